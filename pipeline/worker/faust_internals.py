"""The one module between canonflow and Faust's internals.

canonflow uses Faust's public API (the app, topics, agents, streams, tables, timers)
everywhere else. Where that API does not let the worker keep its one invariant
(STATE NEVER AHEAD OF WHAT WAS PUBLISHED, pipeline.worker.checkpoint), or measurably
costs too much, the worker goes under it, here and nowhere else (tests/pipeline/
test_layers.py checks that no other module imports Faust's or mode's internals or
touches a table's local store, changelog or persisted offsets). Each use is below, with
the reason for it and the test that fails if Faust's behaviour it relies on changes
(tests/pipeline/test_faust_internals.py, unless another is named):

1. Tables written in batches (`write_entries`, `local`): the worker writes a table's
   local store (`table.data`) directly and its checkpoint sends the changelog records
   itself, through the output producer, in record batches, after the output they
   stand for. Faust's `table[key] = value` sends each changelog record at once,
   through Faust's producer, before the output it stands for is published.
   Relies on: `Table.data` is the store, and writing it sends nothing.
2. Persisted offsets (`note_persisted`): what Faust's own changelog callback does for
   the records it sent, done for the ones the checkpoint sent, so that a RocksDB store
   recovers from the right offset. Relies on: `Store.set_persisted_offset(tp, offset)`.
3. The current event (`set_current_event`, `partition_record`): Faust's stores find a
   key's partition from the task's current event. In a batch that is the batch's last
   record, whatever partition the key belongs to; so before touching a session's entry
   the agent sets the current event to the record it belongs to (Faust's
   `faust.streams._current_event`, what the public `current_event()` reads), as Faust's
   own stream iteration does for every record. A write that no record carries (an idle
   close, a stall) names a partition record: an object with the attributes Faust's
   stores read (`event.message.partition`). Relies on: `current_event()` reads
   `_current_event`, and a store reads only `message.partition` of it.
4. Acknowledgements held back (`hold_unacknowledged`, `forget_unacknowledged`,
   `hold_ack`, `release_acks`): the agents' batch generator (`take_batches`, 9, as
   Faust's `take_events`) acknowledges a batch in a `finally` when it is closed; an
   agent that stops (or crashes) inside an undelivered batch must not have it
   acknowledged (it is read again after a restart), so its generator is kept from
   being finalized. A committed batch's states go with the next delivery
   (pipeline.worker.pending): its records keep one reference each until then
   (`Message.incref`), so that the batch's acknowledgement does not commit them. And
   Faust's shutdown waits for every record it handed out to be acknowledged (the
   consumer's `unacked` set): an agent that gives up its batch as the worker stops
   takes its records off that set, or SIGTERM would never be honoured
   (test_stop_in_retry.py).
5. Table recovery (`Recovery`, `TableManager`): two corrections, without which a
   restarted worker can lose raw records and a broker that lost its changelogs stops
   the worker for good (see `Recovery`).
6. The consumer's fetch wait (`tune_consumer`): Faust's aiokafka driver asks the
   broker for records with a fixed fetch_max_wait_ms of 1500. A broker that answers a
   fetch only when that wait is over, even when records arrived meanwhile (the
   embedded Tansu: measured, a record produced 0.4 s after a fetch began was read
   1.2 s after its production), holds every record of a live session up to 1.5 s
   (`canonflow bench --latency`: p50 387 ms, p99 1.4 s at 100 messages/s). Kafka
   answers as soon as a record arrives, so there the wait only spaces the fetches of
   an idle worker.
7. The consumer's assignment (`tune_consumer`, `AssignmentCache`): Faust's driver
   converts the consumer's whole assignment to its own partition type every time it
   is asked, and its offset commit asks once per offset: quadratic in the partitions,
   34-38 ms of the consumer thread at every commit with this worker's 420 partitions.
   It is converted once per assignment instead.
8. Paused changelogs (`tune_consumer`, `set_fetching`): Faust pauses a partition only
   in its own books. aiokafka goes on fetching it, and keeps what it fetched until
   Faust asks for that partition (never, for an active table's changelog after its
   recovery). So every fetch of the worker named every table changelog partition it
   had not yet fetched records from (327-357 partitions in a fetch instead of 133,
   measured in `canonflow bench --latency`), and the records the worker wrote itself
   were fetched back and held. The changelog partitions are paused and resumed in
   aiokafka too, as Faust pauses and resumes them.
9. Batches that wait for their first record (`take_batches`): Faust's `take_events`
   wakes every `within` seconds whether or not a record came, three tasks a wake-up
   (mode's `wait_first`). With a 10 ms window and eleven agents, an idle worker's event
   loop woke 1,100 times a second: measured, 200 ticks of CPU in 20 s (a tenth of a
   core) against 9 with the window at 1 s. `take_batches` hands out the same batches,
   acknowledged the same way, but an empty batch waits for its first record with no
   timer, and a batch waits at most `within` after its first record joined it. The
   records that come while the agent holds a batch join the next one when the agent
   asks for it, as with take_events, so a busy agent's batches stay as large.
10. A fetched record handed on without four tasks (`tune_consumer`, `run_until_it_waits`):
   Faust's consumer gives each fetched record to the conductor with
   `wait_first(callback(record), suspend_flow.wait())`, which makes four tasks (the
   callback, the flow's suspension, the consumer's stop and crash), waits for the
   first and cancels the other three: measured, 14% of the worker's main thread at one
   message per record (py-spy), where the callback itself almost never waits (it
   decodes the record and puts its event in the stream's queue). The callback now runs
   at once, in a copy of the context as a task would, until it completes or waits;
   only one that waits is raced against the flow's suspension, as before. Faust's
   tasks ran the callback's first step too, whatever the flow's state, so what runs
   is the same, one loop turn earlier.
11. A read position reset to the partition's start (`rewind`): when the broker made a
   source topic again below the position (pipeline.ops.progress), the position goes to
   the new log's start, and Faust's books of the partition are emptied as a revocation
   empties them: its committed and read offsets, its acknowledged offsets and gaps.
   Faust takes an acknowledgement below the committed offset for a copy and drops it,
   so with the old books the new log's records would never be committed, and Faust's
   shutdown would wait for them forever.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import time
import weakref
from collections.abc import AsyncIterator, Coroutine, Iterable, MutableMapping, Sequence, Set
from functools import partial
from typing import Any

from aiokafka import TopicPartition
from faust.stores.memory import Store as MemoryStore
from faust.streams import _current_event
from faust.tables import TableManager as FaustTableManager
from faust.tables.recovery import Recovery as FaustRecovery
from faust.transport.drivers.aiokafka import AIOKafkaConsumerThread
from faust.transport.drivers.aiokafka import Consumer as FaustConsumer
from faust.types import TP
from mode.services import WaitResults

from pipeline.ops.records import ProducerRecord, TableEntry
from topics.catalog import changelog_spec

log = logging.getLogger("canonflow")

#: What the worker logs, once, when it rebuilds its tables (see Recovery).
REBUILT = "rebuilding every table from its changelog as it is now"



# ---- 1, 2: tables written in batches ------------------------------------------


def add_table(app: Any, settings: Any, name: str) -> Any:
    """The worker's table `name` (bytes keys and values, default None), co-partitioned
    with the raw topics, its changelog declared with the catalog's configuration
    (topics.catalog.changelog_spec: compacted, an explicit max.message.bytes)."""
    return app.Table(name, partitions=settings.partitions, key_type=bytes, value_type=bytes,
                     default=None,
                     extra_topic_configs=changelog_spec(settings.app_id, name).config())


def local(table: Any) -> MutableMapping[bytes, bytes]:
    """`table`'s local store. Reads see the current event's partition (`set_current_event`),
    or every partition in a context without one; writes send no changelog record (the
    checkpoint sends them: `write_entries`)."""
    return table.data  # type: ignore[no-any-return]


def local_size(table: Any) -> int:
    """Entries in `table`'s local store. Raises what the store raises when it is not
    open (no partition assigned yet)."""
    return len(table.data)


def changelog_name(table: Any) -> str:
    return table.changelog_topic.get_topic_name()  # type: ignore[no-any-return]


def write_entries(table: Any, entries: Iterable[TableEntry]) -> list[ProducerRecord]:
    """Write each entry to `table`'s local store (value None deletes); returns their
    changelog records (None: a tombstone), each in the changelog partition of the
    records it came from, for the checkpoint to deliver. The entry's record names the
    partition whose RocksDB database the entry goes to."""
    data = table.data
    topic = changelog_name(table)
    out: list[ProducerRecord] = []
    for entry in entries:
        if entry.value is None:
            data.pop(entry.key, None)
        else:
            if entry.record is not None:
                set_current_event(entry.record)
            data[entry.key] = entry.value
        out.append(ProducerRecord(topic, entry.value, entry.key, entry.partition))
    return out


def note_persisted(tables: Sequence[Any], ends: dict[tuple[str, int], int]) -> None:
    """Note each changelog partition's last delivered offset (`ends`, as the output
    producer returns them) as persisted, as Faust's own changelog callback does: the
    RocksDB store recovers from there."""
    for table in tables:
        topic = changelog_name(table)
        for (name, partition), offset in ends.items():
            if name == topic:
                table.data.set_persisted_offset(TP(name, partition), offset)


# ---- 3: the current event -------------------------------------------------------


def set_current_event(event: Any) -> None:
    """Make `event` the current event of this task (table partition = its partition)."""
    _current_event.set(weakref.ref(event))


class PartitionRecord:
    """What Faust's stores read of a current event: `event.message.partition`."""

    __slots__ = ("partition", "__weakref__")

    def __init__(self, partition: int):
        self.partition = partition

    @property
    def message(self) -> PartitionRecord:
        return self


