"""claude: the SDK control protocol (`--permission-prompt-tool stdio`): the
agent's requests (can_use_tool, elicitations, hook callbacks) as canonical requests
resolved by the client's control_response, and the client's commands (interrupt,
set_model, ...) whose success changes the session's configuration."""

from __future__ import annotations

from typing import Any

import msgspec
from msgspec import UnsetType

from adapters.claude.agents import request_tool
from adapters.claude.session import _dict, _emit, _obj, _str, _thread, _turn, open_turn
from adapters.claude.state import Pending, State
from adapters.claude.tools import _finalize_tool, _set_tool, _start_tool, _tool_input_known
from adapters.core.contract import MalformedRecord, Message
from adapters.core.decisions import elicitation_outcome
from adapters.core.emitter import UNSET, Emitter
from adapters.core.emitter import replace as _replace
from adapters.core.tools import (
    item_type_for_tool,
    normalize_tool_name,
)
from topics.canonical import (
    Decision,
    HookCompleted,
    HookCompletedPayload,
    HookStarted,
    HookStartedPayload,
    RequestOpened,
    RequestOpenedPayload,
    RequestResolved,
    RequestResolvedPayload,
    RuntimeErrorEvent,
    RuntimeErrorPayload,
    SessionConfigured,
    SessionConfiguredPayload,
    UserInputRequested,
    UserInputRequestedPayload,
    UserInputResolved,
    UserInputResolvedPayload,
)

#: control_request subtypes that open a canonical request, by the requestType rule
_REQUESTS = frozenset({"can_use_tool", "elicitation", "request_user_dialog", "hook_callback"})


_APPROVAL = {"command_execution": "command_execution_approval",
             "file_change": "file_change_approval"}


#: client requests whose success changes the session configuration
_CONFIG_REQUESTS = {"set_permission_mode": ("mode", "permissionMode"),
                    "set_model": ("model", "model"),
                    "set_max_thinking_tokens": ("max_thinking_tokens", "maxThinkingTokens")}


def _on_control_request(state: State, msg: Message, out: Emitter) -> State:
    obj = msg.obj
    rid = obj.get("request_id")
    request = _obj(obj, "request")
    subtype = request.get("subtype")
    if not isinstance(rid, str | int) or not isinstance(subtype, str):
        raise MalformedRecord("control_request needs a request_id and a request.subtype")
    rid = str(rid)
    native = out.native_type = f"control_request/{subtype}"
    if msg.origin == "agent":
        if subtype == "can_use_tool":
            return _permission_request(state, out, rid, request)
        if subtype in ("elicitation", "request_user_dialog"):
            state = open_turn(state, out)
            tid = _str(request.get("tool_use_id"))
            questions = {k: v for k, v in request.items() if k != "subtype"}
            _emit(state, out, UserInputRequested, UserInputRequestedPayload(questions=questions),
                  request=rid, request_ref=rid, item=tid, item_ref=tid)
            return _pend(state, rid, Pending(subtype=subtype, origin="agent", request=rid,
                                             requestType="tool_user_input", tool=tid))
        if subtype == "hook_callback":
            hook_input = _dict(request.get("input"))
            _emit(state, out, HookStarted,
                  HookStartedPayload(hookId=rid, hookName=str(request.get("callback_id", "")),
                                     hookEvent=str(hook_input.get("hook_event_name", ""))))
            # the tool call it is about: its answer is that call's agent's (agents.py)
            return _pend(state, rid, Pending(subtype=subtype, origin="agent",
                                             tool=request_tool(request)))
    elif subtype == "interrupt" or subtype == "initialize" or subtype in _CONFIG_REQUESTS:
        # the client's commands: their effect shows when the agent answers
        if subtype == "interrupt" and state.turnOpen:
            state = _replace(state, interrupting=True)
        value = request.get(_CONFIG_REQUESTS[subtype][0]) if subtype in _CONFIG_REQUESTS else None
        return _pend(state, rid, Pending(subtype=subtype, origin="client", value=value))
    if native not in IGNORED_REQUESTS:
        out.unknown(native, thread=_thread(state, out), turn=_turn(state, out))
    return state


def _pend(state: State, rid: str, pending: Pending) -> State:
    return _replace(state, pending={**state.pending, rid: pending})


