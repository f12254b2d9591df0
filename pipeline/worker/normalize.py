"""One raw record in, canonical events, chat records and dead letters out: the normalize
without its I/O, so the worker and the tests run the very same code.

The Faust agent (pipeline.worker.app) reads the session's stored state from its table,
calls `Normalizer.process`, publishes what comes back, waits for delivery, and
only then stores the new state. That order is what makes a crash harmless: state
is never ahead of what was published, and a record delivered again after a crash
is either below the stored watermark (nothing happens) or translated again into
the same events with the same eventIds (a consumer drops the duplicates).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable
from typing import Any, Generic, TypeVar

import msgspec
from msgspec import UNSET, UnsetType

from adapters import (
    AdapterError,
    InternalError,
    Line,
    MemorySpool,
    Session,
    Spool,
    Translator,
    get,
    new_session,
    split_lines,
    translate_record,
)
from adapters.core import DEFAULT_ITEM_CAP, Emitter, close_session, fit_or_warn, idle_close_time
from adapters.projections.chat import SPOOL_PREFIX as CHAT_SPOOL_PREFIX
from adapters.projections.chat import ChatState, project_next
from adapters.projections.summary import summarize
from pipeline.ops.records import TableEntry
from pipeline.privacy.redact import DeadLines, Redactor
from pipeline.worker.exceptions import BadHeader
from pipeline.worker.waits import Watch, open_requests, waiting_on
from topics.canonical import (
    SessionStateChanged,
    SessionStateChangedPayload,
    decode_event,
    encode_event,
)
from topics.catalog import MAX_EVENT_BYTES, raw_topic
from topics.chat import ChatError, encode_chat
from topics.cloudevents import Header, Headers
from topics.records import (
    HEADER_ORIGIN,
    HEADER_RECORD,
    HEADER_TIME,
    BadRecordId,
    DeadLetter,
    Origin,
    advanced,
    encode_deadletter,
    record_id,
    seen,
)
from topics.sessions import SummaryState

log = logging.getLogger(__name__)
#: Distinct internal errors logged with their trace per normalizer (a bug that fails
#: in ever new places is still logged boundedly; the dead letters count every one).
_LOGGED_KEPT = 256
S = TypeVar("S", bound=msgspec.Struct)


class Output(msgspec.Struct, frozen=True):
    """What one input record produced: the encoded canonical events, chat records and
    dead letters, and the new session state. `state` is None when the record changed
    nothing (a redelivery, or a record dead-lettered whole); `delete` says the session
    is over and its state must be removed. `waiting`: what the session waits on after
    the record's events (pipeline.worker.waits), None when it made no event."""

    state: bytes | None
    records: list[bytes]
    deadletters: list[bytes]
    delete: bool = False
    chat: list[bytes] = []
    waiting: str | None = None
    #: the CloudEvents headers of each of `records` and `chat` (topics.cloudevents)
    record_headers: list[list[Header]] = []
    chat_headers: list[list[Header]] = []
    #: the session's summary after `records` (agents.sessions): its stored part, the last
    #: event and whether it closed the session (topics.sessions.record); None: unchanged
    summary: tuple[SummaryState, Any, bool] | None = None


class SessionEntry(msgspec.Struct, Generic[S], array_like=True, frozen=True):
    """A session's table value: the translator's session and, when the chat
    projection runs, the chat projection's own state, the stall watch's (waits.Watch:
    open requests, a stall said), the session's summary (agents.sessions) and the marks
    of the producers that sent it records (`producers`). One value,
    written once per batch, so they can never disagree after a crash."""

    session: Session[S]
    chat: Session[ChatState] | None = None
    watch: Watch | None = None
    summary: SummaryState | None = None
    #: the last n of each producer stream that sent the session a record with a
    #: `record-id` (topics.records.seen): one integer per stream, at most PRODUCERS_KEPT
    #: streams. Last, as a field added to a stored array must be.
    producers: dict[str, int] = {}


