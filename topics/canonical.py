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

from typing import Union

import msgspec
from msgspec import UNSET, Struct, UnsetType

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

    schemaVersion: int
    eventId: str
    seq: int
    provider: str
    sessionId: str
    createdAt: str
    threadId: str | UnsetType = UNSET
    turnId: str | UnsetType = UNSET
    itemId: str | UnsetType = UNSET
    requestId: str | UnsetType = UNSET
    parentItemId: str | UnsetType = UNSET
    #: The subagent the event belongs to, and the agent that started it (docs/contract, "Agents").
    #: Absent: the session's root agent, whose id only `session.started` carries. A
    #: subagent's id shares its hash with the tool item that started it: `agt_<h>` was
    #: started by `itm_<h>`.
    agentId: str | UnsetType = UNSET
    parentAgentId: str | UnsetType = UNSET
    providerRefs: ProviderRefs | UnsetType = UNSET
    synthetic: bool
    raw: RawSource | UnsetType = UNSET


class SessionStarted(_Event, tag="session.started", frozen=True, kw_only=True):
    payload: SessionStartedPayload


class SessionConfigured(_Event, tag="session.configured", frozen=True, kw_only=True):
    payload: SessionConfiguredPayload


class SessionStateChanged(_Event, tag="session.state.changed", frozen=True, kw_only=True):
    payload: SessionStateChangedPayload


class SessionExited(_Event, tag="session.exited", frozen=True, kw_only=True):
    payload: SessionExitedPayload


class ThreadStarted(_Event, tag="thread.started", frozen=True, kw_only=True):
    payload: ThreadStartedPayload


class ThreadStateChanged(_Event, tag="thread.state.changed", frozen=True, kw_only=True):
    payload: ThreadStateChangedPayload


class ThreadMetadataUpdated(_Event, tag="thread.metadata.updated", frozen=True, kw_only=True):
    payload: ThreadMetadataUpdatedPayload


class ThreadTokenUsageUpdated(_Event, tag="thread.token-usage.updated", frozen=True, kw_only=True):
    payload: ThreadTokenUsageUpdatedPayload


class ThreadRealtimeStarted(_Event, tag="thread.realtime.started", frozen=True, kw_only=True):
    payload: ThreadRealtimeStartedPayload


class ThreadRealtimeItemAdded(_Event, tag="thread.realtime.item-added", frozen=True, kw_only=True):
    payload: ThreadRealtimeItemAddedPayload


class ThreadRealtimeAudioDelta(_Event, tag="thread.realtime.audio.delta", frozen=True, kw_only=True):
    payload: ThreadRealtimeAudioDeltaPayload


class ThreadRealtimeError(_Event, tag="thread.realtime.error", frozen=True, kw_only=True):
    payload: ThreadRealtimeErrorPayload


class ThreadRealtimeClosed(_Event, tag="thread.realtime.closed", frozen=True, kw_only=True):
    payload: ThreadRealtimeClosedPayload


class TurnStarted(_Event, tag="turn.started", frozen=True, kw_only=True):
    payload: TurnStartedPayload


class TurnCompleted(_Event, tag="turn.completed", frozen=True, kw_only=True):
    payload: TurnCompletedPayload


class TurnAborted(_Event, tag="turn.aborted", frozen=True, kw_only=True):
    payload: TurnAbortedPayload


class TurnPlanUpdated(_Event, tag="turn.plan.updated", frozen=True, kw_only=True):
    payload: TurnPlanUpdatedPayload


class TurnDiffUpdated(_Event, tag="turn.diff.updated", frozen=True, kw_only=True):
    payload: TurnDiffUpdatedPayload


class ItemStarted(_Event, tag="item.started", frozen=True, kw_only=True):
    payload: ItemPayload


class ItemUpdated(_Event, tag="item.updated", frozen=True, kw_only=True):
    payload: ItemPayload


class ItemCompleted(_Event, tag="item.completed", frozen=True, kw_only=True):
    payload: ItemPayload


class ContentDelta(_Event, tag="content.delta", frozen=True, kw_only=True):
    payload: ContentDeltaPayload


class RequestOpened(_Event, tag="request.opened", frozen=True, kw_only=True):
    payload: RequestOpenedPayload


class RequestResolved(_Event, tag="request.resolved", frozen=True, kw_only=True):
    payload: RequestResolvedPayload


class UserInputRequested(_Event, tag="user-input.requested", frozen=True, kw_only=True):
    payload: UserInputRequestedPayload


class UserInputResolved(_Event, tag="user-input.resolved", frozen=True, kw_only=True):
    payload: UserInputResolvedPayload


class TaskStarted(_Event, tag="task.started", frozen=True, kw_only=True):
    payload: TaskStartedPayload


class TaskProgress(_Event, tag="task.progress", frozen=True, kw_only=True):
    payload: TaskProgressPayload


class TaskCompleted(_Event, tag="task.completed", frozen=True, kw_only=True):
    payload: TaskCompletedPayload


class HookStarted(_Event, tag="hook.started", frozen=True, kw_only=True):
    payload: HookStartedPayload


class HookProgress(_Event, tag="hook.progress", frozen=True, kw_only=True):
    payload: HookProgressPayload


class HookCompleted(_Event, tag="hook.completed", frozen=True, kw_only=True):
    payload: HookCompletedPayload


class ToolProgress(_Event, tag="tool.progress", frozen=True, kw_only=True):
    payload: ToolProgressPayload


class ToolSummary(_Event, tag="tool.summary", frozen=True, kw_only=True):
    payload: ToolSummaryPayload


class AuthStatus(_Event, tag="auth.status", frozen=True, kw_only=True):
    payload: AuthStatusPayload


class AccountUpdated(_Event, tag="account.updated", frozen=True, kw_only=True):
    payload: AccountUpdatedPayload


class AccountRateLimitsUpdated(_Event, tag="account.rate-limits.updated", frozen=True, kw_only=True):
    payload: AccountRateLimitsUpdatedPayload


class McpStatusUpdated(_Event, tag="mcp.status.updated", frozen=True, kw_only=True):
    payload: McpStatusUpdatedPayload


class McpOauthCompleted(_Event, tag="mcp.oauth.completed", frozen=True, kw_only=True):
    payload: McpOauthCompletedPayload


class ModelRerouted(_Event, tag="model.rerouted", frozen=True, kw_only=True):
    payload: ModelReroutedPayload


class ConfigWarning(_Event, tag="config.warning", frozen=True, kw_only=True):
    payload: ConfigWarningPayload


class DeprecationNotice(_Event, tag="deprecation.notice", frozen=True, kw_only=True):
    payload: DeprecationNoticePayload


class FilesPersisted(_Event, tag="files.persisted", frozen=True, kw_only=True):
    payload: FilesPersistedPayload


class RuntimeWarningEvent(_Event, tag="runtime.warning", frozen=True, kw_only=True):
    payload: RuntimeWarningPayload


class RuntimeErrorEvent(_Event, tag="runtime.error", frozen=True, kw_only=True):
    payload: RuntimeErrorPayload


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

#: The payload class each event type carries.
PAYLOAD_TYPES: dict[str, type[Struct]] = {
    tag: next(f.type for f in msgspec.structs.fields(cls) if f.name == "payload")
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
