"""The payloads of a session's and a thread's events: session.*, thread.*."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from msgspec import UNSET, Meta, UnsetType

from topics.payloads.base import Payload, SessionState, ThreadState, WaitingOn
from topics.usage import TokenUsage


class SessionStartedPayload(Payload, frozen=True, kw_only=True):
    message: Annotated[str | UnsetType, Meta(description=(
        "A runtime's own words about the start (a banner, a status line); absent when it "
        "said none."))] = UNSET
    resume: Annotated[Any | UnsetType, Meta(description=(
        "The runtime's own description of the session it resumes, as it sent it; absent "
        "for a new session."))] = UNSET


class SessionConfiguredPayload(Payload, frozen=True, kw_only=True):
    config: Annotated[dict[str, Any], Meta(description=(
        "The session's configuration as the runtime states it (model, tools, permission "
        "mode, cwd, ...), in the runtime's own keys."))]
    runtimeVersion: Annotated[str | UnsetType, Meta(description=(
        "The runtime's release as its stream states it (claude_code_version, the Codex "
        "app-server's user agent, an ACP agent's agentInfo.version); absent where the "
        "stream does not say."))] = UNSET
    runtimeName: Annotated[str | UnsetType, Meta(description=(
        "The runtime's own name for itself, where the protocol names the agent (ACP's "
        "agentInfo.name, e.g. @zed-industries/claude-code-acp); absent otherwise."))] = UNSET


class SessionStateChangedPayload(Payload, frozen=True, kw_only=True):
    """A runtime's own session state, or canonflow's word on a session's health.

    The health events are synthetic (the worker makes them, never a runtime): `health`
    "stalled" (state "waiting") when the session has had no event for longer than the
    worker's threshold while it waits on `waitingOn`: the model (a turn open, no tool
    running), a tool (a tool item started, not completed) or an approval (a request or
    a question opened, not resolved); "recovered" (state "running") at its next event,
    which follows. `waitedMs`: the wait so far (stalled) or in all (recovered), from
    the session's last event before the stall."""

    state: Annotated[SessionState, Meta(description=(
        "The session's state: starting, ready, running, waiting, stopped or error."))]
    reason: Annotated[str | UnsetType, Meta(description=(
        "Why the state changed, in the runtime's words; absent when it did not say."))] = UNSET
    detail: Annotated[Any | UnsetType, Meta(description=(
        "The runtime's own detail of the change, as it sent it; absent when none."))] = UNSET
    health: Annotated[Literal["stalled", "recovered"] | UnsetType, Meta(description=(
        "On canonflow's own (synthetic) health events only: stalled (no event for longer "
        "than the worker's threshold while it waits) or recovered (its next event came); "
        "absent on a runtime's state changes."))] = UNSET
    waitingOn: Annotated[WaitingOn | UnsetType, Meta(description=(
        "With health: what the stalled session waits on: the model (a turn open, no tool "
        "running), a tool (a tool item started, not completed) or an approval (a request "
        "or question open); absent otherwise."))] = UNSET
    waitedMs: Annotated[int | UnsetType, Meta(description=(
        "With health: the wait in milliseconds since the session's last event, so far "
        "(stalled) or in all (recovered); absent otherwise."))] = UNSET


class SessionExitedPayload(Payload, frozen=True, kw_only=True):
    reason: Annotated[str | UnsetType, Meta(description=(
        "Why the session ended, in the runtime's words, or idle when canonflow closed it "
        "for idleness; absent when unknown."))] = UNSET
    recoverable: Annotated[bool | UnsetType, Meta(description=(
        "Whether the session can be resumed; absent when the runtime did not say."))] = UNSET
    exitKind: Annotated[Literal["graceful", "error"] | UnsetType, Meta(description=(
        "graceful (the runtime finished) or error (it failed or was killed); absent when "
        "the stream does not tell."))] = UNSET


class ThreadStartedPayload(Payload, frozen=True, kw_only=True):
    providerThreadId: Annotated[str | UnsetType, Meta(description=(
        "The runtime's own id of the new thread; absent when it gave none."))] = UNSET


class ThreadStateChangedPayload(Payload, frozen=True, kw_only=True):
    state: Annotated[ThreadState, Meta(description=(
        "The thread's state: active, idle, archived, unarchived, closed, compacted or "
        "error."))]
    detail: Annotated[Any | UnsetType, Meta(description=(
        "The runtime's own detail of the change, as it sent it; absent when none."))] = UNSET


class ThreadMetadataUpdatedPayload(Payload, frozen=True, kw_only=True):
    name: Annotated[str | UnsetType, Meta(description=(
        "The thread's title as the runtime names it; absent when unchanged or unnamed."))] = UNSET
    metadata: Annotated[dict[str, Any] | UnsetType, Meta(description=(
        "The runtime's own thread metadata, in its keys; absent when none."))] = UNSET
    runtimeVersion: Annotated[str | UnsetType, Meta(description=(
        "The runtime's release where a thread's own record states it rather than "
        "session.configured (OpenCode's session info.version); absent otherwise."))] = UNSET


class ThreadTokenUsageUpdatedPayload(Payload, frozen=True, kw_only=True):
    """`usage` is the runtime's own object, as it always was; `tokens` is the thread's
    usage so far in the shape every runtime shares (topics.usage.TokenUsage): the
    runtime's own total where it states one (Codex app-server's `total`), else the sum
    of the thread's turns (docs/contract, "Token usage")."""

    usage: Annotated[Any, Meta(description=(
        "The runtime's own usage object, in its own shape (each runtime counts "
        "differently: read `tokens` instead)."))]
    tokens: Annotated[TokenUsage | UnsetType, Meta(description=(
        "The thread's token usage so far in the shape every runtime shares (TokenUsage): "
        "the runtime's own total where it states one, else the sum of the thread's turns; "
        "absent when the runtime's usage has no token counts."))] = UNSET


class ThreadRealtimeStartedPayload(Payload, frozen=True, kw_only=True):
    realtimeSessionId: Annotated[str | UnsetType, Meta(description=(
        "The runtime's id of the realtime (voice) session; absent when it gave none."))] = UNSET


class ThreadRealtimeItemAddedPayload(Payload, frozen=True, kw_only=True):
    item: Annotated[Any, Meta(description=(
        "The realtime item as the runtime sent it (its own shape)."))]


class ThreadRealtimeAudioDeltaPayload(Payload, frozen=True, kw_only=True):
    audio: Annotated[Any, Meta(description=(
        "The audio chunk as the runtime sent it (its own shape and encoding)."))]


class ThreadRealtimeErrorPayload(Payload, frozen=True, kw_only=True):
    message: Annotated[str, Meta(description=(
        "The realtime session's error message, in the runtime's words."))]


class ThreadRealtimeClosedPayload(Payload, frozen=True, kw_only=True):
    reason: Annotated[str | UnsetType, Meta(description=(
        "Why the realtime session closed, in the runtime's words; absent when it did not "
        "say."))] = UNSET
