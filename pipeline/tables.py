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

It also holds the one correction canonflow makes to Faust's table recovery
(`Recovery`, below): without it a restarted worker can lose raw records.
"""

from __future__ import annotations

import weakref
from typing import Any

from faust.streams import _current_event
from faust.tables import TableManager as FaustTableManager
from faust.tables.recovery import Recovery as FaustRecovery

from topics.catalog import changelog_spec


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
    """Faust's recovery, with the consumer's flow stopped while it seeks the stream
    partitions back to their committed offsets.

    When a worker starts (or gains partitions), Faust's `on_recovery_completed` resumes
    the raw partitions and then awaits `perform_seek`, a broker round trip, with the
    consumer's flow already active (resumed to read the changelogs). Records fetched
    meanwhile reach the agents. When the seek returns, it sets each partition's read
    offset back to the committed offset, and the next record that was fetched before
    the seek looks like a jump past a gap: Faust acknowledges the "gap" and commits past
    records this worker never processed. They are never read again (faust-streaming
    issue 596 describes the same family of races). Observed here: the SIGTERM test
    restarted a worker, which skipped raw records and published fewer events than the
    offline replay.

    With the flow stopped during the seek, no record arrives while the read offsets are
    reset: the fetcher waits, the records in flight are dropped unprocessed, and reading
    resumes at the committed offsets (the records processed since are read again and
    skipped by the sessions' watermarks). Faust's `on_recovery_completed` resumes the
    flow itself once the seek is done."""

    async def on_recovery_completed(self, generation_id: int = 0) -> None:
        self.app.consumer.stop_flow()
        await super().on_recovery_completed(generation_id)


class TableManager(FaustTableManager):
    """Faust's table manager with `Recovery` as its recovery service (the app's
    `TableManager` setting)."""

    @property
    def recovery(self) -> FaustRecovery:
        if self._recovery is None:
            self._recovery = Recovery(self.app, self, beacon=self.beacon, loop=self.loop)
        return self._recovery
