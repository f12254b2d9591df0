"""The fleet-metrics stage: its counting rules on their own, then captures through a
real worker and broker into agents.metrics (windows, models, approvals, tokens, cost,
closing, late events) and the Prometheus gauges of the current windows."""

from __future__ import annotations

import asyncio
import json
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import msgspec
import pytest

from pipeline.cluster.broker import EmbeddedBroker
from pipeline.ops.prometheus import OTHER
from pipeline.tools.kafka_io import RawRecord, follow, produce, records_from_file
from pipeline.worker import fleet, fleet_counts
from pipeline.worker.checkpoint import write_tables
from pipeline.worker.fleet_counts import FleetSession, contributions, window_starts
from tests.pipeline.test_metrics import (
    CAPTURED,
    Exposition,
    closed_turns,
    health,
    http_get,
    read_keys,
    scrape,
    started,
    wait_for,
    worker_settings,
)
from tests.pipeline.test_stuck_sends import gemini, produce_sessions
from topics.catalog import CANONICAL_TOPIC, METRICS_TOPIC
from topics.metrics import decode_fleet_metrics

GOLDENS = Path(__file__).resolve().parents[1] / "adapters" / "goldens"
JAN_1 = 1_767_225_600_000  # 2026-01-01T00:00:00Z, the claude golden's capture times
MINUTE = 60_000


# ---- the rules -----------------------------------------------------------------


def test_tokens_are_counted_from_the_typed_usage_only():
    """The fleet reads `tokens` (topics.usage.TokenUsage: input includes cached input),
    never the runtime's own `usage`: a turn with native usage alone counts no tokens."""
    s = FleetSession()
    typed = {"input": 1209, "cachedInput": 9, "cacheWrite": 0, "output": 84,
             "reasoningOutput": 0, "total": 1293}
    assert contributions(_event("turn.completed", state="completed", tokens=typed), s, 0) == [
        ("turnsCompleted", 1), ("tokensIn", 1209), ("tokensOut", 84)]
    assert contributions(_event("turn.completed", state="completed",
                                usage={"input_tokens": 1200, "output_tokens": 84}), s, 0) == [
        ("turnsCompleted", 1)]


def test_cost_is_the_typed_cost_and_an_unpriced_turn_costs_nothing():
    s = FleetSession()
    assert contributions(_event("turn.completed", state="completed", totalCostUsd=0.25,
                                cost={"source": "provider", "usd": 0.25}), s, 0) == [
        ("turnsCompleted", 1), ("costUsd", 0.25)]
    assert contributions(_event("turn.completed", state="completed",
                                cost={"source": "unpriced", "model": "m"}), s, 0) == [
        ("turnsCompleted", 1)]
    assert contributions(_event("turn.completed", state="completed", totalCostUsd=0.25),
                         s, 0) == [("turnsCompleted", 1)]


def test_a_minute_belongs_to_one_tumbling_and_five_hopping_windows():
    minute = JAN_1 + 7 * MINUTE
    starts = window_starts(minute)
    assert [s for k, s in starts if k == "tumbling-1m"] == [minute]
    assert sorted(s for k, s in starts if k == "hopping-5m") == \
        [minute - n * MINUTE for n in (4, 3, 2, 1, 0)]


def _event(t: str, request_id: str | None = None, **payload: Any) -> Any:
    from pipeline.worker.fleet_counts import read_event

    return read_event(json.dumps({"type": t, "provider": "p", "requestId": request_id,
                                     "payload": payload}))


def test_approvals_count_denials_and_the_time_to_decision():
    session = FleetSession()
    assert contributions(_event("request.opened", "r1", requestType="file_change_approval"),
                         session, 1_000) == [("approvalsRequested", 1)]
    assert session.pending == {"r1": 1_000}
    out = contributions(_event("request.resolved", "r1", requestType="file_change_approval",
                               decision="reject_once", outcome="decline"), session, 4_500)
    assert out == [("approvalsResolved", 1), ("approvalsDenied", 1), ("approvalDecisions", 1),
                   ("approvalDecisionMsSum", 3_500), ("approvalDecisionMsMax", 3_500)]
    assert session.pending == {}
    # a decision whose opening was not seen is counted, not timed; questions are no approvals
    assert contributions(_event("request.resolved", "r2", requestType="exec_command_approval",
                                decision="accept", outcome="accept"), session, 5_000) \
        == [("approvalsResolved", 1)]
    # denied is the normalised outcome, whatever the runtime's word: a cancel too, and a
    # native "deny" without an outcome counts as no denial
    for outcome, denied in (("cancel", True), ("accept_for_session", False), (None, False)):
        out = contributions(_event("request.resolved", "r3", requestType="command_execution_approval",
                                   decision="deny", outcome=outcome), session, 5_000)
        assert (("approvalsDenied", 1) in out) is denied, outcome
    assert contributions(_event("request.opened", "q", requestType="tool_user_input"),
                         session, 5_000) == []


