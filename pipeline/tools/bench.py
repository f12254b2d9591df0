"""`canonflow bench`: throughput and memory, measured side by side in one run.

What is measured, on one generated workload (the real captured conversations,
copied into many sessions, so text deltas dominate, with tools and approvals):

1. the adapter core offline (no Kafka): native messages/s per provider and the mix;
2. a bare aiokafka consume -> produce passthrough: the broker's ceiling here;
3. a plain Faust agent forwarding each record: Faust's per-record ceiling;
4. the canonflow worker end to end (raw topics -> agents.canonical and agents.chat),
   with one native message per record and with batched records;
5. `canonflow replay` on one long Claude stream-json file beside a bare msgspec decode
   of it, and redaction's share (pipeline/tools/bench_replay.py);
6. the worker's CPU microseconds per native message beside the adapter core's, per
   delivery guarantee (pipeline/tools/bench_cpu.py): CPU time, not a rate.

`--latency` measures, alone, produce -> agents.canonical latency at fixed rates
(pipeline/tools/bench_latency.py); `--long`, long sessions (bench_long.py).

Kafka rates are measured the same way for 2-4: an observer consumer notes when each
output record arrives, and the rate is the input's native messages over the time
from the first to the last arrival (so process start-up is not counted), less the
share of the records in the first fetch (made before that clock started; the aiokafka
ceiling's process starts only once the observer watches, and forwards the workload
AIOKAFKA_LAPS times over; the batched worker runs take BATCHED_LAPS copies of it, as
sessions of their own, so each is timed over seconds too). Every run
is checked: the count of its outputs, and for canonflow the exact canonical events
per session against the offline replay (a fast wrong answer is not a result).
Each repetition runs on a fresh broker (the embedded Tansu, or Apache Kafka with
`--engine kafka`); the table reports medians.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

from adapters import build
from pipeline.settings import Settings
from pipeline.tools.bench_ceilings import (
    bench_adapters,
    bench_adapters_interpreted,
    run_passthrough,
)
from pipeline.tools.bench_cpu import run_cpu_bench
from pipeline.tools.bench_kafka import (
    BenchError,
    changelogs,
    create_topics,
    fresh_broker,
    observe,
    produce_all,
    rss_mb,
    scratch_dir,
    verify,
)
from pipeline.tools.bench_workload import (
    Session,
    build_workload,
    default_fixtures,
    expected_events,
    interleaved,
    n_messages,
    records_of,
)
from pipeline.tools.kafka_io import RawRecord
from pipeline.worker.process import WorkerProcess, ensure_topics
from topics.catalog import CANONICAL_TOPIC, CHAT_TOPIC, raw_topic

#: The aiokafka ceiling forwards the workload's records this many times over (one pass
#: of 20,000 took 0.3 s, and read 23k to 53k msg/s from run to run; five, 59k to 68k).
AIOKAFKA_LAPS = 5
#: The batched worker runs (one worker, two) take this many copies of the workload, as
#: sessions of their own, for the same reason: one copy of 20,000 messages was 0.9 s of
#: output, where the worker's start and end (a fetch per partition to begin, the last
#: batch's delivery) kept its main thread busy 77% of the time; over 150,000, 93%.
BATCHED_LAPS = 5

#: bench_latency imports these from here, under their names of before the split.
_fresh_broker, _observe, _produce_all = fresh_broker, observe, produce_all


# ---------------------------------------------------------------------------
# 4. canonflow end to end
# ---------------------------------------------------------------------------


class E2E(msgspec.Struct):
    rate: float
    events: int
    chat: int
    rss_mb: float
    table_entries: int
    table_bytes: int
    changelog_bytes: int


def run_canonflow(settings: Settings, sessions: list[Session], batch: int,
                  expected: dict[str, list[bytes]], timeout: float, workers: int = 1) -> E2E:
    """Native messages/s from raw topics to agents.canonical, checked event by event
    (with `workers` worker processes in one consumer group: their combined rate)."""
    broker, live = fresh_broker(settings)
    log = tempfile.NamedTemporaryFile(prefix="canonflow-bench-", suffix=".log", delete=False)
    log.close()
    scratch = scratch_dir("canonflow-bench-")
    try:
        live = live.replace(app_id=f"bench-{os.getpid()}-{batch}", web_enabled=False,
                            data_dir=f"{scratch.name}/data")
        ensure_topics(live)
        items = interleaved(sessions, batch, lambda s: raw_topic(s.provider))
        asyncio.run(produce_all(live, items))
        want = sum(len(v) for v in expected.values())
        procs = [WorkerProcess(live.replace(data_dir=f"{live.data_dir}-{i}"),
                               log_path=log.name).start() for i in range(workers)]
        try:
            observed = asyncio.run(observe(live, [CANONICAL_TOPIC], want, timeout,
                                            alive=lambda: all(w.alive() for w in procs)))
            rss = max(rss_mb(w.pid) for w in procs)
            chat = asyncio.run(observe(live, [CHAT_TOPIC], 1, 5.0))
        finally:
            for w in procs:
                w.stop()
        verify(observed.records, expected, log.name)
        entries, table_bytes, changelog_bytes = asyncio.run(changelogs(live))
        return E2E(rate=observed.rate(n_messages(sessions)), events=len(observed.records),
                   chat=len(chat.records), rss_mb=rss, table_entries=entries,
                   table_bytes=table_bytes, changelog_bytes=changelog_bytes)
    finally:
        if broker:
            broker.stop()
        scratch.cleanup()


# ---------------------------------------------------------------------------
# Table recovery
# ---------------------------------------------------------------------------


def _ready_seconds(live: Settings, log_path: str, timeout: float) -> float:
    """Seconds from a worker's start until it logs that it is ready (recovery done)."""
    worker = WorkerProcess(live.replace(log_level="info"), log_path=log_path)
    start = time.monotonic()
    worker.start()
    try:
        while time.monotonic() - start < timeout and worker.alive():
            with open(log_path, "rb") as fh:
                if b"Worker]: Ready" in fh.read():
                    return time.monotonic() - start
            time.sleep(0.05)
        raise BenchError(f"the worker was not ready within {timeout:.0f} s (log {log_path})")
    finally:
        worker.stop()