#: The table value of a session closed for idleness while its summary is kept
#: (CANONFLOW_SESSIONS_RETENTION): this prefix, then "<close time, epoch ms>:<partition>".
#: Never a SessionEntry (msgpack arrays start with 0x90-0x9f, 0xdc or 0xdd; "c" is 0x63):
#: a record for the session starts a new life, as after a deletion.
CLOSED_MARK = b"closed:"


def closed_mark(now_ms: int, partition: int) -> bytes:
    return CLOSED_MARK + f"{now_ms}:{partition}".encode()


def closed_at(stored: bytes | None) -> tuple[int, int] | None:
    """(close time ms, partition) of a closed session's mark; None for anything else."""
    if not stored or not stored.startswith(CLOSED_MARK):
        return None
    ms, partition = stored[len(CLOSED_MARK):].split(b":")
    return int(ms), int(partition)


class BatchSpool:
    """The conversation core's Spool over a table (`items.<provider>`, keyed by session,
    stream and chunk number) for one batch of records: reads see the batch's own
    writes, which are kept here until the batch is delivered and then stored (`puts`
    with the batch's output, before the states that refer to them; `drops` after).

    `at(partition, record)` names the record the next writes belong to: a session's
    chunks live on its partition."""

    def __init__(self, get: Any = None, redactor: Redactor | None = None):
        self._get = get or (lambda key: None)
        self.writes: dict[bytes, TableEntry] = {}
        self._partition, self._record = -1, None
        self._redact = redactor.redact_text if redactor is not None and redactor.active else None

    def at(self, partition: int, record: Any) -> None:
        self._partition, self._record = partition, record

    @staticmethod
    def key(session: str, key: str, n: int) -> bytes:
        return f"{session}\x00{key}\x00{n}".encode("utf-8", "surrogatepass")

    def get(self, session: str, key: str, n: int) -> str | None:
        k = self.key(session, key, n)
        written = self.writes.get(k)
        value = written.value if written is not None else self._get(k)
        return None if value is None else value.decode("utf-8", "surrogatepass")

    def put(self, session: str, key: str, n: int, data: str | None) -> None:
        if data and self._redact is not None and not key.startswith(CHAT_SPOOL_PREFIX):
            # no secret at rest in the items changelog; each chunk holds every
            # secret whole: the core holds a chunk's end that may start one for the next
            # chunk (Emitter._seal). The chat's pieces come from published, redacted
            # events. The session's lengths count what the runtime sent (outputLength).
            data = self._redact(data.encode("utf-8", "surrogatepass")).decode(
                "utf-8", "surrogatepass")
        value = None if data is None else data.encode("utf-8", "surrogatepass")
        k = self.key(session, key, n)
        self.writes[k] = TableEntry(k, self._partition, value, self._record)

    def entries(self, drops: bool) -> list[TableEntry]:
        """The writes (drops=False) or the deletions (drops=True)."""
        return [e for e in self.writes.values() if (e.value is None) == drops]


def parse_headers(headers: Any) -> tuple[Origin | None, int | None]:
    """(origin, capture time ms) from Kafka headers given as a mapping or (k, v) pairs
    (read_headers, without the record id). Raises BadHeader."""
    origin, t, _ = read_headers(headers)
    return origin, t


