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
"""

from __future__ import annotations

import weakref
from typing import Any

from faust.streams import _current_event


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
