"""acp: session/prompt -> a turn.

A turn is one `session/prompt`: its request opens the turn (and a user_message item
with the prompt), its response closes it with the stop reason; a prompt sent while one
is open supersedes it (turn.completed cancelled), and the superseded
prompt's own response is then dropped. An error answering `session/prompt` also fails
the turn, and -32800 (request cancelled) cancels it.

Every item opened is completed: items still open when the turn ends are closed (a tool
whose permission was rejected and never reported again as `declined`, others as
`failed`). The agent's `plan` updates are the turn's plan.
"""

from __future__ import annotations

from typing import Any

from adapters.acp.chunks import close_stream
from adapters.acp.envelope import Ctx, as_str, error_message, native_agent, runtime_error
from adapters.acp.state import Pending, State
from adapters.acp.tool_calls import complete_tool
from adapters.acp.usage import on_turn_usage
from adapters.core.emitter import UNSET, Emitter
from adapters.core.emitter import replace as _replace
from adapters.core.lifecycle import complete_item, end_turn, start_item
from topics.canonical import (
    ItemPayload,
    PlanStep,
    TurnCompletedPayload,
    TurnPlanUpdated,
    TurnPlanUpdatedPayload,
    TurnStarted,
    TurnStartedPayload,
)


def on_prompt(state: State, obj: dict[str, Any], params: dict[str, Any], key: str,
              out: Emitter) -> State:
    sid = as_str(params.get("sessionId"))
    if state.turnOpen:  # a new prompt supersedes the open one
        state = finish_turn(state, out, TurnCompletedPayload(
            state="cancelled", stopReason="cancelled",
            errorMessage="superseded by a new session/prompt"), synthetic=True)
    state = _replace(state, turns=state.turns + 1, turnOpen=True, done=[],
                     session=state.session or sid)
    c = Ctx(state, out, sid)
    out.emit(TurnStarted, TurnStartedPayload(), thread=c.thread, turn=c.turn, refs=c.refs())
    prompt = params.get("prompt")
    blocks = [b for b in prompt if isinstance(b, dict)] if isinstance(prompt, list) else []
    text = "".join(b["text"] for b in blocks if b.get("type") == "text" and isinstance(b.get("text"), str))
    others = [b for b in blocks if b.get("type") != "text"]
    n = state.items + 1
    at = c.at(out.id("itm", "msg", str(n)), c.refs())
    start_item(out, at, ItemPayload(itemType="user_message", status="inProgress", role="user",
                                    author="user"), True)
    complete_item(out, at, ItemPayload(itemType="user_message", status="completed", role="user",
                                       text=text, data={"content": others} if others else UNSET,
                                       author="user"), True)
    pending = Pending(method="session/prompt", turn=state.turns, session=sid)
    return _replace(state, items=n, client={**state.client, key: pending})


_STOP_STATES = {"cancelled": "cancelled"}  # end_turn, max_tokens, max_turn_requests, refusal


def on_prompt_result(state: State, result: dict[str, Any], pending: Pending,
                     out: Emitter) -> State:
    if not (state.turnOpen and pending.turn == state.turns):
        return state  # a superseded prompt: its turn was already closed as cancelled
    state = close_stream(state, out)
    stop = as_str(result.get("stopReason"))
    state, usage, turn_tokens = on_turn_usage(state, result, pending.session, out)
    turn_state = _STOP_STATES.get(stop or "", "completed")
    return finish_turn(state, out, TurnCompletedPayload(
        state=turn_state, stopReason=stop, usage=usage if usage is not None else UNSET,  # type: ignore[arg-type]
        tokens=turn_tokens or UNSET), sid=pending.session)


def on_prompt_failed(state: State, error: dict[str, Any], pending: Pending,
                     out: Emitter) -> State:
    current = state.turnOpen and pending.turn == state.turns
    if error.get("code") == -32800:  # the request was cancelled: not an error
        if not current:
            return state
        return finish_turn(state, out, TurnCompletedPayload(
            state="cancelled", stopReason="cancelled", errorMessage=error_message(error)),
            sid=pending.session)
    if not current:  # a superseded prompt failed: report it outside any turn
        runtime_error(_replace(state, turnOpen=False), out, error, pending.method, pending.session)
        return state
    state = close_open_items(state, out, "the turn failed before the tool call completed")
    message = runtime_error(state, out, error, pending.method, pending.session)
    return finish_turn(state, out, TurnCompletedPayload(state="failed", errorMessage=message),
                       sid=pending.session)


def finish_turn(state: State, out: Emitter, payload: TurnCompletedPayload,
                synthetic: bool = False, sid: str | None = None) -> State:
    state = close_open_items(state, out, "the turn ended before the tool call completed")
    c = Ctx(state, out, sid)
    end_turn(out, c.at(refs=c.refs()), payload, synthetic)
    return _replace(state, turnOpen=False, done=[])


def close_open_items(state: State, out: Emitter, why: str) -> State:
    state = close_stream(state, out)
    for key, tool in list(state.tools.items()):
        status = "declined" if tool.declined else "failed"
        state = complete_tool(state, out, key, tool, status, synthetic=True,
                              detail="the permission was rejected" if tool.declined else why)
    return state


_PLAN_STATUS = {"pending": "pending", "in_progress": "inProgress", "completed": "completed"}


def on_plan(state: State, upd: dict[str, Any], sid: str | None, out: Emitter) -> State:
    entries = upd.get("entries")
    steps = [PlanStep(step=str(e.get("content", "")),
                      status=_PLAN_STATUS.get(e.get("status"), "pending"))  # type: ignore[arg-type]
             for e in entries if isinstance(e, dict)] if isinstance(entries, list) else []
    c = Ctx(state, out, sid, native_agent(upd))
    out.emit(TurnPlanUpdated, TurnPlanUpdatedPayload(plan=steps), thread=c.thread, turn=c.turn,
             refs=c.refs())
    return state
