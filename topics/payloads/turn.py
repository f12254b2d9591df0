"""The payloads of a turn's events and of its items: turn.*, item.*,
content.delta."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from msgspec import UNSET, Meta, UnsetType

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
    model: Annotated[str | UnsetType, Meta(description=(
        "The model the turn runs on, as the runtime names it (e.g. claude-sonnet-4-5, "
        "gpt-5-codex); absent when the runtime did not say."))] = UNSET
    effort: Annotated[str | UnsetType, Meta(description=(
        "The reasoning effort asked for the turn (low, medium, high, ... in the runtime's "
        "words); absent when not set."))] = UNSET


class TurnCompletedPayload(Payload, frozen=True, kw_only=True):
    """`usage`, `modelUsage` and `totalCostUsd` are the runtime's own values, as they
    always were; `tokens` is the turn's own token usage (this turn only, never a running
    total) in the shape every runtime shares (topics.usage.TokenUsage), absent where the
    runtime reported no usage for the turn. `cost` is the turn's cost with its
    provenance (topics.usage.Cost): the runtime's own where it reports one, else
    computed from `tokens` and the turn's model, else `unpriced`; absent when the turn
    has neither a reported cost nor `tokens`."""

    state: Annotated[TurnState, Meta(description=(
        "How the turn ended: completed, failed, interrupted (the user or canonflow "
        "stopped it) or cancelled."))]
    stopReason: Annotated[str | None | UnsetType, Meta(description=(
        "The model's stop reason in the runtime's words (end_turn, max_tokens, tool_use, "
        "...); null when the runtime said null, absent when it said nothing."))] = UNSET
    usage: Annotated[Any | UnsetType, Meta(description=(
        "The runtime's own usage object for the turn, in its own shape (read `tokens` for "
        "one shape across runtimes); absent when it reported none."))] = UNSET
    modelUsage: Annotated[dict[str, Any] | UnsetType, Meta(description=(
        "The runtime's own usage per model (Claude's modelUsage), in its shape; absent "
        "when it reported none."))] = UNSET
    totalCostUsd: Annotated[float | UnsetType, Meta(description=(
        "The cost the runtime itself reports, in US dollars, as it reports it (Claude's "
        "total_cost_usd may run over the whole session): read `cost` for this turn's; "
        "absent when none."))] = UNSET
    durationMs: Annotated[int | UnsetType, Meta(description=(
        "The turn's duration in milliseconds as the runtime reports it; absent when it "
        "did not."))] = UNSET
    errorMessage: Annotated[str | UnsetType, Meta(description=(
        "Why the turn failed, in the runtime's words; absent unless `state` is failed (or "
        "the runtime gave a message anyway)."))] = UNSET
    resultText: Annotated[str | UnsetType, Meta(description=(
        "The runtime's own final answer when it reports one (Claude's result.result); "
        "absent otherwise: the answer is then the last assistant_message item's `text`."))] = UNSET
    tokens: Annotated[TokenUsage | UnsetType, Meta(description=(
        "This turn's token usage only (never a running total) in the shape every runtime "
        "shares (TokenUsage); absent when the runtime reported no usage for the turn."))] = UNSET
    cost: Annotated[Cost | UnsetType, Meta(description=(
        "This turn's cost in US dollars with its provenance (Cost): the runtime's own, "
        "else computed from `tokens` and the model, else unpriced; absent when the turn "
        "has neither a reported cost nor `tokens`."))] = UNSET


class TurnAbortedPayload(Payload, frozen=True, kw_only=True):
    reason: Annotated[str, Meta(description=(
        "Why the turn was aborted, in the runtime's words (e.g. interrupted, replaced)."))]


class PlanStep(Payload, frozen=True, kw_only=True):
    step: Annotated[str, Meta(description="The step's text, as the agent wrote it.")]
    status: Annotated[Literal["pending", "inProgress", "completed"], Meta(description=(
        "The step's progress: pending, inProgress or completed."))]


class TurnPlanUpdatedPayload(Payload, frozen=True, kw_only=True):
    explanation: Annotated[str | None | UnsetType, Meta(description=(
        "The agent's note on the plan change; null or absent when it gave none."))] = UNSET
    plan: Annotated[list[PlanStep], Meta(description=(
        "The whole plan as it stands now, in order (not a change: it replaces the "
        "previous plan)."))]


class TurnDiffUpdatedPayload(Payload, frozen=True, kw_only=True):
    unifiedDiff: Annotated[str, Meta(description=(
        "The turn's file changes so far, as one unified diff (the whole diff, replacing "
        "the previous one)."))]


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
    An output or text that canonflow joins from the item's deltas and that is longer
    than the worker's per-item cap (CANONFLOW_ITEM_CAP, 64 KiB) is cut in the middle: it
    keeps its start and its end around a line that says how many characters were left
    out, `outputTruncated` (or `textTruncated`) is true, `outputLength` (`textLength`)
    is the whole length in characters and `outputSha256` (`textSha256`) the SHA-256 of
    its UTF-8 bytes. The item's `content.delta` events still carry every character. What
    the runtime sent whole passes whole, cut the same way only where the event would not
    fit its topic's max.message.bytes (1 MiB); a tool input (or `data`) is then cut in
    its longest strings (`inputTruncated`, `inputLength`, `inputSha256`; `data...`).

    Normalised tool fields, the same whatever the runtime (docs "Normalised tool
    fields"; `input` and `data` keep the runtime's own names): `command` (one string,
    an argv joined with shell quoting, a `bash -lc` wrapper taken off) and `cwd` of a
    command; `paths` (the files a change touches) and `diff` (one unified diff of them,
    `diffBase` says against what; cut past the per-item cap like an output:
    `diffTruncated`, `diffLength`, `diffSha256`) of a file change; `url` and `query` of a web tool;
    `mcpServer` and `mcpTool` of an MCP tool call. Each is absent when the runtime did
    not say it.
    """

    itemType: Annotated[ItemType, Meta(description=(
        "What the item is (the field is itemType; the event's `type` is only the "
        "lifecycle step): user_message, assistant_message (the assistant's answer: the "
        "only item whose `text` is one), reasoning (its thinking), plan, the tool calls "
        "command_execution, file_change, mcp_tool_call, dynamic_tool_call, "
        "collab_agent_tool_call, web_search and image_view (their result is in `output`, "
        "never `text`), review_entered, review_exited, context_compaction, error, unknown "
        "(a kind canonflow cannot name)."))]
    status: Annotated[ItemStatus | UnsetType, Meta(description=(
        "The item's progress: inProgress (started or updating), then completed, failed or "
        "declined (an approval refused); absent where the runtime does not say."))] = UNSET
    title: Annotated[str | UnsetType, Meta(description=(
        "A short human title for the item (a tool call's one-line label); absent when "
        "none."))] = UNSET
    detail: Annotated[str | UnsetType, Meta(description=(
        "A short human detail (a failure's reason, canonflow's note when it closed the "
        "item); absent when none."))] = UNSET
    toolName: Annotated[str | UnsetType, Meta(description=(
        "On a tool item: the tool's name normalised across runtimes (Bash, Read, Edit, "
        "Write, Grep, Glob, WebFetch, WebSearch, Task, TodoWrite, mcp__<server>__<tool>, "
        "...); absent on other items."))] = UNSET
    input: Annotated[Any | UnsetType, Meta(description=(
        "On a tool item: the tool's input, in the runtime's own keys (a command execution "
        "always has `command`); absent on other items or when not known yet."))] = UNSET
    output: Annotated[str | UnsetType, Meta(description=(
        "On a tool item's completion: the tool's whole output (stdout and stderr as the "
        "runtime gives them), cut in the middle past the per-item cap (see "
        "outputTruncated); absent before completion or when none."))] = UNSET
    isError: Annotated[bool | UnsetType, Meta(description=(
        "On a tool item's completion: true when the tool failed; absent when the runtime "
        "does not say."))] = UNSET
    exitCode: Annotated[int | None | UnsetType, Meta(description=(
        "On a command's completion: its exit code; null when the runtime reports none "
        "(killed, timed out); absent on other items."))] = UNSET
    text: Annotated[str | UnsetType, Meta(description=(
        "On a message or reasoning item's completion: the item's whole text, cut in the "
        "middle past the per-item cap (see textTruncated); absent on tool items and "
        "before completion."))] = UNSET
    role: Annotated[Literal["user", "assistant"] | UnsetType, Meta(description=(
        "On a message item: user or assistant; absent on other items."))] = UNSET
    phase: Annotated[str | UnsetType, Meta(description=(
        "On an assistant_message: the runtime's word for what the message is (Codex's "
        "commentary or final_answer); absent when the runtime does not say."))] = UNSET
    data: Annotated[Any | UnsetType, Meta(description=(
        "The runtime's own item detail, in its own shape; absent when none."))] = UNSET
    outputTruncated: Annotated[bool | UnsetType, Meta(description=(
        "True when `output` was cut in the middle: past the worker's per-item cap "
        "(CANONFLOW_ITEM_CAP, 64 KiB) for an output canonflow joined from the item's "
        "deltas, or where the event would not fit its topic's max.message.bytes for an "
        "output the runtime sent whole; absent when whole."))] = UNSET
    outputLength: Annotated[int | UnsetType, Meta(description=(
        "With outputTruncated: the whole output's length in characters; absent otherwise."))] = UNSET
    outputSha256: Annotated[str | UnsetType, Meta(description=(
        "With outputTruncated: the SHA-256 of the whole output's UTF-8 bytes as the runtime "
        "sent them, lowercase hex: the item's content.delta events joined, when it "
        "streamed (unless a secret in them was redacted); absent otherwise."))] = UNSET
    textTruncated: Annotated[bool | UnsetType, Meta(description=(
        "True when `text` was cut in the middle, as `output` is (see outputTruncated); "
        "absent when whole. The item's content.delta events still carry every "
        "character."))] = UNSET
    textLength: Annotated[int | UnsetType, Meta(description=(
        "With textTruncated: the whole text's length in characters; absent otherwise."))] = UNSET
    textSha256: Annotated[str | UnsetType, Meta(description=(
        "With textTruncated: the SHA-256 of the whole text's UTF-8 bytes, lowercase hex; "
        "absent otherwise, and where the text joins several streams (Codex reasoning "
        "parts)."))] = UNSET
    author: Annotated[Author | UnsetType, Meta(description=(
        "On a user_message: who wrote it: user (the person's own prompt, the one a chat "
        "shows), runtime (an interrupt notice, a compaction summary), hook, or agent (a "
        "parent agent prompting a subagent); absent on other items and where an adapter "
        "cannot tell."))] = UNSET
    command: Annotated[str | UnsetType, Meta(description=(
        "On a command_execution: the command as one shell string (an argv joined with "
        "shell quoting, a bash -lc wrapper taken off); absent when the runtime did not "
        "say."))] = UNSET
    cwd: Annotated[str | UnsetType, Meta(description=(
        "On a command_execution: its working directory; absent when the runtime did not "
        "say."))] = UNSET
    paths: Annotated[list[str] | UnsetType, Meta(description=(
        "On a file_change: the files it touches, as the runtime names them; absent when "
        "the runtime did not say."))] = UNSET
    diff: Annotated[str | UnsetType, Meta(description=(
        "On a file_change: one unified diff of its files (`diffBase` says against what), "
        "cut past the per-item cap; absent when the runtime did not give the change."))] = UNSET
    diffBase: Annotated[DiffBase | UnsetType, Meta(description=(
        "With diff: what it was computed against: file (the file before the change; file "
        "line numbers), excerpt (only the replaced text; line numbers count from the "
        "excerpt) or empty (a write whose old content is unknown)."))] = UNSET
    diffTruncated: Annotated[bool | UnsetType, Meta(description=(
        "True when `diff` was cut in the middle past the per-item cap; absent when whole."))] = UNSET
    diffLength: Annotated[int | UnsetType, Meta(description=(
        "With diffTruncated: the whole diff's length in characters; absent otherwise."))] = UNSET
    diffSha256: Annotated[str | UnsetType, Meta(description=(
        "With diffTruncated: the SHA-256 of the whole diff's UTF-8 bytes, lowercase hex; "
        "absent otherwise."))] = UNSET
    inputTruncated: Annotated[bool | UnsetType, Meta(description=(
        "True when `input` was cut to fit the event in its topic's max.message.bytes: its "
        "longest strings keep their start and end around a line that says how many "
        "characters were left out; absent when whole."))] = UNSET
    inputLength: Annotated[int | UnsetType, Meta(description=(
        "With inputTruncated: the length in characters of the whole input as compact JSON "
        "(as canonflow writes it); absent otherwise."))] = UNSET
    inputSha256: Annotated[str | UnsetType, Meta(description=(
        "With inputTruncated: the SHA-256 of the whole input's compact JSON (UTF-8), "
        "lowercase hex; absent otherwise."))] = UNSET
    dataTruncated: Annotated[bool | UnsetType, Meta(description=(
        "True when `data` was cut as `input` is (see inputTruncated): the runtime's item "
        "may repeat an output that made the event too large; absent when whole."))] = UNSET
    dataLength: Annotated[int | UnsetType, Meta(description=(
        "With dataTruncated: the length in characters of the whole `data` as compact "
        "JSON; absent otherwise."))] = UNSET
    dataSha256: Annotated[str | UnsetType, Meta(description=(
        "With dataTruncated: the SHA-256 of the whole `data`'s compact JSON (UTF-8), "
        "lowercase hex; absent otherwise."))] = UNSET
    url: Annotated[str | UnsetType, Meta(description=(
        "On a WebFetch (or WebSearch) call: the URL its input names; absent otherwise."))] = UNSET
    query: Annotated[str | UnsetType, Meta(description=(
        "On a WebSearch (or WebFetch) call: the query its input names; absent otherwise."))] = UNSET
    mcpServer: Annotated[str | UnsetType, Meta(description=(
        "On an mcp_tool_call: the MCP server's name; absent otherwise."))] = UNSET
    mcpTool: Annotated[str | UnsetType, Meta(description=(
        "On an mcp_tool_call: the tool's name on that server; absent otherwise."))] = UNSET


class ContentDeltaPayload(Payload, frozen=True, kw_only=True):
    streamKind: Annotated[StreamKind, Meta(description=(
        "Which stream of the item `itemId` the delta extends; the field is streamKind, "
        "not kind. Only assistant_text is the assistant's answer; reasoning_text and "
        "reasoning_summary_text are its thinking, plan_text a plan, command_output a "
        "command's output and file_change_output a file change's tool output (never "
        "assistant text); unknown: a stream canonflow cannot name."))]
    delta: Annotated[str, Meta(description=(
        "The new characters of the stream, in order (append them; never the text so far)."))]
    contentIndex: Annotated[int | UnsetType, Meta(description=(
        "The part of the item the delta extends, when the runtime streams several (Codex "
        "reasoning content parts, a pi message's content block); absent otherwise."))] = UNSET
    summaryIndex: Annotated[int | UnsetType, Meta(description=(
        "With reasoning_summary_text: which summary part the delta extends (Codex); "
        "absent otherwise."))] = UNSET
