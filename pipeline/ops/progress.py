"""What the worker's source partitions say about its progress, and when /health calls
that unhealthy.

A source partition is one the agents consume (a raw topic; agents.canonical for the
fleet stage). Four offsets describe it: the log's start and end as the broker gives
them, the consumer's fetch position (the next offset it asks for), and the offset this
worker last committed. The end is the high watermark of the last fetch response, not
ListOffsets(latest): the embedded Tansu answers that one short of the log end.

Lag is the records that wait: the end minus the committed offset, or minus the
position before the first commit (or when the commit is from a log that is gone: above
the end). A fetch position above the end means the log was made again below it (a broker
that lost its storage, a topic deleted and created again). Tansu answers a fetch there
with no records and no error, so nothing would ever be read: every record of the
partition waits, and lag is the end minus the start, never 0.

/health is unhealthy, with the reason, when
- a topic the worker owns is missing on the broker, or has fewer partitions than the
  deployment's partition count;
- a fetch position is above its partition's end;
- records wait in a partition (lag > 0, and not only a transaction's control records
  past everything processed) and its processed offset (the committed one, the position
  before the first commit) has not moved for more than `stuck_after` seconds
  (CANONFLOW_STUCK_AFTER).

The worker acts on each (pipeline.worker.watch). This module only judges: it does no
I/O, and the clock is an argument.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from typing import Any

from msgspec import Struct

#: How long the reads of one look at the partitions may take (the consumer's thread
#: answers them; during a rebalance a position waits for its reset).
READ_TIMEOUT = 2.0


class PartitionView(Struct, frozen=True, kw_only=True):
    """One source partition as the worker sees it; None where an offset is not known."""

    topic: str
    partition: int
    end: int | None
    position: int | None
    committed: int | None
    read: int | None = None  # the last offset handed to the agents
    start: int | None = None  # read only when the position is above the end

    @property
    def ahead(self) -> bool:
        """The fetch position is above the log's end: the log was made again below it."""
        return self.end is not None and self.position is not None and self.position > self.end

    @property
    def processed(self) -> int | None:
        """The offset up to which records count as processed: the committed one, or the
        position when nothing is committed or the commit is above the end."""
        if self.committed is not None and (self.end is None or self.committed <= self.end):
            return self.committed
        return self.position

    @property
    def lag(self) -> int | None:
        """Records of the partition that wait (None: the end is not known yet)."""
        if self.end is None:
            return None
        if self.ahead:  # read again from the start once the position is reset
            return max(0, self.end - (self.start or 0))
        done = self.processed
        return None if done is None else max(0, self.end - done)

    @property
    def waiting(self) -> bool:
        """Records wait for this worker: lag, unless every record up to the end is
        fetched and every one handed to the agents is committed. (The control records of
        a producer's transactions are never handed to a consumer: the last of them keeps
        the committed offset below the end for good.)"""
        if not self.lag:
            return False
        fetched = self.position is not None and self.end is not None \
            and self.position >= self.end
        done = self.read is not None and self.committed is not None \
            and self.committed > self.read
        return not (fetched and done)

    def name(self) -> str:
        return f"{self.topic}[{self.partition}]"


def missing_topics(owned: Iterable[str], present: Mapping[str, int], partitions: int
                   ) -> tuple[list[str], list[str]]:
    """(topics missing, `topic has n of m partitions` for those with fewer than
    `partitions`) among `owned`, given the broker's topics and their partition counts."""
    missing, short = [], []
    for topic in owned:
        n = present.get(topic)
        if n is None:
            missing.append(topic)
        elif n < partitions:
            short.append(f"{topic} has {n} of {partitions} partitions")
    return missing, short


def _listed(names: list[str], most: int = 5) -> str:
    more = len(names) - most
    return ", ".join(names[:most]) + (f" and {more} more" if more > 0 else "")


