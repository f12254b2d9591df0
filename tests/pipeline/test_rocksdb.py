"""The on-disk table store (rocksdb:// with rocksdict): sessions on several partitions,
handled in batches, keep their state across a restart of the worker."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from pipeline.tools.bench_kafka import produce_all
from pipeline.tools.bench_workload import build_workload, expected_events, interleaved
from pipeline.worker.process import WorkerProcess
from tests.pipeline.conftest import read_topic
from topics.catalog import CANONICAL_TOPIC, raw_topic

pytest.importorskip("rocksdict", reason="the rocksdb extra (rocksdict) is not installed")
CAPTURED = Path(__file__).resolve().parents[1] / "fixtures" / "captured"


def _timeless(value: bytes) -> str:
    event = json.loads(value)
    event.pop("createdAt", None)
    return json.dumps(event, sort_keys=True)


def test_rocksdb_store_keeps_every_sessions_state_across_a_restart(settings, tmp_path):
    settings = settings.replace(store="rocksdb://", chat_enabled=False, fleet_enabled=False)
    sessions = build_workload(CAPTURED, 600)
    expected = expected_events(sessions)
    first = [s for s in sessions]
    # first halves of every session, then a restart, then the second halves
    halves = [(s, s.lines[: len(s.lines) // 2]) for s in first]
    rest = [(s, s.lines[len(s.lines) // 2:]) for s in first]

    def produce(parts) -> None:  # noqa: ANN001
        import msgspec

        chunk = [msgspec.structs.replace(s, lines=lines) for s, lines in parts if lines]
        asyncio.run(produce_all(settings, interleaved(chunk, 1, lambda s: raw_topic(s.provider))))

    want = sum(len(v) for v in expected.values())
    log = str(tmp_path / "worker.log")
    worker = WorkerProcess(settings, log_path=log).start()
    try:
        produce(halves)
        got = read_topic(settings, CANONICAL_TOPIC, 1, worker=worker)
        assert got
    finally:
        worker.stop()
    worker = WorkerProcess(settings, log_path=log).start()
    try:
        produce(rest)
        records = read_topic(settings, CANONICAL_TOPIC, want, worker=worker, timeout=120)
    finally:
        worker.stop()
    by_session: dict[str, list[str]] = {}
    seen: set[str] = set()
    for r in records:
        eid = json.loads(r.value)["eventId"]
        if eid not in seen:  # redelivered duplicates after the restart
            seen.add(eid)
            by_session.setdefault(r.key.decode(), []).append(_timeless(r.value))
    for sid, events in expected.items():
        assert by_session.get(sid) == [json.dumps(json.loads(e), sort_keys=True)
                                       for e in events], sid
