"""Deliveries the cluster never acknowledges, in the fleet stage's publication and in the
idle-session scan, must not stop the agents, and SIGTERM must stop the worker while
they are being sent again (issue 25, finding 1).

The full-size repro: 100,000 open sessions and 20,000 model names; the idle scan closed
them all in one go and the fleet stage published every window in one delivery; the
deliveries timed out (51k canonical, 43k chat, 30k metrics sends failing) and were
sent again forever while holding the lock the agents need, so the worker translated
nothing for more than 12 minutes, /metrics took over 150 s and SIGTERM was not
honoured. Here the deliveries fail for good (tests/pipeline/failing_sends), on a real
worker and a real broker, with a few thousand sessions, so that each test takes well
under a minute.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from pipeline.settings import Settings
from pipeline.tools.kafka_io import RawRecord, follow
from pipeline.worker.process import WorkerProcess
from tests.pipeline.failing_sends.sitecustomize import FAILED_MARK, LOADED_MARK
from tests.pipeline.faults import own_broker, wait_for_log
from tests.pipeline.test_metrics import (
    closed_turns,
    health,
    http_get,
    read_keys,
    scrape,
    wait_for,
    worker_settings,
)
from topics.catalog import CANONICAL_TOPIC, METRICS_TOPIC, raw_topic

pytestmark = pytest.mark.broker

broker = pytest.fixture(name="broker")(own_broker)

#: SIGTERM, then SIGKILL after this many seconds (a deadline for a hung worker: one
#: that needs it did not stop in order, and its exit status is -9).
STOP_BOUND = 30.0


def gemini(model: str, t: int, *, ended: bool = True, tokens: tuple[Any, Any] = (3600, 120)
           ) -> list[RawRecord]:
    """A Gemini CLI stream-json session: its init (session.started, turn.started with
    `model`) and, when `ended`, its result (turn.completed with `tokens` in and out)."""
    out = [RawRecord(json.dumps({"type": "init", "session_id": f"g-{t}", "model": model}
                                ).encode(), "agent", t)]
    if ended:
        out.append(RawRecord(json.dumps({"type": "result", "status": "success", "stats": {
            "input_tokens": tokens[0], "output_tokens": tokens[1]}}).encode(), "agent", t + 5))
    return out


def produce_sessions(settings: Settings, sessions: dict[str, list[RawRecord]],
                     provider: str = "gemini") -> None:
    """Every session's records, keyed by its id, in one producer (sessions in parallel,
    each session's records in order)."""
    from aiokafka import AIOKafkaProducer

    from pipeline.cluster.admin import kafka_client_kwargs

    async def go() -> None:
        producer = AIOKafkaProducer(**kafka_client_kwargs(settings), acks="all", linger_ms=5)
        await producer.start()
        try:
            futures = [await producer.send(raw_topic(provider), r.value, key=key.encode(),
                                           headers=r.headers(), timestamp_ms=r.t)
                       for key, records in sessions.items() for r in records]
            await asyncio.gather(*futures)
        finally:
            await producer.stop()

    asyncio.run(go())


def failing_worker(settings: Settings, tmp_path: Path, name: str = "worker"
                   ) -> tuple[WorkerProcess, Path]:
    """A worker whose deliveries fail as the control file (absent: none) says."""
    control = tmp_path / f"{name}-failing.json"
    env = {"PYTHONPATH": os.pathsep.join([str(Path(__file__).parent / "failing_sends")]
                                         + [p for p in [os.environ.get("PYTHONPATH")] if p]),
           "TEST_FAILING_SENDS": str(control)}
    worker = WorkerProcess(settings, log_path=str(tmp_path / f"{name}.log"), env=env).start()
    return worker, control


def fail(control: Path, **rule: list[str]) -> None:
    tmp = control.with_suffix(".tmp")
    tmp.write_text(json.dumps(rule))
    tmp.replace(control)  # whole, never half written


def turns_closed(settings: Settings, keys: set[bytes], worker: WorkerProcess,
                 timeout: float = 60.0) -> bool:
    """Did every session of `keys` get its turn.completed on agents.canonical?"""
    got = read_keys(settings, CANONICAL_TOPIC, keys, closed_turns(len(keys)), timeout=timeout,
                    worker=worker)
    return closed_turns(len(keys))(got)


def stop_timed(worker: WorkerProcess) -> tuple[int | None, float]:
    t0 = time.monotonic()
    status = worker.stop(timeout=STOP_BOUND)
    return status, time.monotonic() - t0


