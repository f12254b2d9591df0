"""codex: server requests (approvals, user input, dynamic tool calls, auth refresh)
and how they are resolved: the client's answer (the user's decision), or
`serverRequest/resolved` when the server settles one without it. Seed 002 §3.2."""

from __future__ import annotations

from typing import Any

from msgspec import UnsetType

from adapters.codex.agents import speak_for
from adapters.codex.common import Place, get_str, or_unset, params_of, rpc_id
from adapters.codex.state import OpenRequest, State
from adapters.core.decisions import elicitation_decision, elicitation_outcome
from adapters.core.emitter import UNSET, Emitter
from adapters.core.emitter import replace as _replace
from adapters.core.tools import normalize_tool_name
from topics.canonical import (
    Decision,
    InputOutcome,
    RequestOpened,
    RequestOpenedPayload,
    RequestResolved,
    RequestResolvedPayload,
    UserInputRequested,
    UserInputRequestedPayload,
    UserInputResolved,
    UserInputResolvedPayload,
)


def on_client_response(state: State, obj: dict[str, Any], out: Emitter) -> State:
    """The client's answer to a server request: the user's decision or input."""
    key = rpc_id(obj["id"])
    req = state.requests.get(key)
    out.native_type = f"{req.method if req else 'unknown'} response"
    speak_for(state, out, req.thread if req else None)  # the agent that asked
    if req is None:  # already resolved by serverRequest/resolved, or never seen
        return state
    if "error" in obj:
        _resolve(out, key, req, decision=UNSET, resolution={"error": obj["error"]},
                 answers=None)
    else:
        result = obj["result"]
        result = result if isinstance(result, dict) else {}
        decision, resolution, answers, outcome = _read_answer(req, result)
        _resolve(out, key, req, decision=decision, resolution=resolution, answers=answers,
                 outcome=outcome)
    return _drop_request(state, key)


# ---- server requests (approvals, input, tool calls) ---------------------------------


#: requestType by server request method; the methods this table does not
#: name open as `unknown`, with their payload.
REQUEST_TYPES: dict[str, str] = {
    "item/commandExecution/requestApproval": "command_execution_approval",
    "item/fileChange/requestApproval": "file_change_approval",
    "applyPatchApproval": "apply_patch_approval",
    "execCommandApproval": "exec_command_approval",
    "item/tool/requestUserInput": "tool_user_input",
    # an MCP server asking the user for structured input: the same UI as tool input
    "mcpServer/elicitation/request": "tool_user_input",
    "item/tool/call": "dynamic_tool_call",
    "account/chatgptAuthTokens/refresh": "auth_tokens_refresh",
    # a sandbox-permission grant and a client attestation have no canonical type
    "item/permissions/requestApproval": "unknown",
    "attestation/generate": "unknown",
}
_USER_INPUT = frozenset({"item/tool/requestUserInput", "mcpServer/elicitation/request"})


def on_server_request(state: State, obj: dict[str, Any], method: str, out: Emitter) -> State:
    key = rpc_id(obj["id"])
    params = obj.get("params")
    known = method in REQUEST_TYPES
    p = params_of(obj, method) if known else (params if isinstance(params, dict) else {})
    request_type = REQUEST_TYPES.get(method, "unknown")
    thread = get_str(p, "threadId") or get_str(p, "conversationId")
    item = get_str(p, "itemId") or get_str(p, "callId")
    turn = get_str(p, "turnId")
    if turn is None:  # legacy approvals name no turn: the item's, else the thread's
        if item is not None and item in state.items:
            turn = state.items[item].turn
        else:
            turn = next((k for k, t in state.turns.items() if t.thread == thread), None)
    speak_for(state, out, thread)
    at = Place(out, thread=thread, turn=turn, item=item, request=key)
    payload = _request_payload(method, request_type, p, params)
    if method in _USER_INPUT:
        questions = p.get("questions") if method == "item/tool/requestUserInput" else {
            k: v for k, v in p.items()
            if k in ("mode", "message", "requestedSchema", "url", "elicitationId", "serverName")}
        out.emit(UserInputRequested, UserInputRequestedPayload(questions=questions), **at.kw)
    out.emit(RequestOpened, payload, with_raw=not known, **at.kw)
    req = OpenRequest(method=method, requestType=request_type, thread=thread, turn=turn, item=item)
    return _replace(state, requests={**state.requests, key: req})