def test_turn_ends_tools_and_errors_are_classified():
    s = FleetSession()
    assert contributions(_event("turn.completed", state="failed"), s, 0) == [("turnsFailed", 1)]
    assert contributions(_event("turn.completed", state="cancelled",
                                cost={"source": "computed", "usd": 0.5},
                                tokens={"input": 3, "output": 4, "total": 7}), s, 0) == [
        ("turnsInterrupted", 1), ("tokensIn", 3), ("tokensOut", 4), ("costUsd", 0.5)]
    assert contributions(_event("item.started", itemType="mcp_tool_call",
                                toolName="mcp__fs__read"), s, 0) == \
        [("toolCalls", ("mcp__fs__read", 1))]
    assert contributions(_event("item.started", itemType="web_search"), s, 0) == \
        [("toolCalls", ("web_search", 1))]
    assert contributions(_event("item.started", itemType="assistant_message"), s, 0) == []
    assert contributions(_event("runtime.error", **{"class": "provider_error"}), s, 0) == \
        [("errors", ("provider_error", 1))]


# ---- through the broker ------------------------------------------------------------

pytestmark_broker = pytest.mark.broker


@pytest.fixture
def own_broker(tmp_path: Path) -> Iterator[EmbeddedBroker]:
    """A broker of the test's own: on the shared one, other tests' events would move
    the partitions' stream time and count in the windows."""
    with EmbeddedBroker(log_path=str(tmp_path / "tansu.log")) as b:
        yield b


def _retimed(path: Path, tmp_path: Path, base_ms: int) -> Path:
    """A copy of a capture whose lines carry capture times base_ms, base_ms + 10, ..."""
    out = tmp_path / path.name
    lines = [json.loads(x) for x in path.read_bytes().splitlines() if x.strip()]
    out.write_text("".join(json.dumps({**x, "t": base_ms + 10 * i}) + "\n"
                           for i, x in enumerate(lines)))
    return out


def _partition(key: bytes, n: int) -> int:
    from aiokafka.partitioner import murmur2

    return (murmur2(key) & 0x7FFFFFFF) % n


COUNTS = ("turnsStarted", "turnsCompleted", "turnsFailed", "turnsInterrupted", "toolCalls",
          "approvalsRequested", "approvalsResolved", "approvalsDenied", "approvalDecisions",
          "approvalDecisionMsSum", "approvalDecisionMsMax", "tokensIn", "tokensOut", "costUsd",
          "errors")


class MetricsView:
    """agents.metrics as a consumer keeps it: the last record per key, summed per window
    over partitions."""

    def __init__(self) -> None:
        self.last: dict[bytes, Any] = {}

    def add(self, rec: Any) -> None:
        self.last[rec.key] = decode_fleet_metrics(rec.value)

    def windows(self, provider: str) -> dict[tuple[str, int, str], dict[str, Any]]:
        out: dict[tuple[str, int, str], dict[str, Any]] = defaultdict(dict)
        for m in self.last.values():
            if m.provider != provider:
                continue
            w = out[(m.window, m.windowStartMs, m.model)]
            for field in COUNTS:
                value = getattr(m, field)
                if isinstance(value, dict):
                    merged = w.setdefault(field, {})
                    for k, v in value.items():
                        merged[k] = merged.get(k, 0) + v
                elif field == "approvalDecisionMsMax":
                    w[field] = max(w.get(field, 0), value)
                else:
                    w[field] = w.get(field, 0) + value
            w["closed"] = w.get("closed", True) and m.closed
        return dict(out)


def _expected(minute: int, model: str, closed: bool | None = None, **counts: Any
              ) -> dict[tuple[str, int, str], dict[str, Any]]:
    zero: dict[str, Any] = {f: ({} if f in ("toolCalls", "errors") else 0) for f in COUNTS}
    value = {**zero, **counts}
    out = {("tumbling-1m", minute, model): dict(value)}
    for n in range(5):
        out[("hopping-5m", minute - n * MINUTE, model)] = dict(value)
    if closed is not None:
        for v in out.values():
            v["closed"] = closed
    return out


