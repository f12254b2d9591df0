"""agents.sessions through a real worker: a session's summary follows its events, the
idle close publishes its last one (state exited, closedAt), and a tombstone removes it
after the operator's retention (CANONFLOW_SESSIONS_RETENTION), at once without one.
The summary consistent with a whole workload: tests/pipeline/test_consumer.py."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest

from pipeline.settings import Settings
from pipeline.tools.kafka_io import RawRecord, follow, produce
from pipeline.worker.process import WorkerProcess
from topics.catalog import SESSIONS_TOPIC

pytestmark = pytest.mark.broker

T0 = 1_764_000_000_000
CONVERSATION = [
    {"type": "thread.started", "thread_id": "th"}, {"type": "turn.started"},
    {"type": "item.completed", "item": {"id": "item_0", "type": "agent_message", "text": "ok"}},
    {"type": "turn.completed", "usage": {"input_tokens": 7, "cached_input_tokens": 2,
                                         "output_tokens": 5}},
]


def _records() -> list[RawRecord]:
    return [RawRecord(json.dumps(m).encode(), "agent", T0 + 10 * i)
            for i, m in enumerate(CONVERSATION)]


def _summaries(settings: Settings, key: bytes, until: Any, worker: WorkerProcess,
               timeout: float = 40.0) -> list[tuple[float, Any]]:
    """(arrival time, summary or None for a tombstone) of `key` on agents.sessions until
    `until(those so far)`."""
    got: list[tuple[float, Any]] = []

    def take(rec: Any) -> bool:
        if rec.key == key:
            got.append((time.monotonic(), json.loads(rec.value) if rec.value else None))
        return bool(until(got))

    asyncio.run(follow(settings, [SESSIONS_TOPIC], take, deadline=time.monotonic() + timeout,
                       give_up=lambda: not worker.alive()))
    return got


def _run(settings: Settings, tmp_path: Path, key: bytes) -> list[tuple[float, Any]]:
    worker = WorkerProcess(settings, log_path=str(tmp_path / "worker.log")).start()
    try:
        asyncio.run(produce(settings, "codex-exec", key.decode(), _records()))
        return _summaries(settings, key, lambda got: got and got[-1][1] is None, worker)
    finally:
        worker.stop()


@pytest.mark.serial  # the tombstone's delay is measured on the wall clock
def test_a_closed_sessions_summary_is_tombstoned_after_the_retention(settings, tmp_path):
    retention = 4.0
    got = _run(settings.replace(idle_timeout=2.0, idle_scan_interval=0.5,
                                sessions_retention=retention), tmp_path, b"kept")
    summaries = [s for _, s in got if s is not None]
    assert got[-1][1] is None, f"no tombstone; got {got}"
    live = [s for s in summaries if s["closedAt"] is None][-1]  # the last before the close
    assert (live["provider"], live["state"], live["turns"], live["turnOpen"]) == (
        "codex-exec", "active", 1, False)
    assert [s["lastSeq"] for s in summaries] == sorted({s["lastSeq"] for s in summaries})
    assert live["tokens"] == {"input": 7, "cachedInput": 2, "cacheWrite": 0, "output": 5,
                              "reasoningOutput": 0, "total": 12}
    closed = summaries[-1]
    assert closed["state"] == "exited" and closed["closedAt"] == closed["lastActivity"]
    assert closed["lastSeq"] > live["lastSeq"]  # the closing events
    closed_at = next(t for t, s in got if s is closed)
    assert got[-1][0] - closed_at >= retention - 0.5


def test_without_a_retention_the_tombstone_follows_the_closed_summary(settings, tmp_path):
    got = _run(settings.replace(idle_timeout=2.0, idle_scan_interval=0.5), tmp_path, b"gone")
    # the tombstone right after the closed summary (the same delivery)
    assert [s["state"] if s else None for _, s in got][-2:] == ["exited", None]
