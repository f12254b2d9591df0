"""Bad input never stops the worker (issue 8, guarantee 2).

Through the broker: one session of a real Codex app-server conversation whose good
records are interleaved with every kind of bad record (invalid UTF-8, invalid JSON,
JSON of the wrong shape, a valid message of another provider, an oversized record, a
record with no key, a message of a newer protocol version, a batched record with one
bad line). Each bad record goes to agents.deadletter with its original bytes, topic,
partition, offset, provider, error class and reason, or becomes a runtime.warning
carrying the raw message; the session's good records still give exactly the events
of their offline replay, seq gapless, and the worker is still running at the end.

Offline: a fuzz test over every registered adapter feeds seeded random mutations of
real captured lines (truncation, key deletion, type changes) through
adapters.translate_record: every failure is an AdapterError, and a line that fails
leaves the session exactly as if it had never been sent.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from msgspec import UNSET

from adapters import (
    Line,
    MalformedRecord,
    MemorySpool,
    get,
    new_session,
    providers,
    translate_record,
)
from pipeline.tools.kafka_io import RawRecord
from pipeline.tools.replay import parse_line
from pipeline.worker.normalize import Normalizer
from tests.pipeline.faults import (
    BASE_T,
    CAPTURED,
    Observer,
    Workers,
    own_broker,
    produce_records,
    replay_record,
)
from topics.canonical import decode_event, encode_event
from topics.catalog import CANONICAL_TOPIC, DEADLETTER_TOPIC, raw_topic
from topics.records import decode_deadletter

broker = pytest.fixture(name="broker")(own_broker)

GOLDENS = Path(__file__).resolve().parents[1] / "adapters" / "goldens"

# ---------------------------------------------------------------------------
# Through the broker
# ---------------------------------------------------------------------------

MAX_RECORD_BYTES = 4096
#: The dead letter of the oversized record (its value in base64) is larger than this:
#: it keeps the record's first bytes, with its size and hash.
MAX_MESSAGE_BYTES = 4096
SESSION = "bad-input-1"

CLAUDE_LINE = (b'{"type":"assistant","message":{"id":"msg_1","type":"message","role":"assistant",'
               b'"content":[{"type":"text","text":"hi"}]},"session_id":"abc"}')
NEWER_PROTOCOL = (b'{"method":"item/hologram/delta","params":{"threadId":"t","turnId":"u",'
                  b'"itemId":"i","delta":"from a newer app-server"}}')

#: (label, value, how it must end: (error class, a word of the reason) for a dead
#: letter, "warning" for a runtime.warning). Keyed records of the session unless said.
BAD: list[tuple[str, bytes, Any]] = [
    ("invalid UTF-8", b'{"method":"item/agentMessage/delta","params":{"delta":"\xff\xfe"}}',
     ("MalformedRecord", "UTF-8")),
    ("invalid JSON", b'{"method": "turn/started", "params": {', ("MalformedRecord", "JSON")),
    ("JSON, not an object", b"[1, 2, 3]", ("MalformedRecord", "object")),
    ("wrong shape", b'{"method":"item/started","params":{"item":"not an object"}}',
     ("MalformedRecord", "object")),
    ("another provider's message", CLAUDE_LINE, ("MalformedRecord", "neither")),
    ("oversized", b'{"method":"item/agentMessage/delta","params":{"delta":"'
     + b"x" * MAX_RECORD_BYTES + b'"}}', ("OversizedRecord", "max_record_bytes")),
    ("no key", b'{"method":"turn/started","params":{"turn":{"id":"x"}}}',
     ("MissingKey", "key")),
    ("newer protocol version", NEWER_PROTOCOL, "warning"),
]


def _conversation() -> list[RawRecord]:
    path = CAPTURED / "codex" / "codex-app-server__approval_accept.capture.jsonl"
    lines = [parse_line(raw, "capture") for raw in path.read_bytes().splitlines() if raw.strip()]
    return [RawRecord(ln.data, ln.origin, BASE_T + 10 * n) for n, ln in enumerate(lines)]


def _plan() -> list[tuple[str, bytes | None, RawRecord, Any]]:
    """(label, key, record, expected outcome) in production order: the good records
    with a bad one after every third, and one batched record holding good lines around
    a bad line."""
    good = _conversation()
    bad = list(BAD)
    plan: list[tuple[str, bytes | None, RawRecord, Any]] = []
    key = SESSION.encode()
    for n, rec in enumerate(good):
        if n == 9:  # three good lines of one origin in one record, a bad line among them
            assert good[9].origin == good[10].origin == good[11].origin == "agent"
            continue
        if n in (10, 11):
            continue
        plan.append(("good", key, rec, None))
        if n % 3 == 2 and bad:
            label, value, outcome = bad.pop(0)
            t = rec.t + 1 if rec.t is not None else None
            plan.append((label, None if label == "no key" else key, RawRecord(value, "agent", t),
                         outcome))
        if n == 8:
            mixed = RawRecord(b"\n".join([good[9].value, b"{not json", good[10].value,
                                          good[11].value]), "agent", good[9].t)
            plan.append(("batched record with a bad line", key, mixed,
                         ("MalformedRecord", "JSON")))
    assert not bad, "the conversation is too short for every bad record"
    return plan


def _expected(plan: list[tuple[str, bytes | None, RawRecord, Any]]
              ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(every event the session must get, the events of its good lines alone), both
    from the offline driver. Records dead-lettered whole (no key, oversized) never
    reach a translator; a bad line inside a record is skipped by the driver."""
    provider = "codex"
    session, events, spool = new_session(get(provider)), [], MemorySpool()
    good_session, good_events, good_spool = new_session(get(provider)), [], MemorySpool()
    for n, (label, key, rec, outcome) in enumerate(plan):
        if key is None or len(rec.value) > MAX_RECORD_BYTES:
            continue
        session, evs, _ = replay_record(provider, session, SESSION, rec, n, spool)
        events += [json.loads(e) for e in evs]
        if outcome is None or label.startswith("batched"):
            value = b"\n".join(x for x in rec.value.split(b"\n") if x != b"{not json")
            good_session, evs, failed = replay_record(provider, good_session, SESSION,
                                                      RawRecord(value, rec.origin, rec.t), n,
                                                      good_spool)
            assert failed == 0
            good_events += [json.loads(e) for e in evs]
    return events, good_events