def read_headers(headers: Any) -> tuple[Origin | None, int | None, tuple[str, int] | None]:
    """(origin, capture time ms, record id) from Kafka headers given as a mapping or
    (k, v) pairs, in one pass.

    No `origin` header gives None: the translator reads who sent each message from the
    message where its protocol says (Codex app-server, ACP: `origin_of`), and takes it
    for the agent's elsewhere. An `origin` that is neither `agent` nor `client` raises
    BadHeader: taking a client's decision for the agent's words invents requests, so
    such a record is dead-lettered, not guessed at. A `t` that is not an integer is
    ignored (the Kafka timestamp stands in). The `record-id` is (producer stream, n)
    (topics.records.record_id), None without one; a value that is not
    `<producer stream>:<n>` raises BadHeader."""
    items: Iterable[tuple[str, Any]] = headers.items() if hasattr(headers, "items") else headers or ()
    origin: Origin | None = None
    t: int | None = None
    rid: tuple[str, int] | None = None
    for k, v in items:
        if isinstance(v, bytes):
            v = v.decode("utf-8", "replace")
        if k == HEADER_ORIGIN:
            if v not in ("agent", "client"):
                raise BadHeader(f"header {HEADER_ORIGIN!r} is {str(v)[:40]!r}: it must be "
                                "'agent' or 'client'")
            # the literal itself, not the decoded copy: msgspec's omit_defaults compares
            # by identity, and raw.origin must be written exactly as replay writes it
            origin = "agent" if v == "agent" else "client"
        elif k == HEADER_TIME:
            try:
                t = int(v)
            except (TypeError, ValueError):
                t = None
        elif k == HEADER_RECORD and rid is None:  # the first, as a reader of one would take
            try:
                rid = record_id(v if isinstance(v, str) else str(v))
            except BadRecordId as e:
                raise BadHeader(str(e)) from None
    return origin, t, rid


