"""The worker's CPU per native message, beside the adapter core's (`canonflow bench`).

Wall-clock rates on a shared machine move by 2x from one run to the next; the CPU
seconds a process spent on a piece of work move far less. So this section measures
CPU time, never a rate:

- the adapter core: `translate_record` over the workload's records, offline, in this
  process's thread (its CPU time, `time.thread_time`);
- the worker: one `canonflow run` process per guarantee, its CPU seconds (user and
  system, every thread, from /proc/<pid>/stat) from one quiet moment to the next,
  with the workload produced and translated in between, once as records of up to
  `batch` native messages and once as one native message per record.

The worker is warmed up first (one copy of every conversation: it holds its
partitions, every agent has run), and each measure starts and ends when the worker
is settled (a second with under SETTLED_CORES of a core used): the chat projection
and the fleet stage finish what the records started, and are counted. What the
worker spends idle meanwhile (empty fetches, commits, timers) is counted too: it is
measured on its own (`worker_idle_cores`), and `idle_share_*` says at most how much
of a measure it can be (a run that a busy machine stretches counts more of it).

Every run publishes to agents.canonical exactly the events of the offline replay for
its sessions (checked). The worker of each guarantee is one consumer group that
starts at the end of the raw topics, and each run's sessions have ids of their own,
so the runs can share one broker: the section's own (the embedded Tansu or Apache
Kafka), or the cluster `--broker` names.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from adapters import MemorySpool, get, new_session, translate_record
from pipeline.settings import Settings
from pipeline.tools.bench_kafka import (
    BenchError,
    fresh_broker,
    hold_partitions,
    produce_all,
    scratch_dir,
    verify,
)
from pipeline.tools.bench_workload import (
    Session,
    build_workload,
    expected_events,
    interleaved,
    line_groups,
    n_messages,
)
from pipeline.worker.process import WorkerProcess, ensure_topics
from topics.catalog import CANONICAL_TOPIC, raw_topic

#: The delivery guarantees the worker may run with (CANONFLOW_GUARANTEE).
GUARANTEES = ("at_least_once", "exactly_once")
#: The guarantee whose figures are also the result's top-level keys.
DEFAULT_GUARANTEE = "at_least_once"
#: A worker is settled when it used less than this share of a core over SETTLED_SECONDS.
SETTLED_CORES = 0.05
SETTLED_SECONDS = 1.0
#: Seconds over which the worker's idle cost is measured, once warm.
IDLE_SECONDS = 3.0
#: The names the worker's Settings may give its guarantee (Faust's is the second).
GUARANTEE_FIELDS = ("guarantee", "processing_guarantee")


def guarantee_field() -> str | None:
    """The Settings field of the worker's delivery guarantee; None while it has none
    (the worker then runs at-least-once only)."""
    return next((f for f in GUARANTEE_FIELDS if f in Settings.__struct_fields__), None)


def measurable_guarantees() -> tuple[str, ...]:
    """The guarantees this worker can be run with: all of them once Settings has a
    guarantee, else only at-least-once (a variable the worker does not read would
    measure at-least-once under another name)."""
    return GUARANTEES if guarantee_field() else (DEFAULT_GUARANTEE,)


def with_guarantee(settings: Settings, guarantee: str) -> Settings:
    """`settings` for a worker with `guarantee`: its Settings field, which the worker's
    environment carries (CANONFLOW_GUARANTEE, child_env). Raises BenchError for a
    guarantee this worker cannot run."""
    if guarantee not in measurable_guarantees():
        raise BenchError(f"guarantee {guarantee}: this worker runs "
                         f"{', '.join(measurable_guarantees())}")
    field = guarantee_field()
    return settings.replace(**{field: guarantee}) if field else settings


def core_cpu_us_per_msg(sessions: list[Session], batch: int) -> float:
    """CPU microseconds per native message of the adapter core alone: every session's
    records (up to `batch` native messages each, as the worker receives them) through
    translate_record, in this thread."""
    start = time.thread_time()
    for s in sessions:
        t = get(s.provider)
        session, spool = new_session(t), MemorySpool()  # the spool the worker's table is
        for offset, lines in enumerate(line_groups(s, batch)):
            session, _, _ = translate_record(t, session, s.session_id, lines, offset=offset,
                                             spool=spool)
    return (time.thread_time() - start) * 1e6 / n_messages(sessions)


def cpu_seconds(pid: int | None) -> float:
    """A process's CPU seconds so far (user and system, every thread).
    Raises BenchError when /proc cannot say (no such process, no /proc)."""
    from pipeline.ops.prometheus import process_stats

    try:
        return process_stats(str(pid))["cpu"]
    except (OSError, ValueError, IndexError) as e:
        raise BenchError(f"no CPU time for process {pid}: {e}") from None


def settled(worker: WorkerProcess, timeout: float, log: str) -> float:
    """Wait until `worker` is settled; returns its CPU seconds then. Raises BenchError
    when it dies or stays busy."""
    deadline = time.monotonic() + timeout
    last = cpu_seconds(worker.pid)
    while True:
        time.sleep(SETTLED_SECONDS)
        if not worker.alive():
            raise BenchError(f"the worker exited (log {log})")
        now = cpu_seconds(worker.pid)
        if now - last < SETTLED_CORES * SETTLED_SECONDS:
            return now
        if time.monotonic() > deadline:
            raise BenchError(f"the worker stayed busy for {timeout:.0f} s (log {log})")
        last = now


def idle_cores(worker: WorkerProcess, timeout: float, log: str) -> float:
    """The cores a settled `worker` uses over IDLE_SECONDS (its empty fetches, commits and
    timers). Raises BenchError when it dies or stays busy."""
    before = settled(worker, timeout, log)
    time.sleep(IDLE_SECONDS)
    if not worker.alive():
        raise BenchError(f"the worker exited (log {log})")
    return (cpu_seconds(worker.pid) - before) / IDLE_SECONDS


def renamed(sessions: list[Session], prefix: str) -> list[Session]:
    """The same sessions under ids of their own (`prefix`-<id>)."""
    return [Session(s.provider, f"{prefix}-{s.session_id}", s.lines) for s in sessions]


async def _watch(settings: Settings, keys: set[bytes], want: int, timeout: float,
                 alive: Callable[[], bool], items: list[Any]) -> list[Any]:
    """Produce `items` once a consumer holds agents.canonical at its end, then collect
    the records keyed by one of `keys` until `want` came (fewer: the worker died, or
    `timeout`)."""
    from aiokafka import AIOKafkaConsumer

    from pipeline.cluster.admin import kafka_client_kwargs

    consumer = AIOKafkaConsumer(CANONICAL_TOPIC, **kafka_client_kwargs(settings), group_id=None,
                                auto_offset_reset="latest", enable_auto_commit=False,
                                fetch_max_bytes=50 * 1024 * 1024,
                                max_partition_fetch_bytes=8 * 1024 * 1024)
    await consumer.start()
    got: list[Any] = []
    try:
        await hold_partitions(consumer, at_end=True)
        await produce_all(settings, items)
        deadline = time.monotonic() + timeout
        while len(got) < want and time.monotonic() < deadline and alive():
            batch = await consumer.getmany(timeout_ms=200, max_records=100_000)
            got += [r for recs in batch.values() for r in recs if r.key in keys]
    finally:
        await consumer.stop()
    return got


def through_worker(settings: Settings, worker: WorkerProcess, sessions: list[Session],
                   batch: int, timeout: float, log: str) -> int:
    """`sessions` through `worker`, as records of up to `batch` native messages, checked
    against the offline replay; returns the canonical events. Raises BenchError on a
    missing or different event."""
    expected = expected_events(sessions)
    items = interleaved(sessions, batch, lambda s: raw_topic(s.provider))
    want = sum(len(v) for v in expected.values())
    records = asyncio.run(_watch(settings, {k.encode() for k in expected}, want, timeout,
                                 worker.alive, items))
    verify(records, expected, log)
    return len(records)


async def _start_at_end(settings: Settings) -> None:
    """Commit the raw topics' end offsets for the worker's consumer group (its app id)
    before it starts, so it reads only what the bench produces from then on."""
    from aiokafka import AIOKafkaConsumer, TopicPartition

    from pipeline.cluster.admin import kafka_client_kwargs

    consumer = AIOKafkaConsumer(**kafka_client_kwargs(settings), group_id=settings.app_id,
                                enable_auto_commit=False, auto_offset_reset="latest")
    await consumer.start()
    try:
        tps = [TopicPartition(raw_topic(p), i) for p in settings.providers
               for i in range(settings.partitions)]
        consumer.assign(tps)
        await consumer.seek_to_end(*tps)
        # Tansu answers ListOffsets(latest) with the first offset of a partition's last
        # record batch + 1: the rest of that batch is read, to the log's true end
        while await consumer.getmany(*tps, timeout_ms=500, max_records=100_000):
            pass
        ends = {tp: await consumer.position(tp) for tp in tps}
        if any(ends.values()):
            await consumer.commit(ends)
    finally:
        await consumer.stop()


def measure_guarantee(settings: Settings, guarantee: str, sessions: list[Session],
                      warm: list[Session], batch: int, repeat: int, timeout: float,
                      say: Callable[[str], None]) -> dict[str, Any]:
    """The worker's CPU per native message with `guarantee` (with_guarantee), its
    records batched and one message each, `repeat` times each, on the broker of
    `settings`: medians, and every run's figure."""
    scratch = scratch_dir("canonflow-bench-cpu-")
    fd, log = tempfile.mkstemp(prefix="canonflow-bench-cpu-", suffix=".log")
    os.close(fd)
    tag = f"cpu-{os.getpid()}-{guarantee}"
    try:
        live = settings.replace(app_id=f"bench-{tag}", web_enabled=False,
                                data_dir=f"{scratch.name}/data")
        ensure_topics(live)
        asyncio.run(_start_at_end(live))
        worker = WorkerProcess(with_guarantee(live, guarantee), log_path=log).start()
        try:
            say(f"cpu ({guarantee}): warming the worker up ({n_messages(warm):,} messages)")
            through_worker(live, worker, renamed(warm, f"{tag}-warm"), batch, timeout, log)
            idle = idle_cores(worker, timeout, log)
            runs: dict[str, list[float]] = {"batched": [], "single": []}
            seconds: dict[str, list[float]] = {"batched": [], "single": []}
            n = n_messages(sessions)
            for i in range(repeat):
                for label, b in (("batched", batch), ("single", 1)):
                    before = settled(worker, timeout, log)
                    start = time.monotonic()
                    through_worker(live, worker, renamed(sessions, f"{tag}-{label}-{i}"), b,
                                   timeout, log)
                    after = settled(worker, timeout, log)
                    seconds[label].append(time.monotonic() - start)
                    runs[label].append((after - before) * 1e6 / n)
                    say(f"cpu ({guarantee}) run {i + 1}/{repeat}: worker, {label}, "
                        f"{runs[label][-1]:.1f} CPU us per message")
        finally:
            worker.stop()
    finally:
        scratch.cleanup()
    med = statistics.median
    return {"worker_cpu_us_per_msg_batched": med(runs["batched"]),
            "worker_cpu_us_per_msg_single": med(runs["single"]),
            "worker_idle_cores": idle,
            # the most of a run's CPU its idle work can be (its timers and empty fetches
            # go on while it works): a run stretched by a busy machine counts more of it
            "idle_share_batched": med(idle * t * 1e6 / n / c
                                      for t, c in zip(seconds["batched"], runs["batched"],
                                                      strict=True)),
            "idle_share_single": med(idle * t * 1e6 / n / c
                                     for t, c in zip(seconds["single"], runs["single"],
                                                     strict=True)),
            "runs_worker_cpu_us_per_msg": runs, "runs_seconds": seconds}


