"""The payloads of what a turn asks and runs beside its items: request.*,
user-input.*, task.*, hook.*, tool.*."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from msgspec import UNSET, Meta, UnsetType

from topics.payloads.base import Decision, InputOutcome, Payload, RequestType


class RequestOpenedPayload(Payload, frozen=True, kw_only=True):
    requestType: Annotated[RequestType, Meta(description=(
        "What the runtime asks the user to approve: command_execution_approval, "
        "file_change_approval, apply_patch_approval, exec_command_approval, "
        "tool_user_input, dynamic_tool_call, auth_tokens_refresh or unknown."))]
    detail: Annotated[str | UnsetType, Meta(description=(
        "A human description of what is asked (the command, the reason); absent when "
        "none."))] = UNSET
    toolName: Annotated[str | UnsetType, Meta(description=(
        "The tool the approval is for, normalised as an item's toolName; absent when the "
        "request is not about a tool."))] = UNSET
    options: Annotated[list[Any] | UnsetType, Meta(description=(
        "The answers the runtime offers (ACP's permission options, ...), in its own "
        "shape; absent when it offers none."))] = UNSET
    args: Annotated[Any | UnsetType, Meta(description=(
        "The tool call's arguments, in the runtime's own keys; absent when none."))] = UNSET


class RequestResolvedPayload(Payload, frozen=True, kw_only=True):
    """`decision` is the runtime's own word, as it always was ("allow", "reject_once",
    "once", "acceptForSession", ...); `outcome` says the same in the words every runtime
    shares (Decision), absent where the stream does not say what was decided (an error
    answer, a request the runtime cleared without the answer in the stream). `decision`
    keeps its type and meaning: readers that match its words keep working."""

    requestType: Annotated[RequestType, Meta(description=(
        "The type of the request resolved, as on its request.opened: "
        "command_execution_approval, file_change_approval, apply_patch_approval, "
        "exec_command_approval, tool_user_input, dynamic_tool_call, auth_tokens_refresh "
        "or unknown."))]
    decision: Annotated[str | UnsetType, Meta(description=(
        "The runtime's own word for the answer (allow, reject_once, once, "
        "acceptForSession, ...); absent when the stream does not say. Read `outcome` for "
        "the same in shared words."))] = UNSET
    resolution: Annotated[Any | UnsetType, Meta(description=(
        "The runtime's own answer object, as it sent it; absent when none."))] = UNSET
    outcome: Annotated[Decision | UnsetType, Meta(description=(
        "How the approval ended, the same words for every runtime: accept, "
        "accept_for_session, decline (refused, the agent carries on) or cancel (refused "
        "and the turn stops); absent where the stream does not say."))] = UNSET


class UserInputRequestedPayload(Payload, frozen=True, kw_only=True):
    questions: Annotated[Any, Meta(description=(
        "The questions put to the user, in the runtime's own shape."))]


class UserInputResolvedPayload(Payload, frozen=True, kw_only=True):
    """`outcome`: answered, declined (the user refused to answer) or cancelled (no
    answer came: the turn ended first); absent where the stream does not say."""

    answers: Annotated[Any, Meta(description=(
        "The user's answers, in the runtime's own shape (null when none came)."))]
    outcome: Annotated[InputOutcome | UnsetType, Meta(description=(
        "answered, declined (the user refused to answer) or cancelled (no answer came: "
        "the turn ended first); absent where the stream does not say."))] = UNSET


class TaskStartedPayload(Payload, frozen=True, kw_only=True):
    taskId: Annotated[str, Meta(description=(
        "The runtime's id of the background task (a subagent's or a long-running tool's)."))]
    description: Annotated[str | UnsetType, Meta(description=(
        "What the task does, in the runtime's words; absent when none."))] = UNSET
    taskType: Annotated[str | UnsetType, Meta(description=(
        "The kind of task, in the runtime's words; absent when none."))] = UNSET


class TaskProgressPayload(Payload, frozen=True, kw_only=True):
    taskId: Annotated[str, Meta(description="The task's id, as on its task.started.")]
    description: Annotated[str, Meta(description=(
        "The task's current activity, in the runtime's words."))]
    usage: Annotated[Any | UnsetType, Meta(description=(
        "The task's usage so far, in the runtime's own shape; absent when none."))] = UNSET
    lastToolName: Annotated[str | UnsetType, Meta(description=(
        "The last tool the task ran; absent when none."))] = UNSET


class TaskCompletedPayload(Payload, frozen=True, kw_only=True):
    taskId: Annotated[str, Meta(description="The task's id, as on its task.started.")]
    status: Annotated[Literal["completed", "failed", "stopped"], Meta(description=(
        "How the task ended: completed, failed or stopped."))]
    summary: Annotated[str | UnsetType, Meta(description=(
        "The task's result summary, in the runtime's words; absent when none."))] = UNSET
    usage: Annotated[Any | UnsetType, Meta(description=(
        "The task's usage, in the runtime's own shape; absent when none."))] = UNSET


class HookStartedPayload(Payload, frozen=True, kw_only=True):
    hookId: Annotated[str, Meta(description=(
        "The runtime's id of this hook run (its progress and completion carry it)."))]
    hookName: Annotated[str, Meta(description="The hook's configured name.")]
    hookEvent: Annotated[str, Meta(description=(
        "The runtime event that triggered the hook (e.g. PreToolUse, Stop)."))]


class HookProgressPayload(Payload, frozen=True, kw_only=True):
    hookId: Annotated[str, Meta(description="The hook run's id, as on its hook.started.")]
    output: Annotated[str | UnsetType, Meta(description=(
        "The hook's output so far, where the runtime does not split it; absent otherwise."))] = UNSET
    stdout: Annotated[str | UnsetType, Meta(description=(
        "The hook's standard output so far; absent when none."))] = UNSET
    stderr: Annotated[str | UnsetType, Meta(description=(
        "The hook's standard error so far; absent when none."))] = UNSET


class HookCompletedPayload(Payload, frozen=True, kw_only=True):
    hookId: Annotated[str, Meta(description="The hook run's id, as on its hook.started.")]
    outcome: Annotated[Literal["success", "error", "cancelled"], Meta(description=(
        "How the hook ended: success, error or cancelled."))]
    output: Annotated[str | UnsetType, Meta(description=(
        "The hook's output, where the runtime does not split it; absent otherwise."))] = UNSET
    stdout: Annotated[str | UnsetType, Meta(description=(
        "The hook's standard output; absent when none."))] = UNSET
    stderr: Annotated[str | UnsetType, Meta(description=(
        "The hook's standard error; absent when none."))] = UNSET
    exitCode: Annotated[int | UnsetType, Meta(description=(
        "The hook command's exit code; absent when the runtime does not say."))] = UNSET


class ToolProgressPayload(Payload, frozen=True, kw_only=True):
    toolUseId: Annotated[str | UnsetType, Meta(description=(
        "The runtime's id of the running tool call (its tool_use id); absent when not "
        "given."))] = UNSET
    toolName: Annotated[str | UnsetType, Meta(description=(
        "The running tool's name; absent when not given."))] = UNSET
    summary: Annotated[str | UnsetType, Meta(description=(
        "What the tool is doing, in the runtime's words; absent when none."))] = UNSET
    elapsedSeconds: Annotated[float | UnsetType, Meta(description=(
        "Seconds since the tool call started, as the runtime reports it; absent when not "
        "given."))] = UNSET


class ToolSummaryPayload(Payload, frozen=True, kw_only=True):
    summary: Annotated[str, Meta(description="The runtime's summary of the preceding tool calls.")]
    precedingToolUseIds: Annotated[list[str] | UnsetType, Meta(description=(
        "The runtime's ids of the tool calls it summarises; absent when not given."))] = UNSET
