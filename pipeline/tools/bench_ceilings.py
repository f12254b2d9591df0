"""The bench's ceilings: the adapter core offline (1; compiled and interpreted in one
run), a bare aiokafka passthrough (2) and a plain Faust agent (3) through the broker
(pipeline.tools.bench)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from adapters import MemorySpool, get, new_session, translate_record
from pipeline.cluster.broker import die_with_parent
from pipeline.settings import Settings
from pipeline.tools.bench_kafka import (
    BenchError,
    create_topics,
    fresh_broker,
    observe,
    produce_all,
    scratch_dir,
    stop,
)
from pipeline.tools.bench_workload import ROOT, Session, interleaved, n_messages

# ---------------------------------------------------------------------------
# 1. adapter core
# ---------------------------------------------------------------------------


def bench_adapters(sessions: list[Session], batch: int = 1) -> dict[str, float]:
    """Native messages per second through translate_record, per provider and mixed,
    with `batch` native messages per record (one call per record, as the worker does)."""
    by_provider: dict[str, list[Session]] = {}
    for s in sessions:
        by_provider.setdefault(s.provider, []).append(s)
    rates: dict[str, float] = {}
    total_n, total_t = 0, 0.0
    for provider, group in sorted(by_provider.items()):
        t = get(provider)
        n = 0
        start = time.perf_counter()
        for s in group:
            session, spool = new_session(t), MemorySpool()  # the spool the worker's table is
            lines = s.lines
            for i in range(0, len(lines), batch):
                session, _, _ = translate_record(t, session, s.session_id, lines[i:i + batch],
                                                 offset=i, spool=spool)
            n += len(lines)
        elapsed = time.perf_counter() - start
        rates[provider] = n / elapsed
        total_n, total_t = total_n + n, total_t + elapsed
    rates["mix"] = total_n / total_t
    return rates


_CORE_CHILD = """
import json, sys
from pathlib import Path
from pipeline.tools.bench_ceilings import bench_adapters
from pipeline.tools.bench_workload import build_workload
from adapters import build
sessions = build_workload(Path(sys.argv[1]), int(sys.argv[2]))
rates = [bench_adapters(sessions)["mix"] for _ in range(int(sys.argv[3]))]
print(json.dumps([build(), rates]))
"""


def bench_adapters_interpreted(fixtures: Path, messages: int, repeat: int) -> list[float]:
    """The mix rate of the pure-Python source, measured in a child process that imports
    a copy of the translators without the compiled extensions: when this process runs
    the mypyc build, both builds are measured in the same run."""
    root = ROOT
    with tempfile.TemporaryDirectory(prefix="canonflow-bench-") as tmp:
        shutil.copytree(root / "adapters", Path(tmp) / "adapters",
                        ignore=shutil.ignore_patterns("*.so", "__pycache__"))
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([tmp, str(root)])}
        out = subprocess.run([sys.executable, "-c", _CORE_CHILD, str(fixtures), str(messages),
                              str(repeat)], env=env, cwd=tmp, capture_output=True, check=True,
                             text=True)
    kind, rates = json.loads(out.stdout)
    if kind != "interpreted":
        raise BenchError(f"the interpreted copy of the adapters ran as {kind}")
    return rates


# ---------------------------------------------------------------------------
# 2. and 3. the bare aiokafka and the plain Faust passthroughs
# ---------------------------------------------------------------------------


async def _aiokafka_passthrough(settings: Settings, src: str, dst: str, n_records: int) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    from pipeline.cluster.admin import kafka_client_kwargs

    consumer = AIOKafkaConsumer(src, **kafka_client_kwargs(settings), group_id="bench-bare",
                                auto_offset_reset="earliest", enable_auto_commit=False,
                                rebalance_timeout_ms=3000, session_timeout_ms=10000)
    producer = AIOKafkaProducer(**kafka_client_kwargs(settings), linger_ms=1)
    await consumer.start()
    await producer.start()
    done = 0
    try:
        while done < n_records:
            batch = await consumer.getmany(timeout_ms=200, max_records=5000)
            futures = []
            # record batches per partition (send_batch), as canonflow's output producer
            # sends: with one send() per record, this "ceiling" ran below the worker
            for tp, recs in batch.items():
                out = producer.create_batch()
                for r in recs:
                    if out.append(key=r.key, value=r.value, timestamp=None) is None:  # full
                        futures.append(await producer.send_batch(out, dst, partition=tp.partition))
                        out = producer.create_batch()
                        out.append(key=r.key, value=r.value, timestamp=None)
                futures.append(await producer.send_batch(out, dst, partition=tp.partition))
                done += len(recs)
            if futures:
                await asyncio.gather(*futures)
                await consumer.commit()
    finally:
        await producer.stop()
        await consumer.stop()


def run_passthrough(kind: str, settings: Settings, sessions: list[Session], batch: int,
                    timeout: float, laps: int = 1) -> float:
    """Native messages/s forwarded by a bare aiokafka loop or a plain Faust agent, over
    `laps` copies of the workload's records one after the other (the aiokafka loop
    forwards 20,000 records in 0.3 s: too short a time to measure steadily)."""
    broker, live = fresh_broker(settings)
    scratch = scratch_dir(f"canonflow-bench-{kind}-")
    try:
        live = live.replace(data_dir=scratch.name)
        src, dst = f"bench.in.{kind}", f"bench.out.{kind}"
        create_topics(live, [src, dst])
        items = interleaved(sessions, batch, lambda s: src) * laps
        asyncio.run(produce_all(live, items))
        # in a process of its own, as the Faust agent and the canonflow worker are (in
        # the observer's event loop, the aiokafka loop ran unsteadily: 60k, 20k, 27k)
        procs: list[Any] = []  # started once the observer holds dst's partitions: the
        # aiokafka loop can forward 20,000 records before a consumer is ready to watch

        def begin() -> None:
            procs.append(_passthrough_process(kind, live, src, dst, len(items)))

        try:
            # the aiokafka loop exits once it forwarded everything; only a crash ends
            # the observation early
            observed = asyncio.run(observe(live, [dst], len(items), timeout, begin=begin,
                                           alive=lambda: all(p.poll() in (None, 0)
                                                             for p in procs)))
        finally:
            for proc in procs:
                stop(proc)
        if len(observed.records) != len(items):
            raise BenchError(f"{kind} passthrough forwarded {len(observed.records)} of "
                             f"{len(items)} records")
        return observed.rate(n_messages(sessions) * laps)
    finally:
        if broker:
            broker.stop()
        scratch.cleanup()


_AIOKAFKA_CHILD = """
import asyncio, sys
from pipeline.tools.bench_ceilings import _aiokafka_passthrough
from pipeline.settings import from_env
asyncio.run(_aiokafka_passthrough(from_env(), sys.argv[1], sys.argv[2], int(sys.argv[3])))
"""


def _passthrough_process(kind: str, settings: Settings, src: str, dst: str,
                         n_records: int) -> Any:
    """The bare aiokafka loop (2) or the plain Faust agent (3), forwarding src to dst."""
    from pipeline.settings import child_env

    env = child_env(settings.replace(app_id=f"bench-{kind}", web_enabled=False))
    argv = ([sys.executable, "-c", _AIOKAFKA_CHILD, src, dst, str(n_records)]
            if kind == "aiokafka" else [sys.executable, "-m", "pipeline.tools.bench_faust", src, dst])
    return subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            preexec_fn=die_with_parent())  # a killed bench leaves none
