"""OpenCode: how a turn ends (translator, "Turns", "Aborted while waiting to retry"):
session status busy / idle / retry, session.error, and what a turn leaves open.
"""

from __future__ import annotations

from typing import Any

from msgspec import UnsetType

from adapters.core.contract import MalformedRecord
from adapters.core.emitter import UNSET, Emitter
from adapters.core.emitter import replace as _replace
from adapters.core.lifecycle import At, end_turn
from adapters.opencode.common import (
    _dict,
    _ensure_thread,
    _int,
    _open_turn,
    _require_sid,
    _set_sess,
    _srefs,
    _str,
    _thread,
    _turn,
)
from adapters.opencode.requests import _resolve
from adapters.opencode.state import Part, State
from adapters.opencode.streams import _add, _read, _unsent
from adapters.opencode.text import _advance, _start_text, _user_text
from adapters.opencode.tools import _close_tool, _start_tool
from adapters.opencode.usage import _thread_total, _turn_usage
from topics.canonical import (
    ProviderRefs,
    RuntimeErrorEvent,
    RuntimeErrorPayload,
    TurnCompletedPayload,
)
from topics.usage import Cost, TokenUsage


def _end_turn(state: State, out: Emitter, sid: str, end: str, *, synthetic: bool = False,
              report_error: bool = True) -> State:
    """Complete the session's open turn, with the message session.error gave it unless
    `report_error` is False."""
    sess = state.sessions.get(sid)
    if sess is None or not sess.turnOpen:
        return state
    message = _read(out, out.id("trn", sid, str(sess.turns)), "error", sess.error, take=True)
    error = message.text if message.text and report_error else UNSET
    # close what the turn leaves open, in the order it was opened
    for pid, part in list(state.parts.items()):
        if part.sid == sid:
            state = _force_close(state, out, pid, part)
    for rid, req in list(state.requests.items()):
        if req.sid == sid:
            state = _resolve(state, out, rid, req, "cancelled", None, synthetic=True)
    u = sess.usage
    usage: Any = UNSET
    turn_tokens: TokenUsage | UnsetType = UNSET
    turn_cost: Cost | UnsetType = UNSET
    if u is not None:
        usage, turn_tokens, turn_cost = _turn_usage(u)
        sess = _thread_total(state, out, sid, sess, u, turn_tokens)
    end_turn(out, At(_thread(out, sid), _turn(state, out, sid), refs=_srefs(sid)),
             TurnCompletedPayload(state=end,  # type: ignore[arg-type]
                                  stopReason=sess.finish or UNSET, usage=usage,
                                  totalCostUsd=u.cost if u is not None else UNSET,
                                  errorMessage=error, tokens=turn_tokens, cost=turn_cost),
             synthetic)
    state = _set_sess(state, sid, _replace(sess, turnOpen=False, finish="", retry=0, usage=None,
                                           ending="", error="", waiting=False, held=False))
    # roles are only needed while a turn's parts stream
    stale = [m for m, s in state.msgSession.items() if s == sid]
    if stale:
        roles = {m: r for m, r in state.roles.items() if m not in stale}
        owners = {m: s for m, s in state.msgSession.items() if m not in stale}
        state = _replace(state, roles=roles, msgSession=owners)
    return state


def _force_close(state: State, out: Emitter, pid: str, part: Part) -> State:
    """Complete a part its turn or message leaves open."""
    if part.kind == "tool":
        if not part.started:  # never ran (still pending): still a tool call the model made
            state, part = _start_tool(state, out, pid, part, {}, synthetic=True)
        return _close_tool(state, out, pid, part, {}, "failed", synthetic=True,
                           detail="the turn ended before the tool call completed")
    if part.role == "user":
        text, part = _unsent(out, pid, part)
        return _user_text(state, out, pid, part, text)
    # role still unknown at the end: OpenCode has re-sent the user message by now, so an
    # unclaimed part is the assistant's
    part = _replace(part, role="assistant", kind=part.kind or "text")
    if not part.started:
        state, part = _start_text(state, out, pid, part, synthetic=True)
    return _advance(state, out, pid, part, forced=True)


def _on_session_status(state: State, props: dict[str, Any], out: Emitter) -> State:
    sid = _require_sid(props, "session.status")
    status = props.get("status")
    kind = status.get("type") if isinstance(status, dict) else None
    if not isinstance(status, dict) or not isinstance(kind, str):
        raise MalformedRecord("opencode session.status: 'status' must be an object with a type")
    if kind == "busy":
        return _busy(state, out, sid)
    if kind == "idle":
        return _idle(state, out, sid)
    if kind == "retry":
        state = _retry(state, out, sid, status.get("attempt"), _str(status, "message"),
                       {k: v for k, v in status.items() if k != "type"})
        sess = state.sessions[sid]
        return state if sess.waiting else _set_sess(state, sid, _replace(sess, waiting=True))
    state = _ensure_thread(state, out, sid)
    out.unknown(f"session.status:{kind}", thread=_thread(out, sid), turn=_turn(state, out, sid))
    return state


