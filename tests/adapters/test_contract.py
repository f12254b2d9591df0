"""The translator contract, for every registered adapter.

Any bytes either translate into canonical events that survive a strict schema
round trip, or fail as AdapterError (reported by the driver as a LineFailure);
nothing else may escape, and a failed line leaves the session state unchanged.
"""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adapters import (
    InternalError,
    Line,
    MalformedRecord,
    Session,
    get,
    new_session,
    providers,
    translate_record,
)
from topics.canonical import decode_event, encode_event

json_leaf = st.none() | st.booleans() | st.integers(-2**40, 2**40) | st.floats(
    allow_nan=False, allow_infinity=False) | st.text(max_size=12)
json_value = st.recursive(
    json_leaf,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(
        st.sampled_from(["id", "type", "text", "item", "params", "message", "result", "error",
                         "properties", "part", "content", "status", "delta", "event", "update",
                         "sessionID", "session_id", "request_id", "subtype", "tool_use_id",
                         "name", "input", "output", "role", "info", "toolCallId", "x"]),
        children, max_size=6),
    max_leaves=20,
)


def native_types(provider: str) -> list[str]:
    module = get(provider)
    names = set(getattr(module, "_HANDLERS", {})) | set(getattr(module, "IGNORED", ()))
    return sorted(n for n in names if isinstance(n, str)) or ["x"]


def message_strategy(provider: str) -> st.SearchStrategy[dict[str, Any]]:
    kinds = st.sampled_from(native_types(provider))
    return st.builds(
        lambda kind, body, rid: {**body, "type": kind, "method": kind, "id": rid},
        kinds, st.dictionaries(st.sampled_from(["params", "item", "properties", "message",
                                                "event", "result", "error", "subtype",
                                                "thread_id", "session_id", "part", "text"]),
                               json_value, max_size=5),
        st.none() | st.integers(0, 3) | st.text(max_size=3))


def check(provider: str, lines: list[Line]) -> None:
    t = get(provider)
    session = new_session(t)
    for n, line in enumerate(lines, 1):
        before = session.state
        session, events, failures = translate_record(t, session, "s", [line], offset=n)
        for f in failures:
            assert isinstance(f.error, MalformedRecord), f.error  # never an InternalError
            assert session.state == before
        for e in events:
            assert decode_event(encode_event(e)) == e
    enc = msgspec.msgpack.encode(session)
    assert msgspec.msgpack.decode(enc, type=Session[t.state_type]) == session  # type: ignore[name-defined]


@pytest.mark.parametrize("provider", providers())
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_random_bytes_translate_or_raise_adapter_error(provider: str, data: st.DataObject):
    raw = data.draw(st.lists(st.binary(max_size=40), min_size=1, max_size=4))
    origins = data.draw(st.lists(st.sampled_from(["agent", "client"]), min_size=len(raw),
                                 max_size=len(raw)))
    check(provider, [Line(r, o) for r, o in zip(raw, origins, strict=False)])  # type: ignore[arg-type]


@pytest.mark.parametrize("provider", providers())
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_random_json_of_known_types_translates_or_raises_adapter_error(
        provider: str, data: st.DataObject):
    msgs = data.draw(st.lists(message_strategy(provider) | json_value, min_size=1, max_size=8))
    origins = data.draw(st.lists(st.sampled_from(["agent", "client"]), min_size=len(msgs),
                                 max_size=len(msgs)))
    check(provider, [Line(json.dumps(m).encode(), o)  # type: ignore[arg-type]
                     for m, o in zip(msgs, origins, strict=False)])



@pytest.mark.parametrize("provider", providers())
def test_one_poison_line_costs_exactly_that_line(provider: str):
    """A line nested deeper than any decoder goes, or with a capture time no date can
    say, fails alone (MalformedRecord); the good lines around it are translated as if it
    never came."""
    t = get(provider)
    deep = b'{"type":"x","method":"x","a":' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    good = [Line(b'{"type":"unknown.kind","method":"unknown/kind"}', "agent", 1_764_000_000_000)]
    poison = [Line(deep, "agent", 1_764_000_000_001),
              Line(good[0].data, "agent", 10**20), Line(good[0].data, "agent", -1)]
    _, alone, none = translate_record(t, new_session(t), "s", good, offset=1)
    assert not none
    session, events, failures = translate_record(t, new_session(t), "s", poison[:1] + good
                                                 + poison[1:], offset=1)
    assert [f.line for f in failures] == [0, 2, 3]
    assert all(isinstance(f.error, MalformedRecord) for f in failures)
    assert [e.seq for e in events] == [e.seq for e in alone]


@pytest.mark.parametrize("provider", providers())
def test_one_record_of_many_bad_or_unknown_lines_emits_a_bounded_amount(provider: str):
    """A 300 KB record of 100,000 tiny invalid lines gave 100,000 dead letters, and
    80,000 unknown-type lines 80,000 warnings (29 MB): past 32 of each, the rest are
    counted into one dead letter and one warning that say where the record is."""
    t = get(provider)
    bad = [Line(b"{", "agent", 1_764_000_000_000)] * 5_000
    _, events, failures = translate_record(t, new_session(t), "s", bad, offset=7)
    assert len(failures) == 33 and events == []
    assert "4968 more lines" in str(failures[-1].error) and "offset 7" in str(failures[-1].error)
    unknown = [Line(json.dumps({"type": f"x{k % 3}", "method": f"x/{k % 3}"}).encode(), "agent",
                    1_764_000_000_000) for k in range(5_000)]
    _, events, failures = translate_record(t, new_session(t), "s", unknown, offset=8)
    warnings = [e for e in events if e.__struct_config__.tag == "runtime.warning"]
    assert len(events) < 40 and len(warnings) <= 33
    if len(warnings) == 33:  # the adapter warns about each unknown message
        assert sum(warnings[-1].payload.detail["nativeTypes"].values()) == 5_000 - 32


