"""Kafka's log cleaner on canonflow's compacted topics, with a worker's real output:

- agents.sessions, once compacted, holds one summary per live session (its latest) and
  nothing of a session the worker closed (its summary tombstoned, the tombstone gone
  after delete.retention.ms);
- a worker with a fresh data dir recovers its tables (sessions and pending items) from
  compacted changelogs and continues the sessions with the output of an offline replay.

The module's own Kafka cleans within seconds where the defaults take days (see
CLEANING). The cleaner never touches a partition's active segment, and a segment rolls
only when a record is appended after its `segment.ms`: so each test appends more
records once a roll is due (a filler tombstone on agents.sessions; the sessions'
own remaining records on the changelogs) until the cleaner has run.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pipeline.cluster.admin import kafka_client_kwargs
from pipeline.cluster.kafka import KafkaBroker
from pipeline.settings import Settings
from pipeline.tools.kafka_io import RawRecord, follow, produce
from pipeline.worker.process import WorkerProcess, ensure_topics
from tests.pipeline.brokers import (
    ENGINE,
    TEST_KAFKA,
    TEST_REBALANCE_TIMEOUT,
    _delete_topics,
    on_broker,
)
from tests.pipeline.faults import (
    Deduped,
    Observer,
    Work,
    assert_same,
    expected_canonical,
    interleave,
    long_output_session,
    produce_records,
    total,
    workload,
)
from tests.pipeline.test_sessions_topic import CONVERSATION, T0
from topics.catalog import CANONICAL_TOPIC, SESSIONS_TOPIC, changelog_spec, raw_topic

pytestmark = [pytest.mark.broker,
              pytest.mark.skipif(ENGINE != "kafka", reason="compaction is Kafka's: the "
                                 "embedded Tansu never runs a log cleaner")]

#: Seconds after which a segment rolls (on the next append).
ROLL_SECONDS = 1.0
#: Broker-wide, so that the worker's own changelogs (created by `topics create` with the
#: catalog's settings only) clean as fast as agents.sessions: Kafka's defaults roll a
#: segment after 7 days (log.roll.ms), look for work every 15 s (backoff), clean a log
#: only when half of it is dirty, and keep a tombstone 24 h after its first cleaning.
CLEANING = {
    "log.roll.ms": str(int(ROLL_SECONDS * 1000)),
    "log.cleaner.backoff.ms": "200",
    "log.cleaner.min.cleanable.ratio": "0.01",
    "log.cleaner.delete.retention.ms": "1000",
}
#: The longest a test waits for the cleaner (it takes a few seconds here).
CLEANED_WITHIN = 180.0

#: A key no session has: tombstones of it are what rolls agents.sessions' segments.
FILLER = b"compaction-test-filler"


@pytest.fixture(scope="module")
def module_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBroker]:
    log = tmp_path_factory.mktemp("kafka-cleaning") / "kafka.log"
    with KafkaBroker(log_path=str(log), config=TEST_KAFKA | CLEANING) as b:
        yield b


@pytest.fixture
def cleaning_kafka(module_kafka: KafkaBroker) -> KafkaBroker:
    """The module's Kafka with no topic on it (as tests.pipeline.brokers' shared one)."""
    asyncio.run(_delete_topics(module_kafka.bootstrap))
    return module_kafka


def _settings(broker: KafkaBroker, tmp_path: Path, app_id: str, **kw: Any) -> Settings:
    s = Settings(app_id=app_id, web_enabled=False, data_dir=str(tmp_path / "data"),
                 log_level="info", rebalance_timeout=TEST_REBALANCE_TIMEOUT, **kw)
    s = on_broker(s, broker)
    ensure_topics(s)
    return s


async def _read_all(settings: Settings, topic: str, timeout: float = 60.0) -> list[Any]:
    """Every record `topic` holds now, from offset 0 of each partition to its end."""
    from aiokafka import AIOKafkaConsumer, TopicPartition

    consumer = AIOKafkaConsumer(**kafka_client_kwargs(settings), group_id=None,
                                enable_auto_commit=False, auto_offset_reset="earliest")
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(settings.partitions)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        end = await consumer.end_offsets(tps)
        out: list[Any] = []
        deadline = time.monotonic() + timeout
        while any([await consumer.position(tp) < end[tp] for tp in tps]):
            assert time.monotonic() < deadline, f"{topic}: could not read to {end}"
            for recs in (await consumer.getmany(*tps, timeout_ms=500)).values():
                out += recs
        return out
    finally:
        await consumer.stop()


async def _end_offsets(settings: Settings, topic: str) -> int:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    consumer = AIOKafkaConsumer(**kafka_client_kwargs(settings), group_id=None)
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(settings.partitions)]
        return sum((await consumer.end_offsets(tps)).values())
    finally:
        await consumer.stop()


async def _fill(settings: Settings) -> None:
    """A tombstone of FILLER on every partition of agents.sessions (a no-op to its
    readers: no session has the key), after a roll is due: the segment before it can
    then be cleaned."""
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(**kafka_client_kwargs(settings), acks="all")
    await producer.start()
    try:
        for p in range(settings.partitions):
            await producer.send_and_wait(SESSIONS_TOPIC, None, key=FILLER, partition=p)
    finally:
        await producer.stop()


def _summaries(settings: Settings, worker: WorkerProcess,
               done: Callable[[dict[bytes, list[Any]]], bool]) -> dict[bytes, list[Any]]:
    """Every record of agents.sessions by key (values, None for a tombstone) until done()."""
    got: dict[bytes, list[Any]] = {}

    def take(rec: Any) -> bool:
        got.setdefault(rec.key, []).append(rec.value)
        return done(got)

    asyncio.run(follow(settings, [SESSIONS_TOPIC], take, deadline=time.monotonic() + 90,
                       give_up=lambda: not worker.alive()))
    assert done(got), f"agents.sessions: {got}; worker log {worker.log_path}"
    return got


def _conversation() -> list[RawRecord]:
    return [RawRecord(json.dumps(m).encode(), "agent", T0 + 10 * i)
            for i, m in enumerate(CONVERSATION)]


def _ended(value: bytes | None) -> bool:
    """A summary of a session whose turn has completed (its last, until the idle close)."""
    return value is not None and json.loads(value)["turns"] == 1 and \
        not json.loads(value)["turnOpen"]


def test_agents_sessions_keeps_one_summary_per_live_session_and_none_of_a_closed_one(
        cleaning_kafka, tmp_path):
    s = _settings(cleaning_kafka, tmp_path, "compaction-sessions", partitions=2,
                  providers=("codex-exec",))
    closed, live = [b"closed-1", b"closed-2"], [b"live-1", b"live-2", b"live-3"]
    # the closed sessions under a worker that closes a session idle for 2 s (summary,
    # then its tombstone), the live ones under one that closes none during the test
    worker = WorkerProcess(s.replace(idle_timeout=2.0, idle_scan_interval=0.5),
                           log_path=str(tmp_path / "closing.log")).start()
    try:
        for key in closed:
            asyncio.run(produce(s, "codex-exec", key.decode(), _conversation()))
        _summaries(s, worker, lambda got: all(got.get(k, [b""])[-1] is None for k in closed))
    finally:
        worker.stop()
    worker = WorkerProcess(s, log_path=str(tmp_path / "live.log")).start()
    try:
        # in two goes, each summarised: two summaries of each session, the first to go
        for key in live:
            asyncio.run(produce(s, "codex-exec", key.decode(), _conversation()[:2]))
        _summaries(s, worker, lambda got: all(k in got for k in live))
        for key in live:
            asyncio.run(produce(s, "codex-exec", key.decode(), _conversation()[2:]))
        before = _summaries(s, worker, lambda got: all(_ended(got.get(k, [None])[-1])
                                                       for k in live))
    finally:
        worker.stop()
    assert all(len(before[k]) >= 2 for k in live), before  # something to compact away
    want = {k: [before[k][-1]] for k in live}

    deadline = time.monotonic() + CLEANED_WITHIN
    while True:
        time.sleep(ROLL_SECONDS + 0.2)
        asyncio.run(_fill(s))
        kept: dict[bytes, list[Any]] = {}
        for rec in asyncio.run(_read_all(s, SESSIONS_TOPIC)):
            if rec.key != FILLER:
                kept.setdefault(rec.key, []).append(rec.value)
        if kept == want:
            break
        assert time.monotonic() < deadline, (
            f"agents.sessions not compacted after {CLEANED_WITHIN:.0f} s: "
            f"{ {k: len(v) for k, v in kept.items()} }; log {cleaning_kafka.log_path}")


def test_a_worker_recovers_its_tables_from_compacted_changelogs(cleaning_kafka, tmp_path):
    s = _settings(cleaning_kafka, tmp_path, "compaction-recovery", partitions=1,
                  providers=("codex",))
    long = long_output_session("cmp", deltas=120)
    works = [w for w in workload(150, prefix="cmp") if w.provider == "codex"][:3] + [long]
    expected = expected_canonical(works)
    halves = [Work(w.provider, w.session_id, w.records[:len(w.records) // 2]) for w in works]
    # the long session's second half goes one record at a time until the cleaner has run
    pusher = list(long.records[len(long.records) // 2:])
    rest = [Work(w.provider, w.session_id, w.records[len(w.records) // 2:]) for w in works[:-1]]
    changelogs = [changelog_spec(s.app_id, f"{t}.codex").name for t in ("sessions", "items")]
    asyncio.run(_recover(s, tmp_path, halves, expected, pusher, rest, changelogs))


async def _recover(s: Settings, tmp_path: Path, halves: list[Work],
                   expected: dict[str, list[dict[str, Any]]], pusher: list[RawRecord],
                   rest: list[Work], changelogs: list[str]) -> None:
    observer = await Observer(s, [CANONICAL_TOPIC]).start()
    first = WorkerProcess(s.replace(data_dir=str(tmp_path / "data-first")),
                          log_path=str(tmp_path / "first.log")).start()
    try:
        await produce_records(s, interleave(halves))  # type: ignore[arg-type]
        await observer.wait_for(lambda: observer.unique(CANONICAL_TOPIC) >=
                                total(expected_canonical(halves)), timeout=120,
                                alive=first.alive, what="the first halves' events")
        long_key = halves[-1].session_id.encode()
        deadline = time.monotonic() + CLEANED_WITHIN
        while True:
            cleaned = {t: len(await _read_all(s, t)) < await _end_offsets(s, t)
                       for t in changelogs}
            if all(cleaned.values()):
                break
            assert pusher and time.monotonic() < deadline, (
                f"changelogs not compacted: {cleaned}; worker log {first.log_path}")
            await asyncio.sleep(ROLL_SECONDS + 0.2)
            await produce_records(s, [(raw_topic(halves[-1].provider), long_key,
                                       pusher.pop(0))])
    finally:
        assert first.stop() == 0, f"the first worker; log {first.log_path}"

    second = WorkerProcess(s.replace(data_dir=str(tmp_path / "data-second")),
                           log_path=str(tmp_path / "second.log")).start()
    try:
        await produce_records(s, interleave(rest + [Work(halves[-1].provider,
                                                         halves[-1].session_id, pusher)]))
        await observer.wait_for(lambda: observer.unique(CANONICAL_TOPIC) >= total(expected),
                                timeout=180, alive=second.alive, what="every event")
        await asyncio.sleep(1)  # anything more (it would be a difference) comes now
    finally:
        second.stop()
        await observer.stop()
    got = Deduped(observer.records[CANONICAL_TOPIC], "eventId")
    assert_same(got, expected, "after recovery from compacted changelogs")
    assert got.duplicates == 0, f"{got.duplicates} events published twice"