def _content(event: dict[str, Any]) -> dict[str, Any]:
    """An event without its position in the stream (seq, eventId)."""
    return {k: v for k, v in event.items() if k not in ("seq", "eventId")}


async def _run(live: Any, plan: list[Any], want: int, worker: Any) -> tuple[list[Any], Observer]:
    obs = await Observer(live).start()
    try:
        metas = await produce_records(live, [(raw_topic("codex"), key, rec)
                                             for _, key, rec, _ in plan])
        dead = sum(1 for _, _, _, outcome in plan if isinstance(outcome, tuple))
        await obs.wait_for(lambda: sum(r.key == SESSION.encode()
                                       for r in obs.records[CANONICAL_TOPIC]) >= want
                           and len(obs.records[DEADLETTER_TOPIC]) >= dead,
                           timeout=60, alive=worker.alive, what="the session's events")
        await asyncio.sleep(1.0)  # anything extra would show up here
        return metas, obs
    finally:
        await obs.stop()


def test_bad_records_are_dead_lettered_or_warned_and_the_session_goes_on(settings, tmp_path):
    live = settings.replace(max_record_bytes=MAX_RECORD_BYTES,
                            max_message_bytes=MAX_MESSAGE_BYTES)
    plan = _plan()
    expected, good_only = _expected(plan)
    workers = Workers(tmp_path)
    try:
        worker = workers.start(live, "worker")
        metas, obs = asyncio.run(_run(live, plan, len(expected), worker))
        assert worker.alive(), f"the worker stopped; see {worker.log_path}"
        assert worker.stop() == 0
    finally:
        workers.stop_all()

    got = [json.loads(r.value) for r in obs.records[CANONICAL_TOPIC]]
    assert got == expected
    assert [e["seq"] for e in got] == list(range(1, len(got) + 1))
    # the good records give exactly the events they give alone, only their seq and
    # eventId move past the warning that the newer-protocol message became
    assert [_content(e) for e in got if e["type"] != "runtime.warning"] == \
        [_content(e) for e in good_only]
    [warning] = [e for e in got if e["type"] == "runtime.warning"]
    assert json.loads(json.dumps(warning["raw"]["payload"])) == json.loads(NEWER_PROTOCOL)
    assert warning["raw"]["source"] == "codex.app-server"

    assert all(len(r.value) <= MAX_MESSAGE_BYTES for r in obs.records[DEADLETTER_TOPIC])
    dead = {(d.partition, d.offset): d for d in
            (decode_deadletter(r.value) for r in obs.records[DEADLETTER_TOPIC])}
    assert len(dead) == len(obs.records[DEADLETTER_TOPIC])
    for (label, key, rec, outcome), meta in zip(plan, metas, strict=True):
        if not isinstance(outcome, tuple):
            assert (meta.partition, meta.offset) not in dead, label
            continue
        cls, word = outcome
        d = dead.pop((meta.partition, meta.offset))
        line_value = b"{not json" if label.startswith("batched") else rec.value
        if label == "oversized":  # cut to fit MAX_MESSAGE_BYTES: the first bytes, size, hash
            assert (d.valueBytes, d.valueSha256) == (
                len(line_value), hashlib.sha256(line_value).hexdigest())
            assert len(d.value) > MAX_MESSAGE_BYTES // 2
            line_value = line_value[:len(d.value)]
        else:
            assert d.valueBytes is UNSET and d.valueSha256 is UNSET, label
        assert (d.topic, d.provider, d.errorClass, d.value) == (
            "agents.raw.codex", "codex", cls, line_value), label
        assert word.lower() in d.reason.lower(), (label, d.reason)
        assert d.key == (key.decode() if key is not None else None), label
        if label.startswith("batched"):
            assert d.line == 1
    assert not dead, f"unexpected dead letters: {list(dead.values())}"


