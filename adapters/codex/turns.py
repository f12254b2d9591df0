"""codex: turns (started, completed, failed, interrupted), a turn's errors, diff and
plan. A turn ends with the items it left open completed synthetically (payloads.close_open)."""

from __future__ import annotations

from typing import Any

from adapters.codex.common import Place, get_int, get_str, need_dict, need_str, or_unset
from adapters.codex.payloads import close_open
from adapters.codex.state import OpenTurn, State
from adapters.codex.threads import announce_thread
from adapters.codex.usage import turn_tokens
from adapters.core.emitter import Emitter
from adapters.core.emitter import replace as _replace
from adapters.core.lifecycle import closed_turns, end_turn
from topics.canonical import (
    PlanStep,
    RuntimeErrorEvent,
    RuntimeErrorPayload,
    TurnCompletedPayload,
    TurnDiffUpdated,
    TurnDiffUpdatedPayload,
    TurnPlanUpdated,
    TurnPlanUpdatedPayload,
    TurnStarted,
    TurnStartedPayload,
)

_CLOSED_KEPT = 16  # ended turns remembered (State.closedTurns)


# ---- turns ------------------------------------------------------------------------


_TURN_STATES = {"completed": "completed", "interrupted": "interrupted", "failed": "failed",
                # a turn that ends while still "inProgress" did not finish its work
                "inProgress": "interrupted"}


def _turn_ids(p: dict[str, Any], method: str) -> tuple[str, str, dict[str, Any]]:
    turn = need_dict(p.get("turn"), f"{method} turn")
    return need_str(p, "threadId", method), need_str(turn, "id", f"{method} turn"), turn


def on_turn_started(state: State, p: dict[str, Any], out: Emitter) -> State:
    thread, tid, _ = _turn_ids(p, "turn/started")
    if tid in state.turns or tid in state.closedTurns:
        return state
    # one turn runs at a time in a thread: an older one left open was lost
    for old, t in list(state.turns.items()):
        if t.thread == thread:
            state = _end_turn(state, out, old, "interrupted", synthetic=True)
    return _start_turn(state, out, thread, tid, synthetic=False)


def _start_turn(state: State, out: Emitter, thread: str, tid: str, synthetic: bool) -> State:
    state = announce_thread(state, out, thread, synthetic=True)
    out.emit(TurnStarted, TurnStartedPayload(model=or_unset(state.model)), synthetic=synthetic,
             **Place(out, thread=thread, turn=tid).kw)
    return _replace(state, turns={**state.turns, tid: OpenTurn(thread=thread)})


def ensure_turn(state: State, out: Emitter, thread: str, tid: str) -> State:
    if tid in state.turns or tid in state.closedTurns:
        return state
    return _start_turn(state, out, thread, tid, synthetic=True)


def on_turn_completed(state: State, p: dict[str, Any], out: Emitter) -> State:
    thread, tid, turn = _turn_ids(p, "turn/completed")
    if tid in state.closedTurns:
        return state
    state = ensure_turn(state, out, thread, tid)
    status = _TURN_STATES.get(get_str(turn, "status") or "", "completed")
    return _end_turn(state, out, tid, status, turn=turn)


def _error_class(info: Any) -> str:
    """runtime.error class of a CodexErrorInfo (a string, or a one-key object)."""
    kind = next(iter(info), None) if isinstance(info, dict) else info
    if kind in ("httpConnectionFailed", "responseStreamConnectionFailed",
                "responseStreamDisconnected"):
        return "transport_error"
    if kind in ("unauthorized", "cyberPolicy", "bioPolicy", "misalignmentPolicyViolation",
                "tooManyDenials", "inferenceHookDenied", "sandboxError"):
        return "permission_error"
    if kind in ("badRequest", "activeTurnNotSteerable"):
        return "validation_error"
    return "provider_error"


def _end_turn(state: State, out: Emitter, tid: str, status: str, *,
              turn: dict[str, Any] | None = None, synthetic: bool = False) -> State:
    t = state.turns[tid]
    # items the turn never completed (the streaming agentMessage of an interrupted turn)
    for native_id, item in list(state.items.items()):
        if item.turn == tid:
            close_open(out, native_id, item, status)
    items = {k: v for k, v in state.items.items() if v.turn != tid}
    at = Place(out, thread=t.thread, turn=tid)
    error = turn.get("error") if turn else None
    message = get_str(error, "message") if isinstance(error, dict) else None
    if status == "failed" and not t.errorReported:
        info = error.get("codexErrorInfo") if isinstance(error, dict) else None
        out.emit(RuntimeErrorEvent, RuntimeErrorPayload(
            message=message or "turn failed", errorClass=_error_class(info),  # type: ignore[arg-type]
            willRetry=False, detail=or_unset(error)), **at.kw)
    duration = get_int(turn, "durationMs") if turn else None
    end_turn(out, at.at(), TurnCompletedPayload(
        state=status, usage=or_unset(t.usage), durationMs=or_unset(duration),  # type: ignore[arg-type]
        errorMessage=or_unset(message), tokens=or_unset(turn_tokens(t.base, t.usage))), synthetic)
    turns = dict(state.turns)
    del turns[tid]
    return _replace(state, turns=turns, items=items,
                    closedTurns=closed_turns(state.closedTurns, tid, _CLOSED_KEPT))


def on_error(state: State, p: dict[str, Any], out: Emitter) -> State:
    error = need_dict(p.get("error"), "error.error")
    will_retry = p.get("willRetry") is True
    turn = get_str(p, "turnId")
    out.emit(RuntimeErrorEvent, RuntimeErrorPayload(
        message=get_str(error, "message") or "error", errorClass=_error_class(  # type: ignore[arg-type]
            error.get("codexErrorInfo")), willRetry=will_retry, detail=error),
        **Place(out, thread=get_str(p, "threadId"), turn=turn).kw)
    if not will_retry and turn is not None and turn in state.turns:
        turns = dict(state.turns)
        turns[turn] = _replace(turns[turn], errorReported=True)
        state = _replace(state, turns=turns)
    return state


def on_turn_diff_updated(state: State, p: dict[str, Any], out: Emitter) -> State:
    out.emit(TurnDiffUpdated, TurnDiffUpdatedPayload(unifiedDiff=need_str(p, "diff", "turn/diff")),
             **Place(out, thread=get_str(p, "threadId"), turn=get_str(p, "turnId")).kw)
    return state


def on_turn_plan_updated(state: State, p: dict[str, Any], out: Emitter) -> State:
    steps = p.get("plan")
    plan = [
        PlanStep(step=s["step"] if isinstance(s.get("step"), str) else "",
                 status=s["status"] if s.get("status") in ("pending", "inProgress", "completed")
                 else "pending")
        for s in (steps if isinstance(steps, list) else []) if isinstance(s, dict)
    ]
    out.emit(TurnPlanUpdated, TurnPlanUpdatedPayload(explanation=or_unset(get_str(p, "explanation")),
                                                     plan=plan),
             **Place(out, thread=get_str(p, "threadId"), turn=get_str(p, "turnId")).kw)
    return state