def _request_payload(method: str, request_type: str, p: dict[str, Any],
                     params: Any) -> RequestOpenedPayload:
    reason = get_str(p, "reason")
    if method == "item/commandExecution/requestApproval":
        decisions = p.get("availableDecisions")
        return RequestOpenedPayload(
            requestType="command_execution_approval", toolName="Bash",
            detail=or_unset(reason or get_str(p, "command")),
            options=decisions if isinstance(decisions, list) else UNSET, args=p)
    if method == "execCommandApproval":
        command = p.get("command")
        text = " ".join(c for c in command if isinstance(c, str)) if isinstance(command, list) else None
        return RequestOpenedPayload(requestType="exec_command_approval", toolName="Bash",
                                    detail=or_unset(reason or text), args=p)
    if method in ("item/fileChange/requestApproval", "applyPatchApproval"):
        return RequestOpenedPayload(requestType=request_type, toolName="Edit",  # type: ignore[arg-type]
                                    detail=or_unset(reason or get_str(p, "grantRoot")), args=p)
    if method == "item/tool/requestUserInput":
        questions = p.get("questions")
        texts = [q["question"] for q in questions if isinstance(q, dict)
                 and isinstance(q.get("question"), str)] if isinstance(questions, list) else []
        return RequestOpenedPayload(requestType="tool_user_input",
                                    detail="\n".join(texts) if texts else UNSET)
    if method == "mcpServer/elicitation/request":
        return RequestOpenedPayload(requestType="tool_user_input",
                                    detail=or_unset(get_str(p, "message")))
    if method == "item/tool/call":
        tool = get_str(p, "tool")
        return RequestOpenedPayload(requestType="dynamic_tool_call",
                                    toolName=normalize_tool_name(tool) if tool else UNSET,
                                    args=p.get("arguments"))
    if method == "account/chatgptAuthTokens/refresh":
        return RequestOpenedPayload(requestType="auth_tokens_refresh",
                                    detail=or_unset(get_str(p, "reason")), args=p)
    if method == "item/permissions/requestApproval":
        return RequestOpenedPayload(requestType="unknown", detail=reason or "permissions",
                                    args=p)
    # attestation/generate, or a request this Codex version does not define
    return RequestOpenedPayload(requestType="unknown", detail=method, args=params)


#: `decision` carries the v2 spelling of Codex's word (as it always did); the legacy
#: ReviewDecision's own spelling stays in `resolution`.
_VERBS = {
    "accept": "accept", "acceptForSession": "acceptForSession", "decline": "decline",
    "cancel": "cancel", "approved": "accept", "approved_for_session": "acceptForSession",
    "approved_mcp_policy_amendment": "acceptForSession", "denied": "decline",
    "abort": "cancel", "timed_out": "decline",
}


#: The shared word (topics.canonical.Decision) for each of Codex's, v2 and legacy: both
#: `cancel` and the legacy `abort` refuse and stop the turn; `timed_out` (an automatic
#: review that reached no decision) leaves the command unrun and the turn going.
_OUTCOMES: dict[str, Decision] = {
    "accept": "accept", "acceptForSession": "accept_for_session", "decline": "decline",
    "cancel": "cancel", "approved": "accept", "approved_for_session": "accept_for_session",
    "approved_mcp_policy_amendment": "accept_for_session", "denied": "decline",
    "abort": "cancel", "timed_out": "decline",
}

_Decided = tuple[str | UnsetType, Any, Decision | UnsetType]


