"""OpenCode: messages and their parts: `message.updated` (roles, prompts, a message's
completion) and `message.part.updated` dispatched by part type.
"""

from __future__ import annotations

from typing import Any

from adapters.core.contract import MalformedRecord
from adapters.core.emitter import UNSET, Emitter
from adapters.core.emitter import replace as _replace
from adapters.opencode.common import (
    _close_ids,
    _dict,
    _ensure_thread,
    _int,
    _is_closed,
    _num,
    _open_turn,
    _prefs,
    _require_sid,
    _set_sess,
    _str,
    _thread,
    _turn,
)
from adapters.opencode.state import Part, State
from adapters.opencode.text import _on_text_part, _release
from adapters.opencode.tools import _on_tool_part
from adapters.opencode.turns import _end_turn, _force_close, _message_done, _retry
from adapters.opencode.usage import _on_step_finish
from topics.canonical import (
    ItemCompleted,
    ItemPayload,
    ItemStarted,
)


def _on_message_updated(state: State, props: dict[str, Any], out: Emitter) -> State:
    info = props.get("info")
    if not isinstance(info, dict) or not isinstance(info.get("id"), str):
        raise MalformedRecord("opencode message.updated: 'info' must be a Message with an id")
    sid = _require_sid(props, "message.updated", "info")
    mid, role = info["id"], info.get("role")
    state = _ensure_thread(state, out, sid)
    sess = state.sessions[sid]
    created = _num(_dict(info, "time").get("created"))
    if role == "user" and mid != sess.prompt and created >= sess.promptAt:
        # a new prompt (OpenCode re-sends the user message after every step: same id)
        if sess.turnOpen and (sess.ending or sess.held):  # it never went idle, or was held
            state = _end_turn(state, out, sid, sess.ending or "interrupted", synthetic=True)
        model = _dict(info, "model")
        name = "/".join(x for x in (_str(model, "providerID"), _str(model, "modelID")) if x)
        state = _open_turn(state, out, sid, model=name or UNSET)
        state = _set_sess(state, sid, _replace(state.sessions[sid], prompt=mid,
                                               promptAt=_int(created)))
    elif role == "assistant":
        cwd = _str(_dict(info, "path"), "cwd")
        finish = _str(info, "finish")
        sess = state.sessions[sid]
        if (cwd and cwd != sess.cwd) or (finish and finish != sess.finish):
            state = _set_sess(state, sid, _replace(sess, cwd=cwd or sess.cwd,
                                                   finish=finish or sess.finish))
    if role not in ("user", "assistant"):
        return state
    if state.roles.get(mid) != role:
        roles, owners = dict(state.roles), dict(state.msgSession)
        roles[mid], owners[mid] = role, sid
        state = _replace(state, roles=roles, msgSession=owners)
    # parts that waited for their message's role; once the prompt is known, parts of other
    # unannounced messages of the session are the assistant's (see _role_of)
    prompt = state.sessions[sid].prompt if role == "user" else ""
    for pid, part in list(state.parts.items()):
        if not part.role and part.kind == "text":
            if part.msg == mid:
                state = _release(state, out, pid, part, role)
            elif prompt and part.sid == sid and part.msg not in state.roles:
                state = _release(state, out, pid, part, "assistant")
    if role == "assistant" and _dict(info, "time").get("completed") is not None:
        # the message is done: its text/reasoning parts without time.end are done too
        for pid, part in list(state.parts.items()):
            if part.msg == mid and part.kind != "tool":
                state = _force_close(state, out, pid, part)
        state = _message_done(state, out, sid, info)
    return state


def _on_message_part_updated(state: State, props: dict[str, Any], out: Emitter) -> State:
    part = props.get("part")
    if not isinstance(part, dict):
        raise MalformedRecord("opencode message.part.updated: 'part' must be an object")
    pid, mid, ptype = part.get("id"), part.get("messageID"), part.get("type")
    if not (isinstance(pid, str) and isinstance(mid, str) and isinstance(ptype, str)):
        raise MalformedRecord("opencode message.part.updated: part needs string id, "
                              "messageID and type")
    sid = _require_sid(props, "message.part.updated", "part")
    if pid not in state.parts and _is_closed(state, pid):  # an open part is not closed
        return state  # a finished part sent again (or updated after its turn ended)
    state = _ensure_thread(state, out, sid)
    handler = _PART_HANDLERS.get(ptype)
    if handler is not None:
        return handler(state, out, sid, mid, pid, part)
    if ptype not in _IGNORED_PARTS:
        out.unknown(f"message.part.updated:{ptype}", thread=_thread(out, sid),
                    turn=_turn(state, out, sid))
    return state


def _on_retry_part(state: State, out: Emitter, sid: str, mid: str, pid: str,
                   part: dict[str, Any]) -> State:
    error = _dict(part, "error")
    message = _str(_dict(error, "data"), "message") or _str(error, "message")
    state = _retry(state, out, sid, part.get("attempt"), message, error or UNSET)
    return _replace(state, closed=_close_ids(state, pid))


def _on_compaction_part(state: State, out: Emitter, sid: str, mid: str, pid: str,
                        part: dict[str, Any]) -> State:
    state = _open_turn(state, out, sid)
    data = {k: part[k] for k in ("auto", "overflow") if k in part}
    p = Part(sid=sid, msg=mid, kind="compaction")
    for cls, status in ((ItemStarted, "inProgress"), (ItemCompleted, "completed")):
        out.emit(cls, ItemPayload(itemType="context_compaction", status=status,  # type: ignore[arg-type]
                                  data=data or UNSET),
                 thread=_thread(out, sid), turn=_turn(state, out, sid), item=out.id("itm", pid),
                 refs=_prefs(pid, p))
    return _replace(state, closed=_close_ids(state, pid))


_PART_HANDLERS = {
    "text": _on_text_part,
    "reasoning": _on_text_part,
    "tool": _on_tool_part,
    "step-finish": _on_step_finish,
    "retry": _on_retry_part,
    "compaction": _on_compaction_part,
}


#: Part types read on purpose and mapped to nothing.
_IGNORED_PARTS: dict[str, str] = {
    "step-start": "marks the start of a model call (a snapshot hash only); its usage comes "
                  "with step-finish",
    "snapshot": "a git snapshot hash of the worktree, no conversation content",
    "patch": "the hash and file list of a step's changes; session.diff carries the diff",
    "file": "an attachment or file reference; its content reaches the model as synthetic "
            "text parts, which are mapped",
    "agent": "an @agent mention inside the prompt text, which is already the prompt's text",
    "subtask": "a queued subagent request; the subagent runs as a task tool part and a child "
               "session, both mapped",
}