def test_worker_writes_raw_exactly_as_replay_does():
    rec = RawRecord(NEWER_PROTOCOL, "agent", BASE_T)
    out = Normalizer("codex").process(None, b"s", rec.value, partition=0, offset=0,
                                      headers=rec.headers())
    _, replayed, _ = replay_record("codex", new_session(get("codex")), "s", rec, 0,
                                   MemorySpool())
    assert out.records == replayed


# ---------------------------------------------------------------------------
# Offline fuzz over every adapter
# ---------------------------------------------------------------------------


def _corpus() -> dict[str, list[list[Line]]]:
    """Every provider's real conversations: the captured ones, and the reviewed golden
    inputs (the only source for providers without a capture, like amp)."""
    out: dict[str, list[list[Line]]] = {p: [] for p in providers()}
    for path in [*sorted(CAPTURED.glob("*/*.capture.jsonl")), *sorted(GOLDENS.glob("*/*.in.jsonl"))]:
        provider = path.parent.name
        lines = [parse_line(raw, "capture") for raw in path.read_bytes().splitlines()
                 if raw.strip()]
        out[provider].append([Line(ln.data, ln.origin, BASE_T + 10 * n)
                              for n, ln in enumerate(lines)])
    return out


CORPUS = _corpus()
RETYPED = [None, 0, -1, 2**53, 1.5, "", "x" * 3, True, [], [None], {}, {"type": None}]


