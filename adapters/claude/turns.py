"""claude: the end of a turn, at `result` (one per turn): what the turn left open
is closed (items failed or declined, requests cancelled), then turn.completed with the
turn's usage, tokens and cost."""

from __future__ import annotations

from typing import Any

from adapters.claude.agents import enter_subagent
from adapters.claude.control import _REQUESTS, _resolve_cancelled
from adapters.claude.messages import _close_blocks, _drop_block
from adapters.claude.session import _adopt_session, _at, _emit, _str, open_turn
from adapters.claude.state import State
from adapters.claude.tools import _set_tool, _tool_payload
from adapters.claude.usage import count_turn, result_cost, result_tokens
from adapters.core.contract import Message
from adapters.core.emitter import UNSET, Emitter
from adapters.core.emitter import replace as _replace
from adapters.core.lifecycle import complete_item
from adapters.core.lifecycle import end_turn as complete_turn
from adapters.core.shape import native_list
from topics.canonical import (
    RuntimeErrorEvent,
    RuntimeErrorPayload,
    TurnCompletedPayload,
    UserInputResolved,
    UserInputResolvedPayload,
)
from topics.usage import TokenUsage


def end_turn(state: State, out: Emitter, payload: TurnCompletedPayload) -> State:
    """Close what is still open in the turn, each as the agent it belongs to, then
    complete it (as the root)."""
    why = "the turn ended before the item completed"
    for m in list(state.msgs.values()):
        enter_subagent(state, out, m.parent)
        state = _close_blocks(state, out, m, "failed", why)
    for key in list(state.blocks):  # tool blocks cut off before their stop
        state = _drop_block(state, out, key)
    for rid, pending in state.pending.items():
        if pending.origin == "agent" and pending.subtype in _REQUESTS:
            caller = state.tools.get(pending.tool or "")
            enter_subagent(state, out, caller.parent if caller is not None else None)
            state = _resolve_cancelled(state, out, rid, pending)
    for tid, tool in state.tools.items():
        enter_subagent(state, out, tool.parent)
        if tool.question == 1:
            _emit(state, out, UserInputResolved,
                  UserInputResolvedPayload(answers=None, outcome="cancelled"),
                  synthetic=True, request=tid, item=tid, item_ref=tid, parent=tool.parent)
        complete_item(out, _at(state, out, tid, tid, parent=tool.parent),
                      _tool_payload(tool, "declined" if tool.denied else "failed", out.cap,
                                    detail=why), True)
    out.set_agent(None)
    if state.turnOpen:
        complete_turn(out, _at(state, out), payload)
    kept = {k: v for k, v in state.pending.items() if v.origin == "client"}
    return _replace(state, turnOpen=False, interrupting=False, msgs={}, streams={}, blocks={},
                    tools={}, pending=kept, agents={})


def _on_result(state: State, msg: Message, out: Emitter) -> State:
    obj = msg.obj
    state = _adopt_session(state, msg, out)
    state = open_turn(state, out)  # a result always ends one turn, even a turn never seen
    subtype = _str(obj.get("subtype")) or "success"
    usage = obj.get("usage", UNSET)
    turn_tokens = result_tokens(obj)
    if turn_tokens is not None:  # the usage object, else the per-model counts it came from
        state = count_turn(state, out, usage if isinstance(usage, dict) else
                           obj["model_usage_since_last_result"], turn_tokens)
    for denial in native_list(obj.get("permission_denials"), "result.permission_denials"):
        tid = _str(denial.get("tool_use_id")) if isinstance(denial, dict) else None
        if tid and tid in state.tools:
            state = _set_tool(state, tid, denied=True)
    reason = _str(obj.get("terminal_reason"))
    interrupted = subtype == "error_during_execution" and (
        state.interrupting or (reason or "").startswith("aborted"))
    is_error = subtype != "success" or obj.get("is_error") is True or state.failed
    fields = _turn_fields(obj, turn_tokens, is_error)
    if not is_error:
        return end_turn(state, out, TurnCompletedPayload(state="completed", **fields))
    message = _error_text(obj, subtype, interrupted)
    detail = {k: obj[k] for k in ("subtype", "is_error", "errors", "error", "terminal_reason",
                                  "api_error_status", "permission_denials") if k in obj}
    _emit(state, out, RuntimeErrorEvent,
          RuntimeErrorPayload(message=message,
                              errorClass="unknown" if interrupted else "provider_error",
                              willRetry=False, detail=detail))
    return end_turn(state, out, TurnCompletedPayload(
        state="interrupted" if interrupted else "failed", errorMessage=message, **fields))


def _turn_fields(obj: dict[str, Any], turn_tokens: TokenUsage | None, is_error: bool
                 ) -> dict[str, Any]:
    """What turn.completed says of a `result`: stop reason, usage, tokens and cost,
    duration, and (a turn that did not fail) the runtime's own final answer."""
    fields: dict[str, Any] = {}
    if "stop_reason" in obj and (obj["stop_reason"] is None or isinstance(obj["stop_reason"], str)):
        fields["stopReason"] = obj["stop_reason"]
    if isinstance(obj.get("usage"), dict):
        fields["usage"] = obj["usage"]
    if turn_tokens is not None:
        fields["tokens"] = turn_tokens
    cost = result_cost(obj)
    if cost is not None:
        fields["cost"] = cost
    if isinstance(obj.get("modelUsage"), dict):
        fields["modelUsage"] = obj["modelUsage"]
    if isinstance(obj.get("total_cost_usd"), int | float):
        fields["totalCostUsd"] = float(obj["total_cost_usd"])
    if isinstance(obj.get("duration_ms"), int | float):
        fields["durationMs"] = int(obj["duration_ms"])
    if isinstance(obj.get("result"), str) and not is_error:
        fields["resultText"] = obj["result"]  # the runtime's own final answer (chat `done`)
    return fields


def _error_text(obj: dict[str, Any], subtype: str, interrupted: bool) -> str:
    errors = [e for e in native_list(obj.get("errors"), "result.errors")
              if isinstance(e, str) and e]
    if errors:
        return "; ".join(errors)
    for key in ("error", "result"):
        if _str(obj.get(key)):
            return obj[key]
    if interrupted:
        return f"turn interrupted ({obj.get('terminal_reason') or subtype})"
    return f"turn ended with {subtype}"