def partition_record(partition: int) -> Any:
    """A record of `partition`, for table writes no input record carries (an idle close,
    a stall): pass it to `set_current_event`, and keep it referenced while it is the
    current event (Faust holds it by a weak reference)."""
    return PartitionRecord(partition)


# ---- 4: acknowledgements held back ----------------------------------------------

#: take_batches generators whose last batch was not delivered when their agent stopped
#: or crashed. Held so that they are never finalized while the worker runs: a
#: take_batches generator acknowledges a batch in a `finally` when it is closed, and
#: an undelivered batch must not be acknowledged (it is read again after a restart).
_UNDELIVERED: list[Any] = []


def hold_unacknowledged(batches: Any) -> None:
    """Keep `batches` (a `take_batches` generator whose current batch was not delivered)
    from being closed, and so from acknowledging that batch, while the worker runs."""
    _UNDELIVERED.append(batches)


def hold_ack(event: Any) -> Any:
    """Keep `event`'s record from being acknowledged when its batch is done
    (take_batches acknowledges a batch when the agent asks for the next one); returns its
    message, for `release_acks` once the batch's states are delivered
    (pipeline.worker.pending)."""
    message = event.message
    message.incref()
    return message


def release_acks(app: Any, messages: Iterable[Any]) -> None:
    """Acknowledge the records `hold_ack` held: their offsets may now be committed."""
    consumer, out = app.consumer, app.sensors.on_message_out
    for message in messages:
        if message.ack(consumer):
            out(message.tp, message.offset, message)


