"""The canonical event: the one contract every consumer of `agents.canonical` reads.

Vocabulary and payloads follow seed 002 §1 (event families §1.2, item types §1.3,
request types §1.4, payloads §1.5, id semantics §1.6). Every event is one frozen
msgspec Struct tagged by its wire `type` ("turn.started", ...): the envelope fields
live on the shared base, the typed payload in `payload`.

Evolution rules (consumers in other languages rely on them): new fields get
defaults; a field is never retyped or renamed; consumers ignore unknown fields.
`schemaVersion` changes only on a breaking change, which these rules forbid.
"""

from __future__ import annotations

from typing import Any, Literal, Union

import msgspec
from msgspec import UNSET, Struct, UnsetType

from topics.usage import Cost, TokenUsage

SCHEMA_VERSION = 1

SessionState = Literal["starting", "ready", "running", "waiting", "stopped", "error"]
ThreadState = Literal["active", "idle", "archived", "unarchived", "closed", "compacted", "error"]
TurnState = Literal["completed", "failed", "interrupted", "cancelled"]
#: What a session waits on, as canonflow sees it (SessionStateChangedPayload.waitingOn)
WaitingOn = Literal["model", "tool", "approval"]
ItemStatus = Literal["inProgress", "completed", "failed", "declined"]
ItemType = Literal[
    "user_message",
    "assistant_message",
    "reasoning",
    "plan",
    "command_execution",
    "file_change",
    "mcp_tool_call",
    "dynamic_tool_call",
    "collab_agent_tool_call",
    "web_search",
    "image_view",
    "review_entered",
    "review_exited",
    "context_compaction",
    "error",
    "unknown",
]
RequestType = Literal[
    "command_execution_approval",
    "file_change_approval",
    "apply_patch_approval",
    "exec_command_approval",
    "tool_user_input",
    "dynamic_tool_call",
    "auth_tokens_refresh",
    "unknown",
]
StreamKind = Literal[
    "assistant_text",
    "reasoning_text",
    "reasoning_summary_text",
    "plan_text",
    "command_output",
    "file_change_output",
    "unknown",
]
ErrorClass = Literal[
    "provider_error", "transport_error", "permission_error", "validation_error", "unknown"
]
#: How an approval ended, in the same words for every runtime (README "Decisions"):
#: accept (allowed, this once), accept_for_session (allowed, and the runtime was told not
#: to ask again for the like, for the session or longer), decline (refused; the agent
#: carries on without it), cancel (not allowed, and the turn stops with it: the user
#: refused and interrupted, or the turn ended or was cancelled before an answer).
Decision = Literal["accept", "accept_for_session", "decline", "cancel"]
#: How a question put to the user ended.
InputOutcome = Literal["answered", "declined", "cancelled"]
#: Who wrote a user_message: the person ("user"), the runtime (an interrupt notice, a
#: compaction summary, a synthetic part), a hook, or a parent agent prompting a subagent.
Author = Literal["user", "runtime", "hook", "agent"]

#: Item types that represent a tool invocation (chat shows them as tool_use/tool_result).
TOOL_ITEM_TYPES = frozenset(
    {
        "command_execution",
        "file_change",
        "mcp_tool_call",
        "dynamic_tool_call",
        "collab_agent_tool_call",
        "web_search",
        "image_view",
    }
)


class _Payload(Struct, frozen=True, kw_only=True, omit_defaults=True):
    pass


# ---- envelope parts -----------------------------------------------------------


class ProviderRefs(_Payload, frozen=True, kw_only=True):
    """The provider's own ids, kept for correlation; never used as canonical ids."""

    providerSessionId: str | UnsetType = UNSET
    providerThreadId: str | UnsetType = UNSET
    providerTurnId: str | UnsetType = UNSET
    providerItemId: str | UnsetType = UNSET
    providerRequestId: str | UnsetType = UNSET
    providerParentItemId: str | UnsetType = UNSET


class RawSource(_Payload, frozen=True, kw_only=True):
    """The native message an event came from (only when the deployment opts in)."""

    source: str
    origin: Literal["agent", "client"] = "agent"
    method: str | UnsetType = UNSET
    messageType: str | UnsetType = UNSET
    payload: msgspec.Raw


# ---- payloads (seed 002 §1.5) -------------------------------------------------


class SessionStartedPayload(_Payload, frozen=True, kw_only=True):
    message: str | UnsetType = UNSET
    resume: Any | UnsetType = UNSET