class Normalizer:
    """The translation step of one provider's normalize agent, and the chat projection
    of the events it produces.

    The chat view (agents.chat) is a function of each session's canonical events. It
    is computed here, on the events as they are published (redacted), rather than by
    a second stage reading agents.canonical back: measured with `canonflow bench`, that
    second consumer cost the worker 40% of its throughput, one Faust record per
    canonical event. Its state lives in the session's own table value (SessionEntry).
    """

    def __init__(self, provider: str, *, include_raw: bool = False,
                 max_record_bytes: int = 1024 * 1024, max_message_bytes: int | None = None,
                 redactor: Redactor | None = None, chat: bool = True,
                 item_cap: int = DEFAULT_ITEM_CAP,
                 max_event_bytes: int = MAX_EVENT_BYTES, summaries: bool = True):
        self.provider = provider
        self.summaries = summaries  # keep each session's summary (agents.sessions)
        self.headers = Headers(provider)  # CloudEvents, on every published record
        self.redactor = redactor if redactor is not None else Redactor.from_env()
        self._publish = self.redactor.record_publisher()
        self._dead_lines = DeadLines(self.redactor)  # context of the next dead letters
        self.topic = raw_topic(provider)
        self.translator: Translator[Any] = get(provider)
        self.include_raw = include_raw
        self.max_record_bytes = max_record_bytes
        self.max_message_bytes = max_message_bytes  # of a dead letter; None: no bound
        self.chat = chat
        self.item_cap = item_cap
        self.max_event_bytes = max_event_bytes  # of a canonical event or chat record
        self._encode_state = msgspec.msgpack.Encoder().encode
        self._decode_state = msgspec.msgpack.Decoder(
            SessionEntry[self.translator.state_type]).decode  # type: ignore[name-defined]
        self._logged: set[str] = set()  # the internal errors whose trace was logged

    def decode_state(self, stored: bytes | None) -> SessionEntry[Any]:
        if not stored or stored.startswith(CLOSED_MARK):
            return SessionEntry(new_session(self.translator))
        return self._decode_state(stored)

    def expire(self, stored: bytes, key: bytes, *, now_ms: int, idle_ms: int | None = None,
               reason: str = "idle", spool: Spool | None = None) -> tuple[int, Output]:
        """Close a stored session nobody continues: (its partition, the synthetic
        closing events and their chat records, delete=True); its spooled chunks are
        dropped from `spool`.

        With `idle_ms`, the session closed at its last record's time plus `idle_ms` (never
        after `now_ms`): the time `canonflow import` gives the same close of the same
        records, so both give the same events."""
        entry = self._decode_state(stored)
        session = entry.session
        spool = spool if spool is not None else MemorySpool()
        at = now_ms if idle_ms is None else idle_close_time(session, idle_ms, now_ms)
        events = close_session(self.translator, session, key.decode("utf-8", "replace"),
                               time_ms=at, reason=reason, spool=spool)
        out = self._published(events, entry.chat, key, session.partition, -1, "agent", at,
                              spool)
        kept = summarize(entry.summary, out.shown) if self.summaries else None
        summary = (kept, out.shown[-1], True) if kept is not None and events else None
        return session.partition, Output(None, out.records, out.dead, delete=True,
                                         chat=out.chat, record_headers=out.record_headers,
                                         chat_headers=out.chat_headers, summary=summary)

    def process(self, stored: bytes | None, key: bytes | None, value: bytes | None, *,
                partition: int, offset: int, timestamp_ms: int | None = None,
                headers: Any = (), spool: Spool | None = None) -> Output:
        """Translate one raw record. Never raises for bad input: it becomes dead letters.
        The session's pending text and output are read from and written to `spool` (a
        fresh MemorySpool when None: enough for a session in one record)."""
        try:
            origin, t, rid = read_headers(headers)
        except BadHeader as e:
            return Output(None, [], [self._dead(key, partition, offset, UNSET, timestamp_ms,
                                                str(e), "BadHeader", value or b"")])
        time_ms = t if t is not None else timestamp_ms
        said: Origin | UnsetType = origin if origin is not None else UNSET  # what dead letters say

        def dead(reason: str, cls: str, data: bytes, line: int | None = None,
                 redacted: bytes | None = None) -> bytes:
            return self._dead(key, partition, offset, said, time_ms, reason, cls, data, line,
                              redacted, value)

        if not key:  # None or b"": records of every sandbox would merge into one session
            return Output(None, [], [dead("record has no key (the key must be the session id)",
                                          "MissingKey", value or b"")])
        if value is None:
            return Output(None, [], [dead("record has no value", "EmptyRecord", b"")])
        if len(value) > self.max_record_bytes:
            return Output(None, [], [dead(
                f"record of {len(value)} bytes exceeds max_record_bytes={self.max_record_bytes}",
                "OversizedRecord", value)])
        try:
            session_id = key.decode("utf-8")
        except UnicodeDecodeError:
            return Output(None, [], [dead("record key is not UTF-8", "MalformedKey", value)])
        try:
            entry = self.decode_state(stored)
        except (msgspec.DecodeError, msgspec.ValidationError) as e:
            # State written by an incompatible version: keep the record, say why.
            return Output(None, [], [dead(f"stored session state cannot be read: {e}",
                                          "StateError", value)])
        if rid is not None and seen(entry.producers, rid):
            # a copy of a record the session had (a producer's retry): nothing happens,
            # as for a record at or below the watermark
            return Output(None, [], [])
        session = entry.session
        lines = [Line(data, origin, time_ms) for data in split_lines(value)]
        spool = spool if spool is not None else MemorySpool()
        watch = entry.watch
        stalled = watch is not None and watch.stalled
        # a stalled session's next event follows its recovery, which takes the next seq
        base = msgspec.structs.replace(session, seq=session.seq + 1) if stalled else session
        new, events, failures = translate_record(
            self.translator, base, session_id, lines, offset=offset, partition=partition,
            include_raw=self.include_raw, spool=spool, cap=self.item_cap,
            hold=self.redactor.hold)
        if new is base:
            return Output(None, [], [])
        waiting = None
        if events:
            requests = open_requests(events, watch.requests if watch is not None else 0)
            waiting = waiting_on(new.turn, new.open.values(), requests)
            if stalled:
                assert watch is not None
                events.insert(0, self._recovered(session, session_id, watch, time_ms))
            watch = Watch(requests=requests) if requests else None
        elif stalled:
            new = msgspec.structs.replace(new, seq=session.seq)  # recovered at its next event
        out = self._published(events, entry.chat, key, partition, offset, said, time_ms, spool)
        kept = summarize(entry.summary, out.shown) if self.summaries else None
        producers = advanced(entry.producers, rid) if rid is not None else entry.producers
        # a failed line is redacted with the record's other lines around it, and the
        # session's dead lines before: a private key that fails line by line is masked
        # in every line of it
        redacted = None
        if not failures:
            self._dead_lines.end(key)
        elif self.redactor.redacts_dead_letters:
            redacted = self._dead_lines.redact(key, [ln.data for ln in lines],
                                               [f.line for f in failures if f.data])
        return Output(
            self._encode_state(SessionEntry(new, out.chat_state, watch, kept, producers)),
            out.records,
            [dead(str(f.error), self._error_class(f.error), f.data, f.line,
                  redacted[f.line] if redacted is not None and f.data else None)
             for f in failures] + out.dead,
            chat=out.chat, record_headers=out.record_headers, chat_headers=out.chat_headers,
            summary=(kept, out.shown[-1], False) if kept is not None and events else None,
            waiting=waiting,
        )

    def waiting(self, stored: bytes) -> tuple[str, bool]:
        """(what a stored session waits on, was it said to be stalled): for a session
        this worker has a state of and has not translated (recovered from the changelog).
        Raises msgspec errors for a state it cannot read."""
        entry = self._decode_state(stored)
        watch = entry.watch or Watch()
        session = entry.session
        return waiting_on(session.turn, session.open.values(), watch.requests), \
            bool(watch.stalled)

    def stall(self, stored: bytes, key: bytes, *, on: str, now_ms: int, waited_ms: int
              ) -> tuple[int, Output] | None:
        """A stored session that waits on `on` (waits.MODEL, TOOL or APPROVAL) with no
        event for `waited_ms`: (its partition, its synthetic session.state.changed
        (health "stalled") and the state that remembers it, with the next seq). None
        when the session has no event yet (nothing can be waited on). Raises msgspec
        errors for a state it cannot read."""
        entry = self._decode_state(stored)
        session = entry.session
        if session.epochMs < 0:
            return None
        stalled = self._health(session, key.decode("utf-8", "replace"), now_ms,
                               SessionStateChangedPayload(
            state="waiting", health="stalled", waitingOn=on,  # type: ignore[arg-type]
            waitedMs=waited_ms,
            reason=f"no event for {waited_ms // 1000} s while waiting on the {on}"))
        out = self._published([stalled], entry.chat, key, session.partition, -1, "agent",
                              now_ms, MemorySpool())
        kept = summarize(entry.summary, out.shown) if self.summaries else None
        watch = Watch(requests=entry.watch.requests if entry.watch else 0, stalled=on,
                      sinceMs=now_ms - waited_ms)
        new = msgspec.structs.replace(session, seq=session.seq + 1)
        return session.partition, Output(
            self._encode_state(SessionEntry(new, out.chat_state, watch, kept,
                                            entry.producers)),
            out.records, out.dead, chat=out.chat, record_headers=out.record_headers,
            chat_headers=out.chat_headers,
            summary=(kept, out.shown[-1], False) if kept is not None else None)

    def _recovered(self, session: Session[Any], session_id: str, watch: Watch,
                   time_ms: int | None) -> Any:
        """The session.state.changed (health "recovered") that precedes the first event
        of a stalled session, at the record's time and the seq after the stall's."""
        clock = time_ms if time_ms is not None else session.clockMs
        return self._health(session, session_id, clock, SessionStateChangedPayload(
            state="running", health="recovered", waitingOn=watch.stalled,  # type: ignore[arg-type]
            waitedMs=max(0, clock - watch.sinceMs),
            reason=f"an event came after the wait on the {watch.stalled}"))

    def _health(self, session: Session[Any], session_id: str, clock_ms: int,
                payload: SessionStateChangedPayload) -> Any:
        """A synthetic session.state.changed of `session` (a stall or its recovery), at
        `clock_ms`, with the seq after the session's, in its open thread and turn."""
        out = Emitter(self.provider, session_id, session.seq, clock_ms, False,
                      self.translator.raw_source, max(session.epochMs, 0))
        out.emit(SessionStateChanged, payload, synthetic=True,
                 thread=session.thread or UNSET, turn=session.turn or UNSET)
        return out.events[0]

    def _error_class(self, error: AdapterError) -> str:
        """A failed line's dead-letter class: MalformedRecord for bad input, and for
        canonflow's own failure `InternalError.adapter.<exception>` (as the chat's
        `InternalError.chat.*`), its trace logged once per place it was raised."""
        if not isinstance(error, InternalError):
            return type(error).__name__
        where = "".join(ln for ln in error.trace.splitlines() if ln.startswith("  File"))
        if where not in self._logged and len(self._logged) < _LOGGED_KEPT:
            self._logged.add(where)
            log.error("%s\n%s", error, error.trace)
        return f"InternalError.adapter.{error.cause}"

    def _published(self, events: list[Any], chat_state: Session[ChatState] | None,
                   key: bytes, partition: int, offset: int, origin: Origin | UnsetType,
                   time_ms: int | None, spool: Spool) -> _Published:
        """Encode (and redact) `events`, with their CloudEvents headers, and project them
        onto the chat view: canonical records, chat records, dead letters, the new chat
        state (_Published).

        A failure of the projection (a bug, never bad input: the events are ours) costs
        that event's chat records only; the canonical events are published all the same
        and the dead letter keeps the event."""
        head = self.headers
        out = _Published(chat_state)
        records, dead, record_headers = out.records, out.dead, out.record_headers
        for e, encoded in zip(events, self._publish(events), strict=True):
            data, published = self._fitting(encoded, key, partition, offset, origin,
                                            time_ms, dead)
            records.append(data)
            # the envelope: never redacted (ids, seq, time); the type of what is
            # published (a runtime.warning in place of an event too large)
            shown = published if published is not None else e
            out.shown.append(shown)
            record_headers.append(head.event(shown.__struct_config__.tag, e.eventId, key,
                                             e.createdAt))
            if published is None or not self.chat:
                continue
            try:
                out.chat_state, projected = project_next(out.chat_state, published, spool)
            except Exception as error:  # a projection bug: keep the event, go on
                log.exception("chat projection failed on %s seq %s", e.sessionId, e.seq)
                dead.append(self._dead(key, partition, offset, origin, time_ms, str(error),
                                       f"InternalError.chat.{type(error).__name__}", data))
                continue
            for r in projected:
                encoded = encode_chat(r)
                if len(encoded) > self.max_event_bytes:
                    dead.append(self._dead(key, partition, offset, origin, time_ms,
                                           _too_large(len(encoded), self.max_event_bytes),
                                           "OversizedChatRecord", encoded))
                    r = ChatError(
                        session_id=r.session_id, provider=r.provider, seq=r.seq,
                        event_id=r.event_id, source_event_id=r.source_event_id,
                        turn_id=r.turn_id, error_class="OversizedChatRecord",
                        message=f"a {r.__struct_config__.tag} record of {len(encoded)} bytes "
                                "was too large for agents.chat: it is in agents.deadletter")
                    encoded = encode_chat(r)
                out.chat.append(encoded)
                out.chat_headers.append(head.chat(r.__struct_config__.tag, r.event_id, key,
                                                  e.createdAt))
        return out

    def _fitting(self, published: tuple[bytes, Any], key: bytes, partition: int, offset: int,
                 origin: Origin | UnsetType, time_ms: int | None, dead: list[bytes]
                 ) -> tuple[bytes, Any]:
        """A published event that fits agents.canonical (max_event_bytes): as it is, or
        cut to fit (adapters.core.fit), else a runtime.warning in its place (same
        envelope: its seq stays gapless, its eventId stays deterministic) and the event
        itself dead-lettered: a record the cluster refuses would hold up its partition."""
        data, event = published
        if len(data) <= self.max_event_bytes:
            return published
        original = decode_event(data)
        fitted, whole = fit_or_warn(original, len(data), self.max_event_bytes)
        if not whole:
            dead.append(self._dead(key, partition, offset, origin, time_ms,
                                   _too_large(len(data), self.max_event_bytes),
                                   "OversizedEvent", data))
        return encode_event(fitted), fitted

    def _dead(self, key: bytes | None, partition: int, offset: int,
              origin: Origin | UnsetType, time_ms: int | None, reason: str, cls: str, data: bytes,
              line: int | None = None, redacted: bytes | None = None,
              record: bytes | None = None) -> bytes:
        letter = DeadLetter(
            topic=self.topic, partition=partition, offset=offset, provider=self.provider,
            key=key.decode("utf-8", "replace") if key is not None else None,
            errorClass=cls, reason=reason, value=data,
            line=line if line is not None else UNSET, origin=origin,
            timestampMs=time_ms if time_ms is not None else UNSET)
        # agents.deadletter keeps letters for 30 days: secrets in the record are
        # redacted (the original's size and SHA-256 kept, and the raw record's, which is
        # in the raw topic for its 3 days), unless CANONFLOW_DEADLETTER_ORIGINAL says
        # otherwise; `redacted`: the line as redacted with the record's other lines
        return dead_letter_bytes(self.redactor.dead_letter(letter, redacted=redacted,
                                                           record=record),
                                 self.max_message_bytes)


