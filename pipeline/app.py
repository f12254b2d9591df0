"""The Faust application, built by a factory from settings (nothing happens on import).

One normalize agent per raw topic (`agents.raw.<provider>`), each with its own
session table (`sessions.<provider>`, changelog-backed, co-partitioned with the raw
topic). Agents stay thin: for a batch of records, read each session's state, run the
`Normalizer` (translation, then the chat projection of the events it made), publish
the canonical events and chat records on the record's own partition (the topics are
co-partitioned, so a session keeps one partition end to end) and dead letters to
`agents.deadletter`, wait until they are delivered, then store the new states and
count the delivered events into the fleet-metrics stage (`pipeline.fleet`). Bad input
never reaches the supervisor: it is dead-lettered.

A delivery that fails (the broker went away, a timeout) is sent again with backoff
until it succeeds: the batch's records are not acknowledged and its states not
stored meanwhile, and /health says degraded. Every agent counts what it did per
batch into `pipeline.metrics` (served with /health by `pipeline.web`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator, Sequence
from typing import Any

import faust
from aiokafka.errors import KafkaError
from faust.types import TP
from msgspec import UNSET

from pipeline.fleet import Counted, FleetStage, add_fleet
from pipeline.metrics import Item, WorkerMetrics
from pipeline.normalize import BatchSpool, Normalizer, Output, dead_letter_bytes, internal_error
from pipeline.settings import Settings
from pipeline.tables import TableManager, acting_for, add_table, partition_stand_in
from pipeline.web import Health, install_web
from topics.catalog import (
    CANONICAL_TOPIC,
    CHAT_TOPIC,
    DEADLETTER_TOPIC,
    EVENT_MAX_MESSAGE_BYTES,
    raw_topic,
)
from topics.records import DeadLetter

log = logging.getLogger("canonflow")

#: A record for the output producer: (topic, value, key, partition, timestamp ms); an
#: output Item, or a changelog record, whose value None is a tombstone.
Record = tuple[str, bytes | None, bytes | None, int, int | None]
#: Backoff between two attempts to deliver a batch's output: first, then doubling to max.
RETRY_FIRST_SECONDS = 0.2
RETRY_MAX_SECONDS = 10.0
#: take_events generators whose last batch was not delivered when their agent stopped
#: or crashed. Held so that they are never finalized while the worker runs: Faust's
#: take_events acknowledges a batch in a `finally` when its generator is closed, and
#: an undelivered batch must not be acknowledged (it is read again after a restart).
_UNDELIVERED: list[Any] = []


def broker_credentials(settings: Settings) -> Any:
    """Faust credentials for TLS / SASL, or None for plaintext."""
    from faust.auth import SASLCredentials, SSLCredentials

    ssl_context = None
    if settings.security_protocol in ("SSL", "SASL_SSL"):
        from aiokafka.helpers import create_ssl_context

        ssl_context = create_ssl_context(cafile=settings.ssl_cafile,
                                         certfile=settings.ssl_certfile,
                                         keyfile=settings.ssl_keyfile)
    if settings.sasl_mechanism:
        return SASLCredentials(username=settings.sasl_username, password=settings.sasl_password,
                               mechanism=settings.sasl_mechanism, ssl_context=ssl_context)
    if ssl_context is not None:
        return SSLCredentials(ssl_context)
    return None


def create_app(settings: Settings) -> faust.App:
    """A Faust app with one normalize agent per configured provider."""
    if not settings.broker:
        raise ValueError("settings.broker is empty: start the embedded broker first")
    extra: dict[str, Any] = {}
    if settings.producer_max_batch_size:
        extra["producer_max_batch_size"] = settings.producer_max_batch_size
    credentials = broker_credentials(settings)
    if credentials is not None:
        extra["broker_credentials"] = credentials
    app = faust.App(
        settings.app_id,
        broker=settings.broker,
        store=settings.store,
        datadir=settings.data_dir,
        autodiscover=False,
        topic_partitions=settings.partitions,
        topic_replication_factor=settings.replication,
        topic_allow_declare=True,
        consumer_auto_offset_reset="earliest",
        web_enabled=settings.web_enabled,
        web_host=settings.web_host,
        web_bind=settings.web_host,
        web_port=settings.web_port,
        web_in_thread=False,
        producer_acks=-1,
        TableManager=TableManager,
        producer_linger=settings.producer_linger,
        broker_rebalance_timeout=settings.rebalance_timeout,
        broker_session_timeout=max(10.0, settings.rebalance_timeout),
        **extra,
    )
    for topic in (CANONICAL_TOPIC, CHAT_TOPIC, DEADLETTER_TOPIC):
        app.topic(topic, key_serializer="raw", value_serializer="raw",
                  partitions=settings.partitions)
    metrics, health = WorkerMetrics(), Health()
    sink = OutputProducer(settings, metrics, health)
    app.on_before_shutdown.connect(sink.stop)
    tables: dict[str, Any] = {}
    fleet = None
    if settings.fleet_enabled:
        async def publish_metrics(items: list[Item]) -> None:
            await sink.publish(items, "fleet")

        fleet = add_fleet(app, settings, metrics, publish_metrics)
        tables["fleet.windows"], tables["fleet.sessions"] = fleet.windows, fleet.sessions
    for provider in settings.providers:
        tables[f"sessions.{provider}"] = _add_normalizer(app, settings, provider, sink, metrics,
                                                         fleet)
    install_web(app, settings, metrics, health, tables, sink.probe)
    return app


def _add_normalizer(app: faust.App, settings: Settings, provider: str,
                    sink: OutputProducer, metrics: WorkerMetrics,
                    fleet: FleetStage | None) -> Any:
    source = app.topic(raw_topic(provider), key_serializer="raw", value_serializer="raw",
                       partitions=settings.partitions)
    table = add_table(app, settings, f"sessions.{provider}")
    # the open items' pending text and output, chunk by chunk (pipeline.normalize.BatchSpool)
    items = add_table(app, settings, f"items.{provider}")
    step = Normalizer(provider, include_raw=settings.include_raw,
                      max_record_bytes=settings.max_record_bytes,
                      max_message_bytes=settings.max_message_bytes,
                      chat=settings.chat_enabled, item_cap=settings.item_cap)
    name = f"normalize.{provider}"
    tables = _Tables(table, items)
    sessions = _add_batched_agent(app, settings, name, source, tables, step, sink, metrics,
                                  fleet)
    _add_idle_expiry(app, settings, name, tables, step, sessions, sink, metrics, fleet)
    return table


class _Tables:
    """A normalize agent's two tables: session states, and their items' spooled chunks."""

    def __init__(self, sessions: Any, items: Any):
        self.sessions = sessions
        self.items = items

    def spool(self) -> BatchSpool:
        data = self.items.data
        return BatchSpool(lambda key: data.get(key))


class OutputProducer:
    """The producer of the agents' output topics (canonical, chat, dead letters) and of
    the session tables' changelogs.

    Separate from Faust's own producer (left with the fleet tables' changelogs): on the
    embedded broker that one must put every record in its own batch (so that table
    recovery sees the changelog's true end, DESIGN.md), and measured here that makes
    every further message to a partition wait for the one before it (`canonflow
    bench`). This one sends whole record batches; on the embedded broker only each
    changelog partition's last record of a delivery goes alone (`exact_ends`). Started
    on first use, stopped before the app shuts down (after the agents have drained)."""

    def __init__(self, settings: Settings, metrics: WorkerMetrics | None = None,
                 health: Health | None = None):
        self.settings = settings
        self.metrics = metrics or WorkerMetrics()
        self.health = health or Health()
        self._producer: Any = None
        self._lock = asyncio.Lock()

    async def get(self) -> Any:
        async with self._lock:
            if self._producer is None:
                from aiokafka import AIOKafkaProducer

                from pipeline.admin import kafka_client_kwargs

                producer = AIOKafkaProducer(
                    **kafka_client_kwargs(self.settings), acks="all",
                    linger_ms=int(self.settings.producer_linger * 1000),
                    max_batch_size=256 * 1024, max_request_size=EVENT_MAX_MESSAGE_BYTES,
                    request_timeout_ms=int(self.settings.producer_request_timeout * 1000))
                await producer.start()
                self._producer = producer
            return self._producer

    async def stop(self, *args: Any, **kwargs: Any) -> None:
        producer, self._producer = self._producer, None
        if producer is not None:
            await producer.stop()  # flushes what is still buffered

    async def probe(self) -> None:
        """Ask the cluster for its metadata. Raises (a Kafka error) when no broker answers."""
        producer = await self.get()
        await producer.client.fetch_all_metadata()

    async def publish(self, items: Sequence[Record], agent: str, *, exact_ends: bool = False
                      ) -> dict[tuple[str, int], int]:
        """Send `items` (topic, value, key, partition, timestamp ms) and wait until every
        one is delivered, in order within each topic partition. Returns the offset of
        the last record delivered in each (topic, partition).

        `exact_ends` puts the last record of each partition in a record batch of its own:
        the embedded broker answers ListOffsets(latest) with the first offset of the
        last batch + 1 (DESIGN.md), and table recovery reads a changelog up to that.

        The items of each topic partition go as whole record batches (`send_batch`):
        measured, aiokafka's per-message `send` (a future and a metadata wait per
        record) cost the worker more than translating the records.

        A failed send or delivery (broker gone, timeout) is not an error for the caller:
        in each partition, the first undelivered batch and every one after it are sent
        again, in order, after a backoff (doubling up to RETRY_MAX_SECONDS), until all
        are delivered. Records that were delivered before the failure may be delivered
        twice; their eventIds are the same, so consumers drop the copies. Returns only
        when everything is delivered; raises only CancelledError (the worker stops).

        A refusal that no retry can change (`refusal`: a record too large for the topic,
        a topic not authorised or not there after UNKNOWN_TOPIC_SECONDS) is not sent
        again: each refused record goes to agents.deadletter with the reason (cut to the
        dead-letter limit; one refused there is logged and dropped), the partition moves
        on, and /health and canonflow_output_refused_total say so."""
        pending: Sequence[Record] = items
        delay = RETRY_FIRST_SECONDS
        started = time.monotonic()
        alone: set[int] = set()  # ids of records to send in a batch of their own
        ends: dict[tuple[str, int], int] = {}
        while True:
            sent: list[tuple[tuple[str, int], Any, list[int]]] = []
            unsent: list[int] = []
            error: BaseException | None = None
            try:
                producer = await self.get()
                await self._send(producer, pending, sent, unsent, exact_ends, alone)
            except Exception as e:  # no metadata in time, buffer full past the timeout, ...
                error = e
            results = await asyncio.gather(*(f for _, f, _ in sent), return_exceptions=True)
            failed: set[tuple[str, int]] = set()
            again: list[int] = list(unsent)
            refused: list[tuple[Record, BaseException]] = []
            for (tp, _, members), result in zip(sent, results, strict=True):
                if tp not in failed and isinstance(result, BaseException) and refusal(
                        result, time.monotonic() - started):
                    if len(members) == 1:
                        refused.append((pending[members[0]], result))
                        continue
                    # the cluster refuses a batch whole: send its records one per batch,
                    # so that only the one it cannot take is refused
                    alone.update(id(pending[i]) for i in members)
                    result = KafkaError(f"a batch of {len(members)} records was refused "
                                        f"({type(result).__name__}); sent again one by one")
                if tp in failed or isinstance(result, BaseException):
                    if tp not in failed and error is None:
                        error = result  # type: ignore[assignment]
                    failed.add(tp)
                    again += members
                elif result is not None:  # RecordMetadata of the batch: its first offset
                    ends[tp] = result.offset + len(members) - 1
            if refused:
                await self._refused(refused, agent)
            if error is None:
                self.health.send_ok(agent)
                return ends
            pending = [pending[i] for i in sorted(again)]
            self.metrics.send_failed(agent, (item[0] for item in pending))
            self.health.send_failed(agent, error)
            log.warning("%s: %d record(s) not delivered (%s: %s); sending again in %.1fs",
                        agent, len(pending), type(error).__name__, error, delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, RETRY_MAX_SECONDS)

    async def _refused(self, refused: list[tuple[Record, BaseException]], agent: str) -> None:
        """Dead-letter the records the cluster refused for good (see publish)."""
        letters: list[Record] = []
        for (topic, value, key, partition, ts), error in refused:
            name = type(error).__name__
            self.metrics.send_refused([topic], name)
            log.error("%s: %s refused a record of %d bytes for good (%s: %s); it goes to %s",
                      agent, topic, len(value or b""), name, error, DEADLETTER_TOPIC)
            if topic == DEADLETTER_TOPIC:
                continue  # nowhere left to keep it: logged and counted
            letter = DeadLetter(
                topic=topic, partition=partition, offset=-1, provider="canonflow",
                key=key.decode("utf-8", "replace") if key is not None else None,
                errorClass=f"Refused.{name}",
                reason=f"{topic} refused this output record for good: {name}: {error}",
                value=value or b"", timestampMs=ts if ts is not None else UNSET)
            letters.append((DEADLETTER_TOPIC, dead_letter_bytes(
                letter, self.settings.max_message_bytes), key, partition, ts))
        self.health.send_refused(len(refused), refused[-1][1])
        if letters:
            await self.publish(letters, f"{agent}.refused")

    @staticmethod
    async def _send(producer: Any, items: Sequence[Record],
                    sent: list[tuple[tuple[str, int], Any, list[int]]],
                    unsent: list[int], exact_ends: bool, alone: set[int] | None = None
                    ) -> None:
        """Queue `items` as record batches, one or more per topic partition, in order
        (with `exact_ends`, each partition's last record alone in the last one; the
        records whose id is in `alone` each in a batch of its own).
        Appends (topic partition, delivery future, item indexes) to `sent` per batch
        queued; the indexes of items not queued when a send raises go to `unsent`."""
        groups: dict[tuple[str, int], list[int]] = {}
        for i, item in enumerate(items):
            groups.setdefault((item[0], item[3]), []).append(i)
        queued: set[int] = set()

        async def flush(tp: tuple[str, int], batch: Any, members: list[int]) -> None:
            future = await producer.send_batch(batch, tp[0], partition=tp[1])
            sent.append((tp, future, members))
            queued.update(members)

        try:
            for tp, indexes in groups.items():
                batch, members = producer.create_batch(), list[int]()
                last = indexes[-1] if exact_ends and len(indexes) > 1 else None
                for i in indexes:
                    _, value, key, _, ts = items[i]
                    single = bool(alone) and id(items[i]) in alone  # type: ignore[operator]
                    if members and (single or i == last):
                        await flush(tp, batch, members)
                        batch, members = producer.create_batch(), []
                    if batch.append(key=key, value=value, timestamp=ts) is None:  # full
                        await flush(tp, batch, members)
                        batch, members = producer.create_batch(), []
                        batch.append(key=key, value=value, timestamp=ts)
                    members.append(i)
                    if single:  # and nothing after it in the same batch
                        await flush(tp, batch, members)
                        batch, members = producer.create_batch(), []
                if members:
                    await flush(tp, batch, members)
        except BaseException:
            unsent.extend(i for i in range(len(items)) if i not in queued)
            raise


#: Seconds an unknown topic or partition is waited for (it may be being created) before
#: its records count as refused.
UNKNOWN_TOPIC_SECONDS = 60.0
_REFUSALS = ("MessageSizeTooLargeError", "RecordTooLargeError", "RecordListTooLargeError",
             "TopicAuthorizationFailedError", "ClusterAuthorizationFailedError",
             "InvalidTopicError", "PolicyViolationError", "CorruptRecordException",
             "InvalidRecordError")


def refusal(error: BaseException, waited: float) -> bool:
    """Is `error` a refusal that sending the same record again cannot change?"""
    name = type(error).__name__
    if name == "UnknownTopicOrPartitionError":
        return waited >= UNKNOWN_TOPIC_SECONDS
    return name in _REFUSALS


class _Sessions:
    """What an agent shares with its idle-session scan: the lock that keeps them from
    interleaving on one table, and when each local session last had a record."""

    def __init__(self) -> None:
        self.lock = asyncio.Lock()
        self.last_seen: dict[bytes, float] = {}


def _outputs(out: Output, key: bytes | None, partition: int, ts_ms: int | None
             ) -> Iterator[Item]:
    """What `out` publishes, on the partition of the record it came from: its canonical
    events, chat records and dead letters."""
    for topic, values in ((CANONICAL_TOPIC, out.records), (CHAT_TOPIC, out.chat),
                          (DEADLETTER_TOPIC, out.deadletters)):
        for value in values:
            yield topic, value, key, partition, ts_ms


Entry = tuple[bytes, int, bytes | None, Any]  # key, partition, value (None: delete), record


def _write_local(table: Any, entries: list[Entry]) -> list[Record]:
    """Write each (key, partition, value, last record) to the table's local store (None
    deletes); their changelog records (None: a tombstone), each in the changelog
    partition of the records it came from. The last record names the partition whose
    RocksDB database the entry goes to (pipeline.tables)."""
    for key, _, value, event in entries:
        if value is None:
            table.data.pop(key, None)
        else:
            if event is not None:
                acting_for(event)
            table.data[key] = value
    topic = table.changelog_topic.get_topic_name()
    return [(topic, value, key, partition, None) for key, partition, value, _ in entries]


def _persisted(tables: Sequence[Any], ends: dict[tuple[str, int], int]) -> None:
    """Note each changelog partition's last delivered offset as persisted (what Faust's
    own changelog callback does: the RocksDB store recovers from there)."""
    for table in tables:
        topic = table.changelog_topic.get_topic_name()
        for (name, partition), offset in ends.items():
            if name == topic:
                table.data.set_persisted_offset(TP(name, partition), offset)


async def _store(sink: OutputProducer, table: Any, entries: list[Entry], agent: str,
                 before: list[Record] | None = None) -> None:
    """Write `entries` to `table` and deliver their changelog records (after `before`,
    records of other tables delivered in the same call), and wait for them, as Faust
    does before it commits the offsets of the records they came from.

    The session tables' changelogs go through the output producer, in record batches,
    instead of Faust's producer (which on the embedded broker must send every record in
    a batch of its own): measured, that producer was an eighth of the worker's time."""
    records = (before or []) + _write_local(table, entries)
    if not records:
        return
    ends = await sink.publish(records, f"{agent}.changelog",
                              exact_ends=sink.settings.producer_max_batch_size == 1)
    _persisted([table], ends)