def _without_closed(windows: dict[Any, dict[str, Any]]) -> dict[Any, dict[str, Any]]:
    return {k: {f: v for f, v in w.items() if f != "closed"} for k, w in windows.items()}


def _watch(settings: Any, view: MetricsView, done: Any, timeout: float = 90.0) -> bool:
    """Follow agents.metrics into `view` until done(view) (False on timeout)."""
    ok = False

    def take(rec: Any) -> bool:
        nonlocal ok
        view.add(rec)
        ok = bool(done(view))
        return ok

    view.last.clear()
    asyncio.run(follow(settings, [METRICS_TOPIC], take, deadline=time.monotonic() + timeout))
    return ok


@pytestmark_broker
def test_fleet_windows_reach_agents_metrics_close_and_drop_late_events(own_broker, tmp_path):
    settings = worker_settings(own_broker.url, tmp_path, fleet_publish_interval=0.5)
    worker = started(settings, tmp_path)
    try:
        wait_for(lambda: health(settings.web_port)[0] == 200, "a healthy worker", worker=worker)

        # 1. Claude (its golden's times, 2026-01-01 00:00): two approvals, one denied
        asyncio.run(produce(settings, "claude", "fleet-claude", records_from_file(
            str(GOLDENS / "claude" / "edit_permission.in.jsonl"), "capture")))
        read_keys(settings, CANONICAL_TOPIC, {b"fleet-claude"}, closed_turns(1), worker=worker)
        claude = _expected(JAN_1, "unknown", turnsStarted=1, turnsCompleted=1,
                           toolCalls={"Edit": 1, "Write": 1}, approvalsRequested=2,
                           approvalsResolved=2, approvalsDenied=1, approvalDecisions=2,
                           approvalDecisionMsSum=20, approvalDecisionMsMax=10,
                           tokensIn=1200, tokensOut=84, costUsd=0.0112)
        view = MetricsView()
        assert _watch(settings, view, lambda v: _without_closed(v.windows("claude")) == claude), \
            view.windows("claude")

        # 2. Ten minutes later on the same partition: its stream time passes the windows'
        #    ends (plus the grace minute), so they close, whole, and leave the table
        asyncio.run(produce(settings, "claude", "fleet-claude", [RawRecord(
            b'{"type":"telemetry_ping"}', "agent", JAN_1 + 10 * MINUTE)]))
        closed = _expected(JAN_1, "unknown", closed=True, **{
            f: v for f, v in claude[("tumbling-1m", JAN_1, "unknown")].items()})
        assert _watch(settings, view, lambda v: v.windows("claude") == closed), \
            view.windows("claude")

        # 3. ACP (its golden's times): both approvals rejected, the second turn cancelled
        asyncio.run(produce(settings, "acp", "fleet-acp", records_from_file(
            str(GOLDENS / "acp" / "permission_rejected.in.jsonl"), "capture")))
        read_keys(settings, CANONICAL_TOPIC, {b"fleet-acp"}, closed_turns(2), worker=worker)
        acp_minute = 1_795_975_860_000  # 2026-11-29T18:11:00Z
        acp = _expected(acp_minute, "unknown", turnsStarted=2, turnsCompleted=1,
                        turnsInterrupted=1, toolCalls={"Write": 1, "Bash": 1},
                        approvalsRequested=2, approvalsResolved=2, approvalsDenied=2,
                        approvalDecisions=2, approvalDecisionMsSum=14,
                        approvalDecisionMsMax=7)

        # 4. Codex app-server, later still: the model comes from turn.started
        codex_base = 1_796_000_000_000
        codex_file = _retimed(CAPTURED / "codex" / "codex-app-server__approval_accept.capture.jsonl",
                              tmp_path, codex_base)
        asyncio.run(produce(settings, "codex", "fleet-codex",
                            records_from_file(str(codex_file), "capture")))
        read_keys(settings, CANONICAL_TOPIC, {b"fleet-codex"}, closed_turns(1), worker=worker)
        codex_minute = codex_base - codex_base % MINUTE

        def settled(v: MetricsView) -> bool:
            codex = v.windows("codex")
            return (_without_closed(v.windows("acp")) == acp
                    and set(codex) == set(_expected(codex_minute, "gpt-5.5"))
                    and all(w["turnsCompleted"] == 1 for w in codex.values()))

        assert _watch(settings, view, settled), (view.windows("acp"), view.windows("codex"))
        codex = view.windows("codex")
        assert len({json.dumps(w, sort_keys=True) for w in codex.values()}) == 1  # one minute
        w = codex[("tumbling-1m", codex_minute, "gpt-5.5")]
        assert (w["turnsStarted"], w["toolCalls"], w["approvalsRequested"],
                w["approvalsResolved"], w["approvalsDenied"], w["approvalDecisions"]) == \
            (1, {"Bash": 1}, 1, 1, 0, 1)
        assert w["approvalDecisionMsSum"] > 0
        # the turn's two model calls (its gain in the thread total), not the last call's
        assert (w["tokensIn"], w["tokensOut"]) == (2400, 80)

        # the gauges: codex's partition is at codex's time, so its windows are current
        exp = scrape(settings.web_port)
        assert exp.value("canonflow_fleet_turns", window="tumbling-1m", provider="codex",
                         model="gpt-5.5", state="completed") == 1
        assert exp.value("canonflow_fleet_tool_calls", window="hopping-5m", provider="codex",
                         model="gpt-5.5", tool="Bash") == 1
        assert exp.value("canonflow_fleet_tokens", window="tumbling-1m", provider="codex",
                         model="gpt-5.5", direction="in") == 2400
        assert exp.value("canonflow_fleet_approval_decisions", window="tumbling-1m",
                         provider="codex", model="gpt-5.5") == 1
        assert exp.value("canonflow_fleet_turns", window="tumbling-1m", provider="claude",
                         model="unknown", state="started") is None  # closed and gone
        assert exp.value("canonflow_fleet_late_events_total") == 0

        # 5. A session on Claude's partition with times inside the closed windows: late
        n = settings.partitions
        late_key = next(f"fleet-late-{i}".encode() for i in range(1000)
                        if _partition(f"fleet-late-{i}".encode(), n) ==
                        _partition(b"fleet-claude", n))
        late_file = _retimed(CAPTURED / "codex-exec" / "codex-exec__tool_shell.capture.jsonl",
                             tmp_path, JAN_1 + 30_000)
        asyncio.run(produce(settings, "codex-exec", late_key.decode(),
                            records_from_file(str(late_file), "capture")))
        read_keys(settings, CANONICAL_TOPIC, {late_key}, closed_turns(1), worker=worker)
        late = 3  # turn.started, the Bash item, turn.completed
        counted = wait_for(lambda: (v := scrape(settings.web_port).value(
            "canonflow_fleet_late_events_total")) is not None and v >= late and v,
            "late events counted", worker=worker)
        assert counted == late
        _watch(settings, view, lambda v: False, timeout=3)
        assert view.windows("codex-exec") == {}
        assert view.windows("claude") == closed
    finally:
        worker.stop()


