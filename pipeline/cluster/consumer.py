"""The consumer library: agents.canonical (and agents.chat) as typed events, over aiokafka
(docs "Consuming canonflow"). Imports aiokafka and msgspec only (never Faust), so a
consumer service depends on canonflow's contract, not on its worker.

    async with Consumer.connect("kafka:9092", group="billing") as events:
        async for event in events:
            match event:
                case Gap():
                    alert(f"{event.sessionId}: {event.missing} event(s) missing")
                case TurnCompleted():
                    bill(event.sessionId, event.payload.cost)
            events.handled(event)          # committed once all before it are handled

What it does, and why it is enough, is in topics.consumer (the part without I/O):
a copy is a seq already seen for its session life on its own partition and is
dropped, gaps (merged across partitions) are yielded as `Gap`, unknown types as
`Unknown`, and only the contiguous prefix of handled records is committed, so that a
restart reads on from the first record not handled; the `lookback` records before the
committed offset are read back first, for their seqs only, so that the copies a
crashed worker published past it are dropped too.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import AsyncIterator, Iterable, Iterator
from types import TracebackType
from typing import Any

from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition

from topics.catalog import CANONICAL_TOPIC
from topics.consumer import DEFAULT_MAX_LIVES, Item, Tracker, position

#: Records before the committed offset read back on resume, per partition (see the
#: module doc): far more than a worker publishes again after a crash (its batches not
#: acknowledged), about 1 KB each to read once.
DEFAULT_LOOKBACK = 10_000
#: Seconds between the commits the iterator makes itself of what was marked handled.
DEFAULT_COMMIT_INTERVAL = 2.0


class Consumer:
    """An async iterator of typed items (topics.consumer.Item) over `topics`.

    With a `group`, offsets are committed to it (only what was marked `handled`: by
    `commit()`, every `commit_interval` seconds while iterating, and when the consumer
    stops or loses a partition), and a restart resumes from them. Without one, it reads
    from the beginning (or from now) and commits nothing, as `canonflow tail` does.

    Iteration ends after `idle_timeout` seconds without a record (None: never). Raises
    what aiokafka raises when the cluster cannot be reached."""

    def __init__(self, *topics: str, group: str | None = None, from_beginning: bool = True,
                 lookback: int = DEFAULT_LOOKBACK, max_lives: int = DEFAULT_MAX_LIVES,
                 commit_interval: float | None = DEFAULT_COMMIT_INTERVAL,
                 idle_timeout: float | None = None, poll_ms: int = 200, **client: Any):
        self.topics = topics or (CANONICAL_TOPIC,)
        self.group, self.from_beginning = group, from_beginning
        self.lookback, self.commit_interval = lookback, commit_interval
        self.idle_timeout, self.poll_ms = idle_timeout, poll_ms
        self.client = client
        # without a group nothing is committed: no offset needs keeping
        self.tracker = Tracker(max_lives=max_lives, offsets=group is not None)
        self._consumer: Any = None
        self._ready: deque[tuple[Item, Any]] = deque()
        self._resume_at: dict[tuple[str, int], int] = {}  # history below this offset
        self._last_commit = self._last_record = time.monotonic()

    @classmethod
    def connect(cls, bootstrap_servers: str, *topics: str, **options: Any) -> Consumer:
        """A consumer of a cluster at `bootstrap_servers` (other aiokafka client options,
        TLS and SASL, pass through `options`)."""
        return cls(*topics, bootstrap_servers=bootstrap_servers, **options)

    async def start(self) -> Consumer:
        self._consumer = AIOKafkaConsumer(
            **self.client, group_id=self.group, enable_auto_commit=False,
            auto_offset_reset="earliest" if self.from_beginning else "latest")
        if self.group is None:
            self._consumer.subscribe(list(self.topics))
        else:
            self._consumer.subscribe(list(self.topics), listener=_Listener(self))
        try:
            await self._consumer.start()
        except BaseException:  # no broker answers: nothing left open behind the error
            consumer, self._consumer = self._consumer, None
            await consumer.stop()
            raise
        self._last_commit = self._last_record = time.monotonic()
        return self

    async def stop(self, *, commit: bool = True) -> None:
        """Commit what was handled (unless `commit` is False), then leave the group."""
        consumer, self._consumer = self._consumer, None
        if consumer is None:
            return
        try:
            if commit:
                await self._commit(consumer)
        finally:
            await consumer.stop()

    async def __aenter__(self) -> Consumer:
        return await self.start()

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.stop()

    def __aiter__(self) -> AsyncIterator[Item]:
        return self._items()

    async def _items(self) -> AsyncIterator[Item]:
        async for item, _ in self.records():
            yield item

    async def records(self) -> AsyncIterator[tuple[Item, Any]]:
        """The items with the aiokafka ConsumerRecord each came from (a Gap: the record
        of the event after it), for readers that want the record's bytes or time."""
        while True:
            while self._ready:
                yield self._ready.popleft()
            if not await self._fetch():
                return

    def handled(self, item: Item) -> None:
        """Done with `item` (topics.consumer.Tracker.handled)."""
        self.tracker.handled(item)

    async def commit(self) -> dict[tuple[str, int], int]:
        """Commit, per partition, the offset after its contiguous prefix of handled
        records; returns what was committed. Nothing without a group."""
        return await self._commit(self._consumer)

    async def _commit(self, consumer: Any) -> dict[tuple[str, int], int]:
        self._last_commit = time.monotonic()
        offsets = self.tracker.commits()
        if self.group is None or not offsets or consumer is None:
            return {}
        await consumer.commit({TopicPartition(*tp): end for tp, end in offsets.items()})
        self.tracker.committed(offsets)
        return offsets

    async def _fetch(self) -> bool:
        """Read the next records into the ready queue; False when iteration ends."""
        while not self._ready:
            now = time.monotonic()
            if self.idle_timeout is not None and now - self._last_record > self.idle_timeout:
                return False
            if (self.group is not None and self.commit_interval is not None
                    and now - self._last_commit >= self.commit_interval):
                await self._commit(self._consumer)
            batch = await self._consumer.getmany(timeout_ms=self.poll_ms)
            for tp, rec in merged(batch):
                self._take(tp, rec)
        return True

    def _take(self, tp: Any, rec: Any) -> None:
        key = (tp.topic, tp.partition)
        self._last_record = time.monotonic()
        if rec.offset < self._resume_at.get(key, -1):
            self.tracker.history(key, rec.value)
            return
        self._ready.extend((item, rec) for item in self.tracker.feed(key, rec.offset,
                                                                     rec.value))

    async def _assigned(self, assigned: Iterable[Any]) -> None:
        """Each new partition resumes at its committed offset, its `lookback` records
        before it read back first (history); one without a commit starts at the
        beginning (or the end: from_beginning=False)."""
        tps = list(assigned)
        if not tps:
            return
        consumer = self._consumer
        firsts = await consumer.beginning_offsets(tps)
        for tp in tps:
            key, first = (tp.topic, tp.partition), firsts[tp]
            committed = await consumer.committed(tp)
            if committed is None:
                if self.from_beginning:
                    consumer.seek(tp, first)
                    self.tracker.assigned(key, first, complete=True)
                else:
                    end = (await consumer.end_offsets([tp]))[tp]
                    consumer.seek(tp, end)
                    self.tracker.assigned(key, end, complete=False)
                continue
            start = max(first, committed - self.lookback)
            consumer.seek(tp, start)
            self._resume_at[key] = committed
            self.tracker.assigned(key, committed, complete=start == first)

    async def _revoked(self, revoked: Iterable[Any]) -> None:
        """Commit what was handled before the partitions go; forget what was handed out
        of them and not handled (the next owner reads it)."""
        tps = [(tp.topic, tp.partition) for tp in revoked]
        if not tps:
            return
        await self._commit(self._consumer)
        for key in tps:
            self.tracker.revoked(key)
            self._resume_at.pop(key, None)
        self._ready = deque(x for x in self._ready if (x[1].topic, x[1].partition) not in tps)