def _busy(state: State, out: Emitter, sid: str) -> State:
    """Work goes on: the turn opens (once: busy is repeated 3-4 times per turn); a retry
    is under way, and a held turn was not cut short after all (1.1.x reports an abort
    before its prompt loop could go busy again)."""
    sess = state.sessions.get(sid)
    if sess is not None and sess.turnOpen and (sess.waiting or sess.held):
        state = _set_sess(state, sid, _replace(sess, waiting=False, held=False))
    return _open_turn(state, out, sid)


def _retry(state: State, out: Emitter, sid: str, attempt: Any, message: str,
           detail: Any) -> State:
    """A provider retry: runtime.error with willRetry, once per attempt (a retry status and
    a retry part may report the same attempt)."""
    state = _open_turn(state, out, sid)
    sess = state.sessions[sid]
    n = _int(attempt)
    if n and n <= sess.retry:
        return state
    out.emit(RuntimeErrorEvent,
             RuntimeErrorPayload(message=message or "provider request failed; retrying",
                                 errorClass="provider_error", willRetry=True, detail=detail),
             thread=_thread(out, sid), turn=_turn(state, out, sid), refs=_srefs(sid))
    return _set_sess(state, sid, _replace(sess, retry=max(n, sess.retry)))


def _on_session_idle(state: State, props: dict[str, Any], out: Emitter) -> State:
    sid = _require_sid(props, "session.idle")
    return _idle(state, out, sid)  # after a status idle: the turn is already closed


def _idle(state: State, out: Emitter, sid: str) -> State:
    """The session went idle: its turn ends, as session.error said, or completed. OpenCode
    1.1.x goes idle *before* reporting an interrupt (cancel() sets idle, then the aborted
    call errors). While it waits to retry a failed call, nothing shows the cut: the turn
    is held open for the report that follows (session.error, the message completed),
    which ends it with the error inside. A text part still streaming or a tool still
    running shows it: the turn ends interrupted at once (no report may follow: the tool
    parts' own abort is all some runs send)."""
    sess = state.sessions.get(sid)
    if sess is None or not sess.turnOpen:
        return state
    if sess.ending:
        return _end_turn(state, out, sid, sess.ending)
    if sess.held:
        return state  # the idle repeated (status idle, then session.idle): still held
    if sess.waiting:
        return _set_sess(state, sid, _replace(sess, held=True))
    end = "interrupted" if any(p.sid == sid and p.busy for p in state.parts.values()) \
        else "completed"
    return _end_turn(state, out, sid, end)


_ERROR_CLASSES = {
    "ProviderAuthError": "permission_error",
    "StructuredOutputError": "validation_error",
    "MessageAbortedError": "unknown",
}


def _on_session_error(state: State, props: dict[str, Any], out: Emitter) -> State:
    sid = props.get("sessionID")
    error = _dict(props, "error")
    name = _str(error, "name")
    message = _str(_dict(error, "data"), "message") or name or "session error"
    thread: str | UnsetType = UNSET
    turn: str | UnsetType = UNSET
    refs: ProviderRefs | UnsetType = UNSET
    if isinstance(sid, str) and sid:
        state = _ensure_thread(state, out, sid)
        thread, turn, refs = _thread(out, sid), _turn(state, out, sid), _srefs(sid)
    out.emit(RuntimeErrorEvent,
             RuntimeErrorPayload(message=message,
                                 errorClass=_ERROR_CLASSES.get(name, "provider_error"),  # type: ignore[arg-type]
                                 willRetry=False, detail=error or UNSET),
             thread=thread, turn=turn, refs=refs)
    sess = state.sessions.get(sid) if isinstance(sid, str) else None
    if isinstance(sid, str) and sess is not None and sess.turnOpen and not sess.ending:
        # the turn ends at idle, which OpenCode sends after it has marked the aborted tool
        # parts ("Tool execution aborted") and completed the message: those stay in the turn
        end = "interrupted" if name == "MessageAbortedError" else "failed"
        # kept for turn.completed; spooled when long (the turn stays open until idle or,
        # never idle, until the next prompt)
        short = _add(out, out.id("trn", sid, str(sess.turns)), "error", "", message)
        state = _set_sess(state, sid, _replace(sess, ending=end, error=short))
        if sess.held:
            # 1.1.x went idle first, and this is the report it held back: the turn ends now
            state = _end_turn(state, out, sid, end)
    return state


def _message_done(state: State, out: Emitter, sid: str, info: dict[str, Any]) -> State:
    """An assistant message completed while its turn was held, or while OpenCode was to
    retry the call (v2 completes it so when the retry is aborted, without session.error,
    then goes idle): the turn was cut short. A message that finished a step (`finish`)
    and has no error is an ordinary end."""
    sess = state.sessions[sid]
    if not sess.turnOpen or sess.ending or not (sess.held or sess.waiting):
        return state
    normal = bool(_str(info, "finish")) and not info.get("error")
    if sess.held:
        return _end_turn(state, out, sid, "completed" if normal else "interrupted")
    if normal:
        return state
    return _set_sess(state, sid, _replace(sess, ending="interrupted"))
