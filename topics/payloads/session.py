"""The payloads of a session's and a thread's events: session.*, thread.*."""

from __future__ import annotations

from typing import Any, Literal

from msgspec import UNSET, UnsetType

from topics.payloads.base import Payload, SessionState, ThreadState, WaitingOn
from topics.usage import TokenUsage


class SessionStartedPayload(Payload, frozen=True, kw_only=True):
    message: str | UnsetType = UNSET
    resume: Any | UnsetType = UNSET


class SessionConfiguredPayload(Payload, frozen=True, kw_only=True):
    config: dict[str, Any]
    #: The runtime's release as its stream states it (Claude Code's
    #: `claude_code_version`, the Codex app-server's user agent, an ACP agent's
    #: `agentInfo.version`); absent where the stream does not say.
    runtimeVersion: str | UnsetType = UNSET
    #: The runtime's own name for itself, where the protocol names the agent (ACP's
    #: `agentInfo.name`, e.g. "@zed-industries/claude-code-acp").
    runtimeName: str | UnsetType = UNSET


class SessionStateChangedPayload(Payload, frozen=True, kw_only=True):
    """A runtime's own session state, or canonflow's word on a session's health.

    The health events are synthetic (the worker makes them, never a runtime): `health`
    "stalled" (state "waiting") when the session has had no event for longer than the
    worker's threshold while it waits on `waitingOn`: the model (a turn open, no tool
    running), a tool (a tool item started, not completed) or an approval (a request or
    a question opened, not resolved); "recovered" (state "running") at its next event,
    which follows. `waitedMs`: the wait so far (stalled) or in all (recovered), from
    the session's last event before the stall."""

    state: SessionState
    reason: str | UnsetType = UNSET
    detail: Any | UnsetType = UNSET
    health: Literal["stalled", "recovered"] | UnsetType = UNSET
    waitingOn: WaitingOn | UnsetType = UNSET
    waitedMs: int | UnsetType = UNSET


class SessionExitedPayload(Payload, frozen=True, kw_only=True):
    reason: str | UnsetType = UNSET
    recoverable: bool | UnsetType = UNSET
    exitKind: Literal["graceful", "error"] | UnsetType = UNSET


class ThreadStartedPayload(Payload, frozen=True, kw_only=True):
    providerThreadId: str | UnsetType = UNSET


class ThreadStateChangedPayload(Payload, frozen=True, kw_only=True):
    state: ThreadState
    detail: Any | UnsetType = UNSET


class ThreadMetadataUpdatedPayload(Payload, frozen=True, kw_only=True):
    name: str | UnsetType = UNSET
    metadata: dict[str, Any] | UnsetType = UNSET
    #: The runtime's release, where a thread's own record states it rather than a
    #: session.configured (OpenCode's session `info.version`).
    runtimeVersion: str | UnsetType = UNSET


class ThreadTokenUsageUpdatedPayload(Payload, frozen=True, kw_only=True):
    """`usage` is the runtime's own object, as it always was; `tokens` is the thread's
    usage so far in the shape every runtime shares (topics.usage.TokenUsage): the
    runtime's own total where it states one (Codex app-server's `total`), else the sum
    of the thread's turns (docs "Token usage")."""

    usage: Any
    tokens: TokenUsage | UnsetType = UNSET


class ThreadRealtimeStartedPayload(Payload, frozen=True, kw_only=True):
    realtimeSessionId: str | UnsetType = UNSET


class ThreadRealtimeItemAddedPayload(Payload, frozen=True, kw_only=True):
    item: Any


class ThreadRealtimeAudioDeltaPayload(Payload, frozen=True, kw_only=True):
    audio: Any


class ThreadRealtimeErrorPayload(Payload, frozen=True, kw_only=True):
    message: str


class ThreadRealtimeClosedPayload(Payload, frozen=True, kw_only=True):
    reason: str | UnsetType = UNSET