def measure_recovery(settings: Settings, sessions: int, timeout: float) -> dict[str, float]:
    """Start-up time of a worker whose session table holds `sessions` entries, against
    the same worker with an empty table: the difference is the table recovery."""
    from pipeline.worker.normalize import Normalizer

    n = Normalizer("codex-exec")
    state = n.process(None, b"s", b'{"type":"thread.started","thread_id":"t"}\n'
                      b'{"type":"turn.started"}', partition=0, offset=0).state
    assert state is not None
    results: dict[str, float] = {}
    for label, count in (("empty", 0), ("full", sessions)):
        broker, live = fresh_broker(settings)
        scratch = scratch_dir("canonflow-bench-recovery-")
        try:
            live = live.replace(app_id=f"bench-recovery-{label}", providers=("codex-exec",),
                                chat_enabled=False, web_enabled=False, data_dir=scratch.name)
            ensure_topics(live)
            changelog = f"{live.app_id}-sessions.codex-exec-changelog"
            create_topics(live, [changelog], {"cleanup.policy": "compact"})
            asyncio.run(produce_all(live, [
                (changelog, f"recovered-{i}".encode(), RawRecord(state, "agent", None))
                for i in range(count)]))
            log = tempfile.NamedTemporaryFile(prefix="canonflow-bench-recovery-", suffix=".log",
                                              delete=False)
            log.close()
            results[label] = _ready_seconds(live, log.name, timeout)
        finally:
            if broker:
                broker.stop()
            scratch.cleanup()
    return {"sessions": float(sessions), "ready_empty_s": results["empty"],
            "ready_full_s": results["full"],
            "recovery_s_per_100k": (results["full"] - results["empty"]) * 100_000 / sessions}


# ---------------------------------------------------------------------------
# The stall scan
# ---------------------------------------------------------------------------


def _stall_state(path: Path, provider: str, until: str, repeat: int = 1) -> bytes:
    """A stored session state (normalize.SessionEntry) after the records of the capture
    at `path` (`repeat` times over, each time under new offsets) up to the first one of
    the last time after which the session waits on `until` (pipeline.worker.waits): a
    session as long as `repeat` conversations."""
    from pipeline.worker.normalize import Normalizer
    from topics.records import capture_line_decoder

    n = Normalizer(provider, chat=True)
    lines = [capture_line_decoder.decode(raw) for raw in path.read_bytes().splitlines()]
    state: bytes | None = None
    offset = 0
    for time_round in range(repeat):
        for cap in lines:
            headers = [("origin", cap.origin.encode())] if cap.origin is not None else []
            out = n.process(state, b"bench", bytes(cap.msg), partition=0, offset=offset,
                            headers=headers, timestamp_ms=1_000 + offset)
            offset += 1
            state = out.state if out.state is not None else state
            if time_round == repeat - 1 and out.waiting == until:
                assert state is not None
                return state
    raise BenchError(f"{path} never waits on {until}")


