"""The canonical event: the one contract every consumer of `agents.canonical` reads.

The vocabulary (event families, item types, request types), the payloads and the id
semantics are the canonical contract's, documented in docs/contract. Every event is one frozen
msgspec Struct tagged by its wire `type` ("turn.started", ...): the envelope fields
live on the shared base, the typed payload in `payload`.

Evolution rules (consumers in other languages rely on them): new fields get
defaults; a field is never retyped or renamed; consumers ignore unknown fields.
`schemaVersion` changes only on a breaking change, which these rules forbid.

The vocabulary (the Literal types) and the payloads live in topics.payloads, by family;
this module is the envelope, the tagged union and its codec, and re-exports every name
of the contract, so `from topics.canonical import X` is the one import consumers need.
"""

from __future__ import annotations

from typing import Annotated, Union

import msgspec
from msgspec import UNSET, Meta, Struct, UnsetType

from topics.payloads.base import (
    TOOL_ITEM_TYPES,
    Author,
    Decision,
    ErrorClass,
    InputOutcome,
    ItemStatus,
    ItemType,
    Payload,
    ProviderRefs,
    RawSource,
    RequestType,
    SessionState,
    StreamKind,
    ThreadState,
    TurnState,
    WaitingOn,
)
from topics.payloads.request import (
    HookCompletedPayload,
    HookProgressPayload,
    HookStartedPayload,
    RequestOpenedPayload,
    RequestResolvedPayload,
    TaskCompletedPayload,
    TaskProgressPayload,
    TaskStartedPayload,
    ToolProgressPayload,
    ToolSummaryPayload,
    UserInputRequestedPayload,
    UserInputResolvedPayload,
)
from topics.payloads.runtime import (
    AccountRateLimitsUpdatedPayload,
    AccountUpdatedPayload,
    AuthStatusPayload,
    ConfigWarningPayload,
    DeprecationNoticePayload,
    FailedFile,
    FilesPersistedPayload,
    McpOauthCompletedPayload,
    McpStatusUpdatedPayload,
    ModelReroutedPayload,
    PersistedFile,
    RuntimeErrorPayload,
    RuntimeWarningPayload,
)
from topics.payloads.session import (
    SessionConfiguredPayload,
    SessionExitedPayload,
    SessionStartedPayload,
    SessionStateChangedPayload,
    ThreadMetadataUpdatedPayload,
    ThreadRealtimeAudioDeltaPayload,
    ThreadRealtimeClosedPayload,
    ThreadRealtimeErrorPayload,
    ThreadRealtimeItemAddedPayload,
    ThreadRealtimeStartedPayload,
    ThreadStartedPayload,
    ThreadStateChangedPayload,
    ThreadTokenUsageUpdatedPayload,
)
from topics.payloads.turn import (
    ContentDeltaPayload,
    DiffBase,
    ItemPayload,
    PlanStep,
    TurnAbortedPayload,
    TurnCompletedPayload,
    TurnDiffUpdatedPayload,
    TurnPlanUpdatedPayload,
    TurnStartedPayload,
)

#: The payload base under its old name (tests walk its subclasses).
_Payload = Payload

SCHEMA_VERSION = 1


# ---- the envelope and the tagged union ----------------------------------------


