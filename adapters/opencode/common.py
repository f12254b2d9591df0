"""OpenCode: what every module of the adapter shares: canonical ids and provider refs,
reading a native object's fields, the state's setters, and a thread and a turn opened
when the bus first shows them (OpenCode has no turn events).
"""

from __future__ import annotations

import hashlib
from typing import Any

from msgspec import UnsetType

from adapters.core.contract import MalformedRecord
from adapters.core.emitter import UNSET, Emitter
from adapters.core.emitter import replace as _replace
from adapters.core.lifecycle import At
from adapters.opencode.agents import _unlink
from adapters.opencode.state import Part, Sess, State
from topics.canonical import (
    ProviderRefs,
    ThreadStarted,
    ThreadStartedPayload,
    TurnStarted,
    TurnStartedPayload,
)

# ---- ids and small helpers -----------------------------------------------------------


_RING = 64  # closed part/request ids remembered, to swallow late re-sends


_MAX_NUM = 2.0**53  # token counts, costs, times and attempts beyond this are not real


# characters of a part's text (emitted, Part.said, or not yet, Part.held) kept in the
# state; a longer text is spooled (_add)
_KEPT = 256


def _thread(out: Emitter, sid: str) -> str:
    return out.id("thr", sid)


def _turn(state: State, out: Emitter, sid: str) -> str | UnsetType:
    s = state.sessions.get(sid)
    return out.id("trn", sid, str(s.turns)) if s is not None and s.turnOpen else UNSET


def _srefs(sid: str) -> ProviderRefs:
    return ProviderRefs(providerSessionId=sid)


def _prefs(pid: str, p: Part) -> ProviderRefs:
    return ProviderRefs(providerSessionId=p.sid, providerItemId=p.call or pid,
                        providerParentItemId=p.msg)


def _at(state: State, out: Emitter, pid: str, part: Part) -> At:
    """Where the events of part `pid`'s item go (the conversation core's At)."""
    return At(_thread(out, part.sid), _turn(state, out, part.sid), out.id("itm", pid),
              refs=_prefs(pid, part))


def _str(obj: dict[str, Any], key: str) -> str:
    value = obj.get(key)
    return value if isinstance(value, str) else ""


def _dict(obj: dict[str, Any], key: str) -> dict[str, Any]:
    value = obj.get(key)
    return value if isinstance(value, dict) else {}


def _num(value: Any) -> float:
    """A JSON number as a float; anything else (or a non-finite or absurd value) is 0."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return 0.0
    return float(value) if abs(value) < _MAX_NUM else 0.0


def _int(value: Any) -> int:
    # bounded: the state is msgpack-encoded (64-bit integers) and sums must stay finite
    return int(_num(value))


def _require_sid(props: dict[str, Any], kind: str, *nested: str) -> str:
    """The native session id of an event: `properties.sessionID`, else inside `nested`."""
    sid = props.get("sessionID")
    for key in nested:
        if not isinstance(sid, str):
            sid = _dict(props, key).get("sessionID")
    if not isinstance(sid, str) or not sid:
        raise MalformedRecord(f"opencode {kind}: no string sessionID")
    return sid


def _digest(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


# ---- the state -----------------------------------------------------------------------


def _closed_key(id_: str) -> int:
    """How State.closed keeps a closed id: the first 8 bytes of its BLAKE2b."""
    return int.from_bytes(hashlib.blake2b(id_.encode("utf-8", "surrogatepass"),
                                          digest_size=8).digest(), "big")


def _is_closed(state: State, id_: str) -> bool:
    closed = state.closed
    if not closed:
        return False
    return _closed_key(id_) in closed or (isinstance(closed[0], str) and id_ in closed)


def _close_ids(state: State, *ids: str) -> tuple[int | str, ...]:
    return (state.closed + tuple(_closed_key(i) for i in ids))[-_RING:]


def _set_part(state: State, pid: str, part: Part) -> State:
    parts = dict(state.parts)
    parts[pid] = part
    return _replace(state, parts=parts)


def _drop_part(state: State, pid: str) -> State:
    parts = dict(state.parts)
    parts.pop(pid, None)
    if state.agents:  # a task part's child session is its subagent no more
        state = _unlink(state, (pid,))
    return _replace(state, parts=parts, closed=_close_ids(state, pid))


def _set_sess(state: State, sid: str, sess: Sess) -> State:
    sessions = dict(state.sessions)
    sessions[sid] = sess
    return _replace(state, sessions=sessions)


# ---- threads and turns, opened -------------------------------------------------------


def _ensure_thread(state: State, out: Emitter, sid: str, native: bool = False) -> State:
    if sid in state.sessions:
        return state
    out.emit(ThreadStarted, ThreadStartedPayload(providerThreadId=sid), synthetic=not native,
             thread=_thread(out, sid), refs=_srefs(sid))
    return _set_sess(state, sid, Sess())


def _open_turn(state: State, out: Emitter, sid: str,
               model: str | UnsetType = UNSET) -> State:
    state = _ensure_thread(state, out, sid)
    sess = state.sessions[sid]
    if sess.turnOpen:
        return state
    state = _set_sess(state, sid, _replace(sess, turns=sess.turns + 1, turnOpen=True, finish="",
                                           retry=0, usage=None, ending="", error="",
                                           waiting=False, held=False))
    # OpenCode has no turn-start event: the turn is inferred from status or activity
    out.emit(TurnStarted, TurnStartedPayload(model=model), synthetic=True,
             thread=_thread(out, sid), turn=_turn(state, out, sid), refs=_srefs(sid))
    return state
