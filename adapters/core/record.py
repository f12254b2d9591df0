"""The translator contract shared by every adapter (sans-I/O, like h11).

An adapter is a `Translator`: a provider id, a frozen msgspec state type, and one
pure function `translate(state, message, out) -> state` that reads one native
message and appends canonical events to `out`. No clock, no uuid4, no random, no
I/O: ids and times come from the record or from counters held in the state, so the
same input always gives the same output, byte for byte.

This module, `emitter` and `contract` (its errors and structs, apart so that the
others can be compiled, see setup.py) own what every adapter would otherwise write
again:

* `Session`: the per-session cursor (last `seq`, the source-offset watermark that
  makes redelivery harmless, the last known time) around the adapter's own state;
* `Emitter`: stamps the envelope (gapless `seq`, deterministic `eventId`,
  `createdAt`, canonical ids derived from provider ids, optional `raw`);
* `translate_record`: the driver that feeds one raw record (one or more NDJSON
  lines) through a translator, isolating each bad line as a `LineFailure` so the
  caller can dead-letter its bytes while the good lines go on.

Errors, one boundary (as in h11): `AdapterError` is the root, and a line that fails
becomes a `LineFailure` with one of two subclasses. `MalformedRecord` is bad input:
not JSON, not an object, a capture time no date can say, a shape the translator
checked and refused (it raises MalformedRecord itself), or a native value of a type
its event cannot carry (the payload check). `InternalError` is canonflow's own
failure: any other exception a translator raises (a KeyError, a TypeError, ...) is a
bug, reported with its traceback and never blamed on the input. So a translator
checks the shape of what it reads (`.get` and isinstance, then MalformedRecord);
indexing into a native message and trusting it is a bug the property tests find.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Iterable
from typing import Any, Final, Protocol, TypeVar

import msgspec
from msgspec import Struct

from adapters.core.check import check_payload
from adapters.core.contract import (
    AdapterError,
    InternalError,
    Line,
    LineFailure,
    MalformedRecord,
    Message,
    Origin,
    Session,
    Stream,
    fields_in_order,
)
from adapters.core.emitter import (
    DEFAULT_ITEM_CAP,
    MAX_FAILURES_PER_RECORD,
    MAX_WARNINGS_PER_RECORD,
    UNSET,
    Emitter,
    _version_of,
    astuple,
)
from adapters.core.ids import DEDUPE_KEPT, MessageId, message_digest, seen_before
from adapters.core.pricing import computed_cost
from adapters.core.spool import Spool
from topics.canonical import (
    ItemCompleted,
    ItemPayload,
    ItemStarted,
    ModelRerouted,
    RuntimeWarningEvent,
    RuntimeWarningPayload,
    SessionExited,
    SessionExitedPayload,
    ThreadStarted,
    TurnCompleted,
    TurnCompletedPayload,
    TurnStarted,
    _Event,
)

S = TypeVar("S", bound=Struct)
#: A translator's `origin_of`: (its state, the decoded message) -> who sent it.
OriginOf = Callable[[Any, dict[str, Any]], Origin]


class Translator(Protocol[S]):
    """What every adapter package provides (see adapters.registry)."""

    provider: str
    raw_source: str  # RawSource.source label, e.g. "codex.app-server"
    state_type: type[S]
    #: the id of a native message, to drop one sent twice (adapters.core.ids); None
    #: for a runtime whose messages carry none
    message_id: MessageId | None
    #: who sent a message that came without its origin (Line.origin None), read from the
    #: message and the state before it: defined by the two-way protocols (Codex
    #: app-server, ACP), where it raises UnknownOrigin when the message does not say;
    #: a translator without it takes such a message for the agent's
    origin_of: OriginOf | None

    def initial(self) -> S: ...

    def translate(self, state: S, msg: Message, out: Emitter) -> S:
        """Apply one native message. Raises AdapterError (MalformedRecord for bad input)."""
        ...


# ---------------------------------------------------------------------------
# The driver
# ---------------------------------------------------------------------------

# Session's fields in astuple's order (translate_record reads them in one call)
_SEQ: Final = 0
_WATERMARK: Final = 1
_PARTITION: Final = 2
_CLOCK: Final = 3
_EPOCH: Final = 4
_THREAD: Final = 5
_TURN: Final = 6
_OPEN: Final = 7
_STATE: Final = 8
_STREAMS: Final = 9
_MARKS: Final = 10
_SEEN: Final = 11
_VERSION: Final = 12
_HELD: Final = 13
_MODEL: Final = 14
_ANSWERED: Final = 15
fields_in_order(Session, "seq", "watermark", "partition", "clockMs", "epochMs", "thread",
                "turn", "open", "state", "streams", "marks", "seen", "version", "held", "model",
                "answered")
_decode_json: Final = msgspec.json.Decoder().decode
# what the payload check raises for a native value an event cannot carry (a ValueError:
# msgspec's ValidationError; RecursionError: nested deeper than the encoder goes)
_PAYLOAD_ERRORS: Final = (KeyError, TypeError, AttributeError, ValueError, IndexError,
                          RecursionError)
_MAX_TIME_MS: Final = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z
# names read at every record or event, as C statics (compiled, an imported name is a
# dict lookup at each use: contract and topics are not compiled)
_Session: Final = Session
_TurnStarted: Final = TurnStarted
_ModelRerouted: Final = ModelRerouted
_TurnCompleted: Final = TurnCompleted


def _native_kind(obj: dict[str, Any]) -> str:
    """The message's native type, for an error's text (at most 80 characters)."""
    return str(obj.get("type", obj.get("method", "?")))[:80]


def _wrong_shape(provider: str, obj: dict[str, Any], why: str) -> MalformedRecord:
    return MalformedRecord(f"{provider} message {_native_kind(obj)!r} has the wrong shape: {why}")


def _internal(provider: str, obj: dict[str, Any], error: Exception) -> InternalError:
    """The error of a translator that raised what it did not mean to (a KeyError, a
    TypeError, ...): canonflow's bug. The message names the exception, never a file or
    line, so that it is the same compiled and interpreted; the trace has those."""
    cause = type(error).__name__
    return InternalError(
        f"internal error in the {provider} adapter on message {_native_kind(obj)!r} (a "
        f"canonflow bug, not bad input): {cause}: {error}", cause,
        "".join(traceback.format_exception(error)))


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


# each translator's constants, read once (compiled, an attribute of a module is a dict
# lookup behind a call: ~160 instructions, three a record); `translate` is read at every
# record, where a test may have replaced it
_CONSTANTS: Final[dict[object, tuple[str, str, MessageId | None, OriginOf | None]]] = {}


def _constants(translator: Translator[Any]
               ) -> tuple[str, str, MessageId | None, OriginOf | None]:
    """(provider, raw_source, message_id, origin_of) of `translator`, kept in _CONSTANTS
    (origin_of None for a translator that does not define it)."""
    known = _CONSTANTS[translator] = (translator.provider, translator.raw_source,
                                      translator.message_id,
                                      getattr(translator, "origin_of", None))
    return known


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
    # the session's fields in one call: compiled, reading them one by one is a generic
    # attribute lookup on a msgspec struct each (callgrind: 23 lookups, 7% of the adapter
    # core at one message a record), as is each attribute of a line (read once each)
    fields = astuple(session)
    watermark: int = fields[_WATERMARK]
    was_on: int = fields[_PARTITION]
    marks: dict[int, int] = fields[_MARKS]
    streams: dict[str, Stream] = fields[_STREAMS]
    moved = 0 <= was_on != partition and partition >= 0
    mark = marks.get(partition, -1) if moved else watermark
    if offset <= mark:
        return session, [], []
    if spool is None and any(st.chunks for st in streams.values()):
        raise ValueError("this session has spooled streams: pass translate_record the spool "
                         "that holds their chunks (the one of its earlier records)")
    clock_ms: int = fields[_CLOCK]
    epoch: int = fields[_EPOCH]
    first_epoch = epoch
    if epoch < 0:
        first = next((ln.time_ms for ln in lines
                      if ln.time_ms is not None and 0 <= ln.time_ms <= _MAX_TIME_MS), None)
        epoch = first if first is not None else clock_ms
    state = fields[_STATE]
    s_thread: str | None = fields[_THREAD]
    s_turn: str | None = fields[_TURN]
    s_version: str | None = fields[_VERSION]
    known = _CONSTANTS.get(translator)
    provider, raw_source, message_id, origin_of = (
        known if known is not None else _constants(translator))
    out = Emitter(provider, session_id, fields[_SEQ], clock_ms, include_raw, raw_source, epoch,
                  streams, spool, cap)
    out.version = s_version
    out.hold = hold
    out.held = fields[_HELD]
    translate = translator.translate
    events = out.events
    failures: list[LineFailure] = []
    folded: list[int] = []  # lines that failed past MAX_FAILURES_PER_RECORD
    # the session's last digests, then this record's: the last DEDUPE_KEPT once the
    # record is done
    s_seen: tuple[int, ...] = fields[_SEEN]
    seen = list(s_seen) if message_id is not None else []
    if moved:
        marks = {**marks, was_on: watermark}
        marks.pop(partition, None)
        out.emit(RuntimeWarningEvent, RuntimeWarningPayload(
            message=f"this session's records moved from partition {was_on} to "
                    f"{partition}: a session's records must stay on one partition (same key, "
                    "same partitioner, a fixed partition count)",
            detail={"fromPartition": was_on, "toPartition": partition,
                    "offset": offset}), synthetic=True,
            thread=s_thread or UNSET, turn=s_turn or UNSET)
    for n, line in enumerate(lines):
        data: bytes
        origin: Origin | None
        time_ms: int | None
        data, origin, time_ms = astuple(line)
        mark, seq = len(events), out.seq
        out._begin_line()
        try:
            if time_ms is not None:
                if not 0 <= time_ms <= _MAX_TIME_MS:  # no createdAt can say it
                    raise MalformedRecord(f"capture time {time_ms} ms is not between 1970 "
                                          "and 9999")
                out.set_clock(time_ms)
            obj = decode_message(data)
            if origin is None:  # the record did not say who sent it: the message may
                origin = origin_of(state, obj) if origin_of is not None else "agent"
            digest = 0  # none: a digest is negative
            if message_id is not None:
                if message_id(obj, origin) is not None:
                    # the bytes hold the id: equal digests are the same id and bytes (a
                    # retried produce), an id a runtime used twice drops neither message
                    digest = message_digest(data)
                    if seen_before(seen, digest):
                        continue  # the same message again (a retried produce): once is all
            message = out._message = Message(obj, data, origin, time_ms)
            out.native_type = UNSET
            out.agent = out.parent_agent = UNSET  # the root's, unless the adapter says whose
            try:
                new_state = translate(state, message, out)
            except AdapterError:
                raise
            except RecursionError:  # a native value nested deeper than the translator goes
                raise _wrong_shape(provider, obj, "nested too deeply") from None
            except Exception as e:  # not raised on purpose: our bug, not the input's
                raise _internal(provider, obj, e) from None
            try:
                for k in range(mark, len(events)):
                    # the encoder writes whatever a field holds: a native value of the
                    # wrong type must not leave as an event consumers cannot decode
                    # (the envelope is ours; the payload holds the native values)
                    check_payload(events[k].payload)  # type: ignore[attr-defined]
            except _PAYLOAD_ERRORS as e:
                raise _wrong_shape(provider, obj, f"{type(e).__name__}: {e}") from None
            state = new_state
            if digest:
                seen.append(digest)
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
        out.agent = out.parent_agent = UNSET  # a warning of the record, not of an agent
        out.emit(RuntimeWarningEvent, RuntimeWarningPayload(
            message=f"{sum(out._folded.values())} more messages of types this adapter does "
                    f"not know (past the first {MAX_WARNINGS_PER_RECORD} of this record): "
                    f"the whole record is in its raw topic at offset {offset}",
            detail={"nativeTypes": dict(sorted(out._folded.items()))}), synthetic=True)
    s_model: str | None = fields[_MODEL]
    model = _price_turns(events, s_model) if events else s_model
    s_open: dict[str, str] = fields[_OPEN]
    answered: bool = fields[_ANSWERED]
    if events:
        thread, turn, open_items, answered = _follow(s_thread, s_turn, s_open, answered,
                                                     events, out)
    else:
        thread, turn, open_items = s_thread, s_turn, s_open
        if first_epoch < 0:
            epoch = -1  # the epoch is the time of the first record that gave events
    out._flush()
    return (
        _Session(seq=out.seq, watermark=offset, partition=partition, clockMs=out.clock_ms,
                epochMs=epoch, thread=thread, turn=turn, open=open_items, state=state,
                streams=out.streams, marks=marks, version=_version_of(events, s_version),
                held=out.held, model=model, answered=answered,
                seen=tuple(seen[-DEDUPE_KEPT:]) if len(seen) > len(s_seen) else s_seen),
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


def _price_turns(events: list[_Event], model: str | None) -> str | None:
    """Give each turn.completed with `tokens` and no reported cost its computed (or
    unpriced) `cost`, for the model its turn ran on; the session's model after
    `events`. Here rather than in each adapter: one rule, and the model is the one the
    canonical events name (turn.started, model.rerouted), whatever the runtime."""
    for k, ev in enumerate(events):
        kind = type(ev)
        if kind is _TurnStarted:
            named = ev.payload.model  # type: ignore[attr-defined]
            model = named if isinstance(named, str) and named else model
        elif kind is _ModelRerouted:
            model = ev.payload.toModel or model  # type: ignore[attr-defined]
        elif kind is _TurnCompleted:
            p = ev.payload  # type: ignore[attr-defined]
            if p.cost is UNSET and p.tokens is not UNSET:
                cost = computed_cost(p.tokens, model, ev.createdAt)
                events[k] = msgspec.structs.replace(
                    ev, payload=msgspec.structs.replace(p, cost=cost))
    return model


def _follow(thread: str | None, turn: str | None, open_items: dict[str, str],
            answered: bool, events: list[_Event], out: Emitter
            ) -> tuple[str | None, str | None, dict[str, str], bool]:
    """The open thread, turn and items, and whether the turn's last item is the agent's
    completed answer (the session's `thread`, `turn`, `open` and `answered`) after
    `events` (for close_session); the streams of the items they completed are closed
    (an adapter that took an item's text or output has closed them already)."""
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
                answered = False
            else:
                open_items.pop(item, None)
                completed[item] = None
                p = ev.payload  # type: ignore[attr-defined]
                answered = p.itemType == "assistant_message" and p.status == "completed"
        elif kind == _OPENS_TURN:
            turn = ev.turnId if isinstance(ev.turnId, str) else turn
            thread = ev.threadId if isinstance(ev.threadId, str) else thread
            answered = False
        elif kind == _CLOSES_TURN:
            turn, answered = None, False
        elif kind == _OPENS_THREAD and isinstance(ev.threadId, str):
            thread = ev.threadId
    if out.streams:
        for item in completed:
            out.drop_item(item)
    return thread, turn, open_items, answered


def idle_close_time(session: Session[Any], idle_ms: int, now_ms: int | None = None) -> int:
    """When a session nobody continues is closed: its last record's time plus `idle_ms`
    (never after `now_ms`), so that the worker's idle close and `canonflow import` of the
    same records give the same events; `now_ms` (else `idle_ms`) for a session whose
    records had no time."""
    if session.clockMs <= 0:
        return now_ms if now_ms is not None else idle_ms
    at = session.clockMs + idle_ms
    return at if now_ms is None else min(now_ms, at)


def close_session(translator: Translator[Any], session: Session[Any], session_id: str, *,
                  time_ms: int, reason: str = "idle", spool: Spool | None = None
                  ) -> list[_Event]:
    """Synthetic events that close a session nobody will continue: every open item
    completed as failed, the open turn completed, then session.exited. The chunks of its
    open streams are dropped from `spool`. The caller then forgets the session's state
    (no consumer waits forever).

    The open turn completes as `completed` when its last item is the agent's answer,
    completed, and nothing is open: the runtime said all it had to say, only its end was
    never written (a transcript keeps no turn end; a process killed after its answer).
    Otherwise something was cut short (an answer still streaming, a tool running, a
    question unanswered): `interrupted`."""
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
        done = session.answered and not session.open
        out.emit(TurnCompleted, TurnCompletedPayload(
            state="completed" if done else "interrupted",
            errorMessage=UNSET if done else detail), synthetic=True, thread=thread, turn=turn)
    out.emit(SessionExited, SessionExitedPayload(reason=reason, recoverable=True,
                                                 exitKind="graceful"),
             synthetic=True, thread=thread)
    return out.events


def split_lines(value: bytes) -> list[bytes]:
    """The native lines of an NDJSON record value (blank lines dropped)."""
    return [ln for ln in value.split(b"\n") if ln.strip()]