class SessionConfiguredPayload(_Payload, frozen=True, kw_only=True):
    config: dict[str, Any]
    #: The runtime's release as its stream states it (Claude Code's
    #: `claude_code_version`, the Codex app-server's user agent, an ACP agent's
    #: `agentInfo.version`); absent where the stream does not say.
    runtimeVersion: str | UnsetType = UNSET
    #: The runtime's own name for itself, where the protocol names the agent (ACP's
    #: `agentInfo.name`, e.g. "@zed-industries/claude-code-acp").
    runtimeName: str | UnsetType = UNSET


class SessionStateChangedPayload(_Payload, frozen=True, kw_only=True):
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


class SessionExitedPayload(_Payload, frozen=True, kw_only=True):
    reason: str | UnsetType = UNSET
    recoverable: bool | UnsetType = UNSET
    exitKind: Literal["graceful", "error"] | UnsetType = UNSET


class ThreadStartedPayload(_Payload, frozen=True, kw_only=True):
    providerThreadId: str | UnsetType = UNSET


class ThreadStateChangedPayload(_Payload, frozen=True, kw_only=True):
    state: ThreadState
    detail: Any | UnsetType = UNSET


class ThreadMetadataUpdatedPayload(_Payload, frozen=True, kw_only=True):
    name: str | UnsetType = UNSET
    metadata: dict[str, Any] | UnsetType = UNSET
    #: The runtime's release, where a thread's own record states it rather than a
    #: session.configured (OpenCode's session `info.version`).
    runtimeVersion: str | UnsetType = UNSET


class ThreadTokenUsageUpdatedPayload(_Payload, frozen=True, kw_only=True):
    """`usage` is the runtime's own object, as it always was; `tokens` is the thread's
    usage so far in the shape every runtime shares (topics.usage.TokenUsage): the
    runtime's own total where it states one (Codex app-server's `total`), else the sum
    of the thread's turns (README "Token usage")."""

    usage: Any
    tokens: TokenUsage | UnsetType = UNSET


class ThreadRealtimeStartedPayload(_Payload, frozen=True, kw_only=True):
    realtimeSessionId: str | UnsetType = UNSET


class ThreadRealtimeItemAddedPayload(_Payload, frozen=True, kw_only=True):
    item: Any


class ThreadRealtimeAudioDeltaPayload(_Payload, frozen=True, kw_only=True):
    audio: Any


class ThreadRealtimeErrorPayload(_Payload, frozen=True, kw_only=True):
    message: str


class ThreadRealtimeClosedPayload(_Payload, frozen=True, kw_only=True):
    reason: str | UnsetType = UNSET


class TurnStartedPayload(_Payload, frozen=True, kw_only=True):
    model: str | UnsetType = UNSET
    effort: str | UnsetType = UNSET


class TurnCompletedPayload(_Payload, frozen=True, kw_only=True):
    """`usage`, `modelUsage` and `totalCostUsd` are the runtime's own values, as they
    always were; `tokens` is the turn's own token usage (this turn only, never a running
    total) in the shape every runtime shares (topics.usage.TokenUsage), absent where the
    runtime reported no usage for the turn. `cost` is the turn's cost with its
    provenance (topics.usage.Cost): the runtime's own where it reports one, else
    computed from `tokens` and the turn's model, else `unpriced`; absent when the turn
    has neither a reported cost nor `tokens`."""

    state: TurnState
    stopReason: str | None | UnsetType = UNSET
    usage: Any | UnsetType = UNSET
    modelUsage: dict[str, Any] | UnsetType = UNSET
    totalCostUsd: float | UnsetType = UNSET
    durationMs: int | UnsetType = UNSET
    errorMessage: str | UnsetType = UNSET
    #: The runtime's own final answer when it reports one (Claude's `result.result`).
    resultText: str | UnsetType = UNSET
    tokens: TokenUsage | UnsetType = UNSET
    cost: Cost | UnsetType = UNSET


class TurnAbortedPayload(_Payload, frozen=True, kw_only=True):
    reason: str


class PlanStep(_Payload, frozen=True, kw_only=True):
    step: str
    status: Literal["pending", "inProgress", "completed"]


class TurnPlanUpdatedPayload(_Payload, frozen=True, kw_only=True):
    explanation: str | None | UnsetType = UNSET
    plan: list[PlanStep]


class TurnDiffUpdatedPayload(_Payload, frozen=True, kw_only=True):
    unifiedDiff: str


