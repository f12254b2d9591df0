"""The payloads of what a turn asks and runs beside its items: request.*,
user-input.*, task.*, hook.*, tool.*."""

from __future__ import annotations

from typing import Any, Literal

from msgspec import UNSET, UnsetType

from topics.payloads.base import Decision, InputOutcome, Payload, RequestType


class RequestOpenedPayload(Payload, frozen=True, kw_only=True):
    #: What is asked.
    requestType: RequestType
    #: What is asked, in words.
    detail: str | UnsetType = UNSET
    #: The normalised name of the tool concerned.
    toolName: str | UnsetType = UNSET
    #: The answers the runtime offers.
    options: list[Any] | UnsetType = UNSET
    #: The request's arguments, as the runtime sent them.
    args: Any | UnsetType = UNSET


class RequestResolvedPayload(Payload, frozen=True, kw_only=True):
    """`decision` is the runtime's own word, as it always was ("allow", "reject_once",
    "once", "acceptForSession", ...); `outcome` says the same in the words every runtime
    shares (Decision), absent where the stream does not say what was decided (an error
    answer, a request the runtime cleared without the answer in the stream). `decision`
    keeps its type and meaning: readers that match its words keep working."""

    #: What was asked.
    requestType: RequestType
    decision: str | UnsetType = UNSET
    #: The answer, as the runtime sent it.
    resolution: Any | UnsetType = UNSET
    outcome: Decision | UnsetType = UNSET


class UserInputRequestedPayload(Payload, frozen=True, kw_only=True):
    #: The questions asked, as the runtime sent them.
    questions: Any


class UserInputResolvedPayload(Payload, frozen=True, kw_only=True):
    """`outcome`: answered, declined (the user refused to answer) or cancelled (no
    answer came: the turn ended first); absent where the stream does not say."""

    #: The answers given, as the runtime sent them.
    answers: Any
    outcome: InputOutcome | UnsetType = UNSET


class TaskStartedPayload(Payload, frozen=True, kw_only=True):
    #: The task's id.
    taskId: str
    #: What the task is for.
    description: str | UnsetType = UNSET
    #: The kind of task.
    taskType: str | UnsetType = UNSET


class TaskProgressPayload(Payload, frozen=True, kw_only=True):
    #: The task's id.
    taskId: str
    #: What the task is doing.
    description: str
    #: The task's usage so far, as the runtime sent it.
    usage: Any | UnsetType = UNSET
    #: The last tool the task ran.
    lastToolName: str | UnsetType = UNSET


class TaskCompletedPayload(Payload, frozen=True, kw_only=True):
    #: The task's id.
    taskId: str
    #: How the task ended.
    status: Literal["completed", "failed", "stopped"]
    #: The task's summary.
    summary: str | UnsetType = UNSET
    #: The task's usage, as the runtime sent it.
    usage: Any | UnsetType = UNSET


class HookStartedPayload(Payload, frozen=True, kw_only=True):
    #: The hook run's id.
    hookId: str
    #: The hook's name.
    hookName: str
    #: The event the hook runs on.
    hookEvent: str


class HookProgressPayload(Payload, frozen=True, kw_only=True):
    #: The hook run's id.
    hookId: str
    #: Output so far.
    output: str | UnsetType = UNSET
    #: stdout so far.
    stdout: str | UnsetType = UNSET
    #: stderr so far.
    stderr: str | UnsetType = UNSET


class HookCompletedPayload(Payload, frozen=True, kw_only=True):
    #: The hook run's id.
    hookId: str
    #: How the hook ended.
    outcome: Literal["success", "error", "cancelled"]
    #: The hook's output.
    output: str | UnsetType = UNSET
    #: What the hook wrote on stdout.
    stdout: str | UnsetType = UNSET
    #: What the hook wrote on stderr.
    stderr: str | UnsetType = UNSET
    #: The hook's exit code.
    exitCode: int | UnsetType = UNSET


class ToolProgressPayload(Payload, frozen=True, kw_only=True):
    #: The tool call (the runtime's id).
    toolUseId: str | UnsetType = UNSET
    #: The normalised tool name.
    toolName: str | UnsetType = UNSET
    #: What the tool is doing.
    summary: str | UnsetType = UNSET
    #: Seconds since the tool started.
    elapsedSeconds: float | UnsetType = UNSET


class ToolSummaryPayload(Payload, frozen=True, kw_only=True):
    #: The summary.
    summary: str
    #: The tool calls the summary covers.
    precedingToolUseIds: list[str] | UnsetType = UNSET