def forget_unacknowledged(app: Any, topic: str) -> int:
    """Make Faust's shutdown stop waiting for the records of `topic` it handed out and
    that this worker will not acknowledge (its agent gave up a batch as the worker
    stopped: pipeline.worker.output.Abandoned); returns how many. They stay
    unacknowledged, so their offsets are not committed: they are read again after the
    restart. Why: Faust's shutdown first waits until every record it handed out is
    acknowledged (the consumer's `wait_empty`, through its `unacked` set); with a batch
    held back, SIGTERM was never honoured (SIGKILL after 60 s,
    tests/pipeline/test_stop_in_retry.py)."""
    unacked = app.consumer.unacked
    mine = [message for message in list(unacked) if message.topic == topic]
    for message in mine:
        unacked.discard(message)
    return len(mine)


# ---- 5: table recovery ------------------------------------------------------------


class Recovery(FaustRecovery):
    """Faust's recovery, with two corrections.

    1. The consumer's flow is stopped while Faust seeks the stream partitions back to
    their committed offsets. When a worker starts (or gains partitions), Faust's
    `on_recovery_completed` resumes the raw partitions and then awaits `perform_seek`, a
    broker round trip, with the consumer's flow already active (resumed to read the
    changelogs). Records fetched meanwhile reach the agents. When the seek returns, it
    sets each partition's read offset back to the committed offset, and the next record
    that was fetched before the seek looks like a jump past a gap: Faust acknowledges
    the "gap" and commits past records this worker never processed. They are never read
    again (faust-streaming's issue tracker describes the same family of races). Observed here:
    the SIGTERM test restarted a worker, which skipped raw records and published fewer
    events than the offline replay. With the flow stopped during the seek, no record
    arrives while the read offsets are reset: the fetcher waits, the records in flight
    are dropped unprocessed, and reading resumes at the committed offsets (the records
    processed since are read again and skipped by the sessions' watermarks). Faust's
    `on_recovery_completed` resumes the flow itself once the seek is done.

    1b. "Reading resumes at the committed offsets" held only for partitions that have
    one. For a raw partition this group never committed an offset in (a new group over
    a topic with records; a worker stopped before its first batch there was
    acknowledged), aiokafka's `seek_to_committed` seeks nothing, so the records the
    dropped fetch had already carried were never read again: the consumer's position
    stayed past them. Found with tests/pipeline/test_stop_in_retry.py: a worker that
    gave up its first batches on SIGTERM was restarted, consumed every raw partition to
    its end (positions at the high watermarks) and never published the providers whose
    partitions had no committed offset (claude, codex-exec, opencode, gemini; codex
    and acp, whose first record had been acknowledged, were whole), in about one run
    of five under load. Faust's own drop of a fetch that arrives while the flow is
    stopped (its `getmany`, during any rebalance) calls the same seek. So the seek is
    followed, once per worker (`_rewind_uncommitted`), by a seek to the beginning of
    every stream partition without a committed offset: what the app's
    `consumer_auto_offset_reset` ("earliest") gives such a partition anyway.

    2. A changelog that ends below what the worker's tables hold is read again from its
    start, and the tables with it, instead of stopping the worker. Faust raises
    `ConsistencyError` in `_restart_recovery` when a changelog partition's stored offset
    (RocksDB: the offset persisted with the data; memory: what the last recovery read)
    is above the partition's highwater: the broker lost records the tables were built
    from (the embedded broker restarted with its memory storage, a topic deleted and
    made again). The exception ends the recovery service and the worker with it, and
    with RocksDB every later start raises it again. Measured here
    (tests/pipeline/test_broker_trouble.py): a worker that had recovered its tables
    died when the embedded broker restarted empty, in 3 runs of 3; a RocksDB worker died
    on start after the broker lost its changelogs, in 3 runs of 3. Faust's check also
    skips a stored offset of 0 (falsy), keeping a table built from records that are
    gone. Here, after Faust builds the active offsets (`_build_offsets`, the step just
    before its check), every active and standby changelog partition is compared with
    its highwater; if one is behind, the cluster lost data the local state came from,
    so every table drops its local state and every partition is read from the start
    of its changelog as it is now (empty, after the embedded broker's restart): the
    tables again hold what the changelogs hold. Sessions whose state is gone begin a
    new life with their next record (new event ids: a life's ids come from its first
    record's time). The worker logs one warning (`REBUILT`) and counts the rebuild in
    `rebuilds` / `rebuilt_at` / `rebuilt_reason`. Faust's check stays on and then
    passes. Not detected: a memory-store partition this worker's last recovery read
    nothing from (stored offset -1) and wrote to since, and a partition whose new log
    has grown past the stored offset before the worker rejoins; the tables keep their
    state then (the sessions' watermarks skip the new log's records of a session
    continuing across the loss up to its old offset). A RocksDB partition database that
    is not assigned at the rebuild is checked when it is assigned."""

    #: Times this worker rebuilt its tables, when last (unix time) and why (for /health).
    rebuilds: int = 0
    rebuilt_at: float | None = None
    rebuilt_reason: str | None = None

    async def on_recovery_completed(self, generation_id: int = 0) -> None:
        consumer = self.app.consumer
        _rewind_uncommitted(consumer, self._is_changelog_tp)
        consumer.stop_flow()
        await super().on_recovery_completed(generation_id)

    async def _build_offsets(self, consumer: Any, tps: Set[Any],
                             destination: MutableMapping[Any, Any], title: str) -> None:
        await super()._build_offsets(consumer, tps, destination, title)
        if destination is not self.active_offsets or not tps:
            return  # the standby offsets come next; the active call has checked them
        behind = await self._behind(consumer, tps)
        if not behind:
            return
        self._rebuild(behind)
        for tp in tps:
            destination[tp] = None  # Faust then starts at the changelog's earliest offset
        for tp in self.standby_tps:
            self.standby_offsets[tp] = None
        await super()._build_offsets(consumer, tps, destination, title)

    async def _behind(self, consumer: Any, tps: Iterable[Any]) -> list[str]:
        """Changelog partitions (active and standby) whose highwater is below the offset
        this worker's tables hold, as `topic[partition] offset > highwater`."""
        held = [(tp, self.active_offsets.get(tp), self.active_highwaters.get(tp))
                for tp in tps]
        if self.standby_tps:
            ends = await consumer.highwaters(*self.standby_tps)
            held += [(tp, self.standby_offsets.get(tp),
                      ends[tp] - 1 if ends.get(tp) is not None else -1)  # as Faust counts
                     for tp in self.standby_tps]
        return [f"{tp.topic}[{tp.partition}] {offset} > {end}" for tp, offset, end in
                sorted(held) if offset is not None and end is not None and offset > end]

    def _rebuild(self, behind: list[str]) -> None:
        for table in self.tables.values():
            partitions = {tp.partition for tp in self.actives_for_table.get(table, ())}
            partitions |= {tp.partition for tp in self.standbys_for_table.get(table, ())}
            _drop_local(table, partitions)
        self.rebuilds += 1
        self.rebuilt_at = time.time()
        self.rebuilt_reason = (f"{len(behind)} changelog partition(s) end below what the "
                               f"tables held, e.g. {behind[0]}")
        log.warning("canonflow: the broker lost table changelogs (%s): %s, and going on",
                    self.rebuilt_reason, REBUILT)


