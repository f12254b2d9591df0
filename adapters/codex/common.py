"""codex: what every module of the app-server adapter shares: the readers of native
fields (a wrong type reads as absent, or is MalformedRecord where the field is required),
where an event goes (`Place`: canonical ids and Codex's providerRefs), and the session's
first event."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from adapters.codex.state import State
from adapters.core.contract import MalformedRecord
from adapters.core.emitter import UNSET, Emitter
from adapters.core.emitter import replace as _replace
from adapters.core.lifecycle import At
from topics.canonical import ProviderRefs, SessionStarted, SessionStartedPayload

# ---- small helpers --------------------------------------------------------------


def get_str(d: dict[str, Any], key: str) -> str | None:
    v = d.get(key)
    return v if isinstance(v, str) else None


def get_int(d: dict[str, Any], key: str) -> int | None:
    v = d.get(key)
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def need_dict(v: Any, what: str) -> dict[str, Any]:
    if not isinstance(v, dict):
        raise MalformedRecord(f"{what} must be an object")
    return v


def need_str(d: dict[str, Any], key: str, what: str) -> str:
    v = d.get(key)
    if not isinstance(v, str):
        raise MalformedRecord(f"{what}.{key} must be a string")
    return v


def rpc_id(value: Any) -> str:
    """A JSON-RPC id (string or integer) as the string that keys it (0 -> "0")."""
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise MalformedRecord("a JSON-RPC id must be a string or an integer")
    return str(value)


def or_unset(v: Any) -> Any:
    return UNSET if v is None else v


class Place:
    """Where an event belongs: envelope ids (canonical) and providerRefs (Codex's)."""

    __slots__ = ("kw",)

    def __init__(self, out: Emitter, *, thread: str | None = None, turn: str | None = None,
                 item: str | None = None, request: str | None = None):
        any_ref = thread is not None or turn is not None or item is not None or request is not None
        self.kw: dict[str, Any] = {
            "thread": out.id("thr", thread) if thread is not None else UNSET,
            "turn": out.id("trn", turn) if turn is not None else UNSET,
            "item": out.id("itm", turn or "", item) if item is not None else UNSET,
            "request": out.id("req", request) if request is not None else UNSET,
            # built only when it is used
            "refs": ProviderRefs(providerThreadId=or_unset(thread), providerTurnId=or_unset(turn),
                                 providerItemId=or_unset(item), providerRequestId=or_unset(request))
            if any_ref else UNSET,
        }

    def at(self) -> At:
        """The same place, for the conversation core (adapters.core.lifecycle)."""
        kw = self.kw
        return At(kw["thread"], kw["turn"], kw["item"], refs=kw["refs"], request=kw["request"])


def item_at(out: Emitter, thread: str, turn: str, item: str) -> At:
    """Where an item's events go (Place(...).at() without its dict: the delta path)."""
    return At(out.id("thr", thread), out.id("trn", turn), out.id("itm", turn, item),
              refs=ProviderRefs(providerThreadId=thread, providerTurnId=turn,
                                providerItemId=item))

def params_of(obj: dict[str, Any], method: str) -> dict[str, Any]:
    params = obj.get("params")
    if params is None:
        return {}
    return need_dict(params, f"{method} params")


def ensure_session(state: State, out: Emitter) -> State:
    """The app-server announces no session of its own except the `initialize`
    response; a stream that starts later still opens with session.started."""
    if state.started:
        return state
    out.emit(SessionStarted, SessionStartedPayload(), synthetic=True)
    return _replace(state, started=True)



Handler = Callable[[State, dict[str, Any], Emitter], State]
