"""codex: notifications outside the conversation proper: hooks, automatic approval
reviews, the account and its rate limits, authentication, MCP servers, configuration and
deprecation notices, the Windows sandbox, realtime (voice) sessions."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from adapters.codex.common import Place, get_int, get_str, need_dict, need_str, or_unset
from adapters.codex.state import State
from adapters.core.emitter import UNSET, Emitter
from adapters.core.shape import native_list
from topics.canonical import (
    AccountRateLimitsUpdated,
    AccountRateLimitsUpdatedPayload,
    AccountUpdated,
    AccountUpdatedPayload,
    AuthStatus,
    AuthStatusPayload,
    ConfigWarning,
    ConfigWarningPayload,
    DeprecationNotice,
    DeprecationNoticePayload,
    HookCompleted,
    HookCompletedPayload,
    HookStarted,
    HookStartedPayload,
    McpOauthCompleted,
    McpOauthCompletedPayload,
    McpStatusUpdated,
    McpStatusUpdatedPayload,
    ModelRerouted,
    ModelReroutedPayload,
    SessionStateChanged,
    SessionStateChangedPayload,
    TaskCompleted,
    TaskCompletedPayload,
    TaskStarted,
    TaskStartedPayload,
    ThreadRealtimeAudioDelta,
    ThreadRealtimeAudioDeltaPayload,
    ThreadRealtimeClosed,
    ThreadRealtimeClosedPayload,
    ThreadRealtimeError,
    ThreadRealtimeErrorPayload,
    ThreadRealtimeItemAdded,
    ThreadRealtimeItemAddedPayload,
    ThreadRealtimeStarted,
    ThreadRealtimeStartedPayload,
)

# ---- hooks, reviews, account, MCP, config, realtime -----------------------------------


_HOOK_OUTCOMES = {"completed": "success", "running": "success", "failed": "error",
                  "blocked": "error", "stopped": "cancelled"}


def on_hook(done: bool) -> Callable[[State, dict[str, Any], Emitter], State]:
    def handler(state: State, p: dict[str, Any], out: Emitter) -> State:
        run = need_dict(p.get("run"), "hook run")
        hook_id = str(run.get("id"))
        at = Place(out, thread=get_str(p, "threadId"), turn=get_str(p, "turnId"))
        if not done:
            out.emit(HookStarted, HookStartedPayload(
                hookId=hook_id, hookName=get_str(run, "sourcePath") or str(run.get("handlerType")),
                hookEvent=str(run.get("eventName"))), **at.kw)
            return state
        output = "\n".join(e["text"] for e in native_list(run.get("entries"), "hook run entries")
                           if isinstance(e, dict) and isinstance(e.get("text"), str))
        out.emit(HookCompleted, HookCompletedPayload(
            hookId=hook_id, outcome=_HOOK_OUTCOMES.get(str(run.get("status")), "success"),  # type: ignore[arg-type]
            output=output or UNSET), **at.kw)
        return state
    return handler


def on_auto_review(done: bool) -> Callable[[State, dict[str, Any], Emitter], State]:
    """The guardian's automatic review of an approval: a background task."""
    def handler(state: State, p: dict[str, Any], out: Emitter) -> State:
        review_id = need_str(p, "reviewId", "autoApprovalReview")
        at = Place(out, thread=get_str(p, "threadId"), turn=get_str(p, "turnId"),
                 item=get_str(p, "targetItemId"))
        action = p.get("action")
        kind = get_str(action, "type") if isinstance(action, dict) else None
        if not done:
            out.emit(TaskStarted, TaskStartedPayload(
                taskId=review_id, description=f"automatic approval review ({kind})",
                taskType="autoApprovalReview"), **at.kw)
            return state
        review = p.get("review")
        review = review if isinstance(review, dict) else {}
        verdict = get_str(review, "status") or "completed"
        rationale = get_str(review, "rationale")
        out.emit(TaskCompleted, TaskCompletedPayload(
            taskId=review_id,
            status="stopped" if verdict in ("aborted", "timedOut") else "completed",
            summary=f"{verdict}: {rationale}" if rationale else verdict), **at.kw)
        return state
    return handler


def on_account_updated(state: State, p: dict[str, Any], out: Emitter) -> State:
    out.emit(AccountUpdated, AccountUpdatedPayload(account=p))
    return state


def on_rate_limits(state: State, p: dict[str, Any], out: Emitter) -> State:
    out.emit(AccountRateLimitsUpdated, AccountRateLimitsUpdatedPayload(rateLimits=p.get("rateLimits")))
    return state


def on_auth(authenticating: bool | None) -> Callable[[State, dict[str, Any], Emitter], State]:
    """Login, gateway OAuth and model-provider auth recovery progress: auth.status."""
    def handler(state: State, p: dict[str, Any], out: Emitter) -> State:
        busy = authenticating
        if busy is None:  # account/gatewayOAuth/changed says it in `status`
            busy = p.get("status") in ("notReady", "started")
        message = get_str(p, "message")
        out.emit(AuthStatus, AuthStatusPayload(
            isAuthenticating=busy, output=[message] if message else UNSET,
            error=or_unset(get_str(p, "error"))),
            **Place(out, thread=get_str(p, "threadId"), turn=get_str(p, "turnId")).kw)
        return state
    return handler