def _add_batched_agent(app: faust.App, settings: Settings, name: str, source: faust.TopicT,
                       tables: _Tables, step: Normalizer, sink: OutputProducer,
                       metrics: WorkerMetrics, fleet: FleetStage | None) -> _Sessions:
    """The normalize agent of one raw topic: `step` over batches of records.

    Per batch: each record is processed in order, reading its session's state from
    the batch's own cache (a session's state is read once and written once per
    batch, however many of its records the batch holds); canonical events go to
    agents.canonical, chat records to agents.chat and dead letters to
    agents.deadletter, on the record's own partition; then the batch waits for their
    delivery (sent again until delivered: OutputProducer.publish), and only then
    stores each session's new state and waits for the delivery of its changelog
    record, in the changelog partition of the records it came from (STATE NEVER AHEAD
    OF WHAT WAS PUBLISHED: see pipeline.normalize), is counted by the fleet stage, and
    is counted in the metrics, before Faust acknowledges it.

    The items' spooled chunks (pipeline.normalize.BatchSpool) are delivered with the
    batch's output, so a stored state never names a chunk that is not stored; the
    chunks the batch dropped are deleted after the states, so a state that is not
    stored yet never names a chunk already gone.
    """
    sessions = _Sessions()
    provider = step.provider
    table = tables.sessions

    async def run(stream: faust.StreamT) -> None:
        batches = stream.take_events(settings.batch_max, settings.batch_within)
        delivered = True
        try:
            async for events in batches:
                delivered = False
                async with sessions.lock:
                    await _run_batch(events)
                delivered = True
        except BaseException:
            if not delivered:
                _UNDELIVERED.append(batches)
            raise

    async def _run_batch(events: Any) -> None:
        t0 = time.perf_counter()
        states: dict[bytes, tuple[int, bytes | None, Any]] = {}
        items: list[Item] = []
        counted: list[Counted] = []
        stamps: list[float] = []
        lines = 0
        spool = tables.spool()
        for event in events:
            msg, key, value = event.message, event.key, event.value
            ts = msg.timestamp
            ts_ms = int(ts * 1000) if ts else None
            partition = msg.partition
            spool.at(partition, event)
            try:
                if key is not None:
                    # the RocksDB store reads this record's partition: the session's
                    # entry, and its items' spooled chunks (read by any record of it)
                    acting_for(event)
                stored = (states[key][1] if key in states else table.get(key)
                          ) if key is not None else None
                out = step.process(stored, key, value, partition=partition,
                                   offset=msg.offset, timestamp_ms=ts_ms,
                                   headers=event.headers, spool=spool)
            except Exception as e:  # a bug must not stop the worker: keep the record
                log.exception("%s failed on %s[%s]@%s", name, msg.topic, partition,
                              msg.offset)
                out = internal_error(step, e, key, value, partition=partition,
                                     offset=msg.offset)
            items.extend(_outputs(out, key, partition, ts_ms))
            if fleet is not None and key is not None:
                counted.extend(Counted(key, v, partition, msg.offset, ts_ms or 0, event)
                               for v in out.records)
            if key is not None and (out.state is not None or out.delete):
                states[key] = (partition, out.state, event)
            if value:
                lines += value.count(b"\n") + (value[-1:] != b"\n")
            if ts:
                stamps.append(ts)
        t1 = time.perf_counter()
        chunks = _write_local(tables.items, spool.entries(drops=False))
        if items or chunks:
            _persisted([tables.items], await sink.publish(
                items + chunks, name, exact_ends=sink.settings.producer_max_batch_size == 1))
        t2 = time.perf_counter()
        await _store(sink, table, [(key, partition, state, last)
                                   for key, (partition, state, last) in states.items()], name)
        await _store(sink, tables.items, spool.entries(drops=True), name)
        now = time.monotonic()
        for key, (_, state, _) in states.items():
            if state is None:
                sessions.last_seen.pop(key, None)
            else:
                sessions.last_seen[key] = now
        if counted and fleet is not None:
            await fleet.count(counted)
        try:
            metrics.normalized(provider, name, len(events), lines, items, stamps,
                               t1 - t0, t2 - t1)
        except Exception:  # counting must not stop a delivered batch from being acknowledged
            log.exception("%s: a batch could not be counted", name)

    app.agent(source, name=name)(run)
    return sessions