class Progress:
    """Follows each source partition's processed offset between looks, to tell a worker
    that processes nothing while records wait (`stuck`)."""

    def __init__(self, stuck_after: float):
        self.stuck_after = stuck_after
        # (topic, partition) -> (processed offset, monotonic time it was last seen move
        # or the partition was last seen with nothing waiting)
        self._marks: dict[tuple[str, int], tuple[int | None, float]] = {}

    def stuck(self, views: Iterable[PartitionView], now: float) -> list[PartitionView]:
        """The partitions whose records wait and whose processed offset has not moved
        for more than `stuck_after` seconds, as of `now` (monotonic)."""
        out = []
        seen = set()
        for v in views:
            key = (v.topic, v.partition)
            seen.add(key)
            done = v.processed
            mark = self._marks.get(key)
            if mark is None or mark[0] != done or not v.waiting:
                self._marks[key] = (done, now)
            elif now - mark[1] > self.stuck_after:
                out.append(v)
        for key in set(self._marks) - seen:  # revoked
            del self._marks[key]
        return out

    def since(self, view: PartitionView) -> float | None:
        mark = self._marks.get((view.topic, view.partition))
        return None if mark is None else mark[1]

    def forget(self) -> None:
        """Start over: nothing can be processed meanwhile (the broker away, a rebalance,
        an output delivery being sent again), so a wait then says nothing."""
        self._marks.clear()


def reasons(*, missing: list[str], short: list[str], ahead: list[PartitionView],
            stuck: list[PartitionView], progress: Progress, now: float) -> list[str]:
    """/health's reasons for what a look at the source partitions found."""
    out = []
    if missing:
        out.append(f"topics missing on the broker: {_listed(missing)}")
    if short:
        out.append(f"partitions missing on the broker: {_listed(short)}")
    if ahead:
        out.append("read position above the log end (the topic was made again): "
                   + _listed([f"{v.name()} at {v.position} > end {v.end}" for v in ahead]))
    if stuck:
        def still(v: PartitionView) -> float:
            since = progress.since(v)
            return 0.0 if since is None else now - since

        out.append("stuck: records wait and none was processed for more than "
                   f"{progress.stuck_after:g} s: " + _listed([
                       f"{v.name()} {v.lag} waiting, at {v.processed} for {still(v):.0f} s"
                       for v in stuck]))
    return out


async def _each_within(calls: list[Any], timeout: float) -> list[Any]:
    """Each call's result, or None for one that failed or did not end within `timeout`
    (it is cancelled, and what it raised is taken, so none is left unretrieved)."""
    tasks = [asyncio.ensure_future(c) for c in calls]
    if not tasks:
        return []
    _, pending = await asyncio.wait(tasks, timeout=timeout)
    for task in pending:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return [None if t.cancelled() or t.exception() is not None else t.result() for t in tasks]


async def read_partitions(app: Any, tps: Iterable[Any]) -> list[PartitionView]:
    """The partitions `tps` as the app's consumer sees them (Faust's public consumer API:
    highwater, position, earliest_offsets; the monitor's committed offsets)."""
    tps = sorted(tps)
    consumer = app.consumer
    committed = getattr(app.monitor, "tp_committed_offsets", {}) or {}
    read = getattr(app.monitor, "tp_read_offsets", {}) or {}

    def end_of(tp: Any) -> int | None:
        try:
            high = consumer.highwater(tp)
        except Exception:  # the consumer is not started, or lost the partition
            return None
        return high if isinstance(high, int) and high >= 0 else None

    positions = await _each_within([consumer.position(tp) for tp in tps], READ_TIMEOUT)
    views = [PartitionView(topic=tp.topic, partition=tp.partition, end=end_of(tp),
                           position=pos if isinstance(pos, int) and pos >= 0 else None,
                           committed=committed.get(tp), read=read.get(tp))
             for tp, pos in zip(tps, positions, strict=True)]
    ahead = [tp for tp, v in zip(tps, views, strict=True) if v.ahead]
    if ahead:
        try:
            starts = await asyncio.wait_for(consumer.earliest_offsets(*ahead),
                                            timeout=READ_TIMEOUT)
        except Exception:  # a timeout, the broker away: lag counts from offset 0
            starts = {}
        views = [v if not v.ahead else PartitionView(
            topic=v.topic, partition=v.partition, end=v.end, position=v.position,
            committed=v.committed, read=v.read, start=starts.get(tp)) for tp, v in zip(tps, views,
                                                                          strict=True)]
    return views
