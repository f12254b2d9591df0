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
from collections.abc import Iterable
from datetime import UTC, datetime
from functools import lru_cache
from types import UnionType
from typing import Any, Final, Protocol, TypeVar, Union, get_args, get_origin

import msgspec
from msgspec import Struct, UnsetType

from adapters.contract import AdapterError, Line, LineFailure, MalformedRecord, Message, Session
from topics.canonical import (
    SCHEMA_VERSION,
    ItemCompleted,
    ItemPayload,
    ItemStarted,
    ProviderRefs,
    RawSource,
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


# ---------------------------------------------------------------------------
# Session state and messages
# ---------------------------------------------------------------------------


class Emitter:
    """Collects the canonical events of one session's record and stamps their envelope."""

    __slots__ = (
        "provider", "session_id", "seq", "epoch_ms", "clock_ms", "_created", "_id_prefix",
        "include_raw", "raw_source", "events", "_message", "native_type",
    )

    def __init__(self, provider: str, session_id: str, seq: int, clock_ms: int,
                 include_raw: bool, raw_source: str, epoch_ms: int = 0):
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
        """Append one event; canonical ids (`thread`, `turn`, ...) must already be canonical."""
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
        the native message in `raw` (always, whatever include_raw says), never a drop."""
        self.emit(
            RuntimeWarningEvent,
            RuntimeWarningPayload(
                message=f"unknown {self.provider} message type {native_type!r}",
                detail={"nativeType": native_type},
            ),
            thread=thread,
            turn=turn,
            with_raw=True,
        )


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
_SHAPE_ERRORS: Final = (KeyError, TypeError, AttributeError, ValueError, IndexError)


def decode_message(data: bytes) -> dict[str, Any]:
    """Decode one native JSON line. Raises MalformedRecord if it is not a JSON object."""
    try:
        obj = _decode_json(data)
    except msgspec.DecodeError as e:
        raise MalformedRecord(f"not valid JSON: {e}") from None
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
) -> tuple[Session[S], list[_Event], list[LineFailure]]:
    """Feed one raw record (its native lines, in order) through `translator`.

    Returns the new session, the canonical events, and the lines that failed (each
    failed line leaves the state as it was before that line). A record at or below
    the session's watermark is a redelivery: nothing changes, nothing is emitted.
    """
    if offset <= session.watermark:
        return session, [], []
    # each attribute of the session and of a line is read once: compiled, a read is a
    # generic attribute lookup on a msgspec struct (callgrind: 7% of the adapter core)
    epoch = first_epoch = session.epochMs
    if epoch < 0:
        first = next((ln.time_ms for ln in lines if ln.time_ms is not None), None)
        epoch = first if first is not None else session.clockMs
    state = session.state
    out = Emitter(translator.provider, session_id, session.seq, session.clockMs, include_raw,
                  translator.raw_source, epoch)
    translate = translator.translate
    events = out.events
    failures: list[LineFailure] = []
    for n, line in enumerate(lines):
        data, time_ms = line.data, line.time_ms
        if time_ms is not None:
            out.set_clock(time_ms)
        mark, seq = len(events), out.seq
        try:
            obj = decode_message(data)
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
            except _SHAPE_ERRORS as e:
                kind = obj.get("type", obj.get("method", "?"))
                raise MalformedRecord(
                    f"{translator.provider} message {str(kind)[:80]!r} has the wrong shape: "
                    f"{type(e).__name__}: {e}"
                ) from None
        except AdapterError as e:
            del events[mark:]
            out.seq = seq
            failures.append(LineFailure(n, data, e))
    if events:
        thread, turn, open_items = _follow(session, events)
    else:
        thread, turn, open_items = session.thread, session.turn, session.open
        if first_epoch < 0:
            epoch = -1  # the epoch is the time of the first record that gave events
    return (
        Session(seq=out.seq, watermark=offset, partition=partition, clockMs=out.clock_ms,
                epochMs=epoch, thread=thread, turn=turn, open=open_items, state=state),
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


def _follow(session: Session[Any], events: list[_Event]
            ) -> tuple[str | None, str | None, dict[str, str]]:
    """The open thread, turn and items after `events` (for close_session)."""
    thread, turn, open_items = session.thread, session.turn, session.open
    copied = False
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
            else:
                open_items.pop(item, None)
        elif kind == _OPENS_TURN:
            turn = ev.turnId if isinstance(ev.turnId, str) else turn
            thread = ev.threadId if isinstance(ev.threadId, str) else thread
        elif kind == _CLOSES_TURN:
            turn = None
        elif kind == _OPENS_THREAD and isinstance(ev.threadId, str):
            thread = ev.threadId
    return thread, turn, open_items


def close_session(translator: Translator[Any], session: Session[Any], session_id: str, *,
                  time_ms: int, reason: str = "idle") -> list[_Event]:
    """Synthetic events that close a session nobody will continue: every open item
    completed as failed, the open turn completed as interrupted, then session.exited.
    The caller then forgets the session's state (no consumer waits forever)."""
    out = Emitter(translator.provider, session_id, session.seq, time_ms, False,
                  translator.raw_source, max(session.epochMs, 0))
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