def _add_idle_expiry(app: faust.App, settings: Settings, name: str, tables: _Tables,
                     step: Normalizer, sessions: _Sessions, sink: OutputProducer,
                     metrics: WorkerMetrics, fleet: FleetStage | None) -> None:
    """Close sessions without a record for settings.idle_timeout seconds, so that no
    consumer waits forever on a turn that will never end, and remove their state.

    Idleness is measured on this worker's clock since the session's last record here;
    a session this worker only recovered from the changelog counts from the first
    scan that sees it.

    The scan closes `chunk` sessions at a time, and lets the loop run between chunks.
    The agent's lock is held only while a chunk's closing events are made and its
    sessions leave the local tables (no await): a record of one of them that comes
    after starts a new life. Their delivery and their tombstones, sent again until the
    cluster takes them, hold nothing the agent needs, and stop when the worker stops:
    then no tombstone was delivered, and the worker that recovers the sessions closes
    them again (the same eventIds). (Issue 25: 100,000 sessions closed in one go, their
    delivery retried under the agent's lock, stopped the worker for 12 minutes.)"""
    from pipeline.fleet import until_stopped

    table = tables.sessions
    chunk = 500  # sessions: 1,500 to 3,000 records to deliver, made in about 10 ms
    exact = sink.settings.producer_max_batch_size == 1

    async def scan() -> None:
        if app.should_stop:
            return
        now = time.monotonic()
        cutoff = now - settings.idle_timeout
        live = set(table.data.keys())
        for key in [k for k in sessions.last_seen if k not in live]:
            del sessions.last_seen[key]  # moved away in a rebalance
        metrics.forget_sessions(step.provider, live)
        idle = [key for key in live if sessions.last_seen.setdefault(key, now) <= cutoff]
        for start in range(0, len(idle), chunk):
            if app.should_stop or not await close(idle[start:start + chunk], cutoff):
                return
            await asyncio.sleep(0)  # the agents, the web server, the other timers

    async def close(keys: list[bytes], cutoff: float) -> bool:
        """Close the sessions of `keys` still idle; False when the worker stopped first."""
        now_ms = int(time.time() * 1000)
        closed: list[tuple[bytes, int]] = []
        items: list[Item] = []
        counted: list[Counted] = []
        stand_ins: dict[int, Any] = {}
        drops: list[Entry] = []
        async with sessions.lock:
            for key in keys:
                seen = sessions.last_seen.get(key)
                stored = table.data.get(key)
                if seen is None or seen > cutoff or stored is None:
                    continue  # a record came since the scan began, or the session ended
                spool = tables.spool()  # its chunks live on the session's partition
                try:
                    partition, out = step.expire(stored, key, now_ms=now_ms, spool=spool)
                except Exception:  # an unreadable state is left alone, and said so
                    log.exception("%s: cannot close idle session %r", name, key)
                    continue
                drops.extend((k, partition, None, None) for k, *_ in spool.entries(drops=True))
                items.extend(_outputs(out, key, partition, now_ms))
                if fleet is not None:
                    at = stand_ins.setdefault(partition, partition_stand_in(partition))
                    counted.extend(Counted(key, v, partition, None, now_ms, at)
                                   for v in out.records)
                closed.append((key, partition))
            for key, _ in closed:
                sessions.last_seen.pop(key, None)
            tombstones = _write_local(table, [(key, p, None, None) for key, p in closed])
            chunk_tombstones = _write_local(tables.items, drops)
        if not closed:
            return True

        async def deliver() -> None:
            if items:
                await sink.publish(items, f"{name}.idle")
            # a session that came back meanwhile has a new life, whose state stands
            for t, records in ((table, tombstones), (tables.items, chunk_tombstones)):
                records = [r for r in records if r[2] not in t.data]
                if records:
                    _persisted([t], await sink.publish(records, f"{name}.idle",
                                                       exact_ends=exact))

        if not await until_stopped(app, deliver()):
            return False
        if counted and fleet is not None:
            await fleet.count(counted)
        metrics.closed_idle(step.provider, (key for key, _ in closed), items)
        log.info("%s: closed %d idle session(s)", name, len(closed))
        return True

    app.timer(settings.idle_scan_interval, name=f"{name}.idle")(scan)