def _rewind_uncommitted(consumer: Any, is_changelog: Any) -> None:
    """Make `consumer.perform_seek` (seek every partition back to its committed offset)
    also seek each stream partition without a committed offset to its beginning
    (Recovery, 1b). Installed once per consumer."""
    if getattr(consumer, "_rewinds_uncommitted", False):
        return
    seek_to_committed = consumer.perform_seek

    async def perform_seek() -> None:
        await seek_to_committed()
        read = consumer._read_offset  # after the seek: None where nothing is committed
        uncommitted = [tp for tp in consumer.assignment()
                       if read.get(tp) is None and not is_changelog(tp)]
        if uncommitted:  # on the consumer's thread, as aiokafka's partitions
            await consumer._thread.seek_to_beginning(
                *(TopicPartition(tp.topic, tp.partition) for tp in uncommitted))

    consumer.perform_seek = perform_seek
    consumer._rewinds_uncommitted = True


async def rewind(app: Any, tps: Iterable[Any]) -> None:
    """Reset the fetch position of each of `tps` to its partition's start, with Faust's
    books of it (11 above)."""
    consumer = app.consumer
    tps = list(tps)
    for tp in tps:
        consumer._committed_offset.pop(tp, None)
        consumer._read_offset.pop(tp, None)
        consumer._acked.pop(tp, None)
        consumer._acked_index.pop(tp, None)
        consumer._gap.pop(tp, None)
        app.monitor.tp_committed_offsets.pop(tp, None)
        app.monitor.tp_read_offsets.pop(tp, None)
    await consumer._thread.seek_to_beginning(  # on the consumer's thread, as in 1b
        *(TopicPartition(tp.topic, tp.partition) for tp in tps))