class _Event(
    Struct, frozen=True, kw_only=True, omit_defaults=True, tag_field="type"
):
    """Envelope shared by every canonical event (docs/contract/index.md).

    `schemaVersion` and `synthetic` carry no default so that they are always on the
    wire (omit_defaults drops defaults); canonical ids are canonflow's own, the
    provider's ids are only in `providerRefs`.
    """

    schemaVersion: Annotated[int, Meta(description=(
        "The canonical contract's version, 1; it changes only on a breaking change, which "
        "the evolution rules forbid."))]
    eventId: Annotated[str, Meta(description=(
        "The event's id, deterministic (from provider, session life and seq): a consumer "
        "drops an event whose eventId it has already handled as a copy."))]
    seq: Annotated[int, Meta(description=(
        "The event's number in its session, gapless from 1: a missing number is a lost "
        "event, a repeated one a copy."))]
    provider: Annotated[str, Meta(description=(
        "The runtime that produced the session (claude, codex, opencode, ...; the "
        "schema's x-canonflow-providers lists them)."))]
    sessionId: Annotated[str, Meta(description=(
        "The session's id in the fleet (the record key), the same for every event of the "
        "session."))]
    createdAt: Annotated[str, Meta(description=(
        "When the native record was captured (its `t` header, else its Kafka timestamp), "
        "RFC 3339 UTC with milliseconds, e.g. 2026-11-29T18:38:20.123Z."))]
    threadId: Annotated[str | UnsetType, Meta(description=(
        "canonflow's id of the thread the event belongs to (thr_...); absent on session-"
        "level events."))] = UNSET
    turnId: Annotated[str | UnsetType, Meta(description=(
        "canonflow's id of the turn the event belongs to (trn_...); absent outside a "
        "turn."))] = UNSET
    itemId: Annotated[str | UnsetType, Meta(description=(
        "canonflow's id of the item the event belongs to (itm_...): on item.* and "
        "content.delta, and on a request about a tool call; absent otherwise."))] = UNSET
    requestId: Annotated[str | UnsetType, Meta(description=(
        "canonflow's id of the approval or question (req_...), on request.* and user-"
        "input.* events; absent otherwise."))] = UNSET
    parentItemId: Annotated[str | UnsetType, Meta(description=(
        "canonflow's id of the item this one is nested in (a tool call inside a "
        "subagent's Task call); absent at the top level."))] = UNSET
    agentId: Annotated[str | UnsetType, Meta(description=(
        "The subagent the event belongs to (agt_<h>, started by the tool item itm_<h>); "
        "absent on the root agent's events but session.started, which carries the root's "
        "id."))] = UNSET
    parentAgentId: Annotated[str | UnsetType, Meta(description=(
        "The agent whose tool started the subagent `agentId` (the root's id for a first-"
        "level subagent); absent when `agentId` is."))] = UNSET
    providerRefs: Annotated[ProviderRefs | UnsetType, Meta(description=(
        "The runtime's own ids for the event's session, thread, turn, item and request, "
        "for correlation only; never canonical ids. Absent when the runtime gave none."))] = UNSET
    synthetic: Annotated[bool, Meta(description=(
        "True when canonflow made the event up (a session start never announced, a full-"
        "text delta for a runtime that streams none, an item closed when its turn ended, "
        "a stall notice); false when a native message said it."))]
    raw: Annotated[RawSource | UnsetType, Meta(description=(
        "The native message the event came from; only when the deployment includes raw "
        "messages (CANONFLOW_INCLUDE_RAW), and always on runtime.warning."))] = UNSET


class SessionStarted(_Event, tag="session.started", frozen=True, kw_only=True):
    payload: Annotated[SessionStartedPayload, Meta(description=(
        "What the session.started event says; its shape (SessionStartedPayload) is fixed by `type`."))]


class SessionConfigured(_Event, tag="session.configured", frozen=True, kw_only=True):
    payload: Annotated[SessionConfiguredPayload, Meta(description=(
        "What the session.configured event says; its shape (SessionConfiguredPayload) is fixed by `type`."))]


class SessionStateChanged(_Event, tag="session.state.changed", frozen=True, kw_only=True):
    payload: Annotated[SessionStateChangedPayload, Meta(description=(
        "What the session.state.changed event says; its shape (SessionStateChangedPayload) is fixed by `type`."))]


class SessionExited(_Event, tag="session.exited", frozen=True, kw_only=True):
    payload: Annotated[SessionExitedPayload, Meta(description=(
        "What the session.exited event says; its shape (SessionExitedPayload) is fixed by `type`."))]


class ThreadStarted(_Event, tag="thread.started", frozen=True, kw_only=True):
    payload: Annotated[ThreadStartedPayload, Meta(description=(
        "What the thread.started event says; its shape (ThreadStartedPayload) is fixed by `type`."))]


