"""OpenCode: permissions (v1 `permission.updated`, `permission.asked`, `permission.v2.*`)
and questions (`question.*`, `question.v2.*`) as requests and user-input requests.
"""

from __future__ import annotations

from typing import Any

from msgspec import UnsetType

from adapters.core.contract import MalformedRecord
from adapters.core.emitter import UNSET, Emitter
from adapters.core.emitter import replace as _replace
from adapters.core.shape import native_list
from adapters.core.tools import normalize_tool_name
from adapters.opencode.common import (
    _close_ids,
    _dict,
    _ensure_thread,
    _is_closed,
    _open_turn,
    _require_sid,
    _set_part,
    _str,
    _thread,
    _turn,
)
from adapters.opencode.state import Request, State
from topics.canonical import (
    Decision,
    InputOutcome,
    ProviderRefs,
    RequestOpened,
    RequestOpenedPayload,
    RequestResolved,
    RequestResolvedPayload,
    UserInputRequested,
    UserInputRequestedPayload,
    UserInputResolved,
    UserInputResolvedPayload,
)

_PERMISSION_TYPES = {
    "bash": "command_execution_approval",
    "edit": "file_change_approval",
    "write": "file_change_approval",
    "multiedit": "file_change_approval",
    "patch": "apply_patch_approval",
    "apply_patch": "apply_patch_approval",
}


def _tool_item_for(state: State, out: Emitter, call: str) -> str | UnsetType:
    for pid, part in state.parts.items():
        if call and part.call == call:
            return out.id("itm", pid)
    return UNSET


def _open_request(state: State, out: Emitter, rid: str, req: Request,
                  payload: RequestOpenedPayload | UserInputRequestedPayload) -> State:
    if rid in state.requests or _is_closed(state, rid):
        return state  # the same request announced again (v1 and v2 names)
    state = _open_turn(state, out, req.sid)
    cls = RequestOpened if req.kind == "permission" else UserInputRequested
    out.emit(cls, payload, thread=_thread(out, req.sid), turn=_turn(state, out, req.sid),
             request=out.id("req", rid), parent=_tool_item_for(state, out, req.call),
             refs=ProviderRefs(providerSessionId=req.sid, providerRequestId=rid,
                               providerItemId=req.call or UNSET))
    requests = dict(state.requests)
    requests[rid] = req
    return _replace(state, requests=requests)


def _on_permission_asked(state: State, props: dict[str, Any], out: Emitter) -> State:
    """permission.asked (PermissionRequest), permission.updated (1.1.x Permission) and
    permission.v2.asked share one mapping."""
    rid = props.get("id")
    if not isinstance(rid, str) or not rid:
        raise MalformedRecord(f"opencode {out.native_type}: no string id")
    sid = _require_sid(props, str(out.native_type))
    state = _ensure_thread(state, out, sid)
    permission = _str(props, "permission") or _str(props, "type") or _str(props, "action")
    tool = _dict(props, "tool") or _dict(props, "source")
    call = _str(tool, "callID") or _str(props, "callID")
    patterns = props.get("patterns", props.get("resources", props.get("pattern")))
    if isinstance(patterns, str):
        patterns = [patterns]
    patterns = native_list(patterns, "permission patterns")
    title = _str(props, "title") or ", ".join(p for p in patterns if isinstance(p, str))
    args: dict[str, Any] = {k: props[k] for k in ("patterns", "resources", "pattern", "always", "save",
                                  "metadata") if k in props}
    args["permission"] = permission
    rtype = _PERMISSION_TYPES.get(permission, "unknown")
    payload = RequestOpenedPayload(requestType=rtype,  # type: ignore[arg-type]
                                   detail=title or UNSET,
                                   toolName=normalize_tool_name(permission) if permission else UNSET,
                                   options=["once", "always", "reject"], args=args)
    return _open_request(state, out, rid,
                         Request(sid=sid, kind="permission", requestType=rtype, call=call),
                         payload)