def _drop_local(table: Any, partitions: Iterable[int]) -> None:
    """Drop the local state of `table`: every entry of an in-memory store (it does not
    know each key's partition: keys are written under the record's partition, not the
    key's), and each of `partitions`' databases of a RocksDB store, the offset persisted
    with it included."""
    store = table.data
    if isinstance(store, MemoryStore):
        store.data.clear()
        store._key_partition.clear()
        return
    for partition in partitions:
        db = store._db_for_partition(partition)
        for key in list(db.keys()):
            del db[key]
    store._key_index.clear()


class TableManager(FaustTableManager):
    """Faust's table manager with `Recovery` as its recovery service (the app's
    `TableManager` setting)."""

    @property
    def recovery(self) -> FaustRecovery:
        if self._recovery is None:
            self._recovery = Recovery(self.app, self, beacon=self.beacon, loop=self.loop)
        return self._recovery


def tune_consumer(app: Any, fetch_wait: float) -> None:
    """The app's consumer with the longest a fetch waits for records (6 above; Faust:
    1.5 s fixed), its assignment converted once per assignment (7) and its changelog
    partitions paused in aiokafka as Faust pauses them (8). Set before the app starts
    its consumer."""
    wait_ms = max(1, int(fetch_wait * 1000))

    class Thread(AIOKafkaConsumerThread):  # type: ignore[misc]
        # one per app (this class is): keyed by aiokafka's assignment, so it holds for
        # whichever consumer the thread runs; a class attribute, so that asking before
        # the consumer starts raises Faust's ConsumerNotStarted as before
        _assigned = AssignmentCache()

        def _create_worker_consumer(self, transport: Any) -> Any:
            consumer = super()._create_worker_consumer(transport)
            consumer._fetch_max_wait_ms = wait_ms  # read when it starts its fetcher
            return consumer

        def assignment(self) -> Set[TP]:  # type: ignore[override]
            return self._assigned.of(self._ensure_consumer().assignment())

    class Consumer(FaustConsumer):  # type: ignore[misc]
        def _new_consumer_thread(self) -> Any:
            return Thread(self, loop=self.loop, beacon=self.beacon)

        async def wait_first(self, *coros: Any, timeout: Any = None) -> Any:
            # Faust's consumer calls this only to hand a fetched record to the conductor:
            # (the record's callback, the flow's suspension); see 10 above
            if timeout is None and len(coros) == 2 and all(map(asyncio.iscoroutine, coros)):
                callback, suspended = coros
                rest = run_until_it_waits(callback)
                if rest is None:
                    suspended.close()
                    return WaitResults([callback], [None], False)
                coros = (rest, suspended)
            return await super().wait_first(*coros, timeout=timeout)

        def pause_partitions(self, tps: Iterable[TP]) -> None:
            tps = list(tps)
            super().pause_partitions(tps)
            self._fetch_changelogs(tps, fetch=False)

        def resume_partitions(self, tps: Iterable[TP]) -> None:
            tps = list(tps)
            super().resume_partitions(tps)
            self._fetch_changelogs(tps, fetch=True)

        def _fetch_changelogs(self, tps: list[TP], *, fetch: bool) -> None:
            """Faust pauses a partition only in its own books (its `getmany` leaves
            the partition's records where they are); the changelog partitions are
            paused and resumed in aiokafka's too, in the consumer's thread (8 above)."""
            changelogs = [TopicPartition(tp.topic, tp.partition) for tp in tps
                          if self._is_changelog_tp(tp)]
            consumer, loop = self._thread._consumer, self._thread.thread_loop
            if changelogs and consumer is not None and not loop.is_closed():
                loop.call_soon_threadsafe(set_fetching, consumer, changelogs, fetch)

    app.transport.Consumer = Consumer


