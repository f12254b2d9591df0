"""The consumer library on a real broker (issue 22): a consumer built on it reads a
workload across a worker's kill -9 and its own restart and handles every event exactly
once; it reports no gap where there is none and one where one is injected; canonflow's
records carry CloudEvents headers that the CloudEvents SDK reads; agents.sessions holds
one summary per session, consistent with its canonical events.

One scenario (a module-scoped fixture: an embedded broker, a workload produced while
the worker is killed and started again, a consumer that stops mid-way and starts
again in its group), then each test checks what it saw. About 35 s, most of it the
restarted worker waiting for the dead one's session to time out.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from pipeline.cluster.admin import kafka_client_kwargs
from pipeline.cluster.consumer import Consumer
from pipeline.settings import Settings
from pipeline.tools.kafka_io import follow, follow_events
from tests.pipeline.faults import (
    Producer,
    Workers,
    expected_canonical,
    interleave,
    scenario,
    workload,
)
from topics.catalog import CANONICAL_TOPIC, CHAT_TOPIC, SESSIONS_TOPIC
from topics.consumer import Gap, Unknown

GROUP = "audit"


class Seen:
    """What the consumer handed out and the test handled, across its two lives."""

    def __init__(self) -> None:
        self.handled: list[str] = []  # eventIds, in the order handled
        self.gaps: list[Gap] = []
        self.unknown: list[Unknown] = []
        self.unhandled_at_stop: list[str] = []  # handed out, not handled, when it stopped
        self.copies: list[str] = []  # handled events whose copies were put past the commit
        self.duplicates_dropped = 0
        self.notes: list[str] = []
        self.records: dict[str, list[Any]] = {}  # topic -> every record on it, at the end
        self.tail: tuple[list[Any], list[Gap]] = ([], [])  # what `canonflow tail` reads


def _consumer(settings: Settings) -> Consumer:
    # the embedded broker holds a group join for the rebalance timeout: keep it short
    return Consumer(CANONICAL_TOPIC, group=GROUP, rebalance_timeout_ms=3000,
                    commit_interval=0.5, **kafka_client_kwargs(settings))


async def _read(consumer: Consumer, seen: Seen, until: Any, *, timeout: float,
                hold_back: int = 0) -> None:
    """Handle what `consumer` hands out until `until()`; then take `hold_back` more
    without handling them (a consumer stopped mid-work)."""

    async def run() -> None:
        held = 0
        async for item in consumer:
            if isinstance(item, Gap):
                seen.gaps.append(item)
                continue
            if isinstance(item, Unknown):
                seen.unknown.append(item)
            elif until():
                seen.unhandled_at_stop.append(item.eventId)  # type: ignore[union-attr]
                held += 1
                if held >= hold_back:
                    return
                continue
            else:
                seen.handled.append(item.eventId)  # type: ignore[union-attr]
            consumer.handled(item)
            if until() and hold_back == 0:
                return

    await asyncio.wait_for(run(), timeout)


async def _copies_past_the_commit(settings: Settings, handled: list[str], n: int = 3
                                  ) -> list[str]:
    """What a worker killed after publishing does on its restart: publish its last
    events again. Here the last `n` events the consumer handled, read back from the
    topic and produced again as they were (same key, value and headers)."""
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    want = set(handled[-n:])
    found: dict[str, Any] = {}
    reader = AIOKafkaConsumer(CANONICAL_TOPIC, **kafka_client_kwargs(settings),
                              auto_offset_reset="earliest", enable_auto_commit=False)
    await reader.start()
    try:
        while len(found) < len(want):
            for recs in (await reader.getmany(timeout_ms=500)).values():
                for r in recs:
                    eid = json.loads(r.value)["eventId"]
                    if eid in want and eid not in found:
                        found[eid] = r
    finally:
        await reader.stop()
    producer = AIOKafkaProducer(**kafka_client_kwargs(settings), acks="all")
    await producer.start()
    try:
        for r in found.values():
            await producer.send_and_wait(CANONICAL_TOPIC, r.value, key=r.key,
                                         partition=r.partition, headers=list(r.headers))
    finally:
        await producer.stop()
    return list(found)


async def _inject_gap(settings: Settings, last: dict[str, Any]) -> dict[str, Any]:
    """A canonical record two past `last` (the last event of its session): seq
    last+1 never published."""
    from aiokafka import AIOKafkaProducer

    seq = last["seq"] + 2
    skipped = {**last, "seq": seq, "eventId": last["eventId"][:24] + f"{seq:012x}",
               "type": "runtime.warning", "payload": {"message": "injected after a gap"}}
    producer = AIOKafkaProducer(**kafka_client_kwargs(settings), acks="all")
    await producer.start()
    try:
        await producer.send_and_wait(CANONICAL_TOPIC, json.dumps(skipped).encode(),
                                     key=last["sessionId"].encode())
    finally:
        await producer.stop()
    return skipped


async def _scenario(settings: Settings, workers: Workers, seen: Seen,
                    expected: dict[str, list[dict[str, Any]]], work: list[Any]) -> None:
    want = {e["eventId"] for events in expected.values() for e in events}
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    producing = asyncio.ensure_future(Producer(settings, interleave(work), chunk=20,
                                               pause=0.3).run())
    w = workers.start(settings, "worker")
    first = _consumer(settings)
    await first.start()
    try:
        # 1. the worker is killed once a third of the events are handled
        await _read(first, seen, lambda: len(seen.handled) >= len(want) // 3, timeout=60)
        w.kill()
        seen.notes.append(f"kill -9 at {loop.time() - t0:.0f}s, {len(seen.handled)} handled")
        workers.start(settings, "worker")
        # 2. the consumer stops mid-work at half: 5 events handed out, not handled
        await _read(first, seen, lambda: len(seen.handled) >= len(want) // 2, timeout=60,
                    hold_back=5)
        seen.duplicates_dropped += first.tracker.duplicates
    finally:
        await first.commit()
        await first.stop(commit=False)
    seen.copies = await _copies_past_the_commit(settings, seen.handled)
    seen.notes.append(f"consumer restarted at {loop.time() - t0:.0f}s")
    second = _consumer(settings)
    await second.start()
    try:
        await _read(second, seen, lambda: set(seen.handled) >= want, timeout=60)
        await producing
        # 3. a gap, injected where the worker would never leave one
        last = max(expected[work[0].session_id], key=lambda e: e["seq"])
        injected = await _inject_gap(settings, last)
        gaps = len(seen.gaps)
        await _read(second, seen, lambda: len(seen.gaps) > gaps
                    and injected["eventId"] in seen.handled, timeout=30)
        seen.duplicates_dropped += second.tracker.duplicates
    finally:
        await second.stop()
    seen.notes.append(f"done at {loop.time() - t0:.0f}s")
    for topic in (CANONICAL_TOPIC, CHAT_TOPIC, SESSIONS_TOPIC):
        seen.records[topic] = await _everything(settings, topic)
    shown, gaps = seen.tail
    await follow_events(settings, CANONICAL_TOPIC, lambda r: shown.append(r) or False,
                        on_gap=lambda g, _: gaps.append(g), idle_timeout=2.0)


async def _everything(settings: Settings, topic: str) -> list[Any]:
    got: list[Any] = []
    await follow(settings, [topic], lambda r: got.append(r) or False, idle_timeout=2.0)
    return got


@pytest.fixture(scope="module")
def kit(tmp_path_factory: pytest.TempPathFactory) -> tuple[Seen, dict[str, Any], list[Any]]:
    work = workload(300, prefix="kit")
    expected = expected_canonical(work)
    seen = Seen()
    with scenario(Path(tmp_path_factory.mktemp("kit")), app_id="kit") as (settings, workers):
        asyncio.run(_scenario(settings, workers, seen, expected, work))
    return seen, expected, work


def test_every_event_is_handled_exactly_once_across_a_kill_9_and_a_consumer_restart(kit, capsys):
    seen, expected, _ = kit
    with capsys.disabled():
        print(f"\nconsumer kit: {'; '.join(seen.notes)}; {len(seen.handled)} handled, "
              f"{seen.duplicates_dropped} copies dropped")
    want = [e["eventId"] for events in expected.values() for e in events]
    workload_ids = [eid for eid in seen.handled if eid in set(want)]
    assert len(workload_ids) == len(set(workload_ids)), "an event was handled twice"
    assert set(workload_ids) == set(want)
    assert seen.unknown == []


def test_what_was_handed_out_but_not_handled_comes_again_after_the_restart(kit):
    seen, _, _ = kit
    assert len(seen.unhandled_at_stop) == 5
    assert set(seen.unhandled_at_stop) <= set(seen.handled)


def test_copies_published_past_the_committed_offset_are_dropped_after_the_restart(kit):
    seen, _, _ = kit
    assert len(seen.copies) == 3
    assert all(seen.handled.count(eid) == 1 for eid in seen.copies)


def test_a_gap_is_reported_where_one_was_injected_and_nowhere_else(kit):
    seen, expected, work = kit
    (gap,) = seen.gaps
    last = max(e["seq"] for e in expected[work[0].session_id])
    assert (gap.sessionId, gap.after, gap.before, gap.missing) == (
        work[0].session_id, last, last + 2, 1)


def _cloudevent(rec: Any) -> Any:
    from cloudevents.core.bindings.kafka import KafkaMessage, from_binary
    from cloudevents.core.formats.json import JSONFormat

    return from_binary(KafkaMessage(headers=dict(rec.headers), key=rec.key, value=rec.value),
                       JSONFormat())


@pytest.mark.parametrize("topic", [CANONICAL_TOPIC, CHAT_TOPIC])
def test_the_cloudevents_sdk_reads_every_record_the_worker_published(kit, topic):
    """Binary content mode of the CloudEvents Kafka binding, read by the SDK's own
    decoder (it validates the attributes: id, source, type, time, dataschema)."""
    seen, _, _ = kit
    chat = topic == CHAT_TOPIC
    records = [r for r in seen.records[topic] if r.headers]
    injected = [r for r in seen.records[topic] if not r.headers]
    assert len(injected) == (0 if chat else 1)  # the gap the test wrote itself
    assert len(records) > 100
    for rec in records:
        ce, body = _cloudevent(rec), json.loads(rec.value)
        assert ce.get_specversion() == "1.0"
        assert ce.get_id() == body["event_id" if chat else "eventId"]
        assert ce.get_type() == ("dev.canonflow.chat." if chat else "dev.canonflow.") + body["type"]
        assert ce.get_subject() == body["session_id" if chat else "sessionId"] == rec.key.decode()
        assert ce.get_source() == f"/canonflow/{body['provider']}/{rec.key.decode()}"
        assert ce.get_datacontenttype() == "application/json"
        assert ce.get_dataschema().endswith("#/$defs/" + ("ChatRecord" if chat else "CanonicalEvent"))
        assert ce.get_data() == body
        if not chat:
            assert ce.get_time().isoformat(timespec="milliseconds").replace("+00:00", "Z") == \
                body["createdAt"]


def test_agents_sessions_holds_one_summary_per_session_consistent_with_its_events(kit):
    """Keep the last record per key, as compaction does: one summary per session of
    the workload, standing for all its events (the worker was killed mid-way: the
    summaries of the batches it published again are the same)."""
    seen, expected, _ = kit
    latest: dict[str, Any] = {}
    for rec in seen.records[SESSIONS_TOPIC]:
        latest[rec.key.decode()] = json.loads(rec.value) if rec.value is not None else None
    assert set(latest) == set(expected)
    for sid, events in expected.items():
        s = latest[sid]
        done = [e["payload"] for e in events if e["type"] == "turn.completed"]
        assert (s["sessionId"], s["provider"]) == (sid, events[0]["provider"])
        assert (s["lastSeq"], s["lastEventId"]) == (events[-1]["seq"], events[-1]["eventId"])
        assert (s["firstActivity"], s["lastActivity"]) == (events[0]["createdAt"],
                                                           events[-1]["createdAt"])
        assert s["turns"] == sum(e["type"] == "turn.started" for e in events)
        assert s["tokens"]["total"] == sum(p.get("tokens", {}).get("total", 0) for p in done)
        assert s["costUsd"] == pytest.approx(sum(p.get("cost", {}).get("usd", 0) for p in done))
        opened = sum(e["type"] in ("request.opened", "user-input.requested") for e in events)
        resolved = sum(e["type"] in ("request.resolved", "user-input.resolved") for e in events)
        assert s["openRequests"] == max(opened - resolved, 0)
        assert s["closedAt"] is None and s["state"] != "exited"
    assert any(s["tokens"]["total"] for s in latest.values())


def test_tail_reads_each_event_once_and_shows_the_one_gap(kit):
    """`canonflow tail`'s reading (the library without a group, from the beginning)."""
    seen, _, _ = kit
    shown, gaps = seen.tail
    ids = [json.loads(r.value)["eventId"] for r in shown]
    assert len(ids) == len(set(ids)) == len({json.loads(r.value)["eventId"]
                                             for r in seen.records[CANONICAL_TOPIC]})
    assert len(shown) < len(seen.records[CANONICAL_TOPIC])  # the copies were there
    assert [(g.after, g.before) for g in gaps] == [(seen.gaps[0].after, seen.gaps[0].before)]
