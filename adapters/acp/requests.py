"""acp: what the agent asks the user: session/request_permission (an approval of a tool
call, request.opened and request.resolved with the option's kind in the shared words)
and elicitation/create (user input).

A permission request names its tool call, which it may be the first to announce
(codex-acp, gemini): it then starts the item.
"""

from __future__ import annotations

from typing import Any

from adapters.acp.envelope import Ctx, as_object, as_str
from adapters.acp.state import Pending, State, Tool
from adapters.acp.tool_calls import start_tool, tool_input, tool_item_type, tool_name
from adapters.acp.tool_content import Content, merge, save
from adapters.core.contract import MalformedRecord
from adapters.core.decisions import elicitation_outcome
from adapters.core.emitter import UNSET, Emitter
from adapters.core.emitter import replace as _replace
from adapters.core.shape import native_list
from topics.canonical import (
    Decision,
    RequestOpened,
    RequestOpenedPayload,
    RequestResolved,
    RequestResolvedPayload,
    UserInputRequested,
    UserInputRequestedPayload,
    UserInputResolved,
    UserInputResolvedPayload,
)

_REQUEST_TYPES = {"execute": "command_execution_approval", "edit": "file_change_approval",
                  "delete": "file_change_approval", "move": "file_change_approval"}


def on_request_permission(state: State, obj: dict[str, Any], params: dict[str, Any], key: str,
                          out: Emitter) -> State:
    call = as_object(params.get("toolCall"), "session/request_permission toolCall")
    tcid = call.get("toolCallId")
    if not isinstance(tcid, str):
        raise MalformedRecord("session/request_permission toolCall needs a toolCallId")
    rid = str(obj["id"])
    tool, streams = merge(state.tools.get(tcid, Tool()), call, None)
    content = Content(out, tcid)
    if tcid in state.tools:  # the request may carry a richer view of the call
        save(out, tcid, streams)
        state = _replace(state, tools={**state.tools, tcid: tool})
    elif tcid not in state.done:  # gemini, codex-acp: the request comes first
        save(out, tcid, streams)
        state = start_tool(state, out, tcid, tool, synthetic=True, rid=rid)
        tool = state.tools[tcid]
    else:  # a call already completed: its item has no streams any more
        content = Content(out, tcid, streams)
    name = tool_name(tcid, tool)
    request_type = _REQUEST_TYPES.get(tool.kind or "")
    if request_type is None:
        item_type = tool_item_type(tool, name)
        request_type = {"command_execution": "command_execution_approval",
                        "file_change": "file_change_approval"}.get(item_type, "unknown")
    options = [o for o in native_list(params.get("options"), "request_permission options")
               if isinstance(o, dict)]
    c = Ctx(state, out, as_str(params.get("sessionId")), tool.agent)
    out.emit(RequestOpened,
             RequestOpenedPayload(requestType=request_type, detail=tool.title or UNSET,  # type: ignore[arg-type]
                                  toolName=name, options=options,
                                  args=tool_input(tool, name, content)[0]),
             thread=c.thread, turn=c.turn, item=content.item,
             request=out.id("req", "agent", key),
             refs=c.refs(providerRequestId=rid, providerItemId=tcid))
    pending = Pending(method="session/request_permission", tool=tcid, requestType=request_type,
                      session=c.sid, options={str(o.get("optionId")): str(o.get("kind"))
                                              for o in options})
    return _replace(state, agent={**state.agent, key: pending})


#: PermissionOptionKind in the shared words ("cancelled": the prompt turn was cancelled
#: before the user chose); an option without a kind says nothing.
_OUTCOMES: dict[str, Decision] = {"allow_once": "accept", "allow_always": "accept_for_session",
                                  "reject_once": "decline", "reject_always": "decline",
                                  "cancelled": "cancel"}


def on_permission_answered(state: State, obj: dict[str, Any], key: str, pending: Pending,
                           out: Emitter) -> State:
    resolution: dict[str, Any]
    if "error" in obj:
        error = as_object(obj["error"], "error")
        decision, resolution = "error", {"error": error}
    else:
        outcome = as_object(as_object(obj["result"], "result").get("outcome"), "outcome")
        if outcome.get("outcome") == "selected":
            option = str(outcome.get("optionId"))
            kind = pending.options.get(option)
            decision = kind or option
            resolution = {"outcome": "selected", "optionId": option,
                          **({"kind": kind} if kind else {})}
        else:
            decision, resolution = "cancelled", {"outcome": "cancelled"}
    tcid = pending.tool or ""
    tool = state.tools.get(tcid)
    if tool is not None and decision.startswith("reject"):
        state = _replace(state, tools={**state.tools, tcid: _replace(tool, declined=True)})
    c = Ctx(state, out, pending.session, tool.agent if tool is not None else None)
    out.emit(RequestResolved,
             RequestResolvedPayload(requestType=pending.requestType or "unknown",  # type: ignore[arg-type]
                                    decision=decision, resolution=resolution,
                                    outcome=_OUTCOMES.get(decision, UNSET)),
             thread=c.thread, turn=c.turn, item=out.id("itm", tcid) if tcid else UNSET,
             request=out.id("req", "agent", key),
             refs=c.refs(providerRequestId=str(obj["id"]), providerItemId=tcid or UNSET))
    return state


def on_elicitation(state: State, obj: dict[str, Any], params: dict[str, Any], key: str,
                   out: Emitter) -> State:
    sid = as_str(params.get("sessionId"))
    c = Ctx(state, out, sid)
    questions = {k: v for k, v in params.items() if k not in ("sessionId", "_meta")}
    out.emit(UserInputRequested, UserInputRequestedPayload(questions=questions),
             thread=c.thread, turn=c.turn, request=out.id("req", "agent", key),
             refs=c.refs(providerRequestId=str(obj["id"])))
    return _replace(state, agent={**state.agent, key: Pending(method=obj["method"], session=sid)})


def on_elicitation_answered(state: State, obj: dict[str, Any], key: str, pending: Pending,
                            out: Emitter) -> State:
    answers = obj["result"] if "result" in obj else {"error": obj["error"]}
    c = Ctx(state, out, pending.session)
    out.emit(UserInputResolved, UserInputResolvedPayload(
        answers=answers, outcome=elicitation_outcome(answers)), thread=c.thread,
             turn=c.turn, request=out.id("req", "agent", key),
             refs=c.refs(providerRequestId=str(obj["id"])))
    return state