def run_until_it_waits(coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any] | None:
    """Run `coro` in a copy of the current context, as a new task would, until it
    completes (None; raises what it raised) or waits: then a task (in the same context)
    that runs the rest of it, as the task would have."""
    ctx = contextvars.copy_context()
    try:
        waits_on = ctx.run(coro.send, None)
    except StopIteration:
        return None
    rest = asyncio.get_running_loop().create_task(_run_rest(coro, waits_on), context=ctx)
    rest.add_done_callback(partial(_cancelled_unstarted, coro, waits_on))
    return rest


def _cancelled_unstarted(coro: Coroutine[Any, Any, Any], waits_on: Any,
                         rest: asyncio.Task[Any]) -> None:
    """A task cancelled before its first step never runs its coroutine (`_run_rest`),
    so `coro` would not hear of it: cancel what it waits on and throw the cancellation
    in, as Task.cancel would have; one that goes on waiting is closed (no task is left
    to drive it)."""
    if not rest.cancelled() or coro.cr_frame is None or coro.cr_running:
        return  # it ended, or `_run_rest` delivered the cancellation itself
    if asyncio.isfuture(waits_on):
        waits_on.cancel()
    try:
        coro.throw(asyncio.CancelledError())
    except BaseException:  # noqa: BLE001 (StopIteration, CancelledError: it ended)
        return
    coro.close()