#: What an item's `diff` was computed against (adapters.core.diff): the file's content
#: before the change (`file`: the file's line numbers), only the replaced excerpt
#: (`excerpt`: line numbers count from the excerpt), or empty content because the old
#: content is not known (`empty`: a write; the file may be new or overwritten).
DiffBase = Literal["file", "excerpt", "empty"]


class ItemPayload(_Payload, frozen=True, kw_only=True):
    """Lifecycle of one item (seed 002 ItemLifecyclePayload), with typed tool fields.

    `toolName` is normalised across runtimes (Bash, Read, Edit, Write, Grep, Glob,
    WebFetch, WebSearch, Task, TodoWrite, mcp__<server>__<tool>, ...); `input` is the
    tool's input (a command execution always has `command`, and `cwd` when known);
    `output` is the whole tool output on completion; `text` the item's whole text on
    completion of a message or reasoning item; `data` the runtime's own item detail.
    An output or text longer than the worker's per-item cap (CANONFLOW_ITEM_CAP, 8 MiB)
    is cut in the middle: it keeps its start and its end around a line that says how
    many characters were left out, `outputTruncated` (or `textTruncated`) is true and
    `outputLength` (`textLength`) is the whole length in characters. The item's
    `content.delta` events still carry every character.

    Normalised tool fields, the same whatever the runtime (README "Normalised tool
    fields"; `input` and `data` keep the runtime's own names): `command` (one string,
    an argv joined with shell quoting, a `bash -lc` wrapper taken off) and `cwd` of a
    command; `paths` (the files a change touches) and `diff` (one unified diff of them,
    `diffBase` says against what; cut past the per-item cap like an output:
    `diffTruncated`, `diffLength`) of a file change; `url` and `query` of a web tool;
    `mcpServer` and `mcpTool` of an MCP tool call. Each is absent when the runtime did
    not say it.
    """

    itemType: ItemType
    status: ItemStatus | UnsetType = UNSET
    title: str | UnsetType = UNSET
    detail: str | UnsetType = UNSET
    toolName: str | UnsetType = UNSET
    input: Any | UnsetType = UNSET
    output: str | UnsetType = UNSET
    isError: bool | UnsetType = UNSET
    exitCode: int | None | UnsetType = UNSET
    text: str | UnsetType = UNSET
    role: Literal["user", "assistant"] | UnsetType = UNSET
    phase: str | UnsetType = UNSET
    data: Any | UnsetType = UNSET
    outputTruncated: bool | UnsetType = UNSET
    outputLength: int | UnsetType = UNSET
    textTruncated: bool | UnsetType = UNSET
    textLength: int | UnsetType = UNSET
    #: On a user_message: who wrote it (only "user" is the person's own prompt, the one
    #: the chat shows); absent on other items and where an adapter cannot tell.
    author: Author | UnsetType = UNSET
    command: str | UnsetType = UNSET
    cwd: str | UnsetType = UNSET
    paths: list[str] | UnsetType = UNSET
    diff: str | UnsetType = UNSET
    diffBase: DiffBase | UnsetType = UNSET
    diffTruncated: bool | UnsetType = UNSET
    diffLength: int | UnsetType = UNSET
    url: str | UnsetType = UNSET
    query: str | UnsetType = UNSET
    mcpServer: str | UnsetType = UNSET
    mcpTool: str | UnsetType = UNSET


class ContentDeltaPayload(_Payload, frozen=True, kw_only=True):
    streamKind: StreamKind
    delta: str
    contentIndex: int | UnsetType = UNSET
    summaryIndex: int | UnsetType = UNSET


class RequestOpenedPayload(_Payload, frozen=True, kw_only=True):
    requestType: RequestType
    detail: str | UnsetType = UNSET
    toolName: str | UnsetType = UNSET
    options: list[Any] | UnsetType = UNSET
    args: Any | UnsetType = UNSET


class RequestResolvedPayload(_Payload, frozen=True, kw_only=True):
    """`decision` is the runtime's own word, as it always was ("allow", "reject_once",
    "once", "acceptForSession", ...); `outcome` says the same in the words every runtime
    shares (Decision), absent where the stream does not say what was decided (an error
    answer, a request the runtime cleared without the answer in the stream). `decision`
    keeps its type and meaning: readers that match its words keep working."""

    requestType: RequestType
    decision: str | UnsetType = UNSET
    resolution: Any | UnsetType = UNSET
    outcome: Decision | UnsetType = UNSET


class UserInputRequestedPayload(_Payload, frozen=True, kw_only=True):
    questions: Any