def _on_permission_replied(state: State, props: dict[str, Any], out: Emitter) -> State:
    rid = props.get("requestID", props.get("permissionID"))
    reply = props.get("reply", props.get("response"))
    if not isinstance(rid, str) or not isinstance(reply, str):
        raise MalformedRecord(f"opencode {out.native_type}: needs requestID/permissionID and "
                              "reply/response strings")
    sid = _require_sid(props, str(out.native_type))
    return _answer(state, out, rid, sid, "permission", reply, {"reply": reply})


def _on_question_asked(state: State, props: dict[str, Any], out: Emitter) -> State:
    rid = props.get("id")
    if not isinstance(rid, str) or not rid:
        raise MalformedRecord(f"opencode {out.native_type}: no string id")
    sid = _require_sid(props, str(out.native_type))
    state = _ensure_thread(state, out, sid)
    call = _str(_dict(props, "tool"), "callID")
    return _open_request(state, out, rid,
                         Request(sid=sid, kind="question", requestType="tool_user_input",
                                 call=call),
                         UserInputRequestedPayload(questions=props.get("questions")))


def _on_question_replied(state: State, props: dict[str, Any], out: Emitter) -> State:
    rid = props.get("requestID")
    if not isinstance(rid, str):
        raise MalformedRecord(f"opencode {out.native_type}: no string requestID")
    sid = _require_sid(props, str(out.native_type))
    return _answer(state, out, rid, sid, "question", "answered", props.get("answers"))


def _on_question_rejected(state: State, props: dict[str, Any], out: Emitter) -> State:
    rid = props.get("requestID")
    if not isinstance(rid, str):
        raise MalformedRecord(f"opencode {out.native_type}: no string requestID")
    sid = _require_sid(props, str(out.native_type))
    # answers null: the user dismissed the question
    return _answer(state, out, rid, sid, "question", "reject", None)


def _answer(state: State, out: Emitter, rid: str, sid: str, kind: str, decision: str,
            resolution: Any) -> State:
    if _is_closed(state, rid):
        return state  # already resolved (v1 and v2 names for the same reply)
    req = state.requests.get(rid)
    if req is None:  # never saw it opened: still report the answer, never lose it
        state = _ensure_thread(state, out, sid)
        req = Request(sid=sid, kind=kind,
                      requestType="unknown" if kind == "permission" else "tool_user_input")
    if decision == "reject" and req.call:
        # the gated tool part will end in error: that is a refusal, not a failure
        for pid, part in state.parts.items():
            if part.call == req.call:
                state = _set_part(state, pid, _replace(part, declined=True))
                break
    return _resolve(state, out, rid, req, decision, resolution)


#: OpenCode's permission replies and question endings in the shared words ("cancelled":
#: still open when its turn ended): `always` allows the call's patterns for the rest of
#: the session.
_OUTCOMES: dict[str, Decision] = {"once": "accept", "always": "accept_for_session",
                                  "reject": "decline", "cancelled": "cancel"}


_ANSWERED: dict[str, InputOutcome] = {"answered": "answered", "reject": "declined",
                                      "cancelled": "cancelled"}


def _resolve(state: State, out: Emitter, rid: str, req: Request, decision: str,
             resolution: Any, synthetic: bool = False) -> State:
    refs = ProviderRefs(providerSessionId=req.sid, providerRequestId=rid,
                        providerItemId=req.call or UNSET)
    thread, turn, request = _thread(out, req.sid), _turn(state, out, req.sid), out.id("req", rid)
    if req.kind == "permission":
        out.emit(RequestResolved,
                 RequestResolvedPayload(requestType=req.requestType,  # type: ignore[arg-type]
                                        decision=decision,
                                        resolution=resolution if resolution is not None
                                        else UNSET,
                                        outcome=_OUTCOMES.get(decision, UNSET)),
                 synthetic=synthetic, thread=thread, turn=turn, request=request, refs=refs)
    else:
        out.emit(UserInputResolved,
                 UserInputResolvedPayload(answers=resolution,
                                          outcome=_ANSWERED.get(decision, UNSET)),
                 synthetic=synthetic, thread=thread, turn=turn, request=request, refs=refs)
    requests = dict(state.requests)
    requests.pop(rid, None)
    return _replace(state, requests=requests, closed=_close_ids(state, rid))