def _paths(obj: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every position in a JSON value (dict keys and list indexes), root excluded."""
    out: list[tuple[Any, ...]] = []
    items = obj.items() if isinstance(obj, dict) else enumerate(obj) if isinstance(obj, list) \
        else ()
    for k, v in items:
        out.append((*path, k))
        out += _paths(v, (*path, k))
    return out


def _mutate(obj: Any, path: tuple[Any, ...], new: Any, delete: bool) -> Any:
    if not path:
        return new
    head, rest = path[0], path[1:]
    copy: Any = dict(obj) if isinstance(obj, dict) else list(obj)
    if not rest and delete:
        del copy[head]
    else:
        copy[head] = _mutate(copy[head], rest, new, delete)
    return copy


@st.composite
def mutations(draw: st.DrawFn, provider: str) -> tuple[list[Line], int, bytes, str]:
    """(conversation, index of the mutated line, its new bytes, what was done)."""
    conv = draw(st.sampled_from(CORPUS[provider]))
    i = draw(st.integers(0, len(conv) - 1))
    data = conv[i].data
    kind = draw(st.sampled_from(["truncate", "delete key", "change type"]))
    if kind == "truncate":
        return conv, i, data[:draw(st.integers(0, len(data) - 1))], kind
    obj = json.loads(data)
    paths = _paths(obj)
    if kind == "delete key":
        paths = [p for p in paths if isinstance(_at(obj, p[:-1]), dict)]
    if not paths:
        return conv, i, b"", "truncate"
    path = draw(st.sampled_from(paths))
    old = _at(obj, path)
    new = draw(st.sampled_from([v for v in RETYPED if type(v) is not type(old)]))
    mutated = _mutate(obj, path, new, kind == "delete key")
    return conv, i, json.dumps(mutated).encode(), f"{kind} at {path}"


def _at(obj: Any, path: tuple[Any, ...]) -> Any:
    for k in path:
        obj = obj[k]
    return obj


def _translate(provider: str, lines: list[Line], *, validate: bool = False
               ) -> tuple[list[bytes], list[int], Any]:
    """Each line as its own record: (encoded events, indexes of failed lines, session).
    Anything but an AdapterError escapes and fails the test, and so does an InternalError
    (bad input is a MalformedRecord, never canonflow's fault); with `validate`, every
    event must also decode back under the canonical schema."""
    t = get(provider)
    session, events, failed, spool = new_session(t), [], [], MemorySpool()
    for n, line in enumerate(lines):
        session, evs, failures = translate_record(t, session, "fuzz", [line], offset=n,
                                                  spool=spool)
        for f in failures:
            assert isinstance(f.error, MalformedRecord), f.error
            failed.append(n)
        encoded = [encode_event(e) for e in evs]
        if validate:
            for e, data in zip(evs, encoded, strict=True):
                assert decode_event(data) == e, f"line {n} gave an invalid event: {data!r}"
        events += encoded
    return events, failed, session


def _mutated(data: st.DataObject, provider: str) -> tuple[list[Line], int, list[Line], str]:
    assert CORPUS[provider], f"no conversation of {provider} to mutate"
    conv, i, bad, what = data.draw(mutations(provider))
    return conv, i, [*conv[:i], Line(bad, conv[i].origin, conv[i].time_ms), *conv[i + 1:]], what


FUZZ = settings(max_examples=500, derandomize=True, database=None, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@pytest.mark.parametrize("provider", providers())
@FUZZ
@given(data=st.data())
def test_fuzzed_real_lines_fail_only_as_adapter_errors_and_change_nothing(provider, data):
    conv, i, mutated, what = _mutated(data, provider)
    events, failed, session = _translate(provider, mutated)
    assert [json.loads(e)["seq"] for e in events] == list(range(1, len(events) + 1))
    if i in failed:
        # the bad line left the session as it was: the good lines after it give exactly
        # what they give when the bad line was never sent
        without, failed_without, session_without = _translate(provider, [*conv[:i], *conv[i + 1:]])
        assert events == without, what
        assert [n - (n > i) for n in failed if n != i] == failed_without, what
        assert session.state == session_without.state, what
        assert (session.seq, session.thread, session.turn, session.open) == (
            session_without.seq, session_without.thread, session_without.turn,
            session_without.open), what


@pytest.mark.parametrize("provider", providers())
@FUZZ
@given(data=st.data())
def test_fuzzed_real_lines_never_give_an_event_outside_the_schema(provider, data):
    """A line that translates gives events a consumer can decode: a native value of the
    wrong type must not reach a canonical field of another type."""
    _, _, mutated, _ = _mutated(data, provider)
    _translate(provider, mutated, validate=True)


def _with(path: str, match: Any, change: Any) -> list[Line]:
    lines = [parse_line(raw, "capture") for raw in (CAPTURED / path).read_bytes().splitlines()
             if raw.strip()]
    out = []
    for n, ln in enumerate(lines):
        obj = json.loads(ln.data)
        data = json.dumps(change(obj)).encode() if match(obj) else ln.data
        out.append(Line(data, ln.origin, BASE_T + 10 * n))
    return out


def _set(obj: dict[str, Any], path: tuple[str, ...], value: Any) -> dict[str, Any]:
    return _mutate(obj, path, value, False)  # type: ignore[no-any-return]


def _is(kind: str, item_type: str | None = None) -> Any:
    return lambda o: o.get("type") == kind and (
        item_type is None or o.get("item", {}).get("type") == item_type)


#: Single wrongly typed native values found by the fuzz test, each in a real capture.
WRONG_TYPES = [
    ("codex-exec", "codex-exec/codex-exec__text.capture.jsonl",
     _is("item.completed", "agent_message"), ("item", "text"), -1),
    ("codex-exec", "codex-exec/codex-exec__tool_shell.capture.jsonl",
     _is("item.completed", "command_execution"), ("item", "exit_code"), True),
    ("codex-exec", "codex-exec/codex-exec__tool_shell.capture.jsonl",
     _is("item.completed", "command_execution"), ("item", "aggregated_output"), True),
    ("gemini", "gemini/gemini-stream-json__text.capture.jsonl", _is("result"),
     ("stats", "duration_ms"), True),
    ("claude", "claude/claude-code-sdk-stdio__tool_shell_allow.capture.jsonl",
     lambda o: "permission_suggestions" in o.get("request", {}),
     ("request", "permission_suggestions"), 1.5),
]


@pytest.mark.parametrize("provider, path, match, field, value", WRONG_TYPES,
                         ids=[f"{p}-{'.'.join(f)}" for p, _, _, f, _ in WRONG_TYPES])
def test_a_wrongly_typed_native_value_is_dead_lettered_not_published(provider, path, match,
                                                                    field, value):
    lines = _with(path, match, lambda o: _set(o, field, value))
    changed = [n for n, (ln, orig) in enumerate(zip(lines, _with(path, match, lambda o: o),
                                                     strict=True)) if ln.data != orig.data]
    assert changed
    _, failed, _ = _translate(provider, lines, validate=True)
    assert failed == changed