class ThreadStateChanged(_Event, tag="thread.state.changed", frozen=True, kw_only=True):
    payload: Annotated[ThreadStateChangedPayload, Meta(description=(
        "What the thread.state.changed event says; its shape (ThreadStateChangedPayload) is fixed by `type`."))]


class ThreadMetadataUpdated(_Event, tag="thread.metadata.updated", frozen=True, kw_only=True):
    payload: Annotated[ThreadMetadataUpdatedPayload, Meta(description=(
        "What the thread.metadata.updated event says; its shape (ThreadMetadataUpdatedPayload) is fixed by `type`."))]


class ThreadTokenUsageUpdated(_Event, tag="thread.token-usage.updated", frozen=True, kw_only=True):
    payload: Annotated[ThreadTokenUsageUpdatedPayload, Meta(description=(
        "What the thread.token-usage.updated event says; its shape (ThreadTokenUsageUpdatedPayload) is fixed by `type`."))]


class ThreadRealtimeStarted(_Event, tag="thread.realtime.started", frozen=True, kw_only=True):
    payload: Annotated[ThreadRealtimeStartedPayload, Meta(description=(
        "What the thread.realtime.started event says; its shape (ThreadRealtimeStartedPayload) is fixed by `type`."))]


class ThreadRealtimeItemAdded(_Event, tag="thread.realtime.item-added", frozen=True, kw_only=True):
    payload: Annotated[ThreadRealtimeItemAddedPayload, Meta(description=(
        "What the thread.realtime.item-added event says; its shape (ThreadRealtimeItemAddedPayload) is fixed by `type`."))]


class ThreadRealtimeAudioDelta(_Event, tag="thread.realtime.audio.delta", frozen=True, kw_only=True):
    payload: Annotated[ThreadRealtimeAudioDeltaPayload, Meta(description=(
        "What the thread.realtime.audio.delta event says; its shape (ThreadRealtimeAudioDeltaPayload) is fixed by `type`."))]


class ThreadRealtimeError(_Event, tag="thread.realtime.error", frozen=True, kw_only=True):
    payload: Annotated[ThreadRealtimeErrorPayload, Meta(description=(
        "What the thread.realtime.error event says; its shape (ThreadRealtimeErrorPayload) is fixed by `type`."))]


class ThreadRealtimeClosed(_Event, tag="thread.realtime.closed", frozen=True, kw_only=True):
    payload: Annotated[ThreadRealtimeClosedPayload, Meta(description=(
        "What the thread.realtime.closed event says; its shape (ThreadRealtimeClosedPayload) is fixed by `type`."))]


class TurnStarted(_Event, tag="turn.started", frozen=True, kw_only=True):
    payload: Annotated[TurnStartedPayload, Meta(description=(
        "What the turn.started event says; its shape (TurnStartedPayload) is fixed by `type`."))]


class TurnCompleted(_Event, tag="turn.completed", frozen=True, kw_only=True):
    payload: Annotated[TurnCompletedPayload, Meta(description=(
        "What the turn.completed event says; its shape (TurnCompletedPayload) is fixed by `type`."))]


class TurnAborted(_Event, tag="turn.aborted", frozen=True, kw_only=True):
    payload: Annotated[TurnAbortedPayload, Meta(description=(
        "What the turn.aborted event says; its shape (TurnAbortedPayload) is fixed by `type`."))]


class TurnPlanUpdated(_Event, tag="turn.plan.updated", frozen=True, kw_only=True):
    payload: Annotated[TurnPlanUpdatedPayload, Meta(description=(
        "What the turn.plan.updated event says; its shape (TurnPlanUpdatedPayload) is fixed by `type`."))]


class TurnDiffUpdated(_Event, tag="turn.diff.updated", frozen=True, kw_only=True):
    payload: Annotated[TurnDiffUpdatedPayload, Meta(description=(
        "What the turn.diff.updated event says; its shape (TurnDiffUpdatedPayload) is fixed by `type`."))]


class ItemStarted(_Event, tag="item.started", frozen=True, kw_only=True):
    payload: Annotated[ItemPayload, Meta(description=(
        "What the item.started event says; its shape (ItemPayload) is fixed by `type`."))]