def _decision(value: Any) -> _Decided:
    """(decision, resolution, outcome): the resolution keeps what the decision word
    alone cannot say (a legacy spelling, the amendment object)."""
    if isinstance(value, str):
        verb = _VERBS.get(value, value)
        return verb, UNSET if verb == value else value, _OUTCOMES.get(value, UNSET)
    if isinstance(value, dict) and len(value) == 1:
        (kind, body), = value.items()
        if kind == "denied":  # ReviewDecision {"denied": {"rejection": ...}}
            return "decline", value, "decline"
        if kind in ("applyNetworkPolicyAmendment", "network_policy_amendment"):
            inner = body.get(kind if kind == "network_policy_amendment"
                             else "network_policy_amendment") if isinstance(body, dict) else None
            action = inner.get("action") if isinstance(inner, dict) else None
            if action == "deny":
                return "decline", value, "decline"
            return "accept", value, "accept_for_session"  # a standing rule for the host
        # accept this action, and amend the exec policy for the next ones
        return "accept", value, "accept_for_session"
    return UNSET, value, UNSET


def _read_answer(req: OpenRequest, result: dict[str, Any]
                 ) -> tuple[str | UnsetType, Any, Any, Decision | UnsetType]:
    """(decision, resolution, user-input answers, outcome) from the client's result."""
    method = req.method
    if method in ("item/commandExecution/requestApproval", "item/fileChange/requestApproval",
                  "applyPatchApproval", "execCommandApproval"):
        decision, resolution, outcome = _decision(result.get("decision"))
        return decision, resolution, None, outcome
    if method == "item/tool/requestUserInput":
        return UNSET, UNSET, result.get("answers"), UNSET
    if method == "mcpServer/elicitation/request":
        action = get_str(result, "action")
        return or_unset(action), UNSET, result.get("content"), elicitation_decision(action)
    if method == "item/permissions/requestApproval":
        if not result.get("permissions"):
            return "decline", result, None, "decline"
        if result.get("scope") == "session":
            return "acceptForSession", result, None, "accept_for_session"
        return "accept", result, None, "accept"
    if method == "item/tool/call":
        return UNSET, result, None, UNSET
    if method == "account/chatgptAuthTokens/refresh":
        # never copy the access token
        return UNSET, {k: v for k, v in result.items() if k != "accessToken"}, None, UNSET
    if method == "attestation/generate":
        return UNSET, {}, None, UNSET  # the token is a secret
    if "decision" in result:  # an approval this version does not define
        decision, _, outcome = _decision(result["decision"])
        return decision, result, None, outcome
    return UNSET, result, None, UNSET


def _resolve(out: Emitter, key: str, req: OpenRequest, *, decision: str | UnsetType,
             resolution: Any, answers: Any, outcome: Decision | UnsetType = UNSET) -> None:
    """`outcome` UNSET: the stream does not say (an error answer, a request the server
    cleared without the client's answer in the stream)."""
    at = Place(out, thread=req.thread, turn=req.turn, item=req.item, request=key)
    if req.method in _USER_INPUT:
        answered: InputOutcome | UnsetType = UNSET
        if req.method == "item/tool/requestUserInput":
            answered = "answered" if answers is not None else UNSET
        elif isinstance(decision, str):
            answered = elicitation_outcome({"action": decision})
        out.emit(UserInputResolved, UserInputResolvedPayload(answers=answers, outcome=answered),
                 **at.kw)
    out.emit(RequestResolved, RequestResolvedPayload(
        requestType=req.requestType, decision=decision, resolution=resolution,  # type: ignore[arg-type]
        outcome=outcome), **at.kw)


def _drop_request(state: State, key: str) -> State:
    requests = dict(state.requests)
    requests.pop(key, None)
    return _replace(state, requests=requests)


def on_server_request_resolved(state: State, p: dict[str, Any], out: Emitter) -> State:
    """The server's word that a request is settled: answered (then the client's
    response already resolved it) or cleared at turn start/completion/interrupt."""
    key = rpc_id(p.get("requestId"))
    req = state.requests.get(key)
    if req is None:
        return state
    _resolve(out, key, req, decision=UNSET, resolution=UNSET, answers=None)
    return _drop_request(state, key)


