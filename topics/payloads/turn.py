"""The payloads of a turn's events and of its items: turn.*, item.*,
content.delta."""

from __future__ import annotations

from typing import Any, Literal

from msgspec import UNSET, UnsetType

from topics.payloads.base import (
    Author,
    ItemStatus,
    ItemType,
    Payload,
    StreamKind,
    TurnState,
)
from topics.usage import Cost, TokenUsage


class TurnStartedPayload(Payload, frozen=True, kw_only=True):
    #: The model the turn runs on.
    model: str | UnsetType = UNSET
    #: The reasoning effort asked for, when the runtime names it.
    effort: str | UnsetType = UNSET


class TurnCompletedPayload(Payload, frozen=True, kw_only=True):
    """`usage`, `modelUsage` and `totalCostUsd` are the runtime's own values, as they
    always were; `tokens` is the turn's own token usage (this turn only, never a running
    total) in the shape every runtime shares (topics.usage.TokenUsage), absent where the
    runtime reported no usage for the turn. `cost` is the turn's cost with its
    provenance (topics.usage.Cost): the runtime's own where it reports one, else
    computed from `tokens` and the turn's model, else `unpriced`; absent when the turn
    has neither a reported cost nor `tokens`."""

    #: How the turn ended.
    state: TurnState
    #: The runtime's own stop reason.
    stopReason: str | None | UnsetType = UNSET
    usage: Any | UnsetType = UNSET
    modelUsage: dict[str, Any] | UnsetType = UNSET
    totalCostUsd: float | UnsetType = UNSET
    #: The turn's duration as the runtime measured it (ms).
    durationMs: int | UnsetType = UNSET
    #: Why the turn failed, when it did.
    errorMessage: str | UnsetType = UNSET
    #: The runtime's own final answer when it reports one (Claude's `result.result`).
    resultText: str | UnsetType = UNSET
    tokens: TokenUsage | UnsetType = UNSET
    cost: Cost | UnsetType = UNSET


class TurnAbortedPayload(Payload, frozen=True, kw_only=True):
    #: Why the turn was aborted.
    reason: str


class PlanStep(Payload, frozen=True, kw_only=True):
    #: The step, in words.
    step: str
    #: The step's status.
    status: Literal["pending", "inProgress", "completed"]


class TurnPlanUpdatedPayload(Payload, frozen=True, kw_only=True):
    #: Why the plan changed, when the runtime says.
    explanation: str | None | UnsetType = UNSET
    #: The plan's steps.
    plan: list[PlanStep]


class TurnDiffUpdatedPayload(Payload, frozen=True, kw_only=True):
    #: The turn's changes so far, as one unified diff.
    unifiedDiff: str


#: What an item's `diff` was computed against (adapters.core.diff): the file's content
#: before the change (`file`: the file's line numbers), only the replaced excerpt
#: (`excerpt`: line numbers count from the excerpt), or empty content because the old
#: content is not known (`empty`: a write; the file may be new or overwritten).
DiffBase = Literal["file", "excerpt", "empty"]


class ItemPayload(Payload, frozen=True, kw_only=True):
    """Lifecycle of one item, with typed tool fields.

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

    Normalised tool fields, the same whatever the runtime (docs "Normalised tool
    fields"; `input` and `data` keep the runtime's own names): `command` (one string,
    an argv joined with shell quoting, a `bash -lc` wrapper taken off) and `cwd` of a
    command; `paths` (the files a change touches) and `diff` (one unified diff of them,
    `diffBase` says against what; cut past the per-item cap like an output:
    `diffTruncated`, `diffLength`) of a file change; `url` and `query` of a web tool;
    `mcpServer` and `mcpTool` of an MCP tool call. Each is absent when the runtime did
    not say it.
    """

    #: What the item is.
    itemType: ItemType
    #: The item's status: inProgress, then completed, failed or declined.
    status: ItemStatus | UnsetType = UNSET
    #: A short title the runtime gives the item (a command line, a file).
    title: str | UnsetType = UNSET
    #: Detail the runtime gives, as text.
    detail: str | UnsetType = UNSET
    toolName: str | UnsetType = UNSET
    input: Any | UnsetType = UNSET
    output: str | UnsetType = UNSET
    #: Whether the tool call failed.
    isError: bool | UnsetType = UNSET
    #: A command's exit code.
    exitCode: int | None | UnsetType = UNSET
    text: str | UnsetType = UNSET
    #: Who a message item is from.
    role: Literal["user", "assistant"] | UnsetType = UNSET
    #: The message's phase when the runtime names one (e.g. final_answer).
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


class ContentDeltaPayload(Payload, frozen=True, kw_only=True):
    #: Which stream of the item the chunk belongs to.
    streamKind: StreamKind
    #: The new text: each character of a stream is carried once.
    delta: str
    #: The content part the chunk belongs to, when the runtime numbers them.
    contentIndex: int | UnsetType = UNSET
    #: The reasoning summary part the chunk belongs to, when the runtime numbers them.
    summaryIndex: int | UnsetType = UNSET