@pytestmark_broker
def test_fleet_counts_survive_a_restart_without_counting_twice(own_broker, tmp_path):
    """A worker killed (no clean shutdown, offsets maybe not committed) and a new one
    that reads the same records again: the windows hold each event once. (Without the
    chat projection, whose agent the stage otherwise shares: the stage's own agent.)"""
    settings = worker_settings(own_broker.url, tmp_path, fleet_publish_interval=0.5,
                               chat_enabled=False)
    worker = started(settings, tmp_path, "worker-1")
    try:
        asyncio.run(produce(settings, "acp", "fleet-acp", records_from_file(
            str(GOLDENS / "acp" / "permission_rejected.in.jsonl"), "capture")))
        acp_minute = 1_795_975_860_000
        want = _expected(acp_minute, "unknown", turnsStarted=2, turnsCompleted=1,
                         turnsInterrupted=1, toolCalls={"Write": 1, "Bash": 1},
                         approvalsRequested=2, approvalsResolved=2, approvalsDenied=2,
                         approvalDecisions=2, approvalDecisionMsSum=14, approvalDecisionMsMax=7)
        view = MetricsView()
        assert _watch(settings, view, lambda v: _without_closed(v.windows("acp")) == want)
        worker.kill()

        worker = started(settings, tmp_path, "worker-2")
        wait_for(lambda: health(settings.web_port)[0] == 200, "the new worker healthy",
                 worker=worker)
        # the new worker republishes what it recovered; nothing is counted twice
        exp = wait_for(lambda: (e := scrape(settings.web_port)).value(
            "canonflow_fleet_turns", window="tumbling-1m", provider="acp", model="unknown",
            state="started") is not None and e, "recovered fleet windows", worker=worker)
        assert exp.value("canonflow_fleet_turns", window="tumbling-1m", provider="acp",
                         model="unknown", state="started") == 2
        assert exp.value("canonflow_fleet_approvals", window="hopping-5m", provider="acp",
                         model="unknown", outcome="denied") == 2
        _watch(settings, view, lambda v: False, timeout=3)
        assert _without_closed(view.windows("acp")) == want
    finally:
        worker.stop()


