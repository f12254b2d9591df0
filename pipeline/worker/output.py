"""The output producer: the one producer of the agents' output topics (canonical, chat,
dead letters, metrics) and of the session and item tables' changelogs, which delivers
whole record batches and sends again what the cluster did not take.

A delivery that fails (the broker went away, a timeout) is sent again with backoff
until it succeeds; meanwhile /health says degraded. A refusal that no retry can change
goes to agents.deadletter instead. A worker told to stop while a delivery is being sent
again stops sending it (`publish`, `stopping`): the batch it belongs to is then not
acknowledged, and is read again after the restart.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from aiokafka.errors import KafkaError
from msgspec import UNSET

from pipeline.ops.metrics import WorkerMetrics
from pipeline.ops.records import ProducerRecord
from pipeline.ops.web import Health
from pipeline.settings import Settings
from pipeline.worker.exceptions import Abandoned
from pipeline.worker.normalize import dead_letter_bytes
from topics.catalog import DEADLETTER_TOPIC, EVENT_MAX_MESSAGE_BYTES
from topics.records import DeadLetter

log = logging.getLogger("canonflow")

#: Backoff between two attempts to deliver a batch's output: first, then doubling to max.
RETRY_FIRST_SECONDS = 0.2
RETRY_MAX_SECONDS = 10.0
#: How often a wait that a stopping worker interrupts looks whether it is stopping.
STOP_POLL_SECONDS = 0.1
#: Give up a delivery being sent again when the worker begins to stop (Abandoned), so
#: that SIGTERM is honoured at once; the batch is not acknowledged and is read again after
#: the restart.
GIVE_UP_ON_STOP = True


class OutputProducer:
    """The producer of the agents' output topics (canonical, chat, dead letters) and of
    the session tables' changelogs.

    Separate from Faust's own producer (left with the fleet tables' changelogs): on the
    embedded broker that one must put every record in its own batch (so that table
    recovery sees the changelog's true end: docs, Embedded broker), and measured that makes
    every further message to a partition wait for the one before it (`canonflow
    bench`). This one sends whole record batches; on the embedded broker only each
    changelog partition's last record of a delivery goes alone (`exact_ends`). Started
    on first use, stopped before the app shuts down (after the agents have drained)."""

    def __init__(self, settings: Settings, metrics: WorkerMetrics | None = None,
                 health: Health | None = None, stopping: Callable[[], bool] | None = None):
        self.settings = settings
        self.metrics = metrics or WorkerMetrics()
        self.health = health or Health()
        #: Is the worker stopping? (its app's `should_stop`; never, without an app)
        self.stopping = stopping or (lambda: False)
        self._producer: Any = None
        self._lock = asyncio.Lock()

    async def get(self) -> Any:
        async with self._lock:
            if self._producer is None:
                from aiokafka import AIOKafkaProducer

                from pipeline.cluster.admin import kafka_client_kwargs

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

    @property
    def exact_ends(self) -> bool:
        """Whether a changelog's last record of each delivery must go in a batch of its
        own (`publish`): on the embedded broker, whose producers send one record per
        batch for that reason (pipeline.worker.process.embedded_settings)."""
        return self.settings.producer_max_batch_size == 1

    async def probe(self) -> None:
        """Ask the cluster for its metadata. Raises (a Kafka error) when no broker answers."""
        await self.topics()

    async def topics(self) -> dict[str, int]:
        """The cluster's topics and their partition counts, from its metadata. Raises (a
        Kafka error) when no broker answers."""
        producer = await self.get()
        cluster = await producer.client.fetch_all_metadata()
        return {t: len(cluster.partitions_for_topic(t) or ()) for t in cluster.topics()}

    async def publish(self, items: Sequence[ProducerRecord], agent: str, *,
                      exact_ends: bool = False, once: bool = False
                      ) -> dict[tuple[str, int], int]:
        """Send `items` and wait until every
        one is delivered, in order within each topic partition. Returns the offset of
        the last record delivered in each (topic, partition).

        `exact_ends` puts the last record of each partition in a record batch of its own:
        the embedded broker answers ListOffsets(latest) with the first offset of the
        last batch + 1, and table recovery reads a changelog up to that.

        The items of each topic partition go as whole record batches (`send_batch`):
        measured, aiokafka's per-message `send` (a future and a metadata wait per
        record) cost the worker more than translating the records.

        A failed send or delivery (broker gone, timeout) is not an error for the caller:
        in each partition, the first undelivered batch and every one after it are sent
        again, in order, after a backoff (doubling up to RETRY_MAX_SECONDS), until all
        are delivered. Records that were delivered before the failure may be delivered
        twice; their eventIds are the same, so consumers drop the copies. Returns only
        when everything is delivered.

        Raises Abandoned when the worker begins to stop once a delivery has failed
        (a worker whose agent was sending a batch again ignored SIGTERM, as
        Faust's shutdown waits for every record it handed out to be acknowledged): the
        attempt under way, or the backoff, is cut short within STOP_POLL_SECONDS, and
        the records not delivered are given up. A first attempt is never cut short, so
        that an orderly stop publishes nothing twice. Raises CancelledError when the
        worker cancels the caller. With `once`, raises Abandoned as soon as one attempt
        fails: a caller that holds what others wait for (an idle close or a stall alert
        holds its agent's lock) tries again later instead of holding it.

        A refusal that no retry can change (`refusal`: a record too large for the topic,
        a topic not authorised or not there after UNKNOWN_TOPIC_SECONDS) is not sent
        again: each refused record goes to agents.deadletter with the reason (cut to the
        dead-letter limit; one refused there is logged and dropped), the partition moves
        on, and /health and canonflow_output_refused_total say so."""
        pending: Sequence[ProducerRecord] = items
        delay = RETRY_FIRST_SECONDS
        started = time.monotonic()
        alone: set[int] = set()  # ids of records to send in a batch of their own
        ends: dict[tuple[str, int], int] = {}
        retrying = False
        while True:
            attempt = self._attempt(pending, exact_ends, alone)
            sent, results, unsent, error = await (
                self._unless_stopping(attempt, agent, len(pending)) if retrying else attempt)
            failed: set[tuple[str, int]] = set()
            again: list[int] = list(unsent)
            refused: list[tuple[ProducerRecord, BaseException]] = []
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
            self.metrics.send_failed(agent, (item.topic for item in pending))
            self.health.send_failed(agent, error)
            if once:
                log.warning("%s: %d record(s) not delivered (%s: %s); given up until its next "
                            "try", agent, len(pending), type(error).__name__, error)
                raise Abandoned(f"{agent}: not delivered at the first attempt")
            log.warning("%s: %d record(s) not delivered (%s: %s); sending again in %.1fs",
                        agent, len(pending), type(error).__name__, error, delay)
            retrying = True
            await self._unless_stopping(asyncio.sleep(delay), agent, len(pending))
            delay = min(delay * 2, RETRY_MAX_SECONDS)

    async def _attempt(self, items: Sequence[ProducerRecord], exact_ends: bool, alone: set[int]
                       ) -> tuple[list[tuple[tuple[str, int], Any, list[int]]],
                                  list[Any], list[int], BaseException | None]:
        """Send `items` once (see `_send`) and wait for every delivery: the batches sent,
        their results (RecordMetadata or the exception), the indexes of the items not
        sent, and the error that stopped the sending (None)."""
        sent: list[tuple[tuple[str, int], Any, list[int]]] = []
        unsent: list[int] = []
        error: BaseException | None = None
        try:
            producer = await self.get()
            await self._send(producer, items, sent, unsent, exact_ends, alone)
        except Exception as e:  # no metadata in time, buffer full past the timeout, ...
            error = e
        results = await asyncio.gather(*(f for _, f, _ in sent), return_exceptions=True)
        return sent, results, unsent, error

    async def _unless_stopping(self, aw: Awaitable[Any], agent: str, records: int) -> Any:
        """Await `aw`, unless the worker begins to stop first. Raises Abandoned then."""
        if not GIVE_UP_ON_STOP:
            return await aw
        try:
            return await unless_stopping(self.stopping, aw)
        except Abandoned:
            log.warning("%s: the worker is stopping: %d record(s) given up undelivered (their "
                        "batch is not acknowledged: it is read again after the restart)",
                        agent, records)
            raise

    async def _refused(self, refused: list[tuple[ProducerRecord, BaseException]], agent: str) -> None:
        """Dead-letter the records the cluster refused for good (see publish)."""
        letters: list[ProducerRecord] = []
        for record, error in refused:
            topic, value, key, partition = record.topic, record.value, record.key, \
                record.partition
            ts = record.timestamp_ms
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
            letters.append(ProducerRecord(DEADLETTER_TOPIC, dead_letter_bytes(
                letter, self.settings.max_message_bytes), key, partition, ts))
        self.health.send_refused(len(refused), refused[-1][1])
        if letters:
            await self.publish(letters, f"{agent}.refused")

    @staticmethod
    async def _send(producer: Any, items: Sequence[ProducerRecord],
                    sent: list[tuple[tuple[str, int], Any, list[int]]],
                    unsent: list[int], exact_ends: bool, alone: set[int] | None = None
                    ) -> None:
        """Queue `items` as record batches, one or more per topic partition, in order
        (with `exact_ends`, each partition's last record alone in the last one; the
        records whose id is in `alone` each in a batch of its own).
        Appends (topic partition, delivery future, item indexes) to `sent` per batch
        queued; the indexes of items not queued when a send raises go to `unsent`.

        The batches are queued in rounds: every partition's first batch, then every
        partition's second, and so on. aiokafka queues one batch per partition at a time
        and keeps one request in flight per broker, so a partition's second batch waits
        until its first is sent: queued partition after partition, a delivery went in
        one request per partition, each after the one before (measured in the worker on
        the embedded broker, where exact ends give most partitions two batches: 14
        requests and 50-70 ms for a delivery to 15-30 partitions). In rounds, a delivery
        takes as many requests as its longest partition has batches."""
        groups: dict[tuple[str, int], list[int]] = {}
        for i, item in enumerate(items):
            groups.setdefault((item.topic, item.partition), []).append(i)
        queued: set[int] = set()
        try:
            plans = [(tp, _batches(producer, items, indexes, exact_ends, alone))
                     for tp, indexes in groups.items()]
            for round_ in range(max((len(b) for _, b in plans), default=0)):
                for tp, batches in plans:
                    if round_ < len(batches):
                        batch, members = batches[round_]
                        future = await producer.send_batch(batch, tp[0], partition=tp[1])
                        sent.append((tp, future, members))
                        queued.update(members)
        except BaseException:
            unsent.extend(i for i in range(len(items)) if i not in queued)
            raise


def _batches(producer: Any, items: Sequence[ProducerRecord], indexes: list[int], exact_ends: bool,
             alone: set[int] | None) -> list[tuple[Any, list[int]]]:
    """The record batches of one topic partition's `indexes`, in order, with the item
    indexes each holds (see OutputProducer._send)."""
    out: list[tuple[Any, list[int]]] = []
    batch, members = producer.create_batch(), list[int]()
    last = indexes[-1] if exact_ends and len(indexes) > 1 else None
    for i in indexes:
        item = items[i]
        single = bool(alone) and id(item) in alone  # type: ignore[operator]
        if members and (single or i == last):
            out.append((batch, members))
            batch, members = producer.create_batch(), []
        if batch.append(key=item.key, value=item.value, timestamp=item.timestamp_ms,
                        headers=item.headers) is None:  # full
            out.append((batch, members))
            batch, members = producer.create_batch(), []
            batch.append(key=item.key, value=item.value, timestamp=item.timestamp_ms,
                         headers=item.headers)
        members.append(i)
        if single:  # and nothing after it in the same batch
            out.append((batch, members))
            batch, members = producer.create_batch(), []
    if members:
        out.append((batch, members))
    return out


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


async def unless_stopping(stopping: Callable[[], bool], aw: Awaitable[Any],
                         poll: float = STOP_POLL_SECONDS) -> Any:
    """Await `aw` unless `stopping()` becomes true first (looked at every `poll`
    seconds), and then cancel it and raise Abandoned. Returns what `aw` returns (its
    exception raised here)."""
    task = asyncio.ensure_future(aw)
    try:
        while not task.done():
            if stopping():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
                raise Abandoned("the worker is stopping")
            await asyncio.wait({task}, timeout=poll)
    except asyncio.CancelledError:
        task.cancel()
        raise
    return task.result()


async def until_stopped(app: Any, aw: Awaitable[Any], poll: float = STOP_POLL_SECONDS) -> bool:
    """Await `aw` unless `app` begins to stop first, and then cancel it. True when `aw`
    completed (its exception raised here), False when the app stopped it (or a delivery
    in it was given up: Abandoned).

    Why: a delivery the cluster does not take is sent again until it does
    (OutputProducer.publish), and Faust cancels a timer's coroutine only at the end of
    its shutdown, after it stopped the output producer, which a retry would start again:
    a worker told to stop stops within `poll` seconds instead."""
    try:
        await unless_stopping(lambda: app.should_stop, aw, poll)
    except Abandoned:
        return False
    return True
