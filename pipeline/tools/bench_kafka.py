"""What every section of the bench that goes through a broker shares: a fresh broker
per run (the embedded Tansu, or Apache Kafka), its topics, producing a workload,
observing the outputs arrive, the checks of what arrived, a worker's memory and its
changelogs' bytes."""

from __future__ import annotations

import asyncio
import tempfile
import time
from collections.abc import Callable
from typing import Any

import msgspec

from pipeline.cluster.broker import BrokerProcess, EmbeddedBroker, stop_process
from pipeline.settings import Settings
from pipeline.tools.bench_workload import timeless
from pipeline.tools.kafka_io import RawRecord
from pipeline.worker.process import embedded_settings


class BenchError(RuntimeError):
    """A run gave a wrong answer (missing or different output)."""


async def produce_all(settings: Settings, items: list[tuple[str, bytes, RawRecord]]) -> None:
    from aiokafka import AIOKafkaProducer

    from pipeline.cluster.admin import kafka_client_kwargs

    producer = AIOKafkaProducer(**kafka_client_kwargs(settings), linger_ms=5,
                                max_batch_size=256 * 1024)
    await producer.start()
    try:
        futures = [await producer.send(topic, r.value, key=key, headers=r.headers())
                   for topic, key, r in items]
        await asyncio.gather(*futures)
    finally:
        await producer.stop()


class Observed(msgspec.Struct):
    records: list[Any]
    first: float  # when the first fetch with a record returned
    last: float  # when the last one did
    first_fetched: int = 0  # the records of that first fetch

    def rate(self, units: float) -> float:
        """`units` (the input's native messages) per second of output: the records after
        the first fetch over the time from it to the last, as that share of `units` (the
        first fetch's records were made before the clock started). Raises BenchError
        when every record came in one fetch: nothing to time, the workload is too small."""
        timed = len(self.records) - self.first_fetched
        if timed <= 0 or self.last <= self.first:
            raise BenchError(f"all {len(self.records)} outputs arrived in one fetch: too few "
                             "to time (a larger --messages)")
        return units * timed / len(self.records) / (self.last - self.first)


async def hold_partitions(consumer: Any, at_end: bool = False) -> None:
    """Wait until `consumer` (subscribed, no group) holds its partitions and knows where
    it reads each from (the end with `at_end`): what is produced from then on, it sees."""
    while not consumer.assignment():
        await asyncio.sleep(0.05)
    if at_end:
        await consumer.seek_to_end()
    for tp in consumer.assignment():
        await consumer.position(tp)


async def observe(settings: Settings, topics: list[str], want: int, timeout: float,
                   alive: Callable[[], bool] | None = None,
                   begin: Callable[[], None] | None = None) -> Observed:
    """Consume `topics` until `want` records arrived; notes first and last arrival.
    `begin` (what makes the records: a process to start) is called once this consumer
    holds its partitions, so no output can be made before the observer watches."""
    from aiokafka import AIOKafkaConsumer

    from pipeline.cluster.admin import kafka_client_kwargs

    consumer = AIOKafkaConsumer(*topics, **kafka_client_kwargs(settings), group_id=None,
                                auto_offset_reset="earliest", enable_auto_commit=False,
                                fetch_max_bytes=50 * 1024 * 1024,
                                max_partition_fetch_bytes=8 * 1024 * 1024)
    await consumer.start()
    got: list[Any] = []
    first = last = 0.0
    first_fetched = 0
    deadline = time.monotonic() + timeout
    try:
        if begin is not None:
            await hold_partitions(consumer)
            begin()
        while len(got) < want and time.monotonic() < deadline:
            if alive is not None and not alive():
                break
            batch = await consumer.getmany(timeout_ms=200, max_records=100_000)
            now = time.perf_counter()
            fetched = sum(len(recs) for recs in batch.values())
            if fetched and not got:
                first, first_fetched = now, fetched
            if fetched:
                last = now
            for recs in batch.values():
                got.extend(recs)
    finally:
        await consumer.stop()
    return Observed(got, first, last, first_fetched)


def fresh_broker(settings: Settings) -> tuple[BrokerProcess | None, Settings]:
    """A broker of the run's own, and the settings for it: Apache Kafka when
    `settings.broker_kind` is "kafka" (`canonflow bench --engine kafka`), else the
    embedded Tansu. With `settings.broker` set, none: the run uses that cluster."""
    if settings.broker:
        return None, settings
    if settings.broker_kind == "kafka":
        from pipeline.cluster.kafka import KafkaBroker

        broker: BrokerProcess = KafkaBroker().start()
    else:
        broker = EmbeddedBroker().start()
    return broker, embedded_settings(settings, broker.url, engine=broker.engine)


def scratch_dir(prefix: str) -> tempfile.TemporaryDirectory[str]:
    """A directory for one run's table stores (its `.name`), removed with everything in
    it by `.cleanup()` where the run ends, so repeated benches leave nothing behind."""
    return tempfile.TemporaryDirectory(prefix=prefix, ignore_cleanup_errors=True)


