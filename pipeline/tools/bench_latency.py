"""`canonflow bench --latency`: how long a native message takes from its production to
its canonical event being readable on agents.canonical, at a live pace.

One worker (`canonflow run` as a child process, default settings, no web server) on a
fresh embedded broker. A producer in a process of its own offers the bench's workload
(the captured conversations copied into many sessions, interleaved as a fleet writes
them, one native message per record) at a fixed rate for a few seconds; then, once the
worker has caught up (no event for a second, at most _DRAIN s), the next rate, with
sessions of its own. Every record's `t` header is the time it was handed to the
producer (epoch ms, as `canonflow produce` and the runtimes' shippers set it): the
worker stamps the events it translates from that record with it (createdAt). An
observer in this process, reading agents.canonical from its end, notes when each event
arrives: latency = arrival - createdAt, both on this machine's clock, in ms. Events
held back (a delta's tail that may start a secret) are published with the record that
releases them, and stamped with its time.

Reported per rate: the rate actually offered, the events measured, p50, p99 and max;
and the first rate at which p99 passes 1 s (none: not within the rates tried).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import msgspec

from pipeline.settings import Settings

#: seconds each rate is offered (fewer messages at the low rates, the same minute)
DEFAULT_RATES = (100, 1000, 5000)
_SECONDS = {100: 10.0, 1000: 8.0}
_DEFAULT_SECONDS = 5.0
_DRAIN = 20.0  # the most seconds to wait for a rate's last events before the next rate


def seconds_for(rate: int) -> float:
    return _SECONDS.get(rate, _DEFAULT_SECONDS)


# ---------------------------------------------------------------------------
# The producer (a child process): records at a fixed rate
# ---------------------------------------------------------------------------

_PRODUCER_CHILD = """
import asyncio, json, sys
from pipeline.settings import from_env
from pipeline.tools.bench_latency import produce_at_rate
print(json.dumps(asyncio.run(produce_at_rate(from_env(), sys.argv[1], int(sys.argv[2])))))
"""


async def produce_at_rate(settings: Settings, fixtures: str, rate: int) -> dict[str, Any]:
    """Offer the workload at `rate` for seconds_for(rate), one native message per
    record, each record's `t` header its send time, its sessions this rate's own.
    Returns what was offered."""
    from aiokafka import AIOKafkaProducer

    from pipeline.cluster.admin import kafka_client_kwargs
    from pipeline.tools.bench import build_workload, interleaved
    from topics.catalog import raw_topic
    from topics.records import HEADER_ORIGIN, HEADER_TIME

    n = int(rate * seconds_for(rate))
    items = interleaved(build_workload(Path(fixtures), n), 1, lambda s: raw_topic(s.provider))
    suffix = b"-%d" % rate
    producer = AIOKafkaProducer(**kafka_client_kwargs(settings), linger_ms=0)
    await producer.start()
    try:
        futures = []
        start = time.time()
        first = last = 0.0
        for i in range(n):
            wait = start + i / rate - time.time()
            if wait > 0.0005:
                await asyncio.sleep(wait)
            topic, key, rec = items[i]
            last = time.time()
            first = first or last
            headers = [(HEADER_ORIGIN, rec.origin.encode()),
                       (HEADER_TIME, str(int(last * 1000)).encode())]
            futures.append(await producer.send(topic, rec.value, key=key + suffix,
                                               headers=headers))
        await asyncio.gather(*futures)
    finally:
        await producer.stop()
    return {"rate": rate, "sent": n, "start": first, "end": last,
            "offered_per_s": n / max(last - first, 1e-6)}


# ---------------------------------------------------------------------------
# The observer: arrivals on agents.canonical
# ---------------------------------------------------------------------------


def _created_ms(value: bytes) -> float:
    created = msgspec.json.decode(value, type=_Stamp).createdAt
    return datetime.fromisoformat(created.replace("Z", "+00:00")).timestamp() * 1000


class _Stamp(msgspec.Struct):
    createdAt: str


async def _arrivals(settings: Settings, ready: asyncio.Event, stop: Callable[[], bool],
                    out: list[tuple[float, float]]) -> None:
    """(createdAt ms, arrival ms) of every event that reaches agents.canonical after
    `ready` is set, until `stop()`."""
    from aiokafka import AIOKafkaConsumer

    from pipeline.cluster.admin import kafka_client_kwargs
    from pipeline.tools.bench_kafka import hold_partitions
    from topics.catalog import CANONICAL_TOPIC

    consumer = AIOKafkaConsumer(CANONICAL_TOPIC, **kafka_client_kwargs(settings),
                                group_id=None, auto_offset_reset="latest",
                                enable_auto_commit=False, fetch_max_wait_ms=5)
    await consumer.start()
    try:
        await hold_partitions(consumer, at_end=True)
        ready.set()
        while not stop():
            batch = await consumer.getmany(timeout_ms=50, max_records=10_000)
            now = time.time() * 1000
            for recs in batch.values():
                out += [(_created_ms(r.value), now) for r in recs]
    finally:
        await consumer.stop()


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


def summarize(phases: list[dict[str, Any]],
              arrivals: list[tuple[float, float]]) -> list[dict[str, Any]]:
    """Each phase's latencies: the events stamped within its records' send times."""
    out = []
    for p in phases:
        lo, hi = p["start"] * 1000 - 1, p["end"] * 1000 + 1
        lat = [arr - created for created, arr in arrivals if lo <= created <= hi]
        out.append({"rate": p["rate"], "sent": p["sent"], "offered_per_s": p["offered_per_s"],
                    "events": len(lat), "p50_ms": _percentile(lat, 0.50),
                    "p99_ms": _percentile(lat, 0.99), "max_ms": max(lat, default=float("nan"))})
    return out


# ---------------------------------------------------------------------------
# The run
# ---------------------------------------------------------------------------


def run_latency_bench(settings: Settings, *, rates: list[int], fixtures: Path | None,
                      say: Callable[[str], None], worker_env: dict[str, str] | None = None,
                      floor: bool = True) -> dict[str, Any]:
    """The rates offered to a canonflow worker and then (`floor`) to the Faust stamp
    passthrough (pipeline.tools.bench_faust --stamp: one agent per raw topic, each record
    to agents.canonical, nothing translated), each on a fresh embedded broker: the same
    harness, broker and machine, so the second is the floor under the first."""
    from pipeline.tools.bench import default_fixtures
    from pipeline.worker.process import WorkerProcess

    fixtures = fixtures or default_fixtures()
    log = tempfile.NamedTemporaryFile(prefix="canonflow-bench-latency-", suffix=".log",
                                      delete=False)
    log.close()
    timings = log.name[:-len(".log")] + ".batches.jsonl"

    def worker(live: Settings) -> Any:
        return WorkerProcess(live.replace(batch_timings=timings), log_path=log.name,
                             env=worker_env).start()

    phases, arrivals, idle = _offer_rates(settings, rates, fixtures, say, worker, "worker")
    idles = {"worker": idle}
    rows = summarize(phases, arrivals)
    steps = batch_steps(phases, read_timings(timings))
    for r, s in zip(rows, steps, strict=True):
        r["batches"] = s
    if floor:
        *under, idles["floor"] = _offer_rates(settings, rates, fixtures, say, _StampProcess,
                                              "Faust passthrough")
        for r, f in zip(rows, summarize(*under), strict=True):
            r["faust"] = {k: f[k] for k in ("offered_per_s", "events", "p50_ms", "p99_ms",
                                            "max_ms")}
    over = next((r["rate"] for r in rows if r["p99_ms"] > 1000), None)
    for r in rows:
        say(f"latency at {r['rate']:,} msg/s: p50 {r['p50_ms']:.0f} ms, p99 "
            f"{r['p99_ms']:.0f} ms, max {r['max_ms']:.0f} ms ({r['events']:,} events)"
            + (f"; Faust passthrough p50 {r['faust']['p50_ms']:.0f} ms, p99 "
               f"{r['faust']['p99_ms']:.0f} ms" if "faust" in r else ""))
    return {"rates": rows, "p99_over_1s_at": over, "idle": idles, "worker_log": log.name,
            "batch_timings": timings}


class _StampProcess:
    """The Faust stamp passthrough as a child process (WorkerProcess's start/alive/stop)."""

    def __init__(self, settings: Settings):
        from pipeline.cluster.broker import die_with_parent
        from pipeline.settings import child_env

        self.proc = subprocess.Popen(
            [sys.executable, "-m", "pipeline.tools.bench_faust", "--stamp"],
            env=child_env(settings),
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            preexec_fn=die_with_parent())  # a killed bench leaves none

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> None:
        from pipeline.cluster.broker import stop_process

        stop_process(self.proc, 20)


def _offer_rates(settings: Settings, rates: list[int], fixtures: Path,
                 say: Callable[[str], None], start: Callable[[Settings], Any], label: str
                 ) -> tuple[list[dict[str, Any]], list[tuple[float, float]],
                            dict[str, float | None]]:
    """On a fresh embedded broker, `start(settings)` the app measured, warm it up, watch
    it idle, and offer each rate in turn: (what each rate offered, every arrival, the
    cores the app and its broker used idle: idle_cores)."""
    from pipeline.settings import child_env
    from pipeline.tools.bench import _fresh_broker
    from pipeline.tools.bench_kafka import scratch_dir
    from pipeline.worker.process import ensure_topics

    broker, live = _fresh_broker(settings)
    scratch = scratch_dir("canonflow-bench-latency-")
    try:
        live = live.replace(app_id=f"bench-latency-{os.getpid()}-{label.split()[0].lower()}",
                            web_enabled=False, data_dir=scratch.name)
        ensure_topics(live)
        app = start(live)
        try:
            say(f"latency ({label}): warming up (every conversation once)")
            _warm_up(live, fixtures)
            say(f"latency ({label}): idle for {IDLE_SECONDS:.0f} s")
            idle = idle_cores({"app": app.proc.pid, "broker": broker.pid if broker else None},
                              IDLE_SECONDS)
            env = child_env(live)
            arrivals: list[tuple[float, float]] = []
            done: list[bool] = []

            async def offer(rate: int) -> dict[str, Any]:
                child = await asyncio.create_subprocess_exec(
                    sys.executable, "-c", _PRODUCER_CHILD, str(fixtures), str(rate), env=env,
                    stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
                stdout, _ = await child.communicate()
                phase: dict[str, Any] = msgspec.json.decode(stdout)
                # until the app has caught up: no event for a second (or _DRAIN)
                deadline = time.monotonic() + _DRAIN
                seen = -1
                while len(arrivals) != seen and time.monotonic() < deadline:
                    seen = len(arrivals)
                    await asyncio.sleep(1.0)
                return phase

            async def observe_while_offering() -> list[dict[str, Any]]:
                ready = asyncio.Event()
                task = asyncio.create_task(_arrivals(live, ready, lambda: bool(done), arrivals))
                await ready.wait()
                try:
                    phases = []
                    for rate in rates:
                        say(f"latency ({label}): offering {rate:,} msg/s for "
                            f"{seconds_for(rate):.0f} s")
                        phases.append(await offer(rate))
                    return phases
                finally:
                    done.append(True)
                    await task

            phases = asyncio.run(observe_while_offering())
            if not app.alive():
                raise RuntimeError(f"the {label} stopped")
        finally:
            app.stop()
    finally:
        if broker:
            broker.stop()
        scratch.cleanup()
    return phases, arrivals, idle


#: How long the bench watches each app do nothing (after its warm-up) for its idle cost.
IDLE_SECONDS = 5.0


def idle_cores(pids: dict[str, int | None], seconds: float) -> dict[str, float | None]:
    """The cores each process used over `seconds` (its CPU seconds, user and system,
    every thread, over `seconds`); None for a process /proc cannot say (none, gone, no
    /proc)."""
    from pipeline.ops.prometheus import process_stats

    def cpu(pid: int | None) -> float | None:
        try:
            return process_stats(str(pid))["cpu"] if pid else None
        except OSError:
            return None

    before = {name: cpu(pid) for name, pid in pids.items()}
    time.sleep(seconds)
    cores: dict[str, float | None] = {}
    for name, pid in pids.items():
        start, end = before[name], cpu(pid)
        cores[name] = None if start is None or end is None else (end - start) / seconds
    return cores


#: A batch's steps, as the worker's checkpoint times them (CANONFLOW_BATCH_TIMINGS).
STEPS = ("translate", "publish", "store", "count")


def read_timings(path: str) -> list[dict[str, Any]]:
    try:
        with open(path, "rb") as fh:
            return [msgspec.json.decode(line) for line in fh if line.strip()]
    except FileNotFoundError:
        return []


def batch_steps(phases: list[dict[str, Any]], batches: list[dict[str, Any]]
                ) -> list[dict[str, Any]]:
    """Where a rate's time went in the worker: its batches (acknowledged from the
    rate's first record until the next rate's), records per batch, the median oldest
    record's age when its batch began (the fetch wait and the batches ahead of it),
    and each step's median ms and share of the batches' time."""
    out = []
    for i, p in enumerate(phases):
        hi = phases[i + 1]["start"] if i + 1 < len(phases) else float("inf")
        mine = [b for b in batches if p["start"] <= b["at"] < hi]
        total = sum(b[s] for b in mine for s in STEPS) or 1.0
        ages = [b["oldest_age"] * 1000 for b in mine if b.get("oldest_age") is not None]
        out.append({
            "count": len(mine),
            "records_per_batch": sum(b["records"] for b in mine) / max(1, len(mine)),
            "oldest_age_p50_ms": _percentile(ages, 0.5),
            **{f"{s}_p50_ms": _percentile([b[s] * 1000 for b in mine], 0.5) for s in STEPS},
            **{f"{s}_share": sum(b[s] for b in mine) / total for s in STEPS}})
    return out


def _warm_up(settings: Settings, fixtures: Path) -> None:
    """Every captured conversation once, as sessions of their own, until agents.canonical
    has been quiet for a second: the rates measure the running app, not its first
    record of each provider (a translator's first import, a producer's first metadata
    for a partition; measured, they made the first seconds of the first rate the slowest
    of the run)."""
    from pipeline.tools.bench import _produce_all, build_workload, interleaved
    from topics.catalog import raw_topic

    sessions = build_workload(fixtures, 1)
    for s in sessions:
        s.session_id = "latency-warm-up-" + s.session_id
    asyncio.run(_produce_all(settings, interleaved(sessions, 1,
                                                   lambda s: raw_topic(s.provider))))
    if not asyncio.run(_until_quiet(settings, 120.0)):
        raise RuntimeError("nothing reached agents.canonical within 120 s")


async def _until_quiet(settings: Settings, timeout: float, quiet: float = 1.0) -> int:
    """Read agents.canonical from its start until no event came for `quiet` seconds
    (after the first), or `timeout`: the events read."""
    from aiokafka import AIOKafkaConsumer

    from pipeline.cluster.admin import kafka_client_kwargs
    from topics.catalog import CANONICAL_TOPIC

    consumer = AIOKafkaConsumer(CANONICAL_TOPIC, **kafka_client_kwargs(settings),
                                group_id=None, auto_offset_reset="earliest",
                                enable_auto_commit=False)
    await consumer.start()
    seen, last = 0, time.monotonic()
    deadline = last + timeout
    try:
        while time.monotonic() < deadline and not (seen and time.monotonic() - last > quiet):
            batch = await consumer.getmany(timeout_ms=200, max_records=100_000)
            got = sum(len(recs) for recs in batch.values())
            if got:
                seen, last = seen + got, time.monotonic()
    finally:
        await consumer.stop()
    return seen


def format_latency_report(r: dict[str, Any]) -> list[str]:
    lines = ["latency, native message -> agents.canonical (one message per record, one "
             "worker, embedded broker)",
             "  offered msg/s   (achieved)   events      p50 ms    p99 ms    max ms"]
    for row in r["rates"]:
        lines.append(f"  {row['rate']:>13,}   ({row['offered_per_s']:>8,.0f})  "
                     f"{row['events']:>7,}   {row['p50_ms']:>9.0f} {row['p99_ms']:>9.0f} "
                     f"{row['max_ms']:>9.0f}")
    if all("faust" in row for row in r["rates"]):
        lines += ["  the same rates to a Faust passthrough that translates nothing (one agent "
                  "per raw topic, each record to agents.canonical as it comes), same broker "
                  "and machine: the floor",
                  "  offered msg/s   (achieved)   events      p50 ms    p99 ms    max ms"
                  "   worker p99 / floor p99"]
        for row in r["rates"]:
            f = row["faust"]
            lines.append(f"  {row['rate']:>13,}   ({f['offered_per_s']:>8,.0f})  "
                         f"{f['events']:>7,}   {f['p50_ms']:>9.0f} {f['p99_ms']:>9.0f} "
                         f"{f['max_ms']:>9.0f}   {row['p99_ms'] / max(f['p99_ms'], 1e-9):>20.2f}x")
    if all("batches" in row for row in r["rates"]):
        lines += _steps_report(r["rates"])
    if "idle" in r:
        lines.append(_idle_report(r["idle"]))
    over = r["p99_over_1s_at"]
    top = max(row["rate"] for row in r["rates"])
    lines.append(f"  p99 passes 1 s at {over:,} msg/s" if over is not None
                 else f"  p99 stays under 1 s up to {top:,} msg/s (the highest rate tried)")
    return lines


def _idle_report(idle: dict[str, dict[str, float | None]]) -> str:
    def cores(x: float | None) -> str:
        return "?" if x is None else f"{x:.3f}"

    w = idle["worker"]
    line = (f"  idle, after the warm-up ({IDLE_SECONDS:.0f} s): the worker {cores(w['app'])} "
            f"core, its broker {cores(w['broker'])}")
    f = idle.get("floor")
    if f is not None:
        line += (f"; the Faust passthrough {cores(f['app'])}, its broker "
                 f"{cores(f['broker'])}")
        if w["app"] is not None and f["app"]:
            line += f" (worker / passthrough {w['app'] / f['app']:.2f}x)"
    return line


def _steps_report(rows: list[dict[str, Any]]) -> list[str]:
    lines = ["  where a batch's time went (median ms per batch; share of the batches' time)"]
    lines.append("  offered msg/s  batches  records/batch  oldest age  " +
                 "  ".join(f"{s:>13}" for s in STEPS))
    for row in rows:
        b = row["batches"]
        lines.append(f"  {row['rate']:>13,}  {b['count']:>7,}  {b['records_per_batch']:>13.1f}  "
                     f"{b['oldest_age_p50_ms']:>10.0f}  " + "  ".join(
                         f"{b[s + '_p50_ms']:>6.1f} ({b[s + '_share']:>3.0%})" for s in STEPS))
    return lines