def on_mcp_oauth(state: State, p: dict[str, Any], out: Emitter) -> State:
    out.emit(McpOauthCompleted, McpOauthCompletedPayload(
        success=p.get("success") is True, name=or_unset(get_str(p, "name")),
        error=or_unset(get_str(p, "error"))), **Place(out, thread=get_str(p, "threadId")).kw)
    return state


def on_mcp_status(state: State, p: dict[str, Any], out: Emitter) -> State:
    out.emit(McpStatusUpdated, McpStatusUpdatedPayload(status=p),
             **Place(out, thread=get_str(p, "threadId")).kw)
    return state


def on_model_rerouted(state: State, p: dict[str, Any], out: Emitter) -> State:
    out.emit(ModelRerouted, ModelReroutedPayload(
        fromModel=str(p.get("fromModel")), toModel=str(p.get("toModel")),
        reason=str(p.get("reason"))),
        **Place(out, thread=get_str(p, "threadId"), turn=get_str(p, "turnId")).kw)
    return state


def on_config_warning(state: State, p: dict[str, Any], out: Emitter) -> State:
    out.emit(ConfigWarning, ConfigWarningPayload(
        summary=str(p.get("summary")), details=or_unset(get_str(p, "details")),
        path=or_unset(get_str(p, "path")), range=or_unset(p.get("range"))))
    return state


def on_user_warning(state: State, p: dict[str, Any], out: Emitter) -> State:
    # runtime.warning is kept for messages this adapter does not know; Codex's own
    # user-facing warnings (`warning`, `guardianWarning`) are notices with a summary
    out.emit(ConfigWarning, ConfigWarningPayload(summary=str(p.get("message"))),
             **Place(out, thread=get_str(p, "threadId")).kw)
    return state


def on_world_writable(state: State, p: dict[str, Any], out: Emitter) -> State:
    paths = p.get("samplePaths")
    paths = [x for x in paths if isinstance(x, str)] if isinstance(paths, list) else []
    extra = get_int(p, "extraCount") or 0
    out.emit(ConfigWarning, ConfigWarningPayload(
        summary="world-writable directories weaken the Windows sandbox",
        details=(", ".join(paths) + (f" and {extra} more" if extra else "")) or UNSET))
    return state


def on_deprecation(state: State, p: dict[str, Any], out: Emitter) -> State:
    out.emit(DeprecationNotice, DeprecationNoticePayload(
        summary=str(p.get("summary")), details=or_unset(get_str(p, "details"))))
    return state


def on_windows_sandbox(state: State, p: dict[str, Any], out: Emitter) -> State:
    ok = p.get("success") is True
    out.emit(SessionStateChanged, SessionStateChangedPayload(
        state="ready" if ok else "error", reason=f"windows sandbox setup ({p.get('mode')})",
        detail=p))
    return state


def on_realtime_started(state: State, p: dict[str, Any], out: Emitter) -> State:
    out.emit(ThreadRealtimeStarted, ThreadRealtimeStartedPayload(
        realtimeSessionId=or_unset(get_str(p, "realtimeSessionId"))),
        **Place(out, thread=get_str(p, "threadId")).kw)
    return state


def on_realtime_item(state: State, p: dict[str, Any], out: Emitter) -> State:
    out.emit(ThreadRealtimeItemAdded, ThreadRealtimeItemAddedPayload(item=p.get("item")),
             **Place(out, thread=get_str(p, "threadId")).kw)
    return state


def on_realtime_transcript_done(state: State, p: dict[str, Any], out: Emitter) -> State:
    item = {"type": "transcript", "role": p.get("role"), "text": p.get("text")}
    out.emit(ThreadRealtimeItemAdded, ThreadRealtimeItemAddedPayload(item=item),
             **Place(out, thread=get_str(p, "threadId")).kw)
    return state


def on_realtime_audio(state: State, p: dict[str, Any], out: Emitter) -> State:
    out.emit(ThreadRealtimeAudioDelta, ThreadRealtimeAudioDeltaPayload(audio=p.get("audio")),
             **Place(out, thread=get_str(p, "threadId")).kw)
    return state


def on_realtime_error(state: State, p: dict[str, Any], out: Emitter) -> State:
    out.emit(ThreadRealtimeError, ThreadRealtimeErrorPayload(message=str(p.get("message"))),
             **Place(out, thread=get_str(p, "threadId")).kw)
    return state


def on_realtime_closed(state: State, p: dict[str, Any], out: Emitter) -> State:
    out.emit(ThreadRealtimeClosed, ThreadRealtimeClosedPayload(reason=or_unset(get_str(p, "reason"))),
             **Place(out, thread=get_str(p, "threadId")).kw)
    return state