def test_a_fleet_publication_never_delivered_stops_no_agent_nor_sigterm(broker, tmp_path):
    """agents.metrics takes nothing: the fleet stage's publication is sent again and
    again. The agents translate on, and SIGTERM stops the worker in order (exit 0)."""
    settings = worker_settings(broker.url, tmp_path, fleet_publish_interval=0.3)
    worker, control = failing_worker(settings, tmp_path)
    try:
        wait_for(lambda: health(settings.web_port)[0] == 200, "a healthy worker", worker=worker)
        assert asyncio.run(wait_for_log(worker.log_path or "", LOADED_MARK, timeout=5))
        now = int(time.time() * 1000)
        fail(control, topics=[METRICS_TOPIC])
        produce_sessions(settings, {"first": gemini("m-1", now)})
        assert turns_closed(settings, {b"first"}, worker)
        assert asyncio.run(wait_for_log(worker.log_path or "", f"{FAILED_MARK} {METRICS_TOPIC}",
                                        timeout=30, alive=worker.alive))
        # one batch after another, while the publication is being sent again
        for n in range(3):
            key = f"then-{n}"
            produce_sessions(settings, {key: gemini(f"m-{n}", now + 1000 * n)})
            assert turns_closed(settings, {key.encode()}, worker), f"{key} not translated"
        status, _, _ = http_get(settings.web_port, "/metrics")
        assert status == 200
        assert asyncio.run(wait_for_log(worker.log_path or "", f"{FAILED_MARK} {METRICS_TOPIC}",
                                        timeout=1))
        status, seconds = stop_timed(worker)
        print(f"SIGTERM during a failing fleet publication: exit {status} in {seconds:.1f} s")
        assert status == 0, f"exit {status} after {seconds:.1f} s; see {worker.log_path}"
    finally:
        worker.stop()


def test_idle_sessions_whose_closing_is_never_delivered_stop_no_agent_nor_sigterm(
        broker, tmp_path):
    """2,000 open sessions go idle and their closing events are never delivered (the
    full-size repro had 100,000). The scan sends them again and again, chunk by chunk;
    the agent of the same raw topic translates new sessions meanwhile, and SIGTERM stops
    the worker in order. A worker started again without the fault closes every one of
    them (the sessions were recovered from the changelog: no tombstone was delivered)."""
    n_idle = 2000
    settings = worker_settings(broker.url, tmp_path, idle_timeout=3.0, idle_scan_interval=0.5,
                               fleet_publish_interval=1.0)
    worker, control = failing_worker(settings, tmp_path)
    try:
        wait_for(lambda: health(settings.web_port)[0] == 200, "a healthy worker", worker=worker)
        # the closings fail, not the sessions' own events: no record of theirs ends a session
        fail(control, values=['"type":"session.exited"'])
        now = int(time.time() * 1000)
        idle = {f"idle-{i}": gemini(f"m-{i % 50}", now, ended=False) for i in range(n_idle)}
        produce_sessions(settings, idle)
        assert asyncio.run(wait_for_log(worker.log_path or "", f"{FAILED_MARK} {CANONICAL_TOPIC}",
                                        timeout=60, alive=worker.alive))
        for n in range(3):
            key = f"live-{n}"
            produce_sessions(settings, {key: gemini("m-live", now + 1000 * n)})
            assert turns_closed(settings, {key.encode()}, worker), f"{key} not translated"
        status, _, _ = http_get(settings.web_port, "/metrics")
        assert status == 200
        status, seconds = stop_timed(worker)
        print(f"SIGTERM during a failing idle scan of {n_idle} sessions: exit {status} in "
              f"{seconds:.1f} s")
        assert status == 0, f"exit {status} after {seconds:.1f} s; see {worker.log_path}"

        worker, control = failing_worker(settings, tmp_path, "worker-2")
        keys = {k.encode() for k in idle}

        ended: set[bytes] = set()

        def take(rec: Any) -> bool:
            if rec.key in keys and json.loads(rec.value)["type"] == "session.exited":
                ended.add(rec.key)
            return ended >= keys

        asyncio.run(follow(settings, [CANONICAL_TOPIC], take, deadline=time.monotonic() + 120,
                           give_up=lambda: not worker.alive()))
        assert ended >= keys, f"{len(keys - ended)} of {len(keys)} sessions not closed"
        wait_for(lambda: scrape(settings.web_port).value(
            "canonflow_active_sessions", provider="gemini") == 0,
            "every session closed and forgotten", worker=worker)
    finally:
        worker.stop()