class ItemUpdated(_Event, tag="item.updated", frozen=True, kw_only=True):
    payload: Annotated[ItemPayload, Meta(description=(
        "What the item.updated event says; its shape (ItemPayload) is fixed by `type`."))]


class ItemCompleted(_Event, tag="item.completed", frozen=True, kw_only=True):
    payload: Annotated[ItemPayload, Meta(description=(
        "What the item.completed event says; its shape (ItemPayload) is fixed by `type`."))]


class ContentDelta(_Event, tag="content.delta", frozen=True, kw_only=True):
    payload: Annotated[ContentDeltaPayload, Meta(description=(
        "What the content.delta event says; its shape (ContentDeltaPayload) is fixed by `type`."))]


class RequestOpened(_Event, tag="request.opened", frozen=True, kw_only=True):
    payload: Annotated[RequestOpenedPayload, Meta(description=(
        "What the request.opened event says; its shape (RequestOpenedPayload) is fixed by `type`."))]


class RequestResolved(_Event, tag="request.resolved", frozen=True, kw_only=True):
    payload: Annotated[RequestResolvedPayload, Meta(description=(
        "What the request.resolved event says; its shape (RequestResolvedPayload) is fixed by `type`."))]


class UserInputRequested(_Event, tag="user-input.requested", frozen=True, kw_only=True):
    payload: Annotated[UserInputRequestedPayload, Meta(description=(
        "What the user-input.requested event says; its shape (UserInputRequestedPayload) is fixed by `type`."))]


class UserInputResolved(_Event, tag="user-input.resolved", frozen=True, kw_only=True):
    payload: Annotated[UserInputResolvedPayload, Meta(description=(
        "What the user-input.resolved event says; its shape (UserInputResolvedPayload) is fixed by `type`."))]


class TaskStarted(_Event, tag="task.started", frozen=True, kw_only=True):
    payload: Annotated[TaskStartedPayload, Meta(description=(
        "What the task.started event says; its shape (TaskStartedPayload) is fixed by `type`."))]


class TaskProgress(_Event, tag="task.progress", frozen=True, kw_only=True):
    payload: Annotated[TaskProgressPayload, Meta(description=(
        "What the task.progress event says; its shape (TaskProgressPayload) is fixed by `type`."))]


class TaskCompleted(_Event, tag="task.completed", frozen=True, kw_only=True):
    payload: Annotated[TaskCompletedPayload, Meta(description=(
        "What the task.completed event says; its shape (TaskCompletedPayload) is fixed by `type`."))]


class HookStarted(_Event, tag="hook.started", frozen=True, kw_only=True):
    payload: Annotated[HookStartedPayload, Meta(description=(
        "What the hook.started event says; its shape (HookStartedPayload) is fixed by `type`."))]


class HookProgress(_Event, tag="hook.progress", frozen=True, kw_only=True):
    payload: Annotated[HookProgressPayload, Meta(description=(
        "What the hook.progress event says; its shape (HookProgressPayload) is fixed by `type`."))]


class HookCompleted(_Event, tag="hook.completed", frozen=True, kw_only=True):
    payload: Annotated[HookCompletedPayload, Meta(description=(
        "What the hook.completed event says; its shape (HookCompletedPayload) is fixed by `type`."))]


class ToolProgress(_Event, tag="tool.progress", frozen=True, kw_only=True):
    payload: Annotated[ToolProgressPayload, Meta(description=(
        "What the tool.progress event says; its shape (ToolProgressPayload) is fixed by `type`."))]


class ToolSummary(_Event, tag="tool.summary", frozen=True, kw_only=True):
    payload: Annotated[ToolSummaryPayload, Meta(description=(
        "What the tool.summary event says; its shape (ToolSummaryPayload) is fixed by `type`."))]


class AuthStatus(_Event, tag="auth.status", frozen=True, kw_only=True):
    payload: Annotated[AuthStatusPayload, Meta(description=(
        "What the auth.status event says; its shape (AuthStatusPayload) is fixed by `type`."))]


class AccountUpdated(_Event, tag="account.updated", frozen=True, kw_only=True):
    payload: Annotated[AccountUpdatedPayload, Meta(description=(
        "What the account.updated event says; its shape (AccountUpdatedPayload) is fixed by `type`."))]


