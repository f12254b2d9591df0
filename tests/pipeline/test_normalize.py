"""The normalize step (the worker's own code, without a broker)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from msgspec import UNSET

from pipeline.worker.normalize import Normalizer, parse_headers
from topics.records import decode_deadletter

CAPTURE = Path(__file__).resolve().parents[1] / "fixtures" / "captured" / "codex-exec"


def _native_lines() -> list[bytes]:
    return [json.dumps(json.loads(ln)["msg"]).encode()
            for ln in (CAPTURE / "codex-exec__tool_shell.capture.jsonl").read_bytes().splitlines()]


def test_a_redelivered_record_changes_nothing_and_emits_nothing():
    n = Normalizer("codex-exec")
    lines = _native_lines()
    state, emitted = None, 0
    for offset, line in enumerate(lines[:3]):
        out = n.process(state, b"s1", line, partition=0, offset=offset)
        state, emitted = out.state, emitted + len(out.records)
    again = n.process(state, b"s1", lines[2], partition=0, offset=2)
    assert again.state is None and again.records == [] and again.deadletters == []
    # the next new record goes on exactly where the stream left off
    nxt = n.process(state, b"s1", lines[3], partition=0, offset=3)
    assert json.loads(nxt.records[0])["seq"] == emitted + 1


def test_batched_records_give_the_same_events_as_one_message_per_record():
    n = Normalizer("codex-exec")
    lines = _native_lines()
    state, single = None, []
    for offset, line in enumerate(lines):
        out = n.process(state, b"s1", line, partition=0, offset=offset, timestamp_ms=5)
        state, single = out.state, single + out.records
    batched = n.process(None, b"s1", b"\n".join(lines), partition=0, offset=0, timestamp_ms=5)
    assert batched.records == single


def test_a_bad_line_is_dead_lettered_with_its_bytes_and_the_good_lines_go_on():
    n = Normalizer("codex-exec")
    value = b'{"type":"turn.started"}\n\xff\xfenot json\n{"type":"turn.completed","usage":{}}'
    out = n.process(None, b"s1", value, partition=3, offset=42, headers=[("origin", b"agent")])
    types = [json.loads(e)["type"] for e in out.records]
    assert types == ["turn.started", "thread.token-usage.updated", "turn.completed"]
    [dl] = [decode_deadletter(d) for d in out.deadletters]
    assert (dl.topic, dl.partition, dl.offset, dl.line, dl.key) == (
        "agents.raw.codex-exec", 3, 42, 1, "s1")
    assert dl.value == b"\xff\xfenot json" and dl.errorClass == "MalformedRecord"
    assert "JSON" in dl.reason


def test_records_without_key_oversized_or_with_a_bad_key_are_dead_lettered_whole():
    n = Normalizer("codex-exec", max_record_bytes=10)
    for key, value, cls in [(None, b"{}", "MissingKey"), (b"s", b"x" * 11, "OversizedRecord"),
                            (b"\xff", b"{}", "MalformedKey")]:
        out = n.process(None, key, value, partition=0, offset=0)
        [dl] = [decode_deadletter(d) for d in out.deadletters]
        assert (out.state, out.records, dl.errorClass, dl.value) == (None, [], cls, value)


def test_a_dead_letter_larger_than_the_cluster_takes_keeps_the_first_bytes_size_and_hash():
    limit = 2000
    n = Normalizer("codex-exec", max_record_bytes=50_000, max_message_bytes=limit)
    for size in (1, 1000, 1400, 1401, 5000, 49_999):
        value = (bytes(b for b in range(256) if b != 10) * 200)[:size - 1] + b"{"  # one
        # line (no newline), never valid JSON
        [data] = n.process(None, b"s", value, partition=0, offset=7).deadletters
        dl = decode_deadletter(data)
        assert len(data) <= limit, size
        assert dl.errorClass == "MalformedRecord" and dl.offset == 7
        if dl.valueBytes is UNSET:  # it fits: whole, as always
            assert dl.value == value and dl.valueSha256 is UNSET
            continue
        assert dl.value == value[:len(dl.value)] and len(dl.value) > limit // 2, size
        assert (dl.valueBytes, dl.valueSha256) == (len(value),
                                                   hashlib.sha256(value).hexdigest())
    # without a bound (replay), nothing is cut
    [data] = Normalizer("codex-exec").process(None, b"s", b"{" * 5000, partition=0,
                                             offset=7).deadletters
    assert decode_deadletter(data).value == b"{" * 5000


def test_headers_give_origin_and_capture_time():
    assert parse_headers([("origin", b"client"), ("t", b"1700000000123")]) == ("client", 1700000000123)
    assert parse_headers({"t": b"nope"}) == (None, None)  # no origin: the message says
    out = Normalizer("codex-exec").process(None, b"s", b'{"type":"turn.started"}', partition=0,
                                           offset=0, headers=[("t", b"1700000000123")])
    assert json.loads(out.records[0])["createdAt"] == "2023-11-14T22:13:20.123Z"


def test_chat_records_come_with_the_events_and_a_projection_bug_loses_no_event(monkeypatch):
    lines = _native_lines()
    whole = Normalizer("codex-exec").process(None, b"s1", b"\n".join(lines), partition=0,
                                             offset=0)
    chat = [json.loads(c) for c in whole.chat]
    assert [c["type"] for c in chat][-1] == "done" and any(c["type"] == "tool_use" for c in chat)
    assert all(c["session_id"] == "s1" for c in chat)
    without = Normalizer("codex-exec", chat=False).process(None, b"s1", b"\n".join(lines),
                                                           partition=0, offset=0)
    assert without.records == whole.records and without.chat == []

    import pipeline.worker.normalize as normalize
    from topics.canonical import ItemCompleted

    real = normalize.project_next

    def broken(session, event, spool=None):
        if isinstance(event, ItemCompleted):
            raise RuntimeError("projection bug")
        return real(session, event, spool)

    monkeypatch.setattr(normalize, "project_next", broken)
    out = Normalizer("codex-exec").process(None, b"s1", b"\n".join(lines), partition=0,
                                           offset=0)
    assert out.records == whole.records  # every canonical event is published all the same
    dead = [decode_deadletter(d) for d in out.deadletters]
    completed = [e for e in out.records if json.loads(e)["type"] == "item.completed"]
    assert completed and [d.value for d in dead] == completed
    assert {d.errorClass for d in dead} == {"InternalError.chat.RuntimeError"}
    assert all(d.reason == "projection bug" and d.key == "s1" for d in dead)
    assert len(out.chat) < len(whole.chat)


def test_an_event_too_large_for_its_topic_is_cut_or_else_becomes_a_warning_and_a_dead_letter():
    """A command whose output makes its item.completed larger than agents.canonical
    takes: the completion is cut in the middle with the whole's length and SHA-256
    (adapters.core.fit); its output's delta, which no cut may shorten, keeps its seq and
    eventId as a runtime.warning in its place and is itself dead-lettered."""
    import hashlib

    lines = _native_lines()
    whole = [json.loads(ln) for ln in lines]
    for msg in whole:
        item = msg.get("item") or {}
        if msg.get("type") == "item.completed" and item.get("type") == "command_execution":
            item["aggregated_output"] = "x" * 50_000
    records = [json.dumps(m).encode() for m in whole]
    small = Normalizer("codex-exec", max_event_bytes=20_000)
    big = Normalizer("codex-exec")
    out_small = small.process(None, b"s1", b"\n".join(records), partition=0, offset=0)
    out_big = big.process(None, b"s1", b"\n".join(records), partition=0, offset=0)
    events = [json.loads(r) for r in out_small.records]
    reference = [json.loads(r) for r in out_big.records]
    assert [(e["seq"], e["eventId"]) for e in events] == \
        [(e["seq"], e["eventId"]) for e in reference]
    changed = [(e, r) for e, r in zip(events, reference, strict=True) if e != r]
    assert {(e["type"], r["type"]) for e, r in changed} == {
        ("item.completed", "item.completed"), ("runtime.warning", "content.delta")}
    [cut] = [e["payload"] for e, r in changed if e["type"] == "item.completed"]
    assert cut["outputTruncated"] is True and cut["outputLength"] == 50_000
    assert cut["outputSha256"] == hashlib.sha256(b"x" * 50_000).hexdigest()
    assert cut["output"].startswith("x" * 1000) and "characters left out]" in cut["output"]
    swapped = [(e, r) for e, r in changed if e["type"] == "runtime.warning"]
    letters = [decode_deadletter(d) for d in out_small.deadletters]
    assert [json.loads(d.value)["eventId"] for d in letters
            if d.errorClass == "OversizedEvent"] == [r["eventId"] for _, r in swapped]
    for warning, original in swapped:
        assert warning["payload"]["detail"]["eventType"] == original["type"]
    chat = [json.loads(r) for r in out_small.chat]
    assert all(len(r) <= 20_000 for r in out_small.chat + out_small.records)
    assert [r["seq"] for r in chat] == list(range(1, len(chat) + 1))


def test_an_empty_key_or_an_origin_neither_agent_nor_client_is_dead_lettered():
    """b"" is no session id (records of every sandbox would merge into one session),
    and an origin that is neither agent nor client must not be guessed at (a client's
    decision read as the agent's words invents approval requests)."""
    line = _native_lines()[0]
    n = Normalizer("codex-exec")
    empty = n.process(None, b"", line, partition=0, offset=0)
    assert empty.state is None and empty.records == []
    assert decode_deadletter(empty.deadletters[0]).errorClass == "MissingKey"
    for bad in (b"evil", b"\xff\xfe", b""):
        out = n.process(None, b"s1", line, partition=0, offset=1, headers=[("origin", bad)])
        assert out.state is None and out.records == []
        letter = decode_deadletter(out.deadletters[0])
        assert letter.errorClass == "BadHeader" and letter.value == line
    # no origin header at all: the agent wrote it (the documented default)
    assert n.process(None, b"s1", line, partition=0, offset=2).records


def test_a_session_whose_records_alternate_partitions_loses_nothing_and_says_so():
    """Offsets of two partitions do not compare: one session's records on partitions 0
    and 1 in turn (partitions added to a raw topic, two sidecar partitioners) give every
    event of the session on one partition, plus a runtime.warning at each move, and a
    record delivered again on either partition still changes nothing."""
    lines = _native_lines()
    n = Normalizer("codex-exec")
    state, one = None, []
    for offset, line in enumerate(lines):
        out = n.process(state, b"s1", line, partition=0, offset=offset)
        state, one = out.state or state, one + [json.loads(r) for r in out.records]
    state, moved = None, []
    offsets = {0: 100, 1: 5}  # partition 1's offsets are far below partition 0's
    for k, line in enumerate(lines):
        p = k % 2
        offsets[p] += 1
        out = n.process(state, b"s1", line, partition=p, offset=offsets[p])
        state, moved = out.state or state, moved + [json.loads(r) for r in out.records]
        again = n.process(state, b"s1", line, partition=p, offset=offsets[p])
        assert again.state is None and again.records == []
    warnings = [e for e in moved if e["type"] == "runtime.warning"]
    assert len(warnings) == len(lines) - 1
    assert "moved from partition" in warnings[0]["payload"]["message"]
    kept = [e for e in moved if e["type"] != "runtime.warning"]
    strip = ("eventId", "seq")
    assert [{k: v for k, v in e.items() if k not in strip} for e in kept] == \
        [{k: v for k, v in e.items() if k not in strip} for e in one]
    assert [e["seq"] for e in moved] == list(range(1, len(moved) + 1))


def test_a_raw_record_sent_twice_gives_its_text_once_where_the_runtime_ids_its_messages():
    """A producer retry without idempotence writes the same record again at a later
    offset. Claude ids every line (uuid): the copy is dropped and the text comes once
    ("This is", not "ThiThis is"). Without ids (codex deltas), two equal lines cannot be
    told from two equal deltas, and both are kept (README, guarantee 1)."""
    path = CAPTURE.parent / "claude" / "claude-code-stream-json-partial__text.capture.jsonl"
    lines = [json.dumps(json.loads(ln)["msg"]).encode() for ln in path.read_bytes().splitlines()]
    n = Normalizer("claude")

    def run(values: list[bytes]) -> list[dict]:
        state, out = None, []
        for offset, value in enumerate(values):
            o = n.process(state, b"s1", value, partition=0, offset=offset)
            state, out = o.state or state, out + [json.loads(r) for r in o.records]
        return out

    once = run(lines)
    twice = run([v for line in lines for v in (line, line)])  # every record sent again
    assert twice == once
    # the same uuid on other bytes is not a copy: kept (a runtime's id reuse drops nothing)
    k = next(i for i, line in enumerate(lines) if b"text_delta" in line)
    other = json.loads(lines[k])
    other["event"]["delta"]["text"] = "MORE"
    changed = run(lines[:k + 1] + [json.dumps(other).encode()] + lines[k + 1:])
    assert len(changed) == len(once) + 1
    assert "MORE" in [e["payload"].get("delta") for e in changed if e["type"] == "content.delta"]


def test_an_adapter_bug_is_dead_lettered_as_an_internal_error_logged_once(monkeypatch, caplog):
    """An exception the translator did not raise on purpose is canonflow's fault, not the
    input's: its own dead-letter class, the trace logged once, and the next records
    translate as ever."""
    import adapters

    n = Normalizer("codex-exec")
    lines = _native_lines()
    good = n.process(None, b"s1", lines[0], partition=0, offset=0)
    real = adapters.get("codex-exec").translate

    def buggy(state, msg, out):  # noqa: ANN001, ANN202
        if msg.obj.get("type") == "turn.started":
            return {}["missing"]  # KeyError inside adapter code
        return real(state, msg, out)

    monkeypatch.setattr(adapters.get("codex-exec"), "translate", buggy)
    with caplog.at_level("ERROR", logger="pipeline.worker.normalize"):
        first = n.process(good.state, b"s1", b'{"type":"turn.started"}', partition=0, offset=1)
        again = n.process(good.state, b"s1", b'{"type":"turn.started"}', partition=0, offset=2)
    for out in (first, again):
        [dl] = [decode_deadletter(d) for d in out.deadletters]
        assert dl.errorClass == "InternalError.adapter.KeyError" and dl.line == 0
        assert "internal error" in dl.reason and "not bad input" in dl.reason
        assert out.records == []
    logged = [r for r in caplog.records if "internal error" in r.getMessage()]
    assert len(logged) == 1 and "Traceback" in logged[0].getMessage()
    monkeypatch.undo()
    after = n.process(again.state, b"s1", lines[1], partition=0, offset=3)
    assert after.records and after.deadletters == []
