"""Reading `agents.canonical` and `agents.chat` as a consumer should, without the I/O:
typed events, duplicates dropped, gaps said, offsets committed only for what was
handled (docs "Consuming canonflow"). `pipeline.cluster.consumer.Consumer` runs this
over aiokafka; anything else that reads Kafka can feed `Tracker` itself.

Duplicates. A worker that crashes publishes again what it had not acknowledged, with
the same eventIds, on the partition of the originals and after them (docs
"Reliability"). An eventId is its session life's prefix (a hash of provider, session
and the life's first record time: a session closed for idleness and started again is
a new life, its seq from 1 again) followed by `seq` in its last 12 hex digits. So the
Tracker remembers, per life and per partition, the seqs it has handed out, as ranges
of consecutive seqs: a session read in order is one range, whatever its length. An
event is a copy when its seq lies in a range of its own life on its own partition:
that exact eventId was handed out there before. Nothing else is a copy. A seq far
past the others (a forged or damaged event) is handed out, opens a range of its own
and hides nothing below it; the same eventId on another partition is handed out too
(a worker never publishes a copy there).

Memory. A life keeps at most `MAX_RANGES` ranges across its partitions (two ints
each), whatever its seqs: a jump costs one range, never anything proportional to its
size. Past that bound the shortest range is forgotten (the highest first among
equals: a forged seq lies above the session's own): a later copy of one of its seqs would be handed out again, a duplicate but
never a loss. The lives remembered are bounded too (least recently seen forgotten
first, `max_lives`).

Gaps. A life's seqs are merged across its partitions: an event whose seq - 1 was not
seen on any of them is past a gap, and the Tracker yields a `Gap` before it, an
explicit value, never a log line (`after`: the highest seq seen below it). A life
seen for the first time with seq > 1 is a gap only when everything of its partition
was read from the partition's first offset and no life was forgotten; otherwise its
start may simply lie before what was read. A session whose records moved to another
partition (the worker says so in a runtime.warning) has its events on two partitions;
read out of seq order, the later partition first, its earlier events come after a
Gap that names them: a Gap says what had not been seen when the event past it came.
(`pipeline.cluster.consumer.merged` feeds one fetch's records of such a life in seq
order, so this happens only across fetches.)

Commits and restarts. The caller marks what it handled (`handled`); `commits` gives,
per partition, the end of the contiguous prefix of handled records (duplicates and
the copies dropped count as handled: nothing to do). Committing only that
prefix means everything at or past the committed offset was not handled, whatever
order the caller handled things in. After a restart the only records to drop are the
copies of handled events that a worker's crash published past the committed offset;
their originals lie just before it. So the reader reads the partition's last
`lookback` records before the committed offset back into `history` (their seqs only,
nothing handed out), then goes on from the committed offset. A copy lies at most a
worker's undelivered output after its original (the batches it had not acknowledged),
far below the default lookback.

Schema evolution (docs "Schema evolution"): unknown fields are ignored (msgspec); an
event of a type this version does not know, or whose values it cannot take (a new
enum value), is yielded as `Unknown` with its envelope and bytes, deduplicated and
gap-checked like any event; a record that is not an event at all is `Unknown` without
an envelope. Nothing raises.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Union

import msgspec
from msgspec import Struct

from topics.canonical import CanonicalEvent, decode_event
from topics.catalog import CHAT_TOPIC
from topics.chat import ChatRecord, decode_chat

#: A topic partition: (topic, partition).
TopicPartition = tuple[str, int]
#: Length of an eventId's session-life prefix (a UUID without its last 12 hex digits).
LIFE_PREFIX = 24
#: Session lives remembered by default (about 500 bytes each for a life read in order,
#: 3 KB at most: MAX_RANGES ranges on as many partitions).
DEFAULT_MAX_LIVES = 100_000
#: Ranges of seqs seen that one session life keeps, across its partitions.
MAX_RANGES = 16


class Gap(Struct, frozen=True, kw_only=True):
    """Events of a session life never seen: seq `after` + 1 to `before` - 1. Yielded just
    before the event with seq `before` (at `offset` of `topic` `partition`). `after` is
    0 when the life was first seen at `before`. Nothing to mark handled."""

    topic: str
    partition: int
    offset: int
    sessionId: str
    after: int
    before: int

    @property
    def missing(self) -> int:
        return self.before - self.after - 1


class Unknown(Struct, frozen=True, kw_only=True):
    """A record this version cannot type: an event type it does not know, values it
    cannot take (`reason` says which), or no event at all (`type` and the envelope None;
    a tombstone too, its `value` empty). `value` is the record's bytes. Mark it handled
    like an event."""

    topic: str
    partition: int
    offset: int
    reason: str
    value: bytes
    type: str | None = None
    sessionId: str | None = None
    eventId: str | None = None
    seq: int | None = None


#: What a Tracker hands out: a canonical event, a chat record, a Gap or an Unknown.
Item = Union[CanonicalEvent, ChatRecord, Gap, Unknown]


class _Envelope(Struct, kw_only=True):
    """The fields every canonical event has, under any schema version."""

    type: str
    eventId: str
    seq: int
    sessionId: str


class _ChatEnvelope(Struct, kw_only=True):
    type: str
    event_id: str
    seq: int
    session_id: str


_envelope = msgspec.json.Decoder(_Envelope).decode
_chat_envelope = msgspec.json.Decoder(_ChatEnvelope).decode


def decode(topic: str, partition: int, offset: int, value: bytes
           ) -> CanonicalEvent | ChatRecord | Unknown:
    """One record of agents.canonical (or agents.chat: `topic`) typed; never raises."""
    chat = topic == CHAT_TOPIC
    try:
        return decode_chat(value) if chat else decode_event(value)
    except (msgspec.DecodeError, msgspec.ValidationError) as e:
        reason = str(e)
    try:
        if chat:
            c = _chat_envelope(value)
            env = (c.type, c.event_id, c.seq, c.session_id)
        else:
            v = _envelope(value)
            env = (v.type, v.eventId, v.seq, v.sessionId)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return Unknown(topic=topic, partition=partition, offset=offset, reason=reason,
                       value=value)
    return Unknown(topic=topic, partition=partition, offset=offset, reason=reason, value=value,
                   type=env[0], eventId=env[1], seq=env[2], sessionId=env[3])


def identity(item: CanonicalEvent | ChatRecord | Unknown) -> tuple[str, str, int] | None:
    """(session id, event id, seq) of a record, None for an Unknown without envelope."""
    if isinstance(item, Unknown):
        if item.eventId is None or item.sessionId is None or item.seq is None:
            return None
        return item.sessionId, item.eventId, item.seq
    if hasattr(item, "eventId"):
        return item.sessionId, item.eventId, item.seq  # type: ignore[union-attr]
    return item.session_id, item.event_id, item.seq  # type: ignore[union-attr]


def life(topic: str, event_id: str) -> str:
    """The session life an event id belongs to, per topic (a life's chat records have
    a seq of their own; their ids start with their canonical event's)."""
    prefix = event_id[:LIFE_PREFIX]
    return prefix + "c" if topic == CHAT_TOPIC else prefix


def _history_identity(topic: str, value: bytes) -> tuple[str, int] | None:
    """(event id, seq) of a record read back for its seq: the envelope alone."""
    try:
        if topic == CHAT_TOPIC:
            c = _chat_envelope(value)
            return c.event_id, c.seq
        v = _envelope(value)
        return v.eventId, v.seq
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None


def position(topic: str, value: bytes | None) -> tuple[str, int] | None:
    """(session life, seq) of a record from its envelope alone; None for a record that
    has none. What a reader orders a life's records of several partitions by."""
    ident = _history_identity(topic, value) if value is not None else None
    return (life(topic, ident[0]), ident[1]) if ident is not None else None


class _Partition:
    """The offsets of one partition handed out and not yet committed, in order, each
    with whether it was handled: the committable end is where the first unhandled one
    is (a dict keeps insertion order: popping its front is O(1))."""

    __slots__ = ("open", "end", "committed", "complete")

    def __init__(self, committed: int, complete: bool):
        self.open: dict[int, bool] = {}
        self.end = committed  # the offset after the contiguous handled prefix
        self.committed = committed  # the offset last committed (or resumed from)
        self.complete = complete  # read from the partition's first offset

    def advance(self) -> None:
        while self.open:
            first = next(iter(self.open))
            if not self.open[first]:
                return
            del self.open[first]
            self.end = first + 1


class _Life:
    """The seqs one session life was seen with, per topic partition: sorted, disjoint
    ranges of consecutive seqs, a flat list [lo, hi, lo, hi, ...] per partition, at
    most MAX_RANGES in all (see the module doc, "Memory")."""

    __slots__ = ("ranges", "count")

    def __init__(self) -> None:
        self.ranges: dict[TopicPartition, list[int]] = {}
        self.count = 0

    def has(self, tp: TopicPartition, seq: int) -> bool:
        """`seq` was seen on `tp`."""
        r = self.ranges.get(tp)
        if r is None:
            return False
        for i in range(len(r) - 2, -1, -2):  # the last range first: a copy is recent
            if r[i] <= seq:
                return seq <= r[i + 1]
        return False

    def highest_below(self, seq: int) -> int | None:
        """The highest seq below `seq` seen on any partition (None: none)."""
        best: int | None = None
        for r in self.ranges.values():
            for i in range(0, len(r), 2):
                if r[i] < seq:
                    top = min(r[i + 1], seq - 1)
                    if best is None or top > best:
                        best = top
        return best

    def add(self, tp: TopicPartition, seq: int) -> None:
        """`seq` is seen on `tp` (not seen there before)."""
        r = self.ranges.get(tp)
        if r is None:
            self.ranges[tp] = [seq, seq]
        elif r[-1] == seq - 1:  # in order: the usual case
            r[-1] = seq
            return
        else:
            i = 0
            while i < len(r) and r[i] < seq:
                i += 2
            joins_before = i > 0 and r[i - 1] == seq - 1
            joins_after = i < len(r) and r[i] == seq + 1
            if joins_before and joins_after:
                r[i - 1] = r[i + 1]
                del r[i:i + 2]
                self.count -= 1
                return
            if joins_before:
                r[i - 1] = seq
                return
            if joins_after:
                r[i] = seq
                return
            r[i:i] = [seq, seq]
        self.count += 1
        if self.count > MAX_RANGES:
            self._forget_one()

    def _forget_one(self) -> None:
        """Forget the shortest range (the highest among equals: a forged seq lies far
        above the session's own)."""
        worst: tuple[int, int, TopicPartition, int] | None = None
        for tp, r in self.ranges.items():
            for i in range(0, len(r), 2):
                rank = (r[i + 1] - r[i], -r[i])
                if worst is None or rank < worst[:2]:
                    worst = (*rank, tp, i)
        assert worst is not None
        tp, i = worst[2], worst[3]
        r = self.ranges[tp]
        del r[i:i + 2]
        if not r:
            del self.ranges[tp]
        self.count -= 1


class Tracker:
    """Dedupe, gap detection and handled offsets of one reader (see the module doc).

    Feed it the records of assigned partitions in offset order: `history` for records
    before the committed offset (already handled: their seqs only), `feed` for the rest
    (returns what to hand out). Cost per record: a dict lookup, an LRU move and a look
    at the life's last range; memory: at most MAX_RANGES ranges per remembered life
    (one for a session read in order) plus the offsets handed out and not yet
    committed. With `offsets` False (a reader that commits nothing, as `canonflow
    tail`), no offset is kept at all: `handled` and `commits` have nothing to do, and
    memory does not grow with the records read."""

    def __init__(self, *, max_lives: int = DEFAULT_MAX_LIVES, offsets: bool = True):
        self.max_lives = max_lives
        self.offsets = offsets
        self.lives: OrderedDict[str, _Life] = OrderedDict()  # life prefix -> seqs seen
        self.forgot = False  # a life was forgotten: a first sight may not be a first
        self.partitions: dict[TopicPartition, _Partition] = {}
        # eventId -> where it was handed out and not yet handled; the same eventId
        # handed out again on another partition waits in _more, in order
        self._where: dict[str, tuple[TopicPartition, int]] = {}
        self._more: dict[str, list[tuple[TopicPartition, int]]] = {}
        self.duplicates = 0
        self.gaps = 0

    def assigned(self, tp: TopicPartition, committed: int, *, complete: bool) -> None:
        """`tp` is read from `committed` on (its history before, if any, first);
        `complete`: nothing of it before `committed` - lookback is left unread."""
        self.partitions[tp] = _Partition(committed, complete)

    def revoked(self, tp: TopicPartition) -> None:
        """`tp` went to another reader: forget its offsets (not the seqs seen on it)."""
        part = self.partitions.pop(tp, None)
        if part is not None:
            open_there = [(e, w) for e, w in self._where.items() if w[0] == tp]
            open_there += [(e, w) for e, ws in self._more.items() for w in ws if w[0] == tp]
            for eid, where in open_there:
                self._release(eid, where)

    def history(self, tp: TopicPartition, value: bytes | None) -> None:
        """A record before the committed offset: handled earlier, its seq was seen."""
        ident = _history_identity(tp[0], value) if value is not None else None
        if ident is not None:
            seen = self._life(life(tp[0], ident[0]))
            if not seen.has(tp, ident[1]):
                seen.add(tp, ident[1])

    def feed(self, tp: TopicPartition, offset: int, value: bytes | None) -> list[Item]:
        """The items one record gives: nothing (a copy), the event (Unknown for what is
        no event of this version, a tombstone too), or a Gap and then the event."""
        part = self.partitions.get(tp)
        if part is None:
            part = self.partitions[tp] = _Partition(offset, complete=offset == 0)
        item = decode(tp[0], tp[1], offset, value) if value is not None else Unknown(
            topic=tp[0], partition=tp[1], offset=offset, reason="no value (a tombstone)",
            value=b"")
        ident = identity(item)
        if ident is None:
            if self.offsets:
                part.open[offset] = False
            return [item]
        session, eid, seq = ident
        seen = self._life(life(tp[0], eid))
        if seen.has(tp, seq):
            self.duplicates += 1
            if self.offsets:
                part.open[offset] = True
                part.advance()
            return []
        below = seen.highest_below(seq)
        seen.add(tp, seq)
        if self.offsets:
            part.open[offset] = False
            self._hand_out(eid, (tp, offset))
        if (below < seq - 1) if below is not None else (
                seq > 1 and part.complete and not self.forgot):
            self.gaps += 1
            return [Gap(topic=tp[0], partition=tp[1], offset=offset, sessionId=session,
                        after=below or 0, before=seq), item]
        return [item]

    def handled(self, item: Item) -> None:
        """The caller is done with `item`: its offset may be committed once every earlier
        one of its partition is. A Gap needs no marking (ignored); marking twice, or an
        item of a partition since revoked, does nothing."""
        if isinstance(item, Gap):
            return
        if isinstance(item, Unknown):
            tp: TopicPartition = (item.topic, item.partition)
            offset = item.offset
            if item.eventId is not None:
                self._release(item.eventId, (tp, offset))
        else:
            ident = identity(item)
            where = self._release(ident[1]) if ident is not None else None
            if where is None:
                return
            tp, offset = where
        part = self.partitions.get(tp)
        if part is not None and offset in part.open:
            part.open[offset] = True
            part.advance()

    def commits(self) -> dict[TopicPartition, int]:
        """Per partition whose handled prefix grew since the last commit, the offset to
        commit (the next record to read after a restart)."""
        return {tp: p.end for tp, p in self.partitions.items() if p.end > p.committed}

    def committed(self, offsets: dict[TopicPartition, int]) -> None:
        """`offsets` (from `commits`) are committed."""
        for tp, end in offsets.items():
            part = self.partitions.get(tp)
            if part is not None:
                part.committed = max(part.committed, end)

    def _life(self, key: str) -> _Life:
        """The seqs seen of life `key`, most recently seen now (a new one if forgotten)."""
        seen = self.lives.get(key)
        if seen is None:
            seen = self.lives[key] = _Life()
            if len(self.lives) > self.max_lives:
                self.lives.popitem(last=False)
                self.forgot = True
        else:
            self.lives.move_to_end(key)
        return seen

    def _hand_out(self, eid: str, where: tuple[TopicPartition, int]) -> None:
        if eid in self._where:
            self._more.setdefault(eid, []).append(where)
        else:
            self._where[eid] = where

    def _release(self, eid: str, at: tuple[TopicPartition, int] | None = None
                 ) -> tuple[TopicPartition, int] | None:
        """Forget where `eid` was handed out: at `at`, or (None) the earliest place it
        is still open. Returns that place, None if there is none."""
        where = self._where.get(eid)
        if where is None:
            return None
        more = self._more.get(eid)
        if at is None or at == where:
            if more:
                self._where[eid] = more.pop(0)
                if not more:
                    del self._more[eid]
            else:
                del self._where[eid]
            return where
        if more and at in more:
            more.remove(at)
            if not more:
                del self._more[eid]
            return at
        return None
