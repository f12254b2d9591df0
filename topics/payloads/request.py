"""The payloads of what a turn asks and runs beside its items: request.*,
user-input.*, task.*, hook.*, tool.*."""

from __future__ import annotations

from typing import Any, Literal

from msgspec import UNSET, UnsetType

from topics.payloads.base import Decision, InputOutcome, Payload, RequestType


class RequestOpenedPayload(Payload, frozen=True, kw_only=True):
    requestType: RequestType
    detail: str | UnsetType = UNSET
    toolName: str | UnsetType = UNSET
    options: list[Any] | UnsetType = UNSET
    args: Any | UnsetType = UNSET


class RequestResolvedPayload(Payload, frozen=True, kw_only=True):
    """`decision` is the runtime's own word, as it always was ("allow", "reject_once",
    "once", "acceptForSession", ...); `outcome` says the same in the words every runtime
    shares (Decision), absent where the stream does not say what was decided (an error
    answer, a request the runtime cleared without the answer in the stream). `decision`
    keeps its type and meaning: readers that match its words keep working."""

    requestType: RequestType
    decision: str | UnsetType = UNSET
    resolution: Any | UnsetType = UNSET
    outcome: Decision | UnsetType = UNSET


class UserInputRequestedPayload(Payload, frozen=True, kw_only=True):
    questions: Any


class UserInputResolvedPayload(Payload, frozen=True, kw_only=True):
    """`outcome`: answered, declined (the user refused to answer) or cancelled (no
    answer came: the turn ended first); absent where the stream does not say."""

    answers: Any
    outcome: InputOutcome | UnsetType = UNSET


class TaskStartedPayload(Payload, frozen=True, kw_only=True):
    taskId: str
    description: str | UnsetType = UNSET
    taskType: str | UnsetType = UNSET


class TaskProgressPayload(Payload, frozen=True, kw_only=True):
    taskId: str
    description: str
    usage: Any | UnsetType = UNSET
    lastToolName: str | UnsetType = UNSET


class TaskCompletedPayload(Payload, frozen=True, kw_only=True):
    taskId: str
    status: Literal["completed", "failed", "stopped"]
    summary: str | UnsetType = UNSET
    usage: Any | UnsetType = UNSET


class HookStartedPayload(Payload, frozen=True, kw_only=True):
    hookId: str
    hookName: str
    hookEvent: str


class HookProgressPayload(Payload, frozen=True, kw_only=True):
    hookId: str
    output: str | UnsetType = UNSET
    stdout: str | UnsetType = UNSET
    stderr: str | UnsetType = UNSET


class HookCompletedPayload(Payload, frozen=True, kw_only=True):
    hookId: str
    outcome: Literal["success", "error", "cancelled"]
    output: str | UnsetType = UNSET
    stdout: str | UnsetType = UNSET
    stderr: str | UnsetType = UNSET
    exitCode: int | UnsetType = UNSET


class ToolProgressPayload(Payload, frozen=True, kw_only=True):
    toolUseId: str | UnsetType = UNSET
    toolName: str | UnsetType = UNSET
    summary: str | UnsetType = UNSET
    elapsedSeconds: float | UnsetType = UNSET


class ToolSummaryPayload(Payload, frozen=True, kw_only=True):
    summary: str
    precedingToolUseIds: list[str] | UnsetType = UNSET
