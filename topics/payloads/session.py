"""The payloads of a session's and a thread's events: session.*, thread.*."""

from __future__ import annotations

from typing import Any, Literal

from msgspec import UNSET, UnsetType

from topics.payloads.base import Payload, SessionState, ThreadState, WaitingOn
from topics.usage import TokenUsage


class SessionStartedPayload(Payload, frozen=True, kw_only=True):
    #: What the runtime said at start, when it said something.
    message: str | UnsetType = UNSET
    #: What the session resumes, when it is resumed.
    resume: Any | UnsetType = UNSET


class SessionConfiguredPayload(Payload, frozen=True, kw_only=True):
    #: The session's configuration, as the runtime stated it (model, tools, cwd, ...).
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

    #: The session's new state.
    state: SessionState
    #: Why the state changed.
    reason: str | UnsetType = UNSET
    #: More about the state, as the runtime sent it.
    detail: Any | UnsetType = UNSET
    health: Literal["stalled", "recovered"] | UnsetType = UNSET
    waitingOn: WaitingOn | UnsetType = UNSET
    waitedMs: int | UnsetType = UNSET


class SessionExitedPayload(Payload, frozen=True, kw_only=True):
    #: Why, when known.
    reason: str | UnsetType = UNSET
    #: Whether the session can be resumed.
    recoverable: bool | UnsetType = UNSET
    #: How the session ended.
    exitKind: Literal["graceful", "error"] | UnsetType = UNSET


class ThreadStartedPayload(Payload, frozen=True, kw_only=True):
    #: The runtime's id of the thread.
    providerThreadId: str | UnsetType = UNSET


class ThreadStateChangedPayload(Payload, frozen=True, kw_only=True):
    #: The thread's new state.
    state: ThreadState
    #: More about the state, as the runtime sent it.
    detail: Any | UnsetType = UNSET


class ThreadMetadataUpdatedPayload(Payload, frozen=True, kw_only=True):
    #: The thread's name.
    name: str | UnsetType = UNSET
    #: The thread's metadata, as the runtime sent it.
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
    #: The runtime's id of the realtime session.
    realtimeSessionId: str | UnsetType = UNSET


class ThreadRealtimeItemAddedPayload(Payload, frozen=True, kw_only=True):
    #: The item, as the runtime sent it.
    item: Any


class ThreadRealtimeAudioDeltaPayload(Payload, frozen=True, kw_only=True):
    #: The audio chunk, as the runtime sent it.
    audio: Any


class ThreadRealtimeErrorPayload(Payload, frozen=True, kw_only=True):
    #: The error's message.
    message: str


class ThreadRealtimeClosedPayload(Payload, frozen=True, kw_only=True):
    #: Why the realtime session closed.
    reason: str | UnsetType = UNSET