def broker_name(broker: Any, settings: Settings) -> str:
    """The engine the section ran on ("kafka" or "tansu"), with its version if known."""
    engine = getattr(broker, "engine", "") or settings.broker_kind
    version = getattr(broker, "version", None)
    if engine == "tansu" and broker is not None:
        from pipeline.cluster.broker import tansu_binary

        out = subprocess.run([tansu_binary(), "--version"], capture_output=True, text=True,
                             timeout=30)
        version = out.stdout.split()[-1] if out.returncode == 0 and out.stdout.split() else None
    return f"{engine} {version}" if version else engine


def run_cpu_bench(settings: Settings, *, messages: int, batch: int, repeat: int,
                  fixtures: Path, timeout: float, guarantees: tuple[str, ...],
                  say: Callable[[str], None]) -> dict[str, Any]:
    """The section's result: per guarantee (`modes`), the worker's CPU per native
    message, batched and one message per record, beside the adapter core's on the same
    records, and their ratios; at-least-once's figures (else the first guarantee's)
    also at the top level, under `guarantee`.

    Raises BenchError for a guarantee this worker cannot run (measurable_guarantees)
    and for a wrong answer."""
    unknown = [g for g in guarantees if g not in measurable_guarantees()]
    if unknown or not guarantees:
        raise BenchError(f"guarantee {', '.join(unknown) or 'none'}: this worker runs "
                         f"{', '.join(measurable_guarantees())}")
    sessions = build_workload(fixtures, messages)
    warm = build_workload(fixtures, 1)
    say(f"cpu: {n_messages(sessions):,} native messages in {len(sessions)} sessions, "
        f"up to {batch} per record, then one per record")
    for b in (batch, 1):  # what the first call pays once (imports, compiled patterns)
        core_cpu_us_per_msg(warm, b)
    core = statistics.median(core_cpu_us_per_msg(sessions, batch) for _ in range(repeat))
    core_single = statistics.median(core_cpu_us_per_msg(sessions, 1) for _ in range(repeat))
    broker, live = fresh_broker(settings)
    try:
        if not broker:  # a cluster of the user's: what it is decides the worker's settings
            from pipeline.worker.process import for_cluster

            live = asyncio.run(for_cluster(live))
        name = broker_name(broker, live)
        modes: dict[str, Any] = {}
        for guarantee in guarantees:
            worker = measure_guarantee(live, guarantee, sessions, warm, batch, repeat, timeout,
                                       say)
            modes[guarantee] = {
                "broker": name,
                "worker_cpu_us_per_msg_batched": worker["worker_cpu_us_per_msg_batched"],
                "worker_cpu_us_per_msg_single": worker["worker_cpu_us_per_msg_single"],
                "core_cpu_us_per_msg": core,
                "core_cpu_us_per_msg_single": core_single,
                "worker_vs_core_batched": worker["worker_cpu_us_per_msg_batched"] / core,
                "worker_vs_core_single": worker["worker_cpu_us_per_msg_single"] / core_single,
                "worker_idle_cores": worker["worker_idle_cores"],
                "idle_share_batched": worker["idle_share_batched"],
                "idle_share_single": worker["idle_share_single"],
                "runs_worker_cpu_us_per_msg": worker["runs_worker_cpu_us_per_msg"],
                "runs_seconds": worker["runs_seconds"],
            }
    finally:
        if broker:
            broker.stop()
    first = DEFAULT_GUARANTEE if DEFAULT_GUARANTEE in modes else guarantees[0]
    return {**modes[first], "guarantee": first, "modes": modes,
            "cpu_workload": {"messages": n_messages(sessions), "sessions": len(sessions),
                             "batch": batch, "repeat": repeat,
                             "messages_per_batched_record": n_messages(sessions) / sum(
                                 len(line_groups(s, batch)) for s in sessions),
                             "warm_up_messages": n_messages(warm)}}