def test_the_fleet_record_is_in_the_published_json_schema():
    import jsonschema

    from topics.metrics import FleetMetrics, encode_fleet_metrics
    from topics.schema import schema

    doc = schema()
    record = FleetMetrics(schemaVersion=1, window="hopping-5m", windowStartMs=0,
                          windowEndMs=300_000, provider="codex", model="gpt-5.5", partition=3,
                          toolCalls={"Bash": 2}, errors={"provider_error": 1}, costUsd=0.25)
    jsonschema.validate(json.loads(encode_fleet_metrics(record)),
                        {**doc, "anyOf": [{"$ref": "#/$defs/FleetMetrics"}]})
    assert msgspec.json.decode(encode_fleet_metrics(record), type=FleetMetrics) == record


@pytestmark_broker
def test_fleet_panes_of_many_partitions_in_one_batch_on_the_rocksdb_store(own_broker, tmp_path):
    """RocksDB keeps one database per partition and picks it from the current event: a
    batch mixing partitions must count each session's events in its own partition's
    panes, and the counts must add up again after a restart from the local store."""
    pytest.importorskip("rocksdict", reason="the rocksdb extra (rocksdict) is not installed")
    settings = worker_settings(own_broker.url, tmp_path, fleet_publish_interval=0.5,
                               store="rocksdb://")
    golden = records_from_file(str(GOLDENS / "acp" / "permission_rejected.in.jsonl"),
                               "capture")
    acp_minute = 1_795_975_860_000

    def want(n: int) -> dict[Any, dict[str, Any]]:
        return _expected(acp_minute, "unknown", turnsStarted=2 * n, turnsCompleted=n,
                         turnsInterrupted=n, toolCalls={"Write": n, "Bash": n},
                         approvalsRequested=2 * n, approvalsResolved=2 * n,
                         approvalsDenied=2 * n, approvalDecisions=2 * n,
                         approvalDecisionMsSum=14 * n, approvalDecisionMsMax=7)

    def produce_sessions(names: list[str]) -> None:
        from aiokafka import AIOKafkaProducer

        from pipeline.cluster.admin import kafka_client_kwargs

        async def go() -> None:  # interleaved, so that batches mix partitions
            producer = AIOKafkaProducer(**kafka_client_kwargs(settings), acks="all")
            await producer.start()
            try:
                futures = [await producer.send("agents.raw.acp", r.value, key=name.encode(),
                                               headers=r.headers(), timestamp_ms=r.t)
                           for r in golden for name in names]
                await asyncio.gather(*futures)
            finally:
                await producer.stop()

        asyncio.run(go())

    first = [f"rocks-{i}" for i in range(8)]
    assert len({_partition(n.encode(), settings.partitions) for n in first}) > 1
    view = MetricsView()
    worker = started(settings, tmp_path, "worker-1")
    try:
        produce_sessions(first)
        assert _watch(settings, view, lambda v: _without_closed(v.windows("acp")) == want(8)), \
            view.windows("acp")
    finally:
        worker.stop()
    worker = started(settings, tmp_path, "worker-2")
    try:
        produce_sessions([f"rocks-{i}" for i in range(8, 16)])
        assert _watch(settings, view, lambda v: _without_closed(v.windows("acp")) == want(16)), \
            view.windows("acp")
    finally:
        worker.stop()


# ---- what the input must not do (issue 25) -------------------------------------------


def _minute_start() -> int:
    """A time in the current minute, early enough that the tests' sessions share it."""
    now = int(time.time() * 1000)
    return now - now % MINUTE + 1_000