class AccountRateLimitsUpdated(_Event, tag="account.rate-limits.updated", frozen=True, kw_only=True):
    payload: Annotated[AccountRateLimitsUpdatedPayload, Meta(description=(
        "What the account.rate-limits.updated event says; its shape (AccountRateLimitsUpdatedPayload) is fixed by `type`."))]


class McpStatusUpdated(_Event, tag="mcp.status.updated", frozen=True, kw_only=True):
    payload: Annotated[McpStatusUpdatedPayload, Meta(description=(
        "What the mcp.status.updated event says; its shape (McpStatusUpdatedPayload) is fixed by `type`."))]


class McpOauthCompleted(_Event, tag="mcp.oauth.completed", frozen=True, kw_only=True):
    payload: Annotated[McpOauthCompletedPayload, Meta(description=(
        "What the mcp.oauth.completed event says; its shape (McpOauthCompletedPayload) is fixed by `type`."))]


class ModelRerouted(_Event, tag="model.rerouted", frozen=True, kw_only=True):
    payload: Annotated[ModelReroutedPayload, Meta(description=(
        "What the model.rerouted event says; its shape (ModelReroutedPayload) is fixed by `type`."))]


class ConfigWarning(_Event, tag="config.warning", frozen=True, kw_only=True):
    payload: Annotated[ConfigWarningPayload, Meta(description=(
        "What the config.warning event says; its shape (ConfigWarningPayload) is fixed by `type`."))]


class DeprecationNotice(_Event, tag="deprecation.notice", frozen=True, kw_only=True):
    payload: Annotated[DeprecationNoticePayload, Meta(description=(
        "What the deprecation.notice event says; its shape (DeprecationNoticePayload) is fixed by `type`."))]


class FilesPersisted(_Event, tag="files.persisted", frozen=True, kw_only=True):
    payload: Annotated[FilesPersistedPayload, Meta(description=(
        "What the files.persisted event says; its shape (FilesPersistedPayload) is fixed by `type`."))]


class RuntimeWarningEvent(_Event, tag="runtime.warning", frozen=True, kw_only=True):
    payload: Annotated[RuntimeWarningPayload, Meta(description=(
        "What the runtime.warning event says; its shape (RuntimeWarningPayload) is fixed by `type`."))]


class RuntimeErrorEvent(_Event, tag="runtime.error", frozen=True, kw_only=True):
    payload: Annotated[RuntimeErrorPayload, Meta(description=(
        "What the runtime.error event says; its shape (RuntimeErrorPayload) is fixed by `type`."))]


CanonicalEvent = Union[
    SessionStarted,
    SessionConfigured,
    SessionStateChanged,
    SessionExited,
    ThreadStarted,
    ThreadStateChanged,
    ThreadMetadataUpdated,
    ThreadTokenUsageUpdated,
    ThreadRealtimeStarted,
    ThreadRealtimeItemAdded,
    ThreadRealtimeAudioDelta,
    ThreadRealtimeError,
    ThreadRealtimeClosed,
    TurnStarted,
    TurnCompleted,
    TurnAborted,
    TurnPlanUpdated,
    TurnDiffUpdated,
    ItemStarted,
    ItemUpdated,
    ItemCompleted,
    ContentDelta,
    RequestOpened,
    RequestResolved,
    UserInputRequested,
    UserInputResolved,
    TaskStarted,
    TaskProgress,
    TaskCompleted,
    HookStarted,
    HookProgress,
    HookCompleted,
    ToolProgress,
    ToolSummary,
    AuthStatus,
    AccountUpdated,
    AccountRateLimitsUpdated,
    McpStatusUpdated,
    McpOauthCompleted,
    ModelRerouted,
    ConfigWarning,
    DeprecationNotice,
    FilesPersisted,
    RuntimeWarningEvent,
    RuntimeErrorEvent,
]

