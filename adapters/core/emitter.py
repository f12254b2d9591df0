"""The conversation core's Emitter: collects the canonical events of one session's
record and stamps their envelope (gapless `seq`, deterministic `eventId`, `createdAt`,
canonical ids derived from provider ids, optional `raw`); keeps each open item's
streams ("Streams": lengths and digests in the state, the text in a Spool) and holds
back a delta's tail that may start a secret ("Held back").
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

import msgspec
from msgspec import Struct, UnsetType

from adapters.core.contract import Held, Message, Stream, fields_in_order
from adapters.core.hold import hold_point
from adapters.core.ids import (
    _bytes_digest,
    _canonical_id,
    _event_prefix,
    _extend,
    _with_seq,
    iso_ms,
)
from adapters.core.sha256 import extend as _sha_extend
from adapters.core.spool import MemorySpool, Spool, Whole
from topics.canonical import (
    SCHEMA_VERSION,
    ContentDelta,
    ContentDeltaPayload,
    ItemCompleted,
    ProviderRefs,
    RawSource,
    RuntimeWarningEvent,
    RuntimeWarningPayload,
    SessionConfigured,
    SessionExited,
    SessionStarted,
    ThreadMetadataUpdated,
    TurnCompleted,
    _Event,
)

# Names the adapters use at every message, as Final module names: compiled with mypyc
# (setup.py), a Final name is a C static, where an imported name is a dict lookup at
# each use (callgrind, adapter core: 2% of its instructions for these two). Interpreted,
# they are msgspec's own objects.
UNSET: Final = msgspec.UNSET
replace: Final = msgspec.structs.replace
# a struct's fields in one call, where each attribute read from compiled code is a
# generic lookup (~160 instructions): the driver reads a Session's so, append a Stream's
astuple: Final = msgspec.structs.astuple
# and the canonical names the core reads at every event (topics is not compiled: each
# imported name is a dict lookup, ~130 instructions)
_SCHEMA_VERSION: Final = SCHEMA_VERSION
_SessionStarted: Final = SessionStarted
_SessionConfigured: Final = SessionConfigured
_ThreadMetadataUpdated: Final = ThreadMetadataUpdated
_ContentDelta: Final = ContentDelta
_ItemCompleted: Final = ItemCompleted
_TurnCompleted: Final = TurnCompleted
_SessionExited: Final = SessionExited
#: the pipeline's hold policy when it redacts, called natively (compiled: a call through
#: `self.hold` costs a Python call's argument parsing at every delta)
_hold_point: Final = hold_point


#: The most a spooled stream keeps of one item's text or output, in UTF-8 bytes (see
#: Emitter "Streams"); the worker's is CANONFLOW_ITEM_CAP.
DEFAULT_ITEM_CAP: Final = 64 * 1024
#: What one raw record may emit at most, one line at a time: past these, unknown-type
#: warnings are counted into one warning and failed lines into one dead letter (a record
#: of 100,000 bad lines gave 100,000 dead letters, 24.5 MB; the record itself stays in its
#: raw topic at its offset, so nothing is lost).
MAX_WARNINGS_PER_RECORD: Final = 32
MAX_FAILURES_PER_RECORD: Final = 32
#: The most characters one content.delta carries: a longer one is split in several
#: (Emitter._split). JSON escapes a character in at most 6 bytes, so a delta's event
#: stays under 1 MiB, Kafka's default max.message.bytes.
DELTA_MAX: Final = 128 * 1024
#: The most a stream holds back (Emitter, "Held back"): past it, everything goes out.
HOLD_MAX: Final = 8 * 1024
#: The most characters one spooled chunk holds: at most 64 KiB of UTF-8, the bound on
#: every table value (a record's appends to a stream share a chunk up to this).
_CHUNK: Final = 16 * 1024
# a Stream's fields in astuple's order
_S_CHARS: Final = 0
_S_SIZE: Final = 1
_S_DIGEST: Final = 2
_S_CHUNKS: Final = 3
_S_HEAD: Final = 4
_S_PREV: Final = 5
_S_CUR: Final = 6
_S_CUR_SIZE: Final = 7
_S_CUT: Final = 8
_S_SPOOLED: Final = 9
_S_PEND: Final = 10
_S_SHA: Final = 11
_S_WHOLE: Final = 12
fields_in_order(Stream, "chars", "size", "digest", "chunks", "head", "prev", "cur", "curSize",
                "cut", "spooled", "pend", "sha", "whole")


# ---------------------------------------------------------------------------
# The Emitter
# ---------------------------------------------------------------------------


def _held_key(item: str | UnsetType, payload: ContentDeltaPayload) -> str:
    """The key of the stream a delta belongs to, in Emitter.held."""
    return "%s\x00%s\x00%s\x00%s" % (item if isinstance(item, str) else "",  # noqa: UP031
                                       payload.streamKind, payload.contentIndex,
                                       payload.summaryIndex)


class Emitter:
    """Collects the canonical events of one session's record and stamps their envelope."""

    __slots__ = (
        "provider", "session_id", "seq", "epoch_ms", "clock_ms", "_created", "_id_prefix",
        "include_raw", "raw_source", "events", "_message", "native_type",
        "streams", "_own_streams", "spool", "cap", "_writes", "_fresh", "_fresh_len", "_undo",
        "_warned", "_folded", "version", "hold", "held", "_own_held", "agent", "parent_agent",
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
        # the subagent the next events belong to (set_agent; UNSET: the root agent)
        self.agent: str | UnsetType = UNSET
        self.parent_agent: str | UnsetType = UNSET

    def id(self, prefix: str, part: str, part2: str | None = None) -> str:
        """Canonical id for one or two provider id parts, scoped to this session
        (canonical_id; the key is built directly, without *parts)."""
        if part2 is None:
            return _canonical_id((prefix, self.session_id, part))
        return _canonical_id((prefix, self.session_id, part, part2))

    # ---- Agents: who in the session the events are from -------------------------------
    #
    # A session has a root agent, and the subagents its tools start (Claude's Task tool,
    # Codex's collab agents, OpenCode's child sessions). An agent's id is deterministic:
    # the root's from the session id, a subagent's from the canonical id of the tool
    # item that started it (the same hash: `agt_<h>` was started by `itm_<h>`), so a
    # consumer and the OpenTelemetry export nest an agent under that tool call without
    # state. The adapter says whose message it translates (set_agent; the record's driver
    # resets it to the root's before each message), and every event emitted until it
    # says otherwise carries agentId and parentAgentId. The root's
    # events carry neither (it is in session.started), to keep deltas small.

    def agent_id(self, spawner: str | None) -> str:
        """The id of the agent started by the canonical tool item `spawner` (None: the
        session's root agent)."""
        if spawner is None:
            return self.id("agt", "")
        return "agt_" + spawner.split("_", 1)[-1]

    def set_agent(self, spawner: str | None, parent_spawner: str | None = None) -> None:
        """The events emitted from now on belong to the subagent started by the canonical
        tool item `spawner`, itself started within the agent of `parent_spawner` (None:
        the root agent); `spawner` None: to the root agent."""
        if spawner is None:
            self.agent = self.parent_agent = UNSET
        else:
            self.agent = self.agent_id(spawner)
            self.parent_agent = self.agent_id(parent_spawner)

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
            if cls is _ContentDelta:
                self._hold_delta(payload, synthetic, thread, turn, item, parent, refs)  # type: ignore[arg-type]
                return
            if self.held:
                if cls is _ItemCompleted:
                    self._release(item if isinstance(item, str) else "")
                elif cls is _TurnCompleted or cls is _SessionExited:
                    self._release(None)
        self._emit(cls, payload, synthetic, thread, turn, item, request, parent, refs, with_raw)

    def _emit(self, cls: type[_Event], payload: Struct, synthetic: bool,
              thread: str | UnsetType, turn: str | UnsetType, item: str | UnsetType,
              request: str | UnsetType, parent: str | UnsetType,
              refs: ProviderRefs | UnsetType, with_raw: bool) -> None:
        if cls is _ContentDelta and len(payload.delta) > DELTA_MAX:  # type: ignore[attr-defined]
            self._split(payload, synthetic, thread, turn, item, parent, refs, with_raw)  # type: ignore[arg-type]
            return
        self.seq = seq = self.seq + 1
        agent = self.agent
        if cls is _SessionStarted and isinstance(agent, UnsetType):
            agent = self.agent_id(None)
        prefix = self._id_prefix
        if prefix is None:
            prefix = self._id_prefix = _event_prefix(self.provider, self.session_id,
                                                     self.epoch_ms)
        self.events.append(
            cls(  # type: ignore[call-arg]  # `payload` is declared on each subclass
                schemaVersion=_SCHEMA_VERSION,
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
                agentId=agent,
                parentAgentId=self.parent_agent,
                providerRefs=refs,
                synthetic=synthetic,
                raw=self._raw() if (self.include_raw or with_raw) and self._message else UNSET,
                payload=payload,
            )
        )

    def _split(self, payload: ContentDeltaPayload, synthetic: bool, thread: str | UnsetType,
               turn: str | UnsetType, item: str | UnsetType, parent: str | UnsetType,
               refs: ProviderRefs | UnsetType, with_raw: bool) -> None:
        """A delta longer than DELTA_MAX as several deltas that join to it: one event
        must fit its topic's max.message.bytes (adapters.core.fit). With a hold policy,
        a piece ends before what may start a secret, so no secret is split."""
        text = payload.delta
        hold = self.hold
        start = 0
        while start < len(text):
            end = min(start + DELTA_MAX, len(text))
            if end < len(text) and hold is not None:
                piece = text[start:end]
                cut = hold_point(piece) if hold is _hold_point else hold(piece)
                if 0 < cut < len(piece) and len(piece) - cut <= HOLD_MAX:
                    end = start + cut
            self._emit(_ContentDelta, replace(payload, delta=text[start:end]), synthetic,
                       thread, turn, item, UNSET, parent, refs, with_raw)
            start = end

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
        # most deltas find nothing held and hold nothing back: their stream's key is only
        # built when something is (a tenth of the held-back path's cost, replay profile)
        key = ""
        old = None
        if self.held:
            key = _held_key(item, payload)
            old = self.held.get(key)
        text = payload.delta if old is None else old.text + payload.delta
        cut = hold_point(text) if hold is _hold_point else hold(text)
        if len(text) - cut > HOLD_MAX:
            cut = len(text)
        if cut > 0:
            if cut < len(text) or old is not None:
                payload = replace(payload, delta=text[:cut])
            self._emit(ContentDelta, payload, synthetic, thread, turn, item, UNSET, parent,
                       refs, False)
        new = None
        if cut < len(text):
            if not key:
                key = _held_key(item, payload)
            content, summary = payload.contentIndex, payload.summaryIndex
            new = Held(text=text[cut:], kind=payload.streamKind,
                       content=content if isinstance(content, int) else None,
                       summary=summary if isinstance(summary, int) else None,
                       thread=thread if isinstance(thread, str) else None,
                       turn=turn if isinstance(turn, str) else None,
                       parent=parent if isinstance(parent, str) else None,
                       refs=None if isinstance(refs, UnsetType) else refs,
                       agent=self.agent if isinstance(self.agent, str) else None,
                       parentAgent=(self.parent_agent if isinstance(self.parent_agent, str)
                                    else None))
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
        agent, parent_agent = self.agent, self.parent_agent
        for key in [k for k in self.held if prefix is None or k.startswith(prefix)]:
            h = self.held[key]
            self._set_held(key, None)
            self.agent = h.agent or UNSET  # the agent of the delta it was held from
            self.parent_agent = h.parentAgent or UNSET
            self._emit(ContentDelta, ContentDeltaPayload(
                streamKind=h.kind, delta=h.text,  # type: ignore[arg-type]
                contentIndex=UNSET if h.content is None else h.content,
                summaryIndex=UNSET if h.summary is None else h.summary),
                True, h.thread or UNSET, h.turn or UNSET, key.split("\x00", 1)[0] or UNSET,
                UNSET, h.parent or UNSET, h.refs if h.refs is not None else UNSET, False)
        self.agent, self.parent_agent = agent, parent_agent

    # ---- Streams: the conversation core's text and output ---------------------------
    #
    # Every runtime streams text (assistant, reasoning, plan) and tool output, as deltas,
    # as growing snapshots, or whole at the end, and every adapter must emit each
    # character once ("never text twice") and deliver a tool's output whole on
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

    def append(self, item: str, stream: str, text: str, spool: bool = True,
               whole: bool = False) -> None:
        """`text` was carried (or is to be kept) on `item`'s `stream`: count it, and spool
        it when the item must later deliver the stream whole (the stream's first append
        decides), past the cap too with `whole` (Stream.whole). Appending "" opens the
        stream."""
        key = item + "/" + stream
        st = self.streams.get(key)
        if st is None:
            st = Stream(spooled=spool, whole=whole)
        data = text.encode("utf-8", "surrogatepass")
        size = len(data)
        f = astuple(st)
        before: int = f[_S_SIZE]
        if f[_S_SPOOLED] and text:
            # a spooled stream's SHA-256 follows every byte: past the cap, the completion
            # carries the digest of the whole, which its spool no longer holds (none for
            # a stream stored without one, by an older version: b"" after bytes)
            sha: bytes = f[_S_SHA]
            new = replace(st, chars=f[_S_CHARS] + len(text), size=before + size,
                          digest=_extend(f[_S_DIGEST], data),
                          sha=_sha_extend(sha, before, data) if sha or not before else sha)
            if len(text) <= _CHUNK:
                new = self._spool(key, new, before, text, size)
            else:  # no table value above _CHUNK characters
                for i in range(0, len(text), _CHUNK):
                    piece = text[i:i + _CHUNK]
                    piece_size = len(piece.encode("utf-8", "surrogatepass"))
                    new = self._spool(key, new, before, piece, piece_size)
                    before += piece_size
        else:
            new = replace(st, chars=f[_S_CHARS] + len(text), size=before + size,
                          digest=_extend(f[_S_DIGEST], data))
        self._set_stream(key, new)

    def _spool(self, key: str, st: Stream, before: int, text: str, size: int) -> Stream:
        """Spool `text` (`size` bytes; the stream held `before` bytes) on the stream `st`
        whose lengths already count it: into the chunk this record is filling, or a new
        one; past the cap, the head is closed or the oldest tail segment dropped."""
        f = astuple(st)
        head: int = f[_S_HEAD]
        cur_size: int = f[_S_CUR_SIZE]
        n: int = f[_S_CHUNKS]
        parts = self._fresh.get(key)
        if parts is not None:
            if self._fresh_len[key] + len(text) <= _CHUNK:  # the record's chunk has room
                self._undo.append((key, -2, len(parts)))
                parts.append(text)
                self._fresh_len[key] += len(text)
                return replace(st, curSize=cur_size + size) if head else st
            sealed, pend = self._seal("".join(parts))  # full: written, less a secret's start
            self._put(key, n - 1, sealed)
            self._undo.append((key, -4, self._fresh.pop(key)))
        else:
            pend = f[_S_PEND]
        prev: int = f[_S_PREV]
        cur: int = f[_S_CUR]
        cut: int = f[_S_CUT]
        if f[_S_WHOLE]:
            pass  # never cut (Stream.whole)
        elif not head and before >= self.cap // 2:
            head, prev, cur, cur_size = n, n, n, 0  # the head is full
        elif head and cur_size >= self.cap // 4:
            for m in range(prev, cur):  # a third segment starts: drop the oldest
                cut += len(self._chunk(key, m))
                self._put(key, m, None)
            prev, cur, cur_size = cur, n, 0
        # what the last chunk held back opens this one (its bytes were counted then)
        self._fresh[key] = [pend, text] if pend else [text]
        self._fresh_len[key] = len(pend) + len(text)
        self._undo.append((key, -3, n))
        return replace(st, chunks=n + 1, head=head, prev=prev, cur=cur,
                       curSize=cur_size + size if head else 0, cut=cut, pend="")

    def _seal(self, chunk: str) -> tuple[str, str]:
        """(what of a full chunk is written, what is held for the next one): with a hold
        policy, the chunk's end that may start a secret waits for the stream's next
        chunk, so a record that ends inside a secret does not cut it in two chunks (the
        worker's spool redacts each chunk alone before storing it)."""
        if self.hold is None or not chunk:
            return chunk, ""
        hold = self.hold
        cut = hold_point(chunk) if hold is _hold_point else hold(chunk)
        if cut >= len(chunk) or len(chunk) - cut > HOLD_MAX:
            return chunk, ""
        return chunk[:cut], chunk[cut:]

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
        return len(prefix) == st.size and _bytes_digest(prefix) == st.digest

    def whole(self, item: str, stream: str) -> Whole | None:
        """The spooled text of the stream, whole (or cut to the cap), without closing it;
        None when the stream is not open or not spooled."""
        key = item + "/" + stream
        st = self.streams.get(key)
        if st is None or not st.spooled:
            return None
        # a held end (Stream.pend) follows every chunk: a new chunk takes it in first
        if not st.cut:
            text = "".join([self._read(key, n) for n in range(st.chunks)])
            return Whole(text + st.pend, st.chars, False)
        head = "".join([self._read(key, n) for n in range(st.head)])
        tail = "".join([self._read(key, n) for n in range(st.prev, st.chunks)])
        return Whole(f"{head}\n[canonflow: {st.cut} characters left out]\n{tail}{st.pend}",
                     st.chars, True, st.sha or None, st.size)

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
        whole = False if st is None else st.whole
        self._drop_key(key)
        self.append(item, stream, text, spool, whole)

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
        if not self._fresh and not self._writes:
            return  # most records (no stream written): not even the spool's put looked up
        for key, parts in self._fresh.items():
            st = self.streams[key]
            sealed, pend = self._seal("".join(parts))
            self._writes[(key, st.chunks - 1)] = sealed
            if pend:
                self._streams_mut()[key] = replace(st, pend=pend)
        self._fresh.clear()
        self._fresh_len.clear()
        sid, put = self.session_id, self.spool.put
        for (key, n), data in self._writes.items():
            put(sid, key, n, data)
        self._writes.clear()


def _version_of(events: list[_Event], version: str | None) -> str | None:
    """The runtime's release after `events`: the last one a session.configured (or a
    thread's metadata) stated, else `version`."""
    for ev in events:
        if type(ev) is _SessionConfigured or type(ev) is _ThreadMetadataUpdated:
            stated = ev.payload.runtimeVersion  # type: ignore[attr-defined]
            if isinstance(stated, str):
                version = stated
    return version