def _same_partition(prefix: str, n: int, partitions: int, like: bytes | None = None
                    ) -> list[str]:
    """`n` session ids on one partition (that of `like`, else the first id's)."""
    target = _partition(like, partitions) if like else None
    out: list[str] = []
    for i in range(100_000):
        key = f"{prefix}-{i}"
        p = _partition(key.encode(), partitions)
        target = p if target is None else target
        if p == target:
            out.append(key)
            if len(out) == n:
                return out
    raise AssertionError("no such keys")


def _current(exp: Any, name: str, **labels: str) -> dict[str, float]:
    """The tumbling-1m series of a fleet gauge, by model."""
    return {ls["model"]: v for ls, v in exp.series(name)
            if ls["window"] == "tumbling-1m" and all(ls.get(k) == w for k, w in labels.items())}


@pytestmark_broker
def test_fleet_series_and_windows_keep_max_models_and_count_the_rest_as_other(own_broker,
                                                                             tmp_path):
    """Model names come from the input. The full-size repro: 20,000 of them gave 85,963
    series, a 9.4 MB scrape that took over 150 s. Here 1,000 models, one session each:
    the worker keeps MAX_MODELS of them in its windows and gauges and counts the rest
    under "other", every turn counted once, each folded event counted."""
    n = 1000
    settings = worker_settings(own_broker.url, tmp_path, fleet_publish_interval=0.5)
    worker = started(settings, tmp_path)
    try:
        wait_for(lambda: health(settings.web_port)[0] == 200, "a healthy worker", worker=worker)
        base = _minute_start()
        produce_sessions(settings, {f"model-{i}": gemini(f"m-{i:04d}", base) for i in range(n)})
        exp = wait_for(lambda: sum(_current(e := scrape(settings.web_port), "canonflow_fleet_turns",
                                            state="completed").values()) == n and e,
                       "every turn counted", worker=worker)
        t0 = time.perf_counter()
        status, _, body = http_get(settings.web_port, "/metrics")
        seconds = time.perf_counter() - t0
        series = sum(1 for line in body.splitlines() if line and not line.startswith(b"#"))
        print(f"{n} models: /metrics {len(body)} bytes, {series} series, in {seconds:.3f} s")
        started_ = _current(exp, "canonflow_fleet_turns", state="started")
        assert len(started_) == fleet_counts.MAX_MODELS + 1 and OTHER in started_
        assert sum(started_.values()) == n
        assert started_[OTHER] == n - fleet_counts.MAX_MODELS
        assert sum(_current(exp, "canonflow_fleet_tokens", direction="in").values()) == n * 3600
        # turn.started and turn.completed of each session past the first MAX_MODELS models
        assert exp.value("canonflow_fleet_models_folded_total", provider="gemini") == \
            2 * (n - fleet_counts.MAX_MODELS)
        assert exp.value("canonflow_metric_series_folded_total", metric="canonflow_fleet_turns") \
            is None

        view = MetricsView()
        assert _watch(settings, view, lambda v: sum(
            w["turnsCompleted"] for (kind, _, _), w in v.windows("gemini").items()
            if kind == "tumbling-1m") == n), "agents.metrics did not count every turn"
        models = {model for (_, _, model) in view.windows("gemini")}
        assert len(models) == fleet_counts.MAX_MODELS + 1 and OTHER in models
    finally:
        worker.stop()


@pytestmark_broker
def test_a_record_ten_years_ahead_moves_no_clock_and_later_events_still_count(own_broker,
                                                                             tmp_path):
    """The full-size repro: one record with a Kafka timestamp 10 years ahead moved its
    partition's clock, and every later event of that partition was late (dropped) until
    that date. Its events now count at the worker's clock, each one counted as clamped."""
    settings = worker_settings(own_broker.url, tmp_path, fleet_publish_interval=0.5)
    worker = started(settings, tmp_path)
    try:
        wait_for(lambda: health(settings.web_port)[0] == 200, "a healthy worker", worker=worker)
        before, ahead, after = _same_partition("clock", 3, settings.partitions)
        base = _minute_start()
        ten_years = 10 * 365 * 24 * 3600 * 1000
        produce_sessions(settings, {before: gemini("m-before", base)})
        wait_for(lambda: _current(scrape(settings.web_port), "canonflow_fleet_turns",
                                  state="completed").get("m-before"), "the first session counted",
                 worker=worker)
        produce_sessions(settings, {ahead: gemini("m-ahead", base + ten_years)})
        read_keys(settings, CANONICAL_TOPIC, {ahead.encode()}, closed_turns(1), worker=worker)
        produce_sessions(settings, {after: gemini("m-after", base + 2_000)})
        exp = wait_for(lambda: (e := scrape(settings.web_port)) and _current(
            e, "canonflow_fleet_turns", state="completed").get("m-after") and e,
            "the session after the one ahead counted", timeout=60, worker=worker)
        turns = _current(exp, "canonflow_fleet_turns", state="completed")
        assert turns == {"m-before": 1, "m-ahead": 1, "m-after": 1}
        assert exp.value("canonflow_fleet_late_events_total") == 0
        # the six canonical events of the session ahead (session.started, thread.started,
        # session.configured, turn.started, thread.token-usage.updated, turn.completed)
        assert exp.value("canonflow_fleet_clamped_times_total", direction="future") == 6
    finally:
        worker.stop()


