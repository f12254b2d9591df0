"""The stall watch without a broker: what a session waits on (pipeline.worker.waits),
the stall and recovery events the normalizer makes (pipeline.worker.normalize), and
how the stall scan learns the sessions it did not translate (pipeline.worker.stall)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from pipeline.worker.normalize import Normalizer, Output
from pipeline.worker.stall import adopt
from pipeline.worker.waits import APPROVAL, IDLE, MODEL, TOOL, Waits, open_requests, waiting_on
from topics.canonical import decode_event
from topics.records import capture_line_decoder

CAPTURED = Path(__file__).resolve().parents[1] / "fixtures" / "captured"
APPROVAL_CAPTURE = CAPTURED / "codex" / "codex-app-server__approval_accept.capture.jsonl"
LIMITS = {MODEL: 120.0, TOOL: 600.0, APPROVAL: 300.0}


def records(path: Path = APPROVAL_CAPTURE) -> list[tuple[bytes, list[tuple[str, bytes]]]]:
    """(native line, headers) per line of a capture: one record each, as a sidecar sends."""
    out = []
    for raw in path.read_bytes().splitlines():
        cap = capture_line_decoder.decode(raw)
        headers = [("origin", cap.origin.encode())]
        if cap.t is not None:
            headers.append(("t", str(cap.t).encode()))
        out.append((bytes(cap.msg), headers))
    return out


def feed(n: Normalizer, state: bytes | None, recs: list[Any], start: int = 0, key: bytes = b"s1"
         ) -> tuple[bytes | None, list[dict[str, Any]], Output | None]:
    """Feed `recs` from offset `start`: (the state, the events as JSON, the last output)."""
    events: list[dict[str, Any]] = []
    out = None
    for offset, (value, headers) in enumerate(recs, start):
        out = n.process(state, key, value, partition=0, offset=offset, headers=headers)
        state = out.state if out.state is not None else state
        events += [json.loads(r) for r in out.records]
    return state, events, out


def until(recs: list[Any], event_type: str) -> int:
    """The index of the first record that gives an event of `event_type`."""
    n = Normalizer("codex")
    state = None
    for i, (value, headers) in enumerate(recs):
        out = n.process(state, b"probe", value, partition=0, offset=i, headers=headers)
        state = out.state if out.state is not None else state
        if any(json.loads(r)["type"] == event_type for r in out.records):
            return i
    raise AssertionError(f"no {event_type} in the capture")


# ---- what a session waits on ---------------------------------------------------------


@pytest.mark.parametrize(("turn", "items", "requests", "on"), [
    (None, [], 0, IDLE),
    ("trn", [], 0, MODEL),
    ("trn", ["assistant_message", "reasoning"], 0, MODEL),
    ("trn", ["assistant_message", "command_execution"], 0, TOOL),
    ("trn", ["mcp_tool_call"], 0, TOOL),
    ("trn", ["file_change"], 1, APPROVAL),
    (None, [], 2, APPROVAL),  # a request outside a turn is waited on all the same
    (None, ["dynamic_tool_call"], 0, TOOL),
])
def test_a_session_waits_on_approval_before_a_tool_before_the_model(turn, items, requests, on):
    assert waiting_on(turn, items, requests) == on


def test_open_requests_are_counted_and_a_turns_end_forgets_the_unresolved_ones():
    n = Normalizer("codex")
    recs = records()
    _, events, _ = feed(n, None, recs)
    decoded = [decode_event(json.dumps(e).encode()) for e in events]
    opened = next(i for i, e in enumerate(events) if e["type"] == "request.opened")
    resolved = next(i for i, e in enumerate(events) if e["type"] == "request.resolved")
    assert open_requests(decoded[:opened + 1], 0) == 1
    assert open_requests(decoded[:resolved + 1], 0) == 0
    assert open_requests(decoded[resolved:resolved + 1], 0) == 0  # never below 0
    ended = next(i for i, e in enumerate(events) if e["type"] == "turn.completed")
    assert open_requests(decoded[opened:opened + 1] + decoded[ended:ended + 1], 3) == 0


def test_each_record_says_what_its_session_waits_on_after_its_events():
    n = Normalizer("codex")
    recs = records()
    on = []
    state = None
    for offset, (value, headers) in enumerate(recs):
        out = n.process(state, b"s1", value, partition=0, offset=offset, headers=headers)
        state = out.state if out.state is not None else state
        if out.waiting is not None and (not on or on[-1] != out.waiting):
            on.append(out.waiting)
    # the turn starts (model), a command is started (tool) and asks for approval,
    # the answer comes (tool), the command completes (model), the turn ends (idle)
    assert on == [IDLE, MODEL, TOOL, APPROVAL, TOOL, MODEL, IDLE]


# ---- the tracker -----------------------------------------------------------------------


def test_the_tracker_counts_sessions_by_state_and_finds_only_the_overdue_ones():
    w = Waits()
    w.put(b"a", MODEL, 0.0)
    w.put(b"b", APPROVAL, 0.0)
    w.put(b"c", TOOL, 0.0)
    w.put(b"d", IDLE, 0.0)
    assert w.counts == {MODEL: 1, APPROVAL: 1, TOOL: 1, IDLE: 1}
    assert sorted(w.overdue(119.0, LIMITS)) == []
    assert sorted(w.overdue(120.0, LIMITS)) == [b"a"]
    assert sorted(w.overdue(10_000.0, LIMITS)) == [b"a", b"b", b"c"]  # idle never
    assert w.overdue(10_000.0, {**LIMITS, TOOL: 0.0}) == [b"a", b"b"]  # 0: off
    w.put(b"a", MODEL, 0.0, True)  # said stalled: not overdue again
    assert sorted(w.overdue(10_000.0, LIMITS)) == [b"b", b"c"]
    assert w.counts == {"stalled_model": 1, APPROVAL: 1, TOOL: 1, IDLE: 1}
    w.shift(100.0)  # the worker's own trouble: not counted in the waits
    assert sorted(w.overdue(10_000.0, LIMITS)) == [b"b", b"c"]
    assert w.overdue(219.0, LIMITS) == [] and w.overdue(220.0, LIMITS) == []
    assert w.overdue(400.0, LIMITS) == [b"b"]
    w.put(b"a", MODEL, 50.0)  # an event came
    w.drop(b"c")
    w.keep_only({b"a", b"b"})
    assert w.counts == {MODEL: 1, APPROVAL: 1} and len(w) == 2


# ---- stall and recovery events -------------------------------------------------------


def test_a_session_waiting_on_an_approval_is_stalled_then_recovers_at_its_next_event():
    n = Normalizer("codex")
    recs = records()
    asked = until(recs, "request.opened")
    state, before, out = feed(n, None, recs[:asked + 1])
    assert out is not None and out.waiting == APPROVAL
    assert state is not None

    made = n.stall(state, b"s1", on=APPROVAL, now_ms=1_800_000_000_000, waited_ms=301_000)
    assert made is not None
    partition, stalled = made
    assert partition == 0 and stalled.deadletters == [] and stalled.state is not None
    [ev] = [json.loads(r) for r in stalled.records]
    last = before[-1]
    assert ev["type"] == "session.state.changed" and ev["synthetic"] is True
    assert ev["seq"] == last["seq"] + 1
    assert ev["payload"] == {"state": "waiting", "health": "stalled", "waitingOn": "approval",
                             "waitedMs": 301_000,
                             "reason": "no event for 301 s while waiting on the approval"}
    assert ev["turnId"] == last["turnId"] and ev["threadId"] == last["threadId"]
    assert ev["createdAt"] == "2027-01-15T08:00:00.000Z"

    # the answer: the recovery first, then the record's own events, seq gapless
    state, after, out = feed(n, stalled.state, recs[asked + 1:], asked + 1)
    recovered, resolved = after[0], after[1]
    assert recovered["type"] == "session.state.changed" and recovered["seq"] == ev["seq"] + 1
    assert recovered["payload"]["health"] == "recovered"
    assert recovered["payload"]["state"] == "running"
    assert recovered["payload"]["waitingOn"] == "approval"
    assert recovered["createdAt"] == resolved["createdAt"]  # the record's time
    assert resolved["type"] == "request.resolved"
    seqs = [e["seq"] for e in before + [ev] + after]
    assert seqs == list(range(1, len(seqs) + 1))
    ids = [e["eventId"] for e in before + [ev] + after]
    assert len(set(ids)) == len(ids)
    assert sum(e["payload"].get("health") == "recovered" for e in after) == 1  # once

    # without the stall, the same records give the same events less the two
    _, plain, _ = feed(Normalizer("codex"), None, recs)
    strip = [{k: v for k, v in e.items() if k not in ("seq", "eventId")}
             for e in before + after[1:]]
    assert strip == [{k: v for k, v in e.items() if k not in ("seq", "eventId")} for e in plain]


def test_a_stalled_session_recovers_only_with_an_event_and_never_on_a_redelivery():
    n = Normalizer("codex")
    recs = records()
    asked = until(recs, "request.opened")
    state, before, _ = feed(n, None, recs[:asked + 1])
    _, stalled = n.stall(state, b"s1", on=APPROVAL, now_ms=1_800_000_000_000,
                         waited_ms=1000)  # type: ignore[misc]
    # a record already applied: nothing at all
    again = n.process(stalled.state, b"s1", recs[asked][0], partition=0, offset=asked,
                      headers=recs[asked][1])
    assert (again.state, again.records) == (None, [])
    # a record that gives no event (a client line the adapter keeps to itself): the
    # session is still stalled, its seq untouched
    quiet = b'{"jsonrpc":"2.0","method":"initialized"}'
    out = n.process(stalled.state, b"s1", quiet, partition=0, offset=asked + 1,
                    headers=[("origin", b"client")])
    assert out.records == [] and out.state is not None and out.waiting is None
    assert n.waiting(out.state) == (APPROVAL, True)
    _, after, _ = feed(n, out.state, recs[asked + 1:], asked + 2)
    assert after[0]["payload"]["health"] == "recovered"
    assert after[0]["seq"] == before[-1]["seq"] + 2


def test_a_session_without_events_is_never_stalled():
    n = Normalizer("codex")
    value, headers = records()[0]  # a client line: no event yet
    out = n.process(None, b"s1", value, partition=0, offset=0, headers=headers)
    assert out.state is not None and out.records == []
    assert n.stall(out.state, b"s1", on=MODEL, now_ms=0, waited_ms=1) is None


# ---- the sessions a worker did not translate ----------------------------------------


def test_adopt_learns_recovered_sessions_once_and_forgets_the_ones_moved_away():
    n = Normalizer("codex")
    recs = records()
    asked = until(recs, "request.opened")
    waiting, _, _ = feed(n, None, recs[:asked + 1], key=b"a")
    _, stalled = n.stall(waiting, b"a", on=APPROVAL, now_ms=0, waited_ms=1)  # type: ignore[misc]
    model, _, _ = feed(n, None, recs[:until(recs, "turn.started") + 1], key=b"b")
    done, _, _ = feed(n, None, recs, key=b"c")
    table = {b"a": stalled.state, b"b": model, b"c": done, b"x": b"\x00not a state"}
    w = Waits()
    w.put(b"gone", MODEL, 0.0)
    assert adopt(w, n, table, 5.0) == 4
    assert w.get(b"a") == (APPROVAL, 5.0, True)
    assert w.get(b"b") == (MODEL, 5.0, False)
    assert w.get(b"c") == (IDLE, 5.0, False)
    assert w.get(b"x") == (IDLE, 5.0, False)  # unreadable: never said stalled
    assert b"gone" not in w
    assert adopt(w, n, table, 9.0) == 0  # once


def test_no_stall_is_said_while_the_worker_itself_keeps_events_back():
    from pipeline.ops.web import Health
    from pipeline.settings import Settings
    from pipeline.worker.output import OutputProducer
    from pipeline.worker.stall import troubled

    sink = OutputProducer(Settings(), health=Health())
    assert not troubled(sink)  # not probed yet: nothing known against it
    sink.health.probe_ok()
    assert not troubled(sink)
    sink.health.send_failed("normalize.codex", TimeoutError("no answer"))
    assert troubled(sink)
    sink.health.send_ok("normalize.codex")
    sink.health.probe_failed(ConnectionError("refused"))
    assert troubled(sink)


# ---- on the embedded broker --------------------------------------------------------


@pytest.mark.broker
def test_a_worker_says_a_session_waits_too_long_on_an_approval_and_that_it_recovered(
        tmp_path):
    from pipeline.cluster.broker import EmbeddedBroker
    from pipeline.tools.kafka_io import produce, records_from_file
    from tests.pipeline.test_metrics import (
        Exposition,
        http_get,
        read_keys,
        started,
        wait_for,
        worker_settings,
    )
    from topics.catalog import CANONICAL_TOPIC

    recs = records()
    asked = until(recs, "request.opened")
    raw = records_from_file(str(APPROVAL_CAPTURE), "capture")
    assert len(raw) == len(recs)
    key = b"stall-1"
    with EmbeddedBroker(log_path=str(tmp_path / "tansu.log")) as broker:
        settings = worker_settings(broker.url, tmp_path, app_id="canonflow-stall-test",
                                   providers=("codex",), stall_approval=1.5,
                                   stall_model=0.0, stall_tool=0.0, stall_scan_interval=0.3)
        worker = started(settings, tmp_path)
        try:
            def events_until(kind: str, **payload: str) -> list[dict[str, Any]]:
                """The session's events, up to the first of type `kind` with `payload`."""
                def done(got: list[Any]) -> bool:
                    last = json.loads(got[-1].value) if got else {}
                    return last.get("type") == kind and all(
                        last["payload"].get(k) == v for k, v in payload.items())

                return [json.loads(r.value) for r in read_keys(
                    settings, CANONICAL_TOPIC, {key}, done, worker=worker)]

            def scrape() -> Exposition | None:
                status, _, body = http_get(settings.web_port, "/metrics")
                return Exposition(body.decode()) if status == 200 else None

            def state(name: str) -> float | None:
                metrics = scrape()
                return None if metrics is None else metrics.value(
                    "canonflow_sessions_by_state", provider="codex", state=name)

            asyncio.run(produce(settings, "codex", key.decode(), raw[:asked + 1]))
            # waiting on the approval: the gauge says so, then, past 1.5 s, the stall
            wait_for(lambda: state("approval") == 1 or state("stalled_approval") == 1,
                     "the session waiting on the approval", worker=worker)
            wait_for(lambda: state("stalled_approval") == 1, "the stall on /metrics",
                     worker=worker)
            stall = events_until("session.state.changed", health="stalled")[-1]
            assert stall["type"] == "session.state.changed" and stall["synthetic"] is True
            assert stall["payload"]["waitingOn"] == "approval"
            assert stall["payload"]["waitedMs"] >= 1500
            assert state("approval") is None

            # the answer comes: recovered, then the resolution, and the rest of the turn
            asyncio.run(produce(settings, "codex", key.decode(), raw[asked + 1:]))
            every = events_until("turn.completed")
            wait_for(lambda: state("idle") == 1, "the session idle on /metrics", worker=worker)
            assert state("stalled_approval") is None
            metrics = scrape()
            assert metrics is not None and metrics.value("canonflow_canonical_events_total", provider="codex",
                                 type="session.state.changed") == 2
        finally:
            worker.stop()
    at = next(i for i, e in enumerate(every) if e["payload"].get("health") == "stalled")
    assert every[at + 1]["payload"]["health"] == "recovered"
    assert every[at + 2]["type"] == "request.resolved"
    assert [e["seq"] for e in every] == list(range(1, len(every) + 1))
    assert [e["type"] for e in every].count("session.state.changed") == 2
