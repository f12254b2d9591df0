"""Reading `agents.canonical` and `agents.chat` as a consumer should, without the I/O:
typed events, duplicates dropped, gaps said, offsets committed only for what was
handled (README "Consuming canonflow"). `pipeline.cluster.consumer.Consumer` runs this
over aiokafka; anything else that reads Kafka can feed `Tracker` itself.

Duplicates. A worker that crashes publishes again what it had not acknowledged, with
the same eventIds (README "Reliability"). An eventId is its session life's prefix
(a hash of provider, session and the life's first record time: a session closed for
idleness and started again is a new life, its seq from 1 again) followed by `seq` in
its last 12 hex digits, and seq is gapless per life and published in order within a
partition (a copy comes after its original). So remembering, per life, the last seq
handed out is enough to know every earlier eventId of that life was handed out: a
record at or below it is a copy. That is one integer per life, not a set of ids; the
lives remembered are bounded (least recently seen forgotten first, `max_lives`).

Gaps. An event whose seq is more than one past its life's last is a gap: the Tracker
yields a `Gap` before the event, an explicit value, never a log line. A life seen for
the first time with seq > 1 is a gap only when everything of its partition was read
from the partition's first offset and no life was forgotten; otherwise its start may
simply lie before what was read.

Commits and restarts. The caller marks what it handled (`handled`); `commits` gives,
per partition, the end of the contiguous prefix of handled records (duplicates and
the copies dropped count as handled: nothing to do). Committing only that
prefix means everything at or past the committed offset was not handled, whatever
order the caller handled things in. After a restart the only records to drop are the
copies of handled events that a worker's crash published past the committed offset;
their originals lie just before it. So the reader reads the partition's last
`lookback` records before the committed offset back into `history` (seq floors only,
nothing handed out), then goes on from the committed offset. A copy lies at most a
worker's undelivered output after its original (the batches it had not acknowledged),
far below the default lookback.

Schema evolution (README "Schema evolution"): unknown fields are ignored (msgspec); an
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
#: Session lives remembered by default (about 100 bytes each).
DEFAULT_MAX_LIVES = 100_000


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
    """(event id, seq) of a record read back for its floor: the envelope alone."""
    try:
        if topic == CHAT_TOPIC:
            c = _chat_envelope(value)
            return c.event_id, c.seq
        v = _envelope(value)
        return v.eventId, v.seq
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None


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


class Tracker:
    """Dedupe, gap detection and handled offsets of one reader (see the module doc).

    Feed it the records of assigned partitions in offset order: `history` for records
    before the committed offset (already handled: seq floors only), `feed` for the rest
    (returns what to hand out). Cost per record: a dict lookup and an LRU move; memory:
    one int per remembered life plus the offsets handed out and not yet committed."""

    def __init__(self, *, max_lives: int = DEFAULT_MAX_LIVES):
        self.max_lives = max_lives
        self.floors: OrderedDict[str, int] = OrderedDict()  # life prefix -> last seq
        self.forgot = False  # a life was forgotten: a first sight may not be a first
        self.partitions: dict[TopicPartition, _Partition] = {}
        self._where: dict[str, tuple[TopicPartition, int]] = {}  # eventId -> handed out at
        self.duplicates = 0
        self.gaps = 0

    def assigned(self, tp: TopicPartition, committed: int, *, complete: bool) -> None:
        """`tp` is read from `committed` on (its history before, if any, first);
        `complete`: nothing of it before `committed` - lookback is left unread."""
        self.partitions[tp] = _Partition(committed, complete)

    def revoked(self, tp: TopicPartition) -> None:
        """`tp` went to another reader: forget its offsets (not its lives' floors)."""
        part = self.partitions.pop(tp, None)
        if part is not None:
            for eid in [e for e, (t, _) in self._where.items() if t == tp]:
                del self._where[eid]

    def history(self, tp: TopicPartition, value: bytes | None) -> None:
        """A record before the committed offset: handled earlier, its seq is a floor."""
        ident = _history_identity(tp[0], value) if value is not None else None
        if ident is not None:
            key, seq = life(tp[0], ident[0]), ident[1]
            if seq > self.floors.get(key, 0):
                self._remember(key, seq)

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
            part.open[offset] = False
            return [item]
        session, eid, seq = ident
        key = life(tp[0], eid)
        last = self.floors.get(key)
        if last is not None and seq <= last:
            self.duplicates += 1
            part.open[offset] = True
            part.advance()
            return []
        self._remember(key, seq)
        part.open[offset] = False
        self._where[eid] = (tp, offset)
        if (seq > last + 1) if last is not None else (
                seq > 1 and part.complete and not self.forgot):
            self.gaps += 1
            return [Gap(topic=tp[0], partition=tp[1], offset=offset, sessionId=session,
                        after=last or 0, before=seq), item]
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
                self._where.pop(item.eventId, None)
        else:
            ident = identity(item)
            where = self._where.pop(ident[1], None) if ident is not None else None
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

    def _remember(self, key: str, seq: int) -> None:
        self.floors[key] = seq
        self.floors.move_to_end(key)
        if len(self.floors) > self.max_lives:
            self.floors.popitem(last=False)
            self.forgot = True

