"""The translator contract shared by every adapter (sans-I/O, like h11).

An adapter is a `Translator`: a provider id, a frozen msgspec state type, and one
pure function `translate(state, message, out) -> state` that reads one native
message and appends canonical events to `out`. No clock, no uuid4, no random, no
I/O: ids and times come from the record or from counters held in the state, so the
same input always gives the same output, byte for byte.

This module and `adapters.contract` (its errors and structs, apart so that this
module can be compiled, see setup.py) own what every adapter would otherwise write
again:

* `Session`: the per-session cursor (last `seq`, the source-offset watermark that
  makes redelivery harmless, the last known time) around the adapter's own state;
* `Emitter`: stamps the envelope (gapless `seq`, deterministic `eventId`,
  `createdAt`, canonical ids derived from provider ids, optional `raw`);
* `translate_record`: the driver that feeds one raw record (one or more NDJSON
  lines) through a translator, isolating each bad line as a `LineFailure` so the
  caller can dead-letter its bytes while the good lines go on.

Errors: `AdapterError` is the root; `MalformedRecord` is bad input (not JSON, not
an object, wrong shape). Nothing else escapes `translate_record`'s per-line path
for bad input: a translator that trips over a wrongly shaped message (KeyError,
TypeError, AttributeError, ValueError) is reported as `MalformedRecord` too.
"""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from functools import lru_cache
from types import UnionType
from typing import Any, Final, Protocol, TypeVar, Union, get_args, get_origin

import msgspec
from msgspec import Struct, UnsetType

from adapters.contract import (
    AdapterError,
    Held,
    Line,
    LineFailure,
    MalformedRecord,
    Message,
    Session,
    Spool,
    Stream,
)
from adapters.ids import DEDUPE_KEPT, MESSAGE_IDS
from topics.canonical import (
    SCHEMA_VERSION,
    ContentDelta,
    ContentDeltaPayload,
    ItemCompleted,
    ItemPayload,
    ItemStarted,
    ProviderRefs,
    RawSource,
    RuntimeWarningEvent,
    RuntimeWarningPayload,
    SessionConfigured,
    SessionExited,
    SessionExitedPayload,
    ThreadMetadataUpdated,
    ThreadStarted,
    TurnCompleted,
    TurnCompletedPayload,
    TurnStarted,
    _Event,
)

S = TypeVar("S", bound=Struct)

# Names the adapters use at every message, as Final module names: compiled with mypyc
# (setup.py), a Final name is a C static, where an imported name is a dict lookup at
# each use (callgrind, adapter core: 2% of its instructions for these two). Interpreted,
# they are msgspec's own objects.
UNSET: Final = msgspec.UNSET
replace: Final = msgspec.structs.replace


# ---------------------------------------------------------------------------
# Deterministic ids
# ---------------------------------------------------------------------------


# The helpers below are pure functions of their arguments; the caches only save the
# hashing and date formatting that dominated the adapter core's profile
# (`canonflow bench`), and never change a result.


def _digest(parts: tuple[str, ...], size: int) -> str:
    return hashlib.blake2b("\x1f".join(parts).encode(), digest_size=size).hexdigest()


@lru_cache(maxsize=1 << 14)
def _event_prefix(provider: str, session_id: str, epoch_ms: int) -> str:
    h = _digest((provider, session_id, str(epoch_ms)), 10)
    return f"{h[:8]}-{h[8:12]}-8{h[13:16]}-{'89ab'[int(h[16], 16) & 3]}{h[17:20]}-"


def event_id(provider: str, session_id: str, seq: int, epoch_ms: int = 0) -> str:
    """The eventId of the `seq`-th event of a session: UUID-shaped (version 8), a hash
    of (provider, session, epoch) followed by `seq` in its last 12 hex digits.

    The same input always gives the same ids, so a consumer can drop the duplicates a
    crash or a replay produces; one session's ids sort by seq. `epoch_ms` is the time
    of the session state's first record: a session closed for idleness and started
    again later gets new ids, never the ids of its first life.
    """
    return _with_seq(_event_prefix(provider, session_id, epoch_ms), seq)


def _with_seq(prefix: str, seq: int) -> str:
    """An eventId: its session's prefix, then `seq` in 12 hex digits. Compiled, "%" is
    one call where an f-string with a format spec is two (callgrind: 5% of the adapter
    core, where Emitter.emit formats every event's id)."""
    return prefix + "%012x" % seq  # noqa: UP031


def canonical_id(prefix: str, session_id: str, *parts: str) -> str:
    """A canonical id (`thr_`, `trn_`, `itm_`, `req_`, ...) derived from provider ids."""
    return _canonical_id((prefix, session_id, *parts))


_CANONICAL_IDS: Final[dict[tuple[str, ...], str]] = {}
_CANONICAL_IDS_KEPT: Final = 1 << 16


def _canonical_id(key: tuple[str, ...]) -> str:
    """canonical_id(*key), cached. A dict keyed by a tuple the caller builds directly,
    rather than lru_cache behind `*parts`: compiled, 3.6% fewer instructions in the
    adapter core (callgrind). The cache is emptied when full; its values are pure."""
    cid = _CANONICAL_IDS.get(key)
    if cid is None:
        if len(_CANONICAL_IDS) >= _CANONICAL_IDS_KEPT:
            _CANONICAL_IDS.clear()
        cid = _CANONICAL_IDS[key] = f"{key[0]}_{_digest(key[1:], 12)}"
    return cid


