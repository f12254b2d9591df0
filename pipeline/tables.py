"""Table reads and writes for records handled in batches.

Faust's stores find the partition of a key from the *current event* (the public
`faust.streams.current_event()`): the RocksDB store reads and writes the partition
database of the event being processed, and the table sends the changelog record to
that partition. Inside a stream that is the record being iterated; in a batch from
`take_events` it is the batch's last record, whatever partition the key belongs to.
So before touching a session's entry, the agent names the record it belongs to.

This module is the one place that sets Faust's current-event context variable
(`faust.streams._current_event`, the variable `current_event()` reads), as Faust's
own stream iteration does for every record.

It also holds the two corrections canonflow makes to Faust's table recovery
(`Recovery`, below): without them a restarted worker can lose raw records, and a
broker that lost its changelogs stops the worker for good.
"""

from __future__ import annotations

import logging
import time
import weakref
from collections.abc import Iterable, MutableMapping, Set
from typing import Any

from faust.stores.memory import Store as MemoryStore
from faust.streams import _current_event
from faust.tables import TableManager as FaustTableManager
from faust.tables.recovery import Recovery as FaustRecovery

from topics.catalog import changelog_spec

log = logging.getLogger("canonflow")

#: What the worker logs, once, when it rebuilds its tables (see Recovery).
REBUILT = "rebuilding every table from its changelog as it is now"


def add_table(app: Any, settings: Any, name: str) -> Any:
    """The worker's table `name` (bytes keys and values, default None), co-partitioned
    with the raw topics, its changelog declared with the catalog's configuration
    (topics.catalog.changelog_spec: compacted, an explicit max.message.bytes)."""
    return app.Table(name, partitions=settings.partitions, key_type=bytes, value_type=bytes,
                     default=None,
                     extra_topic_configs=changelog_spec(settings.app_id, name).config())


def acting_for(event: Any) -> None:
    """Make `event` the current event of this task (table partition = its partition)."""
    _current_event.set(weakref.ref(event))


class _StandIn:
    """What Faust's stores read of a current event: `event.message.partition`."""

    __slots__ = ("partition", "__weakref__")

    def __init__(self, partition: int):
        self.partition = partition

    @property
    def message(self) -> _StandIn:
        return self


def partition_stand_in(partition: int) -> Any:
    """A stand-in for a record of `partition`, for table writes no record carries (the
    idle scan's): pass it to `acting_for`, and keep it referenced while it acts."""
    return _StandIn(partition)


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
    again (faust-streaming issue 596 describes the same family of races). Observed here:
    the SIGTERM test restarted a worker, which skipped raw records and published fewer
    events than the offline replay. With the flow stopped during the seek, no record
    arrives while the read offsets are reset: the fetcher waits, the records in flight
    are dropped unprocessed, and reading resumes at the committed offsets (the records
    processed since are read again and skipped by the sessions' watermarks). Faust's
    `on_recovery_completed` resumes the flow itself once the seek is done.

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
        self.app.consumer.stop_flow()
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