def measure_stall_scan(fixtures: Path, sessions: int = 10_000, repeat: int = 5
                       ) -> dict[str, float]:
    """What one tick of the stall scan (pipeline.worker.stall) costs: learning what the
    sessions of a table wait on (once per session) and then each tick (the table's keys
    and one tuple per session), for `sessions` sessions waiting on a tool, a tenth
    of them, and as many sessions each 50 conversations long. Milliseconds, medians of
    `repeat` ticks; the ratios say how a tick grows with the number of sessions (10:
    linear) and with their length (1: not at all)."""
    from pipeline.worker.normalize import Normalizer
    from pipeline.worker.stall import adopt
    from pipeline.worker.waits import APPROVAL, MODEL, TOOL, Waits

    # codex-exec: no message ids, so a conversation fed again is not dropped as a copy
    capture = fixtures / "codex-exec" / "codex-exec__tool_shell.capture.jsonl"
    short = _stall_state(capture, "codex-exec", TOOL)
    long = _stall_state(capture, "codex-exec", TOOL, repeat=50)
    step = Normalizer("codex-exec")
    limits = {MODEL: 120.0, TOOL: 600.0, APPROVAL: 300.0}

    def ticks(n: int, state: bytes) -> tuple[float, float]:
        table = {f"session-{i}".encode(): state for i in range(n)}
        waits = Waits()
        t0 = time.perf_counter()
        adopt(waits, step, table, 0.0)
        learn = time.perf_counter() - t0
        assert waits.counts == {TOOL: n}, waits.counts
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            adopt(waits, step, table, 1.0)
            due = waits.overdue(2.0, limits)
            times.append(time.perf_counter() - t0)
            assert not due
        return learn * 1000, statistics.median(times) * 1000

    learn_short, tick_short = ticks(sessions, short)
    _, tick_tenth = ticks(sessions // 10, short)
    learn_long, tick_long = ticks(sessions, long)
    return {"sessions": sessions, "tick_ms": tick_short, "learn_ms": learn_short,
            "tick_ms_tenth": tick_tenth, "tick_ms_long": tick_long,
            "learn_ms_long": learn_long,
            "state_bytes": len(short), "state_bytes_long": len(long),
            "tick_ratio_sessions": tick_short / tick_tenth,
            "tick_ratio_length": tick_long / tick_short}


# ---------------------------------------------------------------------------
# The whole run
# ---------------------------------------------------------------------------


def run_bench(settings: Settings, *, messages: int, repeat: int, batch: int,
              fixtures: Path | None, timeout: float, say: Callable[[str], None],
              recovery_sessions: int = 100_000, replay_messages: int = 0,
              guarantees: tuple[str, ...] = ("at_least_once",)) -> dict[str, Any]:
    fixtures = fixtures or default_fixtures()
    sessions = build_workload(fixtures, messages)
    n = n_messages(sessions)
    say(f"workload: {n} native messages in {len(sessions)} sessions "
        f"({len({s.provider for s in sessions})} providers)")
    core = [bench_adapters(sessions) for _ in range(repeat)]
    core_batched = [bench_adapters(sessions, batch) for _ in range(repeat)]
    # the pure-Python source beside the compiled build, same workload, same minute
    core_interpreted = (bench_adapters_interpreted(fixtures, messages, repeat)
                        if build() != "interpreted" else None)
    lapped = build_workload(fixtures, n * BATCHED_LAPS)
    runs, e2e = _through_the_broker(settings, sessions, lapped, batch, repeat, timeout, say)
    med = statistics.median
    # a record holds consecutive messages of one origin (a client request ends one)
    per_record = n / sum(len(records_of(s, batch)) for s in sessions)
    result: dict[str, Any] = {
        "adapter_build": build(),
        "workload": {"messages": n, "sessions": len(sessions), "batch": batch,
                     "batched_messages": n_messages(lapped),
                     "messages_per_batched_record": per_record,
                     "repeat": repeat, "partitions": settings.partitions},
        "adapter_core_msgs_per_s": {p: med(c[p] for c in core) for p in core[0]},
        "adapter_core_batched_msgs_per_s": med(c["mix"] for c in core_batched),
        **({"adapter_core_interpreted_msgs_per_s": med(core_interpreted)}
           if core_interpreted else {}),
        "aiokafka_passthrough_msgs_per_s": med(runs["aiokafka"]),
        "faust_passthrough_msgs_per_s": med(runs["faust"]),
        "canonflow_single_msgs_per_s": med(r.rate for r in e2e["single"]),
        "canonflow_batched_msgs_per_s": med(r.rate for r in e2e["batched"]),
        "canonflow_two_workers_msgs_per_s": med(r.rate for r in e2e["two_workers"]),
    }
    result.update(_ratios(result, runs, e2e))
    result["memory"] = _memory(sessions, lapped, e2e)
    # the worker's CPU per message (bench_cpu): its keys at the top level, `modes` per
    # guarantee
    result.update(run_cpu_bench(settings, messages=messages, batch=batch, repeat=repeat,
                                fixtures=fixtures, timeout=timeout, guarantees=guarantees,
                                say=say))
    if recovery_sessions:
        say(f"table recovery: {recovery_sessions} sessions")
        result["recovery"] = measure_recovery(settings, recovery_sessions, timeout)
    result["stall_scan"] = measure_stall_scan(fixtures)
    if replay_messages:
        from pipeline.tools.bench_replay import run_replay_bench

        say(f"offline replay: {replay_messages:,} claude stream-json messages")
        result["replay"] = run_replay_bench(replay_messages, repeat, say)
    return result


def _through_the_broker(settings: Settings, sessions: list[Session], lapped: list[Session],
                        batch: int, repeat: int,
                        timeout: float, say: Callable[[str], None]
                        ) -> tuple[dict[str, list[float]], dict[str, list[E2E]]]:
    """Each repetition of the ceilings (2, 3) and canonflow end to end (4), one after the
    other on the same workload (`lapped`, its BATCHED_LAPS copies, for the batched
    worker runs)."""
    expected, expected_lapped = expected_events(sessions), expected_events(lapped)
    runs: dict[str, list[float]] = {}
    e2e: dict[str, list[E2E]] = {"single": [], "batched": [], "two_workers": []}
    for i in range(repeat):
        for kind in ("aiokafka", "faust"):
            rate = run_passthrough(kind, settings, sessions, 1, timeout,
                                   laps=AIOKAFKA_LAPS if kind == "aiokafka" else 1)
            runs.setdefault(kind, []).append(rate)
            say(f"run {i + 1}/{repeat}: {kind} passthrough {rate:,.0f} msg/s")
        for label, b, workers in (("single", 1, 1), ("batched", batch, 1),
                                  ("two_workers", batch, 2)):
            ss, want = (sessions, expected) if b == 1 else (lapped, expected_lapped)
            r = run_canonflow(settings, ss, b, want, timeout, workers=workers)
            e2e[label].append(r)
            say(f"run {i + 1}/{repeat}: canonflow {label} {r.rate:,.0f} msg/s "
                f"({r.events} events verified)")
    return runs, e2e


def _ratios(result: dict[str, Any], runs: dict[str, list[float]],
            e2e: dict[str, list[E2E]]) -> dict[str, Any]:
    """canonflow against the ceilings, of the medians and within each repetition."""
    return {
        "ratios": {
            "batched_vs_aiokafka": result["canonflow_batched_msgs_per_s"]
            / result["aiokafka_passthrough_msgs_per_s"],
            "single_vs_faust": result["canonflow_single_msgs_per_s"]
            / result["faust_passthrough_msgs_per_s"],
        },
        # the same ratios within each repetition, whose measures ran minutes apart under
        # the same load: on a shared machine the ceiling alone moves by 2x between
        # repetitions, and a ratio of medians can pair a quiet run with a busy one
        "ratios_per_run": {
            "batched_vs_aiokafka": [r.rate / c for r, c in zip(e2e["batched"], runs["aiokafka"],
                                                               strict=True)],
            "single_vs_faust": [r.rate / c for r, c in zip(e2e["single"], runs["faust"],
                                                           strict=True)],
        },
        "runs_msgs_per_s": {
            "aiokafka_passthrough": runs["aiokafka"], "faust_passthrough": runs["faust"],
            **{f"canonflow_{label}": [r.rate for r in rs] for label, rs in e2e.items()},
        },
    }


def _memory(sessions: list[Session], lapped: list[Session], e2e: dict[str, list[E2E]]
            ) -> dict[str, float]:
    """The worker's memory, its table and its changelogs, per session and per message
    (the batched runs': per message of `lapped`, their workload)."""
    n = n_messages(sessions)
    last, single_last = e2e["batched"][-1], e2e["single"][-1]
    native_bytes = sum(len(line.data) for s in sessions for line in s.lines)
    return {
        "worker_peak_rss_mb": statistics.median(r.rss_mb for r in e2e["single"] + e2e["batched"]),
        "table_entries_after_run": single_last.table_entries,
        "table_bytes_per_session": single_last.table_bytes / len(sessions),
        "changelog_bytes_per_native_message_single": single_last.changelog_bytes / n,
        "changelog_bytes_per_native_message_batched": last.changelog_bytes / n_messages(lapped),
        "native_bytes_per_message": native_bytes / n,
    }