def create_topics(settings: Settings, names: list[str], config: dict[str, str] | None = None) -> None:
    """Create bench topics with the deployment's partition count (and `config`)."""
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    from pipeline.cluster.admin import kafka_client_kwargs

    async def go() -> None:
        admin = AIOKafkaAdminClient(**kafka_client_kwargs(settings))
        await admin.start()
        try:
            await admin.create_topics([NewTopic(n, settings.partitions, settings.replication,
                                                topic_configs=config or {}) for n in names])
        finally:
            await admin.close()

    asyncio.run(go())


def stop(proc: Any) -> None:
    stop_process(proc, 20)


def verify(records: list[Any], expected: dict[str, list[bytes]], log: str) -> None:
    got: dict[str, list[bytes]] = {}
    for r in records:
        got.setdefault(r.key.decode(), []).append(timeless(r.value))
    want = sum(len(v) for v in expected.values())
    if len(records) != want:
        raise BenchError(f"canonflow published {len(records)} canonical events, expected "
                         f"{want} (worker log: {log})")
    for sid, events in expected.items():
        if got.get(sid) != events:
            raise BenchError(f"session {sid}: canonical events differ from the offline replay")


def rss_mb(pid: int | None) -> float:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


async def changelogs(settings: Settings, *, session: bytes | None = None,
                      stats: dict[str, Any] | None = None) -> tuple[int, int, int]:
    """(live table entries, their bytes, all changelog bytes written) over every
    canonflow table changelog of this app: the session states'
    (`<app>-sessions.<provider>-changelog`, keyed by session) and their items' spooled
    chunks (`<app>-items.<provider>-changelog`, keyed by session, NUL, stream, chunk).

    With `session`, only that session's records count. `stats`, when given, receives
    "records" (changelog records counted), "largest_value" (the largest value among
    them, in bytes), "largest_key" (its table and key, NULs shown as "/") and "by_table"
    (the bytes counted per table)."""
    from aiokafka import AIOKafkaConsumer

    from pipeline.cluster.admin import kafka_client_kwargs

    names = await _changelog_topics(settings)
    tally = _Tally(settings.app_id, session)
    if names:
        consumer = AIOKafkaConsumer(*names, **kafka_client_kwargs(settings), group_id=None,
                                    auto_offset_reset="earliest", enable_auto_commit=False,
                                    fetch_max_bytes=64 * 1024 * 1024,
                                    max_partition_fetch_bytes=16 * 1024 * 1024)
        await consumer.start()
        try:
            idle = 0
            while idle < 5:
                batch = await consumer.getmany(timeout_ms=200, max_records=100_000)
                idle = 0 if batch else idle + 1
                for tp, recs in batch.items():
                    for r in recs:
                        tally.add(tp.topic, r.key, r.value)
        finally:
            await consumer.stop()
    if stats is not None:
        stats.update(records=tally.records, largest_value=tally.largest,
                     largest_key=tally.largest_key, by_table=tally.by_table)
    return len(tally.latest), sum(tally.latest.values()), tally.total


async def _changelog_topics(settings: Settings) -> list[str]:
    """The changelogs of this app's session and item tables."""
    from aiokafka.admin import AIOKafkaAdminClient

    from pipeline.cluster.admin import kafka_client_kwargs

    admin = AIOKafkaAdminClient(**kafka_client_kwargs(settings))
    await admin.start()
    try:
        prefixes = (settings.app_id + "-sessions.", settings.app_id + "-items.")
        return [t for t in await admin.list_topics()
                if t.startswith(prefixes) and t.endswith("-changelog")]
    finally:
        await admin.close()


class _Tally:
    """What `changelogs` counts of the records it reads (of one session, if given)."""

    def __init__(self, app_id: str, session: bytes | None):
        self.app_id, self.session = app_id, session
        self.item_prefix = session + b"\x00" if session is not None else b""
        self.latest: dict[tuple[str, bytes | None], int] = {}  # (topic, key) -> its live value's size
        self.total = self.records = self.largest = 0
        self.largest_key = ""
        self.by_table: dict[str, int] = {}

    def add(self, topic: str, key: bytes | None, value: bytes | None) -> None:
        if self.session is not None and key != self.session and \
                not (key or b"").startswith(self.item_prefix):
            return
        size = len(value) if value is not None else 0
        self.total += size
        self.records += 1
        table = topic[len(self.app_id) + 1:-len("-changelog")]
        self.by_table[table] = self.by_table.get(table, 0) + size
        if size > self.largest:
            self.largest = size
            self.largest_key = f"{table} " + (key or b"").decode(
                "utf-8", "replace").replace("\x00", "/")
        if value is None:
            self.latest.pop((topic, key), None)
        else:
            self.latest[(topic, key)] = size