# ---- one error boundary: bad input, or canonflow's own failure --------------------------


def test_a_message_of_the_wrong_shape_is_bad_input():
    """A shape the translator checks (codex-exec's item must be an object with an id)
    fails as MalformedRecord, and the session goes on."""
    t = get("codex-exec")
    lines = [Line(b'{"type":"item.started","item":"not an object"}', "agent"),
             Line(b'{"type":"turn.started"}', "agent")]
    session, events, failures = translate_record(t, new_session(t), "s", lines, offset=1)
    [f] = failures
    assert f.line == 0 and type(f.error) is MalformedRecord
    assert [e.__struct_config__.tag for e in events] == ["turn.started"]


def test_an_exception_out_of_a_translator_is_an_internal_error_with_its_trace(monkeypatch):
    """A KeyError in adapter code is canonflow's bug: an InternalError naming the
    exception (never a file: compiled and interpreted say the same), with the trace;
    the line's events are dropped, the state is the one before it, the next lines go on."""
    t = get("codex-exec")
    real = t.translate

    def buggy(state: Any, msg: Any, out: Any) -> Any:
        if msg.obj.get("type") == "turn.started":
            out.emit(*_a_warning())  # emitted before the bug: must not leave
            return {}["missing"]
        return real(state, msg, out)

    monkeypatch.setattr(t, "translate", buggy)
    lines = [Line(b'{"type":"thread.started","thread_id":"t1"}', "agent"),
             Line(b'{"type":"turn.started"}', "agent"),
             Line(b'{"type":"turn.failed","error":{"message":"x"}}', "agent")]
    session, events, failures = translate_record(t, new_session(t), "s", lines, offset=1)
    [f] = failures
    assert f.line == 1 and isinstance(f.error, InternalError)
    assert f.error.cause == "KeyError" and "Traceback" in f.error.trace
    assert "buggy" in f.error.trace and ".py" not in str(f.error)
    assert str(f.error).startswith("internal error in the codex-exec adapter on message "
                                   "'turn.started' (a canonflow bug, not bad input): KeyError")
    assert "runtime.warning" not in [e.__struct_config__.tag for e in events]
    assert [e.seq for e in events] == list(range(1, len(events) + 1))


def _a_warning() -> tuple[Any, Any]:
    from topics.canonical import RuntimeWarningEvent, RuntimeWarningPayload

    return RuntimeWarningEvent, RuntimeWarningPayload(message="before the bug")


def test_copies_are_dropped_against_the_digests_an_earlier_version_stored():
    """A retried produce repeats messages a session saw; a session stored by an earlier
    version holds its 64-bit digests (`_bytes_digest`), not today's 62-bit ones: the
    copies are dropped all the same, and so is a message repeated inside one record."""
    from adapters import MemorySpool
    from adapters.core.ids import DEDUPE_KEPT, _bytes_digest

    t, spool = get("claude"), MemorySpool()
    msgs = [{"type": "stream_event", "uuid": f"u{k}", "session_id": "s",
             "event": {"type": "content_block_delta", "index": 0,
                       "delta": {"type": "text_delta", "text": f"w{k} "}}} for k in range(4)]
    start = [{"type": "stream_event", "uuid": "u-start", "session_id": "s",
              "event": {"type": "message_start", "message": {"id": "m1", "role": "assistant",
                                                             "model": "x", "content": []}}},
             {"type": "stream_event", "uuid": "u-block", "session_id": "s",
              "event": {"type": "content_block_start", "index": 0,
                        "content_block": {"type": "text", "text": ""}}}]
    lines = [Line(json.dumps(m).encode(), "agent", 1_764_000_000_000 + k)
             for k, m in enumerate(start + msgs)]
    session, first, _ = translate_record(t, new_session(t), "s", lines, offset=0, spool=spool)
    assert [e.payload.delta for e in first if hasattr(e.payload, "delta")] == \
        ["w0 ", "w1 ", "w2 ", "w3 "]
    assert len(session.seen) == len(lines) <= DEDUPE_KEPT and all(d < 0 for d in session.seen)
    stored = msgspec.structs.replace(session, seen=tuple(_bytes_digest(ln.data) for ln in lines))
    for s in (session, stored):
        again, events, failures = translate_record(t, s, "s", lines[3:], offset=1, spool=spool)
        assert events == [] and failures == [] and again.seen == s.seen
    # one record holding a message twice: once
    twice = [Line(json.dumps(m | {"uuid": "u9"}).encode(), "agent", 1_764_000_000_100)
             for m in msgs[:1]] * 2
    _, events, _ = translate_record(t, stored, "s", twice, offset=2, spool=spool)
    assert [e.payload.delta for e in events] == ["w0 "]


def test_a_stored_struct_read_by_position_says_when_its_fields_move():
    """The compiled core reads Session's and Stream's fields by position: a field added
    or moved without updating those positions stops the import, naming the struct."""
    from adapters.core.contract import Stream, fields_in_order

    fields_in_order(Session, *Session.__struct_fields__)
    with pytest.raises(ImportError, match="Stream's fields moved"):
        fields_in_order(Stream, *reversed(Stream.__struct_fields__))
    with pytest.raises(ImportError):
        fields_in_order(Stream, *Stream.__struct_fields__, "extra")