@pytestmark_broker
def test_absurd_tokens_and_costs_cost_their_own_counts_not_the_batchs(own_broker, tmp_path):
    """The full-size repro: a token count of 2**64-1 passed into canonical events, the
    stage's sums overflowed (OverflowError) and the counts of the whole batch were
    dropped; costs of 1.5e308 added up to infinity, which agents.metrics carries as
    null. Now such a value is left out (and counted), the rest of its event and of
    the batch counted. (A count past 2**53 is no count at all to the adapters: 10**12
    is past the fleet's MAX_TURN_TOKENS but still a count.)"""
    settings = worker_settings(own_broker.url, tmp_path, fleet_publish_interval=0.5)
    worker = started(settings, tmp_path)
    try:
        wait_for(lambda: health(settings.web_port)[0] == 200, "a healthy worker", worker=worker)
        base = _minute_start()
        huge, normal = _same_partition("tokens", 2, settings.partitions)
        # one batch: the absurd session first, then a normal one of the same model
        produce_sessions(settings, {huge: gemini("m-1", base, tokens=(10**12, 120)),
                                    normal: gemini("m-1", base + 10, tokens=(3600, 120))})

        def claude(key: str, cost: float) -> list[RawRecord]:
            return [RawRecord(json.dumps({
                "type": "result", "subtype": "success", "session_id": key, "is_error": False,
                "total_cost_usd": cost, "usage": {"input_tokens": 12, "output_tokens": 84},
                "result": "x", "uuid": "res"}).encode(), "agent", base + 20)]

        produce_sessions(settings, {"cost-1": claude("cost-1", 1.5e308),
                                    "cost-2": claude("cost-2", 1.5e308),
                                    "cost-3": claude("cost-3", 0.5)}, provider="claude")
        exp = wait_for(lambda: (e := scrape(settings.web_port)) and sum(_current(
            e, "canonflow_fleet_turns", state="completed").values()) == 5 and e,
            "every turn counted", worker=worker)
        assert _current(exp, "canonflow_fleet_turns", state="completed", provider="gemini") == \
            {"m-1": 2}
        assert _current(exp, "canonflow_fleet_tokens", direction="in", provider="gemini") == \
            {"m-1": 3600}
        assert _current(exp, "canonflow_fleet_tokens", direction="out", provider="gemini") == \
            {"m-1": 240}
        assert _current(exp, "canonflow_fleet_cost_usd", provider="claude") == {"unknown": 0.5}
        # model m-1 has no price and Gemini reports no cost: unpriced, counted, never $0
        assert exp.value("canonflow_unpriced_turns_total", provider="gemini", model="m-1") == 2
        assert exp.value("canonflow_unpriced_turns_total", provider="claude",
                         model="unknown") is None  # Claude Code reports its cost
        assert exp.value("canonflow_fleet_absurd_values_total", field="tokensIn") == 1
        assert exp.value("canonflow_fleet_absurd_values_total", field="costUsd") == 2
        assert exp.value("canonflow_fleet_uncounted_events_total") == 0
        view = MetricsView()  # every record decodes (no null cost), with the same counts
        assert _watch(settings, view, lambda v: (
            w := v.windows("gemini").get(("tumbling-1m", base - base % MINUTE, "m-1"))) is not None
            and (w["turnsCompleted"], w["tokensIn"]) == (2, 3600)), view.windows("gemini")
        assert _watch(settings, view, lambda v: (
            w := v.windows("claude").get(("tumbling-1m", base - base % MINUTE, "unknown")))
            is not None and (w["turnsCompleted"], w["costUsd"]) == (3, 0.5)), \
            view.windows("claude")
    finally:
        worker.stop()


