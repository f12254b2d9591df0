"""adapters.core.fit: an event cut to fit its topic's max.message.bytes, and a delta
split (Emitter): what a runtime sends whole passes whole up to the limit."""

from __future__ import annotations

import hashlib
from typing import Any

import msgspec
import pytest

from adapters import MemorySpool
from adapters.core.emitter import DELTA_MAX, Emitter
from adapters.core.fit import MIN_KEEP, fit_event, fit_or_warn
from topics.canonical import (
    SCHEMA_VERSION,
    ContentDelta,
    ContentDeltaPayload,
    ItemCompleted,
    ItemPayload,
    RawSource,
    RuntimeWarningEvent,
    SessionConfigured,
    SessionConfiguredPayload,
    decode_event,
    encode_event,
)

LIMIT = 100_000


def envelope(seq: int = 1) -> dict[str, Any]:
    return {"schemaVersion": SCHEMA_VERSION, "eventId": f"evt_{seq}", "seq": seq, "provider": "codex",
            "sessionId": "s1", "createdAt": "2026-01-01T00:00:00.000Z", "itemId": "itm_1",
            "synthetic": False}


def completed(**payload: Any) -> ItemCompleted:
    return ItemCompleted(**envelope(), payload=ItemPayload(
        itemType="command_execution", status="completed", **payload))


def fitted(event: Any) -> Any:
    data = encode_event(event)
    got = fit_event(event, len(data), LIMIT)
    assert got is not None
    assert len(encode_event(got)) <= LIMIT
    return decode_event(encode_event(got))  # what a consumer reads


def head_tail(cut: str) -> tuple[str, int, str]:
    head, _, rest = cut.partition("\n[canonflow: ")
    n, _, tail = rest.partition(" characters left out]\n")
    return head, int(n), tail


def test_an_event_that_fits_is_left_as_it_is() -> None:
    ev = completed(output="x" * 1000)
    assert fit_event(ev, len(encode_event(ev)), LIMIT) is ev


def test_an_output_sent_whole_keeps_its_head_and_tail_length_and_digest() -> None:
    output = "".join(f"{i:07d}\n" for i in range(30_000))  # 240,000 characters
    got = fitted(completed(output=output, exitCode=0)).payload
    assert got.outputTruncated is True and got.outputLength == len(output)
    assert got.outputSha256 == hashlib.sha256(output.encode()).hexdigest()
    head, n, tail = head_tail(got.output)
    assert output.startswith(head) and output.endswith(tail)
    assert len(head) + n + len(tail) == len(output) and len(head) > LIMIT // 3
    assert got.exitCode == 0


def test_escapes_are_counted_as_the_encoder_writes_them() -> None:
    output = "\x01" * 200_000  # six bytes each in JSON
    got = fitted(completed(output=output)).payload
    head, n, tail = head_tail(got.output)
    assert len(head) + n + len(tail) == 200_000 and len(head) > LIMIT // 20


def test_a_huge_tool_input_is_cut_in_its_longest_string_and_marked() -> None:
    content = "line\n" * 60_000
    tool_input = {"file_path": "/tmp/a.txt", "content": content, "n": 3}
    got = fitted(completed(input=tool_input, toolName="Write")).payload
    assert got.inputTruncated is True
    whole = msgspec.json.encode(tool_input)
    assert got.inputLength == len(whole.decode()) and got.inputSha256 == hashlib.sha256(
        whole).hexdigest()
    assert got.input["file_path"] == "/tmp/a.txt" and got.input["n"] == 3
    head, n, tail = head_tail(got.input["content"])
    assert len(head) + n + len(tail) == len(content)


def test_a_spooled_output_already_cut_keeps_the_marks_of_the_whole() -> None:
    got = fitted(completed(output="y" * 300_000, outputTruncated=True, outputLength=9_000_000,
                           outputSha256="ab" * 32)).payload
    assert (got.outputLength, got.outputSha256) == (9_000_000, "ab" * 32)


def test_raw_goes_first_with_its_size_and_digest() -> None:
    native = msgspec.json.encode({"method": "x", "params": {"blob": "z" * 150_000}})
    ev = msgspec.structs.replace(completed(output="small"), raw=RawSource(
        source="codex.app-server", payload=msgspec.Raw(native)))
    got = fitted(ev)
    assert got.payload.output == "small" and got.payload.outputTruncated is msgspec.UNSET
    assert bytes(got.raw.payload) == b"null" and got.raw.payloadTruncated is True
    assert got.raw.payloadBytes == len(native)
    assert got.raw.payloadSha256 == hashlib.sha256(native).hexdigest()


def test_an_event_without_a_faithful_cut_becomes_a_warning_in_its_place() -> None:
    ev = SessionConfigured(**envelope(7), payload=SessionConfiguredPayload(
        config={"instructions": "i" * 200_000}))
    size = len(encode_event(ev))
    assert fit_event(ev, size, LIMIT) is None
    warning, whole = fit_or_warn(ev, size, LIMIT)
    assert not whole and isinstance(warning, RuntimeWarningEvent)
    assert (warning.seq, warning.eventId) == (7, "evt_7")
    # many short strings: nothing long enough to cut
    many = completed(input={str(i): "v" * MIN_KEEP for i in range(200)})
    assert fit_event(many, len(encode_event(many)), LIMIT) is None


def test_the_cut_is_the_same_on_every_run() -> None:
    ev = completed(output="abc\u00e9" * 100_000, input={"command": "q" * 90_000})
    assert encode_event(fitted(ev)) == encode_event(fitted(ev))


def test_a_delta_longer_than_delta_max_is_split_into_deltas_that_join_to_it() -> None:
    out = Emitter("codex", "s1", 0, 0, False, "test", 0, None, MemorySpool())
    text = "".join(chr(0x41 + i % 26) for i in range(3 * DELTA_MAX + 5))
    out.emit(ContentDelta, ContentDeltaPayload(streamKind="command_output", delta=text),
             item="itm_1")
    deltas = [e.payload.delta for e in out.events]
    assert len(deltas) == 4 and "".join(deltas) == text
    assert [e.seq for e in out.events] == [1, 2, 3, 4]
    assert max(len(encode_event(e)) for e in out.events) < 1_048_588 - 4096


def test_a_split_never_cuts_a_secret_in_two() -> None:
    out = Emitter("codex", "s1", 0, 0, False, "test", 0, None, MemorySpool())
    secret = "ghp_" + "a" * 36
    text = "x" * (DELTA_MAX - 10) + secret + "y" * 100
    out.hold = lambda t: t.rfind("ghp_") if "ghp_" in t[-50:] else len(t)
    out.emit(ContentDelta, ContentDeltaPayload(streamKind="command_output", delta=text),
             item="itm_1")
    out.hold = None
    deltas = [e.payload.delta for e in out.events]
    assert "".join(deltas) == text and any(secret in d for d in deltas)


@pytest.mark.parametrize("field", ["text", "diff"])
def test_text_and_diff_are_cut_and_marked_like_output(field: str) -> None:
    value = "t" * 250_000
    got = fitted(completed(**{field: value})).payload
    assert getattr(got, field + "Truncated") is True
    assert getattr(got, field + "Length") == 250_000
    assert getattr(got, field + "Sha256") == hashlib.sha256(value.encode()).hexdigest()