async def _run_rest(coro: Coroutine[Any, Any, Any], waits_on: Any) -> Any:
    """Drive `coro`, which waits on `waits_on` (a future, or None: a bare yield), as
    asyncio's Task does: resumed once that is done, the coroutine reads its outcome from
    the future itself; this task's cancellation reaches it through the future it waits
    on (cancelled) or, when that is done already, is thrown into it."""
    while True:
        step: Any = coro.send
        arg: Any = None
        if waits_on is None:
            try:
                await asyncio.sleep(0)
            except asyncio.CancelledError as e:
                step, arg = coro.throw, e
        elif getattr(waits_on, "_asyncio_future_blocking", None) is True:
            waits_on._asyncio_future_blocking = False  # as Task does: it waits on it now
            try:
                await waits_on
            except asyncio.CancelledError as e:
                if not waits_on.cancelled():  # this task's cancellation, not the future's
                    step, arg = coro.throw, e
            except BaseException:  # the future failed: the coroutine reads why from it
                if not waits_on.done():
                    raise
        else:
            step, arg = coro.throw, RuntimeError(f"a coroutine yielded {waits_on!r}")
        try:
            waits_on = step(arg)
        except StopIteration as stop:
            return stop.value


def set_fetching(consumer: Any, tps: list[TopicPartition], fetch: bool) -> None:
    """Resume (`fetch`) or pause the fetching of those of `tps` that aiokafka's
    `consumer` has assigned (a rebalance may have taken them meanwhile); run in the
    consumer's own thread, where aiokafka's pause makes the future its fetcher waits on."""
    assigned = consumer.assignment()
    mine = [tp for tp in tps if tp in assigned]
    if mine:
        (consumer.resume if fetch else consumer.pause)(*mine)