def _permission_request(state: State, out: Emitter, rid: str, request: dict[str, Any]) -> State:
    state = open_turn(state, out)
    tid = _str(request.get("tool_use_id"))
    name = normalize_tool_name(str(request.get("tool_name") or "unknown"))
    args = {k: request[k] for k in ("input", "blocked_path", "decision_reason",
                                    "decision_reason_type", "title", "display_name",
                                    "agent_id") if k in request}
    detail = _str(request.get("title")) or _str(request.get("description")) or \
        _str(request.get("display_name")) or name
    if name == "AskUserQuestion" and tid:
        # the question is the request: one request id for both, from the tool call
        if tid not in state.tools:
            state = _start_tool(state, out, tid, name, request.get("input"), None, final=True)
        elif not state.tools[tid].final:
            state = _finalize_tool(state, out, tid, request.get("input"))
        elif state.tools[tid].question == 0:
            state = _tool_input_known(state, out, tid)
        kind, req = "tool_user_input", tid
    else:
        kind = _APPROVAL.get(item_type_for_tool(name), "unknown")
        req = rid
    parent = state.tools[tid].parent if tid and tid in state.tools else None
    _emit(state, out, RequestOpened,
          RequestOpenedPayload(requestType=kind, detail=detail, toolName=name,  # type: ignore[arg-type]
                               options=request.get("permission_suggestions") or UNSET, args=args),
          request=req, request_ref=rid, item=tid, item_ref=tid, parent=parent)
    return _pend(state, rid, Pending(subtype="can_use_tool", origin="agent", requestType=kind,
                                     request=req, tool=tid))


def _on_control_response(state: State, msg: Message, out: Emitter) -> State:
    response = _obj(msg.obj, "response")
    rid = response.get("request_id")
    if not isinstance(rid, str | int):
        raise MalformedRecord("control_response without a request_id")
    rid = str(rid)
    pending = state.pending.get(rid)
    out.native_type = f"control_response/{pending.subtype if pending else 'unmatched'}"
    if pending is None:
        return state  # a late answer to a request already resolved or never seen
    rest = dict(state.pending)
    del rest[rid]
    state = _replace(state, pending=rest)
    ok = response.get("subtype") != "error"
    body = _dict(response.get("response"))
    error = _str(response.get("error"))
    if pending.subtype == "can_use_tool":
        return _permission_resolved(state, out, rid, pending, body if ok else
                                    {"behavior": "error", "message": error})
    if pending.subtype in ("elicitation", "request_user_dialog"):
        _emit(state, out, UserInputResolved,
              UserInputResolvedPayload(answers=body if ok else {"error": error},
                                       outcome=elicitation_outcome(body) if ok else UNSET),
              request=rid, request_ref=rid)
        return state
    if pending.subtype == "hook_callback":
        _emit(state, out, HookCompleted,
              HookCompletedPayload(hookId=rid, outcome="success" if ok else "error",
                                   output=msgspec.json.encode(body).decode() if ok else
                                   error or UNSET))
        return state
    if not ok:
        _emit(state, out, RuntimeErrorEvent,
              RuntimeErrorPayload(message=f"control request {pending.subtype} failed: {error}",
                                  errorClass="validation_error", willRetry=False))
        return state
    if pending.subtype == "initialize":
        _emit(state, out, SessionConfigured, SessionConfiguredPayload(config=body))
    elif pending.subtype in _CONFIG_REQUESTS:
        name = _CONFIG_REQUESTS[pending.subtype][1]
        if name == "model" and isinstance(pending.value, str):
            state = _replace(state, model=pending.value)
        _emit(state, out, SessionConfigured, SessionConfiguredPayload(config={name: pending.value}))
    return state


#: PermissionUpdates that spare the user the next question: an allow rule, a directory
#: added, or a mode that stops asking.
_GRANTING_MODES = frozenset({"acceptEdits", "bypassPermissions", "dontAsk"})


def _grants(updates: Any) -> bool:
    for u in updates if isinstance(updates, list) else []:
        kind = u.get("type") if isinstance(u, dict) else None
        if (kind in ("addRules", "replaceRules") and u.get("behavior") == "allow") \
                or kind == "addDirectories" \
                or (kind == "setMode" and u.get("mode") in _GRANTING_MODES):
            return True
    return False


