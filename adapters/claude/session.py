"""claude: the session, its thread and turn, and where an event goes.

Every handler emits through `_emit` or `_at`, which put the event in the current thread
and turn with the providerRefs of the native ids it names. A session starts at the first
message of the stream; a new provider session id (resumed, forked) starts a thread; a
turn opens (synthetically: Claude has no turn start) at the first message that needs
one, and ends in adapters.claude.turns."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from msgspec import Struct, UnsetType

from adapters.claude.state import State
from adapters.core.contract import MalformedRecord, Message, Origin
from adapters.core.emitter import UNSET, Emitter
from adapters.core.emitter import replace as _replace
from adapters.core.lifecycle import At
from topics.canonical import (
    ProviderRefs,
    SessionStarted,
    SessionStartedPayload,
    ThreadStarted,
    ThreadStartedPayload,
    TurnStarted,
    TurnStartedPayload,
    _Event,
)

Handler = Callable[[State, Message, Emitter], State]


def restated(msg: Message, obj: dict[str, Any], origin: Origin | None = None) -> Message:
    """A native line seen as the Claude Code line it stands for (`obj`), its bytes the
    line's own: how Amp's, droid's and the session files' lines reuse this package."""
    return Message(obj, msg.data, msg.origin if origin is None else origin, msg.time_ms)


def _thread(state: State, out: Emitter) -> str | UnsetType:
    return out.id("thr", state.session) if state.session else UNSET


def _turn(state: State, out: Emitter) -> str | UnsetType:
    return out.id("trn", str(state.turns)) if state.turnOpen else UNSET


def _refs(state: State, item_ref: str | None, request_ref: str | None, parent: str | None
          ) -> ProviderRefs | UnsetType:
    """The event's providerRefs: only when one of its ids is set (not built, then compared
    with an empty one, for every event)."""
    if state.session or item_ref or request_ref or parent:
        return ProviderRefs(providerThreadId=state.session or UNSET,
                            providerItemId=item_ref or UNSET,
                            providerRequestId=request_ref or UNSET,
                            providerParentItemId=parent or UNSET)
    return UNSET


def _at(state: State, out: Emitter, item: str | None = None, item_ref: str | None = None,
        request: str | None = None, request_ref: str | None = None,
        parent: str | None = None) -> At:
    """Where an event goes: the current thread/turn; `item`, `request`, `parent` are
    native keys."""
    refs = _refs(state, item_ref, request_ref, parent)
    return At(_thread(state, out), _turn(state, out), out.id("itm", item) if item else UNSET,
              out.id("itm", parent) if parent else UNSET, refs,
              out.id("req", request) if request else UNSET)


def _emit(state: State, out: Emitter, cls: type[_Event], payload: Struct, *,
          synthetic: bool = False, item: str | None = None, item_ref: str | None = None,
          request: str | None = None, request_ref: str | None = None,
          parent: str | None = None) -> None:
    """Emit with the current thread/turn (as _at says, without building an At)."""
    refs = _refs(state, item_ref, request_ref, parent)
    out.emit(cls, payload, synthetic=synthetic, thread=_thread(state, out), turn=_turn(state, out),
             item=out.id("itm", item) if item else UNSET,
             request=out.id("req", request) if request else UNSET,
             parent=out.id("itm", parent) if parent else UNSET,
             refs=refs)


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _obj(obj: dict[str, Any], key: str) -> dict[str, Any]:
    value = obj.get(key)
    if not isinstance(value, dict):
        raise MalformedRecord(f"{obj.get('type')}: {key!r} must be an object")
    return value


def _start_session(state: State, msg: Message, out: Emitter) -> State:
    sid = _str(msg.obj.get("session_id")) if msg.origin == "agent" else None
    state = _replace(state, started=True, session=sid)
    _emit(state, out, SessionStarted, SessionStartedPayload(), synthetic=True)
    if sid:
        _emit(state, out, ThreadStarted, ThreadStartedPayload(providerThreadId=sid), synthetic=True)
    return state


def _adopt_session(state: State, msg: Message, out: Emitter) -> State:
    """A new provider session id (first seen, resumed or forked) starts a thread."""
    sid = _str(msg.obj.get("session_id")) if msg.origin == "agent" else None
    if sid is None or sid == state.session:
        return state
    state = _replace(state, session=sid)
    _emit(state, out, ThreadStarted, ThreadStartedPayload(providerThreadId=sid), synthetic=True)
    return state


def open_turn(state: State, out: Emitter) -> State:
    if state.turnOpen:
        return state
    state = _replace(state, turns=state.turns + 1, turnOpen=True, interrupting=False, failed=False)
    _emit(state, out, TurnStarted, TurnStartedPayload(model=state.model or UNSET), synthetic=True)
    return state