class _Table:
    """A Faust table's local store and changelog name, for the stage's logic on its own."""

    def __init__(self) -> None:
        self.data: dict[bytes, bytes] = {}
        self.changelog_topic = SimpleNamespace(get_topic_name=lambda: "fleet-changelog")


def _stage(**settings: Any) -> Any:
    from pipeline.ops.metrics import WorkerMetrics
    from pipeline.settings import Settings
    from pipeline.worker.faust_internals import partition_record

    metrics = WorkerMetrics()
    stage = fleet.FleetStage(Settings(**settings), metrics.registry, metrics)
    stage.windows, stage.sessions = _Table(), _Table()
    return stage, partition_record


def test_one_event_that_cannot_be_counted_costs_only_its_own_counts():
    stage, stand_in = _stage()
    at = stand_in(0)
    now = int(time.time() * 1000)

    def turn(key: bytes, source: Any) -> Any:
        value = json.dumps({"type": "turn.started", "provider": "p", "payload": {"model": "m"}},
                           separators=(",", ":")).encode()  # as msgspec writes it
        return fleet_counts.Counted(key, value, 0, 1, now, source)

    # a record the table cannot be read for (no partition): that event fails, alone
    writes: list[Any] = []
    assert stage.process([turn(b"a", at), turn(b"b", None), turn(b"c", at)], writes) == 0
    write_tables(writes)
    assert stage.gauges.uncounted.get() == 1
    (pane,) = [fleet_counts.decode_stored(v) for k, v in stage.windows.data.items()]
    assert pane.metrics.turnsStarted == 2


def test_a_stored_clock_far_ahead_restarts_from_the_workers_clock():
    """A clock stored by a version that did not clamp event times (the full-size repro:
    10 years ahead) does not make every event late after an upgrade."""
    stage, _ = _stage()
    now = int(time.time() * 1000)
    stage.windows.data[b"clock|3"] = fleet_counts.encode(now + 10 * 365 * 24 * 3600 * 1000)
    assert now <= stage.clock(3) <= int(time.time() * 1000)


def test_absurd_values_and_saturated_sums():
    assert fleet_counts.absurd("tokensIn", 2**64 - 1) and fleet_counts.absurd("tokensOut", -1)
    assert fleet_counts.absurd("costUsd", 1.5e308) and fleet_counts.absurd("costUsd", float("nan"))
    assert not fleet_counts.absurd("tokensIn", 3600) and not fleet_counts.absurd("costUsd", 0.25)
    assert fleet_counts.capped_sum(fleet_counts.MAX_COUNT, 5) == fleet_counts.MAX_COUNT
    assert contributions(_event("turn.completed", state="completed", cost={"usd": 10**400}),
                         FleetSession(), 0) == [("turnsCompleted", 1), ("costUsd", float("inf"))]


def test_gauges_keep_max_models_of_panes_other_workers_wrote():
    """Each worker keeps MAX_MODELS models, but after a rebalance its table holds panes
    of the models another worker kept too: the gauges keep MAX_MODELS and "other"."""
    from topics.metrics import FleetMetrics

    stage, _ = _stage()
    now = int(time.time() * 1000)
    minute = now - now % MINUTE
    n = fleet_counts.MAX_MODELS + 50
    for i in range(n):
        for p in (0, 1):
            pane = FleetMetrics(schemaVersion=1, window="tumbling-1m", windowStartMs=minute,
                                windowEndMs=minute + MINUTE, provider="p", model=f"m-{i:03d}",
                                partition=p, turnsStarted=1)
            stage.windows.data[fleet_counts.pane_key("p", f"m-{i:03d}", minute, p)] = \
                fleet_counts.encode(fleet_counts.Stored(1, pane))
    for p in (0, 1):
        stage.windows.data[f"clock|{p}".encode()] = fleet_counts.encode(now)
    exp = Exposition(stage.metrics.registry.render().decode())
    turns = {ls["model"]: v for ls, v in exp.series("canonflow_fleet_turns")
             if ls["window"] == "tumbling-1m" and ls["state"] == "started"}
    assert len(turns) == fleet_counts.MAX_MODELS + 1
    assert turns[OTHER] == 2 * 50 and sum(turns.values()) == 2 * n