def _outcome(behavior: str, body: dict[str, Any]) -> Decision | UnsetType:
    """The shared word for a permission answer: `allow` with permission updates that
    grant the like from now on is accept_for_session; `deny` with `interrupt` stops the
    turn too (cancel); an error answer says nothing."""
    if behavior == "allow":
        return "accept_for_session" if _grants(body.get("updatedPermissions")) else "accept"
    if behavior == "deny":
        return "cancel" if body.get("interrupt") is True else "decline"
    return UNSET


def _permission_resolved(state: State, out: Emitter, rid: str, pending: Pending,
                         body: dict[str, Any]) -> State:
    behavior = _str(body.get("behavior")) or "allow"
    resolution = {k: body[k] for k in ("updatedInput", "updatedPermissions", "message",
                                       "interrupt", "decisionClassification") if k in body}
    tid = pending.tool
    tool = state.tools.get(tid) if tid else None
    parent = tool.parent if tool else None
    _emit(state, out, RequestResolved,
          RequestResolvedPayload(requestType=pending.requestType, decision=behavior,  # type: ignore[arg-type]
                                 resolution=resolution or UNSET,
                                 outcome=_outcome(behavior, body)),
          request=pending.request, request_ref=rid, item=tid, item_ref=tid, parent=parent)
    if tool is None or tid is None:
        return state
    if behavior != "allow":
        return _set_tool(state, tid, denied=True)
    answers = _dict(body.get("updatedInput")).get("answers")
    if tool.question == 1 and answers is not None:
        _emit(state, out, UserInputResolved,
              UserInputResolvedPayload(answers=answers, outcome="answered"),
              request=tid, item=tid, item_ref=tid, parent=parent)
        return _set_tool(state, tid, question=2)
    return state


def _resolve_cancelled(state: State, out: Emitter, rid: str, pending: Pending) -> State:
    if pending.subtype == "hook_callback":
        _emit(state, out, HookCompleted, HookCompletedPayload(hookId=rid, outcome="cancelled"),
              synthetic=True)
    elif pending.subtype == "can_use_tool":
        _emit(state, out, RequestResolved,
              RequestResolvedPayload(requestType=pending.requestType, decision="cancelled",  # type: ignore[arg-type]
                                     outcome="cancel"),
              synthetic=True, request=pending.request, request_ref=rid, item=pending.tool,
              item_ref=pending.tool)
        if pending.requestType == "tool_user_input" and pending.tool in state.tools:
            return _set_tool(state, pending.tool, question=2)  # answered by nobody
    else:
        _emit(state, out, UserInputResolved,
              UserInputResolvedPayload(answers=None, outcome="cancelled"),
              synthetic=True, request=rid, request_ref=rid)
    return state


def _on_control_cancel_request(state: State, msg: Message, out: Emitter) -> State:
    rid = msg.obj.get("request_id")
    if not isinstance(rid, str | int):
        raise MalformedRecord("control_cancel_request without a request_id")
    pending = state.pending.get(str(rid))
    if pending is None:
        return state
    rest = dict(state.pending)
    del rest[str(rid)]
    state = _replace(state, pending=rest)
    if pending.origin == "agent" and pending.subtype in _REQUESTS:
        state = _resolve_cancelled(state, out, str(rid), pending)
    return state


#: control_request subtypes read on purpose and mapped to nothing, with the reason (part
#: of the translator's IGNORED_REASONS).
IGNORED_REQUESTS: dict[str, str] = {
    "control_request/mcp_message": "SDK MCP server transport; the tool call shows as tool_use",
    # client queries and commands with no effect on the conversation until answered
    **{f"control_request/{s}": "a client query or command; nothing to show"
       for s in ("get_context_usage", "get_session_cost", "list_models", "get_usage",
                 "get_binary_version", "mcp_status", "mcp_call", "file_suggestions",
                 "rewind_files", "cancel_async_message", "read_file", "seed_read_state",
                 "mcp_set_servers", "register_repo_root", "reload_plugins", "reload_skills",
                 "reload_output_styles", "mcp_reconnect", "mcp_toggle", "set_has_subscribers",
                 "stop_task", "background_tasks", "get_task_output", "apply_flag_settings",
                 "get_settings", "get_hooks_listing", "update_settings",
                 "list_permission_rules", "mcp_read_resource", "rename_session", "set_color")},
}