class AssignmentCache:
    """Faust's TPs of an aiokafka assignment, converted once per assignment.

    Faust's driver converts the whole assignment at every `assignment()`, and its
    offset commit asks it once per offset committed (`tp in self.assignment()`): a
    commit's cost grows with the square of the partitions. A worker is assigned every
    raw topic's and every table changelog's partitions (420 at the default 12
    partitions and ten runtimes) and commits about a third of them: measured, 34-38 ms
    of the consumer thread, holding the GIL, at every commit (every 2.8 s); 718 ms at 48
    partitions (0.2 and 0.6 ms converted once). aiokafka keeps one frozenset per
    assignment, so its identity says whether the conversion still holds; the answer is
    frozen, as it is shared."""

    __slots__ = ("_last",)

    def __init__(self) -> None:
        self._last: tuple[Any, frozenset[TP]] = (None, frozenset())

    def of(self, assigned: Set[Any]) -> frozenset[TP]:
        source, converted = self._last  # one read: the two threads may both ask
        if source is not assigned:
            converted = frozenset(tp if isinstance(tp, TP) else TP(tp.topic, tp.partition)
                                  for tp in assigned)
            self._last = (assigned, converted)
        return converted


# ---- 9: batches that wait for their first record ----------------------------------


def take_batches(stream: Any, max_: int, within: float) -> AsyncIterator[list[Any]]:
    """The events of `stream` in batches of at most `max_`, as Faust's `take_events`
    gives them, and acknowledged as it does them (each batch when the next is asked
    for, or when the generator is closed: see 4), but waiting without a timer while no
    record came, and at most `within` seconds after a batch's first record (with
    `within` 0: until the batch is full). Tracked as Faust tracks its own, so that the
    stream's stop closes it as it would take_events'."""
    batches = _take_batches(stream, max_, within)
    stream._active_agens.add(batches)
    return batches


async def _take_batches(stream: Any, max_: int, within: float) -> AsyncIterator[list[Any]]:
    from mode.utils.aiter import aiter

    loop = asyncio.get_running_loop()
    events: list[Any] = []
    first_at = 0.0  # when the batch being filled got its first record (loop time)
    begun = asyncio.Event()  # the batch has a record
    full = asyncio.Event()  # it has max_
    handed_out = asyncio.Event()  # the full batch was handed out: space again
    handing: asyncio.Future[None] | None = None  # the agent holds the batch

    async def add(value: Any) -> Any:
        # the stream's processor: runs for each record, one at a time
        nonlocal handing, first_at
        try:
            if handing is not None:  # the batch is with the agent: this record is the next's
                try:
                    await handing
                finally:
                    handing = None
            event = stream.current_event
            if event is None:
                raise RuntimeError("a batch's record came without its event")
            if not events:
                first_at = loop.time()
                begun.set()
            events.append(event)
            if len(events) >= max_:
                full.set()
                handed_out.clear()
                await stream.wait(handed_out)  # never more than max_ in a batch
        except Exception as exc:  # (not CancelledError: a BaseException, it goes through)
            log.exception("a record could not join its batch: %r", exc)
            await stream.crash(exc)
        return value

    acks = stream.enable_acks
    stream.enable_acks = False  # the batches are acknowledged here, once handed out
    stream.add_processor(add)
    stream._enable_passive(aiter(stream.channel))
    try:
        while not stream.should_stop:
            if not events:
                await stream.wait_for_stopped(begun)
            if events and len(events) < max_:
                if not within:
                    await stream.wait_for_stopped(full)
                else:
                    left = first_at + within - loop.time()
                    if left > 0:
                        await stream.wait_for_stopped(full, timeout=left)
            if events:
                # no record joins while the agent holds the batch (`add` waits on handing)
                batch, handing = list(events), loop.create_future()
                try:
                    yield batch
                finally:
                    events.clear()
                    begun.clear()
                    full.clear()
                    for event in batch:
                        await stream.ack(event)
                    handing.set_result(None)
                    handed_out.set()
    finally:
        stream.enable_acks = acks
        stream._processors.remove(add)