def merged(batch: dict[Any, list[Any]]) -> Iterator[tuple[Any, Any]]:
    """The records of one fetch, as (topic partition, record): each partition's in
    offset order, and a session life's records on several partitions (its raw records
    moved) in seq order between them, as far as the partitions' own orders allow. So
    the events of a session published on two partitions come as the worker published
    them, and no Gap is said for seqs that are in the same fetch. Only the records of a
    key found on several partitions of the fetch are decoded (their envelope)."""
    tps = sorted(batch, key=lambda tp: (tp.topic, tp.partition))
    first_on: dict[tuple[str, Any], Any] = {}
    shared: set[tuple[str, Any]] = set()
    for tp in tps:
        for rec in batch[tp]:
            if first_on.setdefault((tp.topic, rec.key), tp) != tp:
                shared.add((tp.topic, rec.key))
    if not shared:
        for tp in tps:
            for rec in batch[tp]:
                yield tp, rec
        return
    queues: dict[Any, deque[tuple[Any, tuple[str, int] | None]]] = {}
    # per life, per partition: the seqs not yet yielded, in offset order
    waiting: dict[str, dict[Any, deque[int]]] = {}
    for tp in tps:
        queue = queues[tp] = deque()
        for rec in batch[tp]:
            pos = position(tp.topic, rec.value) if (tp.topic, rec.key) in shared else None
            queue.append((rec, pos))
            if pos is not None:
                waiting.setdefault(pos[0], {}).setdefault(tp, deque()).append(pos[1])

    def take(tp: Any) -> Any:
        rec, pos = queues[tp].popleft()
        if pos is not None:
            waiting[pos[0]][tp].popleft()
        return rec

    while True:
        moved = False
        for tp in tps:
            queue = queues[tp]
            while queue:
                pos = queue[0][1]
                if pos is not None and any(
                        other != tp and seqs and seqs[0] < pos[1]
                        for other, seqs in waiting[pos[0]].items()):
                    break  # a lower seq of its life waits on another partition
                moved = True
                yield tp, take(tp)
        if not moved:  # every partition's next record waits on another: take one
            tp = next((tp for tp in tps if queues[tp]), None)
            if tp is None:
                return
            yield tp, take(tp)


class _Listener(ConsumerRebalanceListener):  # type: ignore[misc]
    """Tells the Consumer when partitions come and go (aiokafka awaits these)."""

    def __init__(self, owner: Consumer):
        self.owner = owner

    async def on_partitions_revoked(self, revoked: Any) -> None:
        await self.owner._revoked(revoked)

    async def on_partitions_assigned(self, assigned: Any) -> None:
        await self.owner._assigned(assigned)

