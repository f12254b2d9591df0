"""Bounded state (issue 8, guarantee 3): sessions idle longer than the idle timeout are
closed with synthetic events, so no consumer waits forever on a turn that will never
end, and their state is removed (tombstones in the changelog)."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from pipeline.tools.bench_kafka import changelogs, produce_all, rss_mb
from pipeline.tools.kafka_io import RawRecord, follow, produce
from pipeline.worker.normalize import Normalizer
from pipeline.worker.process import WorkerProcess
from tests.pipeline.conftest import decoded, read_topic
from topics.catalog import CANONICAL_TOPIC, CHAT_TOPIC

OPEN_TURN = [
    {"type": "thread.started", "thread_id": "th-1"},
    {"type": "turn.started"},
    {"type": "item.started", "item": {"id": "item_0", "type": "command_execution",
                                      "command": "sleep 999", "aggregated_output": "",
                                      "status": "in_progress"}},
]


def _value(messages: list[dict]) -> bytes:
    return b"\n".join(json.dumps(m).encode() for m in messages)


def test_expire_closes_open_items_and_turn_then_exits():
    n = Normalizer("codex-exec")
    out = n.process(None, b"s1", _value(OPEN_TURN), partition=2, offset=7, timestamp_ms=1000)
    partition, closed = n.expire(out.state, b"s1", now_ms=5000)
    events = [json.loads(e) for e in closed.records]
    assert partition == 2 and closed.delete and closed.state is None
    assert [(e["type"], e["payload"].get("status") or e["payload"].get("state"))
            for e in events] == [("item.completed", "failed"), ("turn.completed", "interrupted"),
                                 ("session.exited", None)]
    assert all(e["synthetic"] for e in events)
    first = [json.loads(e) for e in out.records]
    assert [e["seq"] for e in first + events] == list(range(1, len(first) + len(events) + 1))
    assert events[1]["turnId"] == first[2]["turnId"]  # the very turn that was open
    assert events[0]["itemId"] == first[3]["itemId"]


@pytest.fixture
def idle_settings(settings):
    return settings.replace(idle_timeout=2.0, idle_scan_interval=0.5)


def test_an_idle_session_is_closed_through_the_broker_and_forgotten(idle_settings, tmp_path):
    worker = WorkerProcess(idle_settings, log_path=str(tmp_path / "worker.log")).start()
    try:
        asyncio.run(produce(idle_settings, "codex-exec", "idle-1", [
            RawRecord(_value(OPEN_TURN), "agent", 1_764_000_000_000)]))
        got = decoded(read_topic(idle_settings, CANONICAL_TOPIC, 7, key=b"idle-1",
                                 worker=worker))
        assert [e["type"] for e in got][-3:] == ["item.completed", "turn.completed",
                                                 "session.exited"]
        assert got[-2]["payload"]["state"] == "interrupted"
        chat = decoded(read_topic(idle_settings, CHAT_TOPIC, 3, key=b"idle-1", worker=worker))
        assert [r["type"] for r in chat] == ["tool_use", "tool_result", "done"]
        assert chat[1]["is_error"] is True
        assert chat[-1]["subtype"] == "interrupted"
        # a later record starts a new life of the session, with new event ids
        asyncio.run(produce(idle_settings, "codex-exec", "idle-1", [
            RawRecord(_value([{"type": "turn.started"}]), "agent", 1_764_000_100_000)]))
        later = decoded(read_topic(idle_settings, CANONICAL_TOPIC, 8, key=b"idle-1",
                                   worker=worker))[-1]
        assert later["type"] == "turn.started" and later["seq"] == 1
        assert later["eventId"] not in {e["eventId"] for e in got}
    finally:
        worker.stop()


def test_100k_short_sessions_leave_no_table_entries_and_memory_stays_bounded(
        idle_settings, tmp_path, capsys):
    sessions = 100_000
    conversation = _value([
        {"type": "thread.started", "thread_id": "th"}, {"type": "turn.started"},
        {"type": "item.completed", "item": {"id": "item_0", "type": "agent_message",
                                            "text": "ok"}},
        {"type": "turn.completed", "usage": {"input_tokens": 1, "output_tokens": 1}}])
    settings = idle_settings.replace(idle_timeout=5.0, idle_scan_interval=2.0,
                                     chat_enabled=False)
    worker = WorkerProcess(settings, log_path=str(tmp_path / "worker.log")).start()
    try:
        started = time.monotonic()
        record = RawRecord(conversation, "agent", 1_764_000_000_000)
        asyncio.run(produce_all(settings, [("agents.raw.codex-exec", f"short-{i}".encode(),
                                             record) for i in range(sessions)]))
        exited = 0

        def count(rec) -> bool:  # noqa: ANN001
            nonlocal exited
            exited += rec.value.startswith(b'{"type":"session.exited"')
            return exited >= sessions

        asyncio.run(follow(settings, [CANONICAL_TOPIC], count,
                           deadline=time.monotonic() + 400, give_up=lambda: not worker.alive()))
        assert exited == sessions, f"only {exited} sessions closed; see {worker.log_path}"
        rss = rss_mb(worker.pid)
        entries, live_bytes, written = asyncio.run(changelogs(settings))
        with capsys.disabled():
            print(f"\n100k sessions: closed in {time.monotonic() - started:.0f} s, "
                  f"worker peak RSS {rss:.0f} MB, changelog written {written / 1e6:.1f} MB, "
                  f"live table entries {entries}")
        assert entries == 0 and live_bytes == 0
        assert rss < 1024, f"worker peak RSS {rss:.0f} MB"
    finally:
        worker.stop()