class UserInputResolvedPayload(_Payload, frozen=True, kw_only=True):
    """`outcome`: answered, declined (the user refused to answer) or cancelled (no
    answer came: the turn ended first); absent where the stream does not say."""

    answers: Any
    outcome: InputOutcome | UnsetType = UNSET


class TaskStartedPayload(_Payload, frozen=True, kw_only=True):
    taskId: str
    description: str | UnsetType = UNSET
    taskType: str | UnsetType = UNSET


class TaskProgressPayload(_Payload, frozen=True, kw_only=True):
    taskId: str
    description: str
    usage: Any | UnsetType = UNSET
    lastToolName: str | UnsetType = UNSET


class TaskCompletedPayload(_Payload, frozen=True, kw_only=True):
    taskId: str
    status: Literal["completed", "failed", "stopped"]
    summary: str | UnsetType = UNSET
    usage: Any | UnsetType = UNSET


class HookStartedPayload(_Payload, frozen=True, kw_only=True):
    hookId: str
    hookName: str
    hookEvent: str


class HookProgressPayload(_Payload, frozen=True, kw_only=True):
    hookId: str
    output: str | UnsetType = UNSET
    stdout: str | UnsetType = UNSET
    stderr: str | UnsetType = UNSET


class HookCompletedPayload(_Payload, frozen=True, kw_only=True):
    hookId: str
    outcome: Literal["success", "error", "cancelled"]
    output: str | UnsetType = UNSET
    stdout: str | UnsetType = UNSET
    stderr: str | UnsetType = UNSET
    exitCode: int | UnsetType = UNSET


class ToolProgressPayload(_Payload, frozen=True, kw_only=True):
    toolUseId: str | UnsetType = UNSET
    toolName: str | UnsetType = UNSET
    summary: str | UnsetType = UNSET
    elapsedSeconds: float | UnsetType = UNSET


class ToolSummaryPayload(_Payload, frozen=True, kw_only=True):
    summary: str
    precedingToolUseIds: list[str] | UnsetType = UNSET


class AuthStatusPayload(_Payload, frozen=True, kw_only=True):
    isAuthenticating: bool | UnsetType = UNSET
    output: list[str] | UnsetType = UNSET
    error: str | UnsetType = UNSET


class AccountUpdatedPayload(_Payload, frozen=True, kw_only=True):
    account: Any


class AccountRateLimitsUpdatedPayload(_Payload, frozen=True, kw_only=True):
    rateLimits: Any


class McpStatusUpdatedPayload(_Payload, frozen=True, kw_only=True):
    status: Any


class McpOauthCompletedPayload(_Payload, frozen=True, kw_only=True):
    success: bool
    name: str | UnsetType = UNSET
    error: str | UnsetType = UNSET


class ModelReroutedPayload(_Payload, frozen=True, kw_only=True):
    fromModel: str
    toModel: str
    reason: str


class ConfigWarningPayload(_Payload, frozen=True, kw_only=True):
    summary: str
    details: str | UnsetType = UNSET
    path: str | UnsetType = UNSET
    range: Any | UnsetType = UNSET


class DeprecationNoticePayload(_Payload, frozen=True, kw_only=True):
    summary: str
    details: str | UnsetType = UNSET


class PersistedFile(_Payload, frozen=True, kw_only=True):
    filename: str
    fileId: str


class FailedFile(_Payload, frozen=True, kw_only=True):
    filename: str
    error: str


class FilesPersistedPayload(_Payload, frozen=True, kw_only=True):
    files: list[PersistedFile]
    failed: list[FailedFile] | UnsetType = UNSET


class RuntimeWarningPayload(_Payload, frozen=True, kw_only=True):
    message: str
    detail: Any | UnsetType = UNSET


class RuntimeErrorPayload(_Payload, frozen=True, kw_only=True):
    message: str
    errorClass: ErrorClass | UnsetType = msgspec.field(default=UNSET, name="class")
    willRetry: bool | UnsetType = UNSET
    detail: Any | UnsetType = UNSET


# ---- the envelope and the tagged union ----------------------------------------


class _Event(
    Struct, frozen=True, kw_only=True, omit_defaults=True, tag_field="type"
):
    """Envelope shared by every canonical event (DESIGN.md "Canonical events").

    `schemaVersion` and `synthetic` carry no default so that they are always on the
    wire (omit_defaults drops defaults); canonical ids are canonflow's own, the
    provider's ids are only in `providerRefs` (seed 002 §1.6).
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
    #: The subagent the event belongs to, and the agent that started it (README "Agents").
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