@lru_cache(maxsize=1024)
def _iso_day(days: int) -> str:
    return datetime.fromtimestamp(days * 86400, tz=UTC).strftime("%Y-%m-%dT")


@lru_cache(maxsize=1 << 12)
def _iso_second(secs: int) -> str:
    """`YYYY-MM-DDTHH:MM:SS.` of epoch seconds: a session's messages share few seconds,
    so only the milliseconds are formatted per call."""
    days, rem = divmod(secs, 86_400)
    mins, secs = divmod(rem, 60)
    hours, mins = divmod(mins, 60)
    return f"{_iso_day(days)}{hours:02d}:{mins:02d}:{secs:02d}."


_MILLIS: Final = tuple(f"{milli:03d}Z" for milli in range(1000))  # each createdAt's tail


def iso_ms(ms: int) -> str:
    """Epoch milliseconds as ISO 8601 UTC with milliseconds (never the local zone)."""
    return _iso_second(ms // 1000) + _MILLIS[ms % 1000]


#: The most a spooled stream keeps of one item's text or output, in UTF-8 bytes (see
#: Emitter "Streams"); the worker's is CANONFLOW_ITEM_CAP.
DEFAULT_ITEM_CAP: Final = 8 * 1024 * 1024
#: What one raw record may emit at most, one line at a time: past these, unknown-type
#: warnings are counted into one warning and failed lines into one dead letter (a record
#: of 100,000 bad lines gave 100,000 dead letters, 24.5 MB; the record itself stays in its
#: raw topic at its offset, so nothing is lost).
MAX_WARNINGS_PER_RECORD: Final = 32
MAX_FAILURES_PER_RECORD: Final = 32
#: The most a stream holds back (Emitter, "Held back"): past it, everything goes out.
HOLD_MAX: Final = 8 * 1024
#: The most characters one spooled chunk holds: at most 64 KiB of UTF-8, the bound on
#: every table value (a record's appends to a stream share a chunk up to this).
_CHUNK: Final = 16 * 1024
_EMPTY_DIGEST: Final = 1  # Stream.digest of no text: CRC-32 0, Adler-32 1


def _extend(digest: int, data: bytes) -> int:
    """The digest of (what `digest` digests) + `data`: CRC-32 and Adler-32 of the
    bytes, side by side in one int. Both run on from a previous value, so a stream's
    digest grows append by append, and any text's prefix is checked against it in one
    pass of zlib's C (Emitter.rest): measured 0.5 ms per MB, where a polynomial hash
    over one big int took 4.5 ms."""
    return (zlib.crc32(data, digest >> 32) << 32) | zlib.adler32(data, digest & 0xFFFFFFFF)


# ---------------------------------------------------------------------------
# Session state and messages
# ---------------------------------------------------------------------------


class Emitter:
    """Collects the canonical events of one session's record and stamps their envelope."""

    __slots__ = (
        "provider", "session_id", "seq", "epoch_ms", "clock_ms", "_created", "_id_prefix",
        "include_raw", "raw_source", "events", "_message", "native_type",
        "streams", "_own_streams", "spool", "cap", "_writes", "_fresh", "_fresh_len", "_undo",
        "_warned", "_folded", "version", "hold", "held", "_own_held",
    )

    def __init__(self, provider: str, session_id: str, seq: int, clock_ms: int,
                 include_raw: bool, raw_source: str, epoch_ms: int = 0,
                 streams: dict[str, Stream] | None = None, spool: Spool | None = None,
                 cap: int = DEFAULT_ITEM_CAP):
        self.provider = provider
        self.session_id = session_id
        self.seq = seq
        self.epoch_ms = epoch_ms
        self.clock_ms = clock_ms
        self._created: str | None = None  # createdAt of clock_ms, formatted when first needed
        self._id_prefix: str | None = None  # the eventIds' common part, hashed when first needed
        self.include_raw = include_raw
        self.raw_source = raw_source
        self.events: list[_Event] = []
        self._message: Message | None = None
        self.native_type: str | UnsetType = UNSET  # set by translators, recorded in `raw`
        # the conversation core's streams (see "Streams" below): the session's, copied on
        # the record's first change; the spool's chunks written by this record, and the
        # parts of the chunk each stream is filling in this record; the line's undo log
        self.streams: dict[str, Stream] = streams if streams is not None else {}
        self._own_streams = False
        self.spool: Spool = spool if spool is not None else MemorySpool()
        self.cap = cap
        self._writes: dict[tuple[str, int], str | None] = {}
        self._fresh: dict[str, list[str]] = {}
        self._fresh_len: dict[str, int] = {}  # characters in each of those chunks
        self._undo: list[tuple[str, int, Any]] = []
        self.version: str | None = None  # the runtime's release (Session.version)
        self.hold: Callable[[str], int] | None = None  # the hold policy ("Held back")
        self.held: dict[str, Held] = {}
        self._own_held = False
        self._warned = 0  # unknown-type warnings emitted for this record
        self._folded: dict[str, int] = {}  # and those folded into one, by native type

    def id(self, prefix: str, part: str, part2: str | None = None) -> str:
        """Canonical id for one or two provider id parts, scoped to this session
        (canonical_id; the key is built directly, without *parts)."""
        if part2 is None:
            return _canonical_id((prefix, self.session_id, part))
        return _canonical_id((prefix, self.session_id, part, part2))

    def set_clock(self, ms: int) -> None:
        """The time of the message being translated (every event's createdAt)."""
        if ms != self.clock_ms:
            self.clock_ms = ms
            self._created = None

    @property
    def created_at(self) -> str:
        if self._created is None:
            self._created = iso_ms(self.clock_ms)
        return self._created

    def _raw(self) -> RawSource:
        m = self._message
        assert m is not None
        return RawSource(source=self.raw_source, origin=m.origin, messageType=self.native_type,
                         payload=msgspec.Raw(m.data))

    def emit(
        self,
        cls: type[_Event],
        payload: Struct,
        *,
        synthetic: bool = False,
        thread: str | UnsetType = UNSET,
        turn: str | UnsetType = UNSET,
        item: str | UnsetType = UNSET,
        request: str | UnsetType = UNSET,
        parent: str | UnsetType = UNSET,
        refs: ProviderRefs | UnsetType = UNSET,
        with_raw: bool = False,
    ) -> None:
        """Append one event; canonical ids (`thread`, `turn`, ...) must already be canonical.
        With a hold policy, a content.delta may hand its tail to the stream's next one
        (see "Held back")."""
        if self.hold is not None:
            if cls is ContentDelta:
                self._hold_delta(payload, synthetic, thread, turn, item, parent, refs)  # type: ignore[arg-type]
                return
            if self.held:
                if cls is ItemCompleted:
                    self._release(item if isinstance(item, str) else "")
                elif cls is TurnCompleted or cls is SessionExited:
                    self._release(None)
        self._emit(cls, payload, synthetic, thread, turn, item, request, parent, refs, with_raw)

    def _emit(self, cls: type[_Event], payload: Struct, synthetic: bool,
              thread: str | UnsetType, turn: str | UnsetType, item: str | UnsetType,
              request: str | UnsetType, parent: str | UnsetType,
              refs: ProviderRefs | UnsetType, with_raw: bool) -> None:
        self.seq = seq = self.seq + 1
        prefix = self._id_prefix
        if prefix is None:
            prefix = self._id_prefix = _event_prefix(self.provider, self.session_id,
                                                     self.epoch_ms)
        self.events.append(
            cls(  # type: ignore[call-arg]  # `payload` is declared on each subclass
                schemaVersion=SCHEMA_VERSION,
                eventId=_with_seq(prefix, seq),  # event_id(), its prefix hashed once
                seq=seq,
                provider=self.provider,
                sessionId=self.session_id,
                createdAt=self.created_at,
                threadId=thread,
                turnId=turn,
                itemId=item,
                requestId=request,
                parentItemId=parent,
                providerRefs=refs,
                synthetic=synthetic,
                raw=self._raw() if (self.include_raw or with_raw) and self._message else UNSET,
                payload=payload,
            )
        )

    def unknown(self, native_type: str, *, thread: str | UnsetType = UNSET,
                turn: str | UnsetType = UNSET) -> None:
        """A valid message of a type this adapter does not know: a warning that carries
        the native message in `raw` (always, whatever include_raw says), never a drop.
        Past MAX_WARNINGS_PER_RECORD in one record, the rest are counted by type into one
        warning at the record's end (the record itself is in its raw topic)."""
        if self._warned >= MAX_WARNINGS_PER_RECORD:
            self._folded[native_type] = self._folded.get(native_type, 0) + 1
            return
        self._warned += 1
        detail: dict[str, Any] = {"nativeType": native_type}
        # which release introduced what (metrics, dashboard): the session's, or one this
        # record stated before (warnings are rare: the record's events are read here)
        version = _version_of(self.events, self.version)
        if version is not None:
            detail["runtimeVersion"] = version
        self.emit(
            RuntimeWarningEvent,
            RuntimeWarningPayload(
                message=f"unknown {self.provider} message type {native_type!r}",
                detail=detail,
            ),
            thread=thread,
            turn=turn,
            with_raw=True,
        )

    # ---- Held back: no secret split across two deltas ---------------------------------
    #
    # The redactor sees one event at a time. A key a runtime streams in two deltas
    # ("ghp_12" + "34...") would pass in halves, and a consumer that joins the deltas
    # would have it whole. With a hold policy (the pipeline passes its redactor's), each
    # delta's text is joined to what its stream held back, the policy says where a tail
    # that may be the start of a secret begins, and that tail waits for the stream's
    # next delta; what is held is published alone (synthetic) right before its item,
    # turn or session ends. The deltas still join to the same text, and seq stays
    # gapless; only where one delta ends and the next begins moves.

    def _hold_delta(self, payload: ContentDeltaPayload, synthetic: bool,
                    thread: str | UnsetType, turn: str | UnsetType, item: str | UnsetType,
                    parent: str | UnsetType, refs: ProviderRefs | UnsetType) -> None:
        hold = self.hold
        assert hold is not None
        content, summary = payload.contentIndex, payload.summaryIndex
        key = "%s\x00%s\x00%s\x00%s" % (item if isinstance(item, str) else "",  # noqa: UP031
                                           payload.streamKind, content, summary)
        old = self.held.get(key)
        text = payload.delta if old is None else old.text + payload.delta
        cut = hold(text)
        if len(text) - cut > HOLD_MAX:
            cut = len(text)
        if cut > 0:
            if cut < len(text) or old is not None:
                payload = replace(payload, delta=text[:cut])
            self._emit(ContentDelta, payload, synthetic, thread, turn, item, UNSET, parent,
                       refs, False)
        new = None
        if cut < len(text):
            new = Held(text=text[cut:], kind=payload.streamKind,
                       content=content if isinstance(content, int) else None,
                       summary=summary if isinstance(summary, int) else None,
                       thread=thread if isinstance(thread, str) else None,
                       turn=turn if isinstance(turn, str) else None,
                       parent=parent if isinstance(parent, str) else None,
                       refs=None if isinstance(refs, UnsetType) else refs)
        if new is not None or old is not None:
            self._set_held(key, new)

    def _set_held(self, key: str, held: Held | None) -> None:
        if not self._own_held:
            self.held = dict(self.held)
            self._own_held = True
        self._undo.append((key, -5, self.held.get(key)))
        if held is None:
            self.held.pop(key, None)
        else:
            self.held[key] = held

    def _release(self, item: str | None) -> None:
        """Publish what `item`'s streams held back (every stream's with None)."""
        prefix = None if item is None else item + "\x00"
        for key in [k for k in self.held if prefix is None or k.startswith(prefix)]:
            h = self.held[key]
            self._set_held(key, None)
            self._emit(ContentDelta, ContentDeltaPayload(
                streamKind=h.kind, delta=h.text,  # type: ignore[arg-type]
                contentIndex=UNSET if h.content is None else h.content,
                summaryIndex=UNSET if h.summary is None else h.summary),
                True, h.thread or UNSET, h.turn or UNSET, key.split("\x00", 1)[0] or UNSET,
                UNSET, h.parent or UNSET, h.refs if h.refs is not None else UNSET, False)

    # ---- Streams: the conversation core's text and output ---------------------------
    #
    # Every runtime streams text (assistant, reasoning, plan) and tool output, as deltas,
    # as growing snapshots, or whole at the end, and every adapter must emit each
    # character once ("never text twice", seed 000) and deliver a tool's output whole on
    # item.completed. The session keeps, per open stream, only its length and a digest
    # (Stream): enough to tell what part of a final text or snapshot is new. Where the
    # completed item must carry text or output the runtime never sends whole, the bytes
    # are spooled: appended as chunks (one per stream per record) to the Spool, read
    # back and dropped when the item completes. So each streamed byte is written about
    # once, and the session's own value stays the same size however long the stream.
    #
    # The cap: a spooled stream keeps at most `cap` bytes. Past half of it the head is
    # closed; what follows goes to tail segments of a quarter each, and when a third
    # segment starts the oldest is dropped. The whole text then reads as the head, a
    # line that says how many characters were left out, and the last segments
    # (Whole.truncated). The deltas on agents.canonical still carry every byte.

    def _streams_mut(self) -> dict[str, Stream]:
        if not self._own_streams:
            self.streams = dict(self.streams)
            self._own_streams = True
        return self.streams

    def _set_stream(self, key: str, stream: Stream | None) -> None:
        streams = self._streams_mut()
        self._undo.append((key, -1, streams.get(key)))
        if stream is None:
            streams.pop(key, None)
        else:
            streams[key] = stream

    def _put(self, key: str, n: int, data: str | None) -> None:
        k = (key, n)
        self._undo.append((key, n, (k in self._writes, self._writes.get(k))))
        self._writes[k] = data

    def _chunk(self, key: str, n: int) -> str:
        data = self._writes.get((key, n), UNSET)
        if isinstance(data, UnsetType):
            data = self.spool.get(self.session_id, key, n)
        return data or ""

    def streamed(self, item: str, stream: str) -> int:
        """Characters the stream carried so far; -1 when it has none open."""
        st = self.streams.get(item + "/" + stream)
        return -1 if st is None else st.chars

    def append(self, item: str, stream: str, text: str, spool: bool = True) -> None:
        """`text` was carried (or is to be kept) on `item`'s `stream`: count it, and spool
        it when the item must later deliver the stream whole (the stream's first append
        decides). Appending "" opens the stream."""
        key = item + "/" + stream
        st = self.streams.get(key)
        if st is None:
            st = Stream(spooled=spool)
        data = text.encode("utf-8", "surrogatepass")
        size = len(data)
        new = replace(st, chars=st.chars + len(text), size=st.size + size,
                      digest=_extend(st.digest, data))
        if st.spooled and text:
            if len(text) <= _CHUNK:
                new = self._spool(key, new, st.size, text, size)
            else:  # no table value above _CHUNK characters
                before = st.size
                for i in range(0, len(text), _CHUNK):
                    piece = text[i:i + _CHUNK]
                    piece_size = len(piece.encode("utf-8", "surrogatepass"))
                    new = self._spool(key, new, before, piece, piece_size)
                    before += piece_size
        self._set_stream(key, new)

    def _spool(self, key: str, st: Stream, before: int, text: str, size: int) -> Stream:
        """Spool `text` (`size` bytes; the stream held `before` bytes) on the stream `st`
        whose lengths already count it: into the chunk this record is filling, or a new
        one; past the cap, the head is closed or the oldest tail segment dropped."""
        parts = self._fresh.get(key)
        if parts is not None:
            if self._fresh_len[key] + len(text) <= _CHUNK:  # the record's chunk has room
                self._undo.append((key, -2, len(parts)))
                parts.append(text)
                self._fresh_len[key] += len(text)
                return replace(st, curSize=st.curSize + size) if st.head else st
            self._put(key, st.chunks - 1, "".join(parts))  # full: written as it is
            self._undo.append((key, -4, self._fresh.pop(key)))
        n = st.chunks
        head, prev, cur, cur_size, cut = st.head, st.prev, st.cur, st.curSize, st.cut
        if not head and before >= self.cap // 2:
            head, prev, cur, cur_size = n, n, n, 0  # the head is full
        elif head and cur_size >= self.cap // 4:
            for m in range(prev, cur):  # a third segment starts: drop the oldest
                cut += len(self._chunk(key, m))
                self._put(key, m, None)
            prev, cur, cur_size = cur, n, 0
        self._fresh[key] = [text]
        self._fresh_len[key] = len(text)
        self._undo.append((key, -3, n))
        return replace(st, chunks=n + 1, head=head, prev=prev, cur=cur,
                       curSize=cur_size + size if head else 0, cut=cut)

    def rest(self, item: str, stream: str, final: str) -> str:
        """The part of `final` (the stream's whole text, as the runtime finally sends it)
        that the stream has not carried: all of it when nothing was streamed, the missing
        suffix when the stream is a prefix of it, and nothing when they differ (emitted
        text cannot be retracted: never twice)."""
        st = self.streams.get(item + "/" + stream)
        if st is None:
            return final
        return final[st.chars:] if self._extends(st, final) else ""

    def extends(self, item: str, stream: str, text: str) -> bool:
        """Does `text` begin with everything the stream carried? (True with no stream.)"""
        st = self.streams.get(item + "/" + stream)
        return st is None or self._extends(st, text)

    @staticmethod
    def _extends(st: Stream, text: str) -> bool:
        if len(text) < st.chars:
            return False
        prefix = text[:st.chars].encode("utf-8", "surrogatepass")
        return len(prefix) == st.size and _extend(_EMPTY_DIGEST, prefix) == st.digest

    def whole(self, item: str, stream: str) -> Whole | None:
        """The spooled text of the stream, whole (or cut to the cap), without closing it;
        None when the stream is not open or not spooled."""
        key = item + "/" + stream
        st = self.streams.get(key)
        if st is None or not st.spooled:
            return None
        if not st.cut:
            text = "".join([self._read(key, n) for n in range(st.chunks)])
            return Whole(text, st.chars, False)
        head = "".join([self._read(key, n) for n in range(st.head)])
        tail = "".join([self._read(key, n) for n in range(st.prev, st.chunks)])
        return Whole(f"{head}\n[canonflow: {st.cut} characters left out]\n{tail}", st.chars, True)

    def _read(self, key: str, n: int) -> str:
        parts = self._fresh.get(key)
        if parts is not None and n == self.streams[key].chunks - 1:
            return "".join(parts)
        return self._chunk(key, n)

    def take(self, item: str, stream: str) -> Whole | None:
        """whole(), and close the stream (its chunks are dropped)."""
        got = self.whole(item, stream)
        self.drop(item, stream)
        return got

    def drop(self, item: str, stream: str) -> None:
        """Close the stream, dropping its spooled chunks."""
        self._drop_key(item + "/" + stream)

    def _drop_key(self, key: str) -> None:
        st = self.streams.get(key)
        if st is None:
            return
        if key in self._fresh:
            self._undo.append((key, -4, self._fresh.pop(key)))
            self._fresh_len.pop(key, None)
        kept = range(st.chunks) if not st.cut else [*range(st.head), *range(st.prev, st.chunks)]
        for n in kept:
            self._put(key, n, None)
        self._set_stream(key, None)

    def reset(self, item: str, stream: str, text: str) -> None:
        """Re-base the stream on `text` (a runtime's snapshot that replaced what it said)."""
        key = item + "/" + stream
        st = self.streams.get(key)
        spool = True if st is None else st.spooled
        self._drop_key(key)
        self.append(item, stream, text, spool)

    def drop_item(self, item: str) -> None:
        """Close every stream of `item` (it completed)."""
        prefix = item + "/"
        for key in [k for k in self.streams if k.startswith(prefix)]:
            self._drop_key(key)

    def _begin_line(self) -> None:
        self._undo.clear()

    def _rollback(self) -> None:
        """Undo the stream changes of the line that failed."""
        undo = self._undo
        i = len(undo)
        while i > 0:  # newest first (an index loop: mypyc cannot compile reversed() here)
            i -= 1
            entry = undo[i]
            key: str = entry[0]
            n: int = entry[1]
            old: Any = entry[2]
            if n >= 0:
                if old[0]:
                    self._writes[(key, n)] = old[1]
                else:
                    self._writes.pop((key, n), None)
            elif n == -1:
                if old is None:
                    self.streams.pop(key, None)
                else:
                    self.streams[key] = old
            elif n == -2:
                keep: int = old
                del self._fresh[key][keep:]
                self._fresh_len[key] = sum([len(p) for p in self._fresh[key]])
            elif n == -3:
                self._fresh.pop(key, None)
                self._fresh_len.pop(key, None)
            elif n == -5:
                if old is None:
                    self.held.pop(key, None)
                else:
                    self.held[key] = old
            else:
                parts: list[str] = old
                self._fresh[key] = parts
                self._fresh_len[key] = sum([len(p) for p in parts])
        self._undo.clear()

    def _flush(self) -> None:
        """Hand the record's chunks to the spool."""
        for key, parts in self._fresh.items():
            self._writes[(key, self.streams[key].chunks - 1)] = "".join(parts)
        self._fresh.clear()
        self._fresh_len.clear()
        sid, put = self.session_id, self.spool.put
        for (key, n), data in self._writes.items():
            put(sid, key, n, data)
        self._writes.clear()


class Whole:
    """A stream's text read back from the spool (Emitter.whole, Emitter.take): `text`,
    its full length in characters, and whether the cap cut its middle out."""

    __slots__ = ("text", "length", "truncated")

    def __init__(self, text: str, length: int, truncated: bool):
        self.text = text
        self.length = length
        self.truncated = truncated


def whole_fields(whole: Whole | None, field: str = "output") -> dict[str, Any]:
    """ItemPayload fields for a stream read back whole: `output` (or `text`) and, when
    the cap cut it, `outputTruncated` and `outputLength` (`textTruncated`, `textLength`);
    nothing for None."""
    if whole is None:
        return {}
    if not whole.truncated:
        return {field: whole.text}
    return {field: whole.text, field + "Truncated": True, field + "Length": whole.length}


class MemorySpool:
    """A Spool in a dict: replay, import and the tests. `len()` is its chunk count."""

    def __init__(self) -> None:
        self.chunks: dict[tuple[str, str, int], str] = {}

    def get(self, session: str, key: str, n: int) -> str | None:
        return self.chunks.get((session, key, n))

    def put(self, session: str, key: str, n: int, data: str | None) -> None:
        if data is None:
            self.chunks.pop((session, key, n), None)
        else:
            self.chunks[(session, key, n)] = data

    def __len__(self) -> int:
        return len(self.chunks)


class Translator(Protocol[S]):
    """What every adapter module provides (see adapters.registry)."""

    provider: str
    raw_source: str  # RawSource.source label, e.g. "codex.app-server"
    state_type: type[S]

    def initial(self) -> S: ...

    def translate(self, state: S, msg: Message, out: Emitter) -> S:
        """Apply one native message. Raises AdapterError (MalformedRecord for bad input)."""
        ...


# ---------------------------------------------------------------------------
# The driver
# ---------------------------------------------------------------------------

_encode: Final = msgspec.json.Encoder().encode
_payload_decoders: Final[dict[type, Any]] = {}


# `Any`-typed field shapes whose values the check skips over instead of building them
# (msgspec.Raw): every JSON value is a valid `Any`, so decoding one can only fail as
# skipping it fails (too deep: the same RecursionError at the same depth, measured).
_SKIP_ANY: dict[Any, Any] = {
    Any: msgspec.Raw,
    dict[str, Any]: dict[str, msgspec.Raw],
    list[Any]: list[msgspec.Raw],
}


def _skip_any(tp: Any) -> Any:
    if tp in _SKIP_ANY:
        return _SKIP_ANY[tp]
    if get_origin(tp) in (Union, UnionType):
        args = get_args(tp)
        new = tuple(_SKIP_ANY.get(a, a) for a in args)
        if new != args:
            return Union[new]  # noqa: UP007  # a tuple of types, built at run time
    return tp


def _check_type(cls: type) -> Any:
    """The type `_check_payload` decodes `cls`'s JSON as: a twin of `cls` with the
    same fields (names, wire names, types, defaults), except that the values of its
    `Any` fields are skipped instead of built as Python objects. The twin accepts
    exactly the JSON `cls` accepts and fails on the rest with the same error; it only
    saves building the dicts and lists the check throws away (half its time: a
    session's whole configuration, token usage, tool input). `cls` itself when it has
    no such field or anything the twin might not reproduce (a tag, array_like,
    forbid_unknown_fields, __post_init__)."""
    config = cls.__struct_config__  # type: ignore[attr-defined]
    if (config.tag is not None or config.array_like or config.forbid_unknown_fields
            or hasattr(cls, "__post_init__")):
        return cls
    fields = msgspec.structs.fields(cls)
    spec: list[tuple[str, Any, Any]] = []
    for f in fields:
        if f.required:
            default = msgspec.field()
        elif f.default_factory is not msgspec.NODEFAULT:
            default = msgspec.field(default_factory=f.default_factory)
        else:
            default = msgspec.field(default=f.default)
        spec.append((f.name, _skip_any(f.type), default))
    if all(tp is f.type for (_, tp, _), f in zip(spec, fields, strict=True)):
        return cls
    return msgspec.defstruct(f"{cls.__name__}Check", spec, kw_only=True,
                             rename={f.name: f.encode_name for f in fields})


def _check_payload(payload: Struct) -> None:
    """Raises msgspec.ValidationError (a ValueError) if `payload` would not decode as
    its own type (checked by a JSON round trip, the way a consumer reads it).
    A field-by-field check in Python was measured no faster than this round trip."""
    cls = type(payload)
    decoder = _payload_decoders.get(cls)
    if decoder is None:
        decoder = _payload_decoders[cls] = msgspec.json.Decoder(_check_type(cls)).decode
    decoder(_encode(payload))


_decode_json: Final = msgspec.json.Decoder().decode
# RecursionError: a native value nested deeper than the encoder goes (the payload check)
_SHAPE_ERRORS: Final = (KeyError, TypeError, AttributeError, ValueError, IndexError,
                        RecursionError)
_MAX_TIME_MS: Final = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z


def decode_message(data: bytes) -> dict[str, Any]:
    """Decode one native JSON line. Raises MalformedRecord if it is not a JSON object."""
    try:
        obj = _decode_json(data)
    except msgspec.DecodeError as e:
        raise MalformedRecord(f"not valid JSON: {e}") from None
    except RecursionError:
        raise MalformedRecord("JSON nested too deeply to decode") from None
    if not isinstance(obj, dict):
        raise MalformedRecord(f"a native message must be a JSON object, got {type(obj).__name__}")
    return obj


def new_session(translator: Translator[S]) -> Session[S]:
    return Session(state=translator.initial())


def translate_record(
    translator: Translator[S],
    session: Session[S],
    session_id: str,
    lines: Iterable[Line],
    *,
    offset: int,
    partition: int = -1,
    include_raw: bool = False,
    spool: Spool | None = None,
    cap: int = DEFAULT_ITEM_CAP,
    hold: Callable[[str], int] | None = None,
) -> tuple[Session[S], list[_Event], list[LineFailure]]:
    """Feed one raw record (its native lines, in order) through `translator`.

    Returns the new session, the canonical events, and the lines that failed (each
    failed line leaves the state as it was before that line). A record at or below
    the session's watermark is a redelivery: nothing changes, nothing is emitted.
    The chunks of the session's spooled streams are read from and written to `spool`
    (a fresh MemorySpool when None: enough for a session translated in one call; a
    session whose streams have chunks elsewhere raises ValueError, never loses them);
    `cap` bounds what one stream keeps (Emitter, "Streams"). `hold(text)` says where a
    delta's tail that may start a secret begins (Emitter, "Held back"); None holds none.
    """
    moved = 0 <= session.partition != partition and partition >= 0
    mark = session.marks.get(partition, -1) if moved else session.watermark
    if offset <= mark:
        return session, [], []
    if spool is None and any(st.chunks for st in session.streams.values()):
        raise ValueError("this session has spooled streams: pass translate_record the spool "
                         "that holds their chunks (the one of its earlier records)")
    # each attribute of the session and of a line is read once: compiled, a read is a
    # generic attribute lookup on a msgspec struct (callgrind: 7% of the adapter core)
    epoch = first_epoch = session.epochMs
    if epoch < 0:
        first = next((ln.time_ms for ln in lines
                      if ln.time_ms is not None and 0 <= ln.time_ms <= _MAX_TIME_MS), None)
        epoch = first if first is not None else session.clockMs
    state = session.state
    out = Emitter(translator.provider, session_id, session.seq, session.clockMs, include_raw,
                  translator.raw_source, epoch, session.streams, spool, cap)
    out.version = session.version
    out.hold = hold
    out.held = session.held
    translate = translator.translate
    events = out.events
    failures: list[LineFailure] = []
    folded: list[int] = []  # lines that failed past MAX_FAILURES_PER_RECORD
    message_id = MESSAGE_IDS.get(translator.provider)
    # the last DEDUPE_KEPT digests once the record is done
    seen = list(session.seen) if message_id is not None else []
    marks = session.marks
    if moved:
        marks = {**marks, session.partition: session.watermark}
        marks.pop(partition, None)
        out.emit(RuntimeWarningEvent, RuntimeWarningPayload(
            message=f"this session's records moved from partition {session.partition} to "
                    f"{partition}: a session's records must stay on one partition (same key, "
                    "same partitioner, a fixed partition count)",
            detail={"fromPartition": session.partition, "toPartition": partition,
                    "offset": offset}), synthetic=True,
            thread=session.thread or UNSET, turn=session.turn or UNSET)
    for n, line in enumerate(lines):
        data, time_ms = line.data, line.time_ms
        mark, seq = len(events), out.seq
        out._begin_line()
        try:
            if time_ms is not None:
                if not 0 <= time_ms <= _MAX_TIME_MS:  # no createdAt can say it
                    raise MalformedRecord(f"capture time {time_ms} ms is not between 1970 "
                                          "and 9999")
                out.set_clock(time_ms)
            obj = decode_message(data)
            digest = -1
            if message_id is not None:
                if message_id(obj, line.origin) is not None:
                    # the bytes hold the id: equal digests are the same id and bytes (a
                    # retried produce), an id a runtime used twice drops neither message
                    digest = _extend(_EMPTY_DIGEST, data)
                    if digest in seen:
                        continue  # the same message again (a retried produce): once is all
            message = out._message = Message(obj, data, line.origin, time_ms)
            out.native_type = UNSET
            try:
                new_state = translate(state, message, out)
                for k in range(mark, len(events)):
                    # the encoder writes whatever a field holds: a native value of the
                    # wrong type must not leave as an event consumers cannot decode
                    # (the envelope is ours; the payload holds the native values)
                    _check_payload(events[k].payload)  # type: ignore[attr-defined]
                state = new_state
                if digest >= 0:
                    seen.append(digest)
            except _SHAPE_ERRORS as e:
                kind = obj.get("type", obj.get("method", "?"))
                raise MalformedRecord(
                    f"{translator.provider} message {str(kind)[:80]!r} has the wrong shape: "
                    f"{type(e).__name__}: {e}"
                ) from None
        except AdapterError as e:
            del events[mark:]
            out.seq = seq
            out._rollback()
            if len(failures) < MAX_FAILURES_PER_RECORD:
                failures.append(LineFailure(n, data, e))
            else:
                folded.append(n)
    if folded:
        failures.append(LineFailure(folded[0], b"", MalformedRecord(
            f"{len(folded)} more lines of this record failed (lines {folded[0]}-{folded[-1]}, "
            f"past the first {MAX_FAILURES_PER_RECORD}): the whole record is in its raw "
            f"topic at offset {offset}")))
    if out._folded:
        out.emit(RuntimeWarningEvent, RuntimeWarningPayload(
            message=f"{sum(out._folded.values())} more messages of types this adapter does "
                    f"not know (past the first {MAX_WARNINGS_PER_RECORD} of this record): "
                    f"the whole record is in its raw topic at offset {offset}",
            detail={"nativeTypes": dict(sorted(out._folded.items()))}), synthetic=True)
    if events:
        thread, turn, open_items = _follow(session, events, out)
    else:
        thread, turn, open_items = session.thread, session.turn, session.open
        if first_epoch < 0:
            epoch = -1  # the epoch is the time of the first record that gave events
    out._flush()
    return (
        Session(seq=out.seq, watermark=offset, partition=partition, clockMs=out.clock_ms,
                epochMs=epoch, thread=thread, turn=turn, open=open_items, state=state,
                streams=out.streams, marks=marks, version=_version_of(events, session.version),
                held=out.held,
                seen=tuple(seen[-DEDUPE_KEPT:]) if message_id is not None else ()),
        events,
        failures,
    )


# what each event kind does to the open thread, turn and items (_follow)
_OPENS_ITEM: Final = 1
_CLOSES_ITEM: Final = 2
_OPENS_TURN: Final = 3
_CLOSES_TURN: Final = 4
_OPENS_THREAD: Final = 5
_FOLLOWED: Final[dict[type, int]] = {
    ItemStarted: _OPENS_ITEM, ItemCompleted: _CLOSES_ITEM, TurnStarted: _OPENS_TURN,
    TurnCompleted: _CLOSES_TURN, ThreadStarted: _OPENS_THREAD,
}


def _follow(session: Session[Any], events: list[_Event], out: Emitter
            ) -> tuple[str | None, str | None, dict[str, str]]:
    """The open thread, turn and items after `events` (for close_session); the streams
    of the items they completed are closed (an adapter that took an item's text or
    output has closed them already)."""
    thread, turn, open_items = session.thread, session.turn, session.open
    copied = False
    completed: dict[str, None] = {}  # in order: the spool's writes stay deterministic
    for ev in events:
        kind = _FOLLOWED.get(type(ev), 0)
        if kind == _OPENS_ITEM or kind == _CLOSES_ITEM:
            if not copied:
                open_items, copied = dict(open_items), True
            item = ev.itemId
            if not isinstance(item, str):
                continue
            if kind == _OPENS_ITEM:
                open_items[item] = ev.payload.itemType  # type: ignore[attr-defined]
                completed.pop(item, None)  # started again later in the record: streams live
            else:
                open_items.pop(item, None)
                completed[item] = None
        elif kind == _OPENS_TURN:
            turn = ev.turnId if isinstance(ev.turnId, str) else turn
            thread = ev.threadId if isinstance(ev.threadId, str) else thread
        elif kind == _CLOSES_TURN:
            turn = None
        elif kind == _OPENS_THREAD and isinstance(ev.threadId, str):
            thread = ev.threadId
    if out.streams:
        for item in completed:
            out.drop_item(item)
    return thread, turn, open_items


def _version_of(events: list[_Event], version: str | None) -> str | None:
    """The runtime's release after `events`: the last one a session.configured (or a
    thread's metadata) stated, else `version`."""
    for ev in events:
        if type(ev) is SessionConfigured or type(ev) is ThreadMetadataUpdated:
            stated = ev.payload.runtimeVersion  # type: ignore[attr-defined]
            if isinstance(stated, str):
                version = stated
    return version


def close_session(translator: Translator[Any], session: Session[Any], session_id: str, *,
                  time_ms: int, reason: str = "idle", spool: Spool | None = None
                  ) -> list[_Event]:
    """Synthetic events that close a session nobody will continue: every open item
    completed as failed, the open turn completed as interrupted, then session.exited.
    The chunks of its open streams are dropped from `spool`. The caller then forgets
    the session's state (no consumer waits forever)."""
    out = Emitter(translator.provider, session_id, session.seq, time_ms, False,
                  translator.raw_source, max(session.epochMs, 0), session.streams, spool)
    for key in list(session.streams):
        out._drop_key(key)
    out._flush()
    out.held = session.held
    out._release(None)  # what was held back is published before anything closes
    thread = session.thread or UNSET
    turn = session.turn or UNSET
    detail = f"closed by canonflow: session {reason}"
    for item_id, item_type in session.open.items():
        out.emit(ItemCompleted, ItemPayload(itemType=item_type, status="failed",  # type: ignore[arg-type]
                                            detail=detail),
                 synthetic=True, thread=thread, turn=turn, item=item_id)
    if session.turn is not None:
        out.emit(TurnCompleted, TurnCompletedPayload(state="interrupted", errorMessage=detail),
                 synthetic=True, thread=thread, turn=turn)
    out.emit(SessionExited, SessionExitedPayload(reason=reason, recoverable=True,
                                                 exitKind="graceful"),
             synthetic=True, thread=thread)
    return out.events


def split_lines(value: bytes) -> list[bytes]:
    """The native lines of an NDJSON record value (blank lines dropped)."""
    return [ln for ln in value.split(b"\n") if ln.strip()]