class _Published:
    """What `Normalizer._published` gives: encoded records, their headers, dead letters
    and the chat state after them."""

    __slots__ = ("records", "record_headers", "chat", "chat_headers", "dead", "chat_state",
                 "shown")

    def __init__(self, chat_state: Session[ChatState] | None):
        self.records: list[bytes] = []
        self.record_headers: list[list[Header]] = []
        self.chat: list[bytes] = []
        self.chat_headers: list[list[Header]] = []
        self.dead: list[bytes] = []
        self.chat_state = chat_state
        self.shown: list[Any] = []  # the events as published (redacted), for the summary


def _too_large(size: int, limit: int) -> str:
    return f"record of {size} bytes exceeds the topic's max.message.bytes ({limit})"


def dead_letter_bytes(letter: DeadLetter, limit: int | None) -> bytes:
    """`letter` encoded, cut to `limit` bytes when longer (_cut; None: no limit)."""
    encoded = encode_deadletter(letter)
    if limit is None or len(encoded) <= limit:
        return encoded
    return encode_deadletter(_cut(letter, limit))


def _cut(letter: DeadLetter, limit: int) -> DeadLetter:
    """`letter` with as many first bytes of its value as fit in `limit` bytes of JSON,
    and the whole value's size and SHA-256. A broker refuses a message above its
    max.message.bytes, and a refused dead letter would be sent again forever, holding
    up its partition; the whole record is still in the raw topic at its offset."""
    data = letter.value
    if letter.valueBytes is not UNSET:  # redacted: the size and hash are the original's
        cut = msgspec.structs.replace(letter, value=b"")
    else:
        cut = msgspec.structs.replace(letter, value=b"", valueBytes=len(data),
                                      valueSha256=hashlib.sha256(data).hexdigest())
    room = limit - len(encode_deadletter(cut))  # characters left for the base64 text
    return msgspec.structs.replace(cut, value=data[:max(0, room // 4 * 3)])


def internal_error(step: Normalizer, error: Exception, key: bytes | None,
                   value: bytes | None, *, partition: int, offset: int) -> Output:
    """The dead letter for a record the step itself failed on (a bug, not bad input):
    the record is kept, the worker goes on."""
    return Output(None, [], [step._dead(key, partition, offset, UNSET, None, str(error),
                                        f"InternalError.{type(error).__name__}",
                                        value or b"")])