#: Event class by wire tag, e.g. EVENT_TYPES["turn.started"] is TurnStarted.
EVENT_TYPES: dict[str, type[_Event]] = {
    cls.__struct_config__.tag: cls  # type: ignore[misc]
    for cls in CanonicalEvent.__args__  # type: ignore[attr-defined]
}

#: The payload class each event type carries (its field's type, without the description).
PAYLOAD_TYPES: dict[str, type[Struct]] = {
    tag: next(f.type.__origin__ for f in msgspec.structs.fields(cls) if f.name == "payload")
    for tag, cls in EVENT_TYPES.items()
}

encode_event = msgspec.json.Encoder().encode
_event_decoder = msgspec.json.Decoder(CanonicalEvent)


def decode_event(data: bytes | str) -> CanonicalEvent:
    """Decode one canonical event from JSON.

    Raises msgspec.ValidationError / msgspec.DecodeError on invalid input.
    """
    return _event_decoder.decode(data)


__all__ = [
    "AccountRateLimitsUpdated", "AccountRateLimitsUpdatedPayload", "AccountUpdated",
    "AccountUpdatedPayload", "AuthStatus", "AuthStatusPayload", "Author", "CanonicalEvent",
    "ConfigWarning", "ConfigWarningPayload", "ContentDelta", "ContentDeltaPayload", "Decision",
    "DeprecationNotice", "DeprecationNoticePayload", "DiffBase", "EVENT_TYPES", "ErrorClass",
    "FailedFile", "FilesPersisted", "FilesPersistedPayload", "HookCompleted",
    "HookCompletedPayload", "HookProgress", "HookProgressPayload", "HookStarted",
    "HookStartedPayload", "InputOutcome", "ItemCompleted", "ItemPayload", "ItemStarted",
    "ItemStatus", "ItemType", "ItemUpdated", "McpOauthCompleted", "McpOauthCompletedPayload",
    "McpStatusUpdated", "McpStatusUpdatedPayload", "ModelRerouted", "ModelReroutedPayload",
    "PAYLOAD_TYPES", "Payload", "PersistedFile", "PlanStep", "ProviderRefs", "RawSource",
    "RequestOpened", "RequestOpenedPayload", "RequestResolved", "RequestResolvedPayload",
    "RequestType", "RuntimeErrorEvent", "RuntimeErrorPayload", "RuntimeWarningEvent",
    "RuntimeWarningPayload", "SCHEMA_VERSION", "SessionConfigured", "SessionConfiguredPayload",
    "SessionExited", "SessionExitedPayload", "SessionStarted", "SessionStartedPayload",
    "SessionState", "SessionStateChanged", "SessionStateChangedPayload", "StreamKind",
    "TOOL_ITEM_TYPES", "TaskCompleted", "TaskCompletedPayload", "TaskProgress",
    "TaskProgressPayload", "TaskStarted", "TaskStartedPayload", "ThreadMetadataUpdated",
    "ThreadMetadataUpdatedPayload", "ThreadRealtimeAudioDelta",
    "ThreadRealtimeAudioDeltaPayload", "ThreadRealtimeClosed", "ThreadRealtimeClosedPayload",
    "ThreadRealtimeError", "ThreadRealtimeErrorPayload", "ThreadRealtimeItemAdded",
    "ThreadRealtimeItemAddedPayload", "ThreadRealtimeStarted", "ThreadRealtimeStartedPayload",
    "ThreadStarted", "ThreadStartedPayload", "ThreadState", "ThreadStateChanged",
    "ThreadStateChangedPayload", "ThreadTokenUsageUpdated", "ThreadTokenUsageUpdatedPayload",
    "ToolProgress", "ToolProgressPayload", "ToolSummary", "ToolSummaryPayload", "TurnAborted",
    "TurnAbortedPayload", "TurnCompleted", "TurnCompletedPayload", "TurnDiffUpdated",
    "TurnDiffUpdatedPayload", "TurnPlanUpdated", "TurnPlanUpdatedPayload", "TurnStarted",
    "TurnStartedPayload", "TurnState", "UserInputRequested", "UserInputRequestedPayload",
    "UserInputResolved", "UserInputResolvedPayload", "WaitingOn", "decode_event",
    "encode_event",
]
