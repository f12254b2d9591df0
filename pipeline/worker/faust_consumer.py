"""The worker's consumer and table recovery, where they go under Faust's public API.

Faust's consumer (its aiokafka driver) and its table recovery are used as they are,
except in the places below. Each names the private method or attribute it uses, why,
what it measured on Apache Kafka 4.4 and on the embedded Tansu (faust-streaming 0.15,
aiokafka 0.14), and the tests that guard it: tests/pipeline/test_faust_consumer.py
fails, by name, when Faust or aiokafka changes what a workaround relies on, and the
broker tests named show that a real worker takes the patched path. tests/pipeline/
test_layers.py allows this module and pipeline.worker.faust_internals, and no other, to
reach Faust's internals.

5. Table recovery (`Recovery`, `TableManager`, the app's TableManager setting): three
   corrections, each needed on both brokers (see `Recovery`).
   - The flow stopped during Faust's seek to the committed offsets (`stop_flow` before
     `on_recovery_completed`). Without it a restart skips raw records on Kafka too:
     test_shutdown's slow-seek test passes (32 s) with it and never gets every output
     (120 s) without it.
   - Partitions with no committed offset sought to their start after that seek
     (`perform_seek`, `_read_offset`, the thread's `seek_to_beginning`): aiokafka's
     `seek_to_committed` leaves them where the dropped fetch left them, on any broker:
     without it test_stop_in_retry's restart lost records in 1 run of 3 on Kafka (a
     race: the fetch must be in flight as the flow stops), as in 1 of 5 on Tansu.
   - Tables rebuilt when a changelog ends below what they hold (`_build_offsets`,
     `active_offsets`, the stores' `_db_for_partition`, `_key_index`,
     `_key_partition`). Kafka keeps its logs across restarts, but topics deleted and
     made again lose them: a RocksDB worker then died of Faust's ConsistencyError at
     every start, as on a Tansu that restarted (test_broker_trouble, both brokers).
6. The consumer's fetch wait (`tune_consumer`: `_create_worker_consumer`, aiokafka's
   `_fetch_max_wait_ms`): Tansu only. Faust fixes it at 1.5 s. Tansu answers a fetch
   only when the wait is over, so each record of a live session waited up to that
   long: at 5 messages/s, p50 602 ms and p99 1,023 ms, against 31 and 69 ms with
   50 ms. Kafka answers as soon as a record arrives: p50 19-23 ms, p99 27-41 ms with
   either wait, and the short one only made an idle worker use 0.05 of a core instead
   of 0.01. So the wait is 50 ms where the worker runs with Tansu's settings
   (pipeline.worker.process.embedded_settings), Faust's elsewhere, or
   CANONFLOW_FETCH_MAX_WAIT when set (test_fetch_wait reads every fetch's wait).
7. The consumer's assignment (`tune_consumer`, `AssignmentCache`: the thread's
   `assignment`, `_ensure_consumer`): both brokers (Faust's driver code). Faust
   converts the whole assignment at every ask, and its commit asks once per offset:
   quadratic in the partitions. A 20,000-message run spent 0.2-1.0 s of the
   consumer thread converting (0.75-2.5 ms an ask), on either broker; 0.5-15 ms with
   the cache (test_faust_consumer's running worker: no conversion at its commits).
8. Paused changelogs (`tune_consumer`, `set_fetching`: the thread's `_consumer` and
   `thread_loop`): both brokers (aiokafka's fetcher). Faust pauses a partition only
   in its own books; aiokafka goes on fetching it and keeps what it fetched. Without
   this a running worker's fetches named every table changelog: 197 partitions a
   fetch on Kafka instead of the 64 raw ones (test_fetch_wait's running worker).
10. A fetched record handed on without four tasks (`tune_consumer`'s `wait_first`,
   `run_until_it_waits`): both brokers (Faust's fetch loop). Faust races each
   record's callback against the flow's suspension in four tasks; the callback
   completes without waiting for 95% of the records, so it runs at once and only one
   that waits is raced. One message per record, 20,000 messages, the worker's CPU
   time over the run: Kafka 4.9 s against 12.5 s without it, Tansu 5.6-7.6 s against
   9.2-10.8 s (test_faust_consumer's running worker: no race for most records).
11. A read position reset to the partition's start (`rewind`, `read_above_end`:
   `_read_offset`, `_committed_offset`, `_acked`, `_acked_index`, `_gap`): both
   brokers, found differently. Faust drops a fetched record below its read offset and
   an acknowledgement below its committed offset, so a log made again below them is
   never read, with lag 0. On Tansu the fetch position stays above the end; Kafka
   answers such a fetch with OFFSET_OUT_OF_RANGE and aiokafka moves the position back
   to the start, but Faust's read offset stays above the end. The source watch
   (pipeline.worker.watch) rewinds either (test_health_truth, both brokers).
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import time
from collections.abc import Coroutine, Iterable, MutableMapping, Set
from functools import partial
from typing import Any

from aiokafka import TopicPartition
from faust.stores.memory import Store as MemoryStore
from faust.tables import TableManager as FaustTableManager
from faust.tables.recovery import Recovery as FaustRecovery
from faust.transport.drivers.aiokafka import AIOKafkaConsumerThread
from faust.transport.drivers.aiokafka import Consumer as FaustConsumer
from faust.types import TP
from mode.services import WaitResults

log = logging.getLogger("canonflow")

#: What the worker logs, once, when it rebuilds its tables (see Recovery).
REBUILT = "rebuilding every table from its changelog as it is now"


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


def read_above_end(app: Any, tps: Iterable[Any]) -> dict[Any, tuple[int, int]]:
    """Each of `tps` whose read offset in Faust's books is above its partition's end
    (the high watermark of the last fetch): (read offset, end). Faust hands on no
    fetched record below its read offset, so none of such a partition's records is
    processed, wherever the consumer's fetch position is (11 above)."""
    consumer = app.consumer
    books = consumer._read_offset
    out: dict[Any, tuple[int, int]] = {}
    for tp in tps:
        read = books.get(tp)  # .get: the books are a defaultdict
        try:
            end = consumer.highwater(tp)
        except Exception:  # the consumer is not started, or lost the partition
            continue
        if isinstance(read, int) and isinstance(end, int) and 0 <= end < read:
            out[tp] = (read, end)
    return out


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


def tune_consumer(app: Any, fetch_wait: float | None) -> None:
    """The app's consumer with the longest a fetch waits for records (6 above; None:
    Faust's 1.5 s), its assignment converted once per assignment (7) and its changelog
    partitions paused in aiokafka as Faust pauses them (8). Set before the app starts
    its consumer."""
    wait_ms = None if fetch_wait is None else max(1, int(fetch_wait * 1000))

    class Thread(AIOKafkaConsumerThread):  # type: ignore[misc]
        # one per app (this class is): keyed by aiokafka's assignment, so it holds for
        # whichever consumer the thread runs; a class attribute, so that asking before
        # the consumer starts raises Faust's ConsumerNotStarted as before
        _assigned = AssignmentCache()

        def _create_worker_consumer(self, transport: Any) -> Any:
            consumer = super()._create_worker_consumer(transport)
            if wait_ms is not None:  # None: Faust's (Kafka answers when a record comes)
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
