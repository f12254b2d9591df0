"""The readable chat contract (`agents.chat`): change the runtime, keep a readable
chat. The same records, with the same fields, for every runtime.

Every record carries `session_id`, `provider`, `seq` (per session, gapless from 1),
a deterministic `event_id` and the `source_event_id` of the canonical event it came
from. All fields are always present (null when unknown), so a chat UI can rely on
the shape. Tags: user, text, reasoning, tool_use, tool_result, approval, question,
error, done.

Evolution as on agents.canonical: a new record type or field never changes an old one
(`user` and the `outcome` fields came later; `decision` keeps the runtime's own word;
the tool records' `paths` and `diff` later still).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

import msgspec
from msgspec import UNSET, Meta, Struct, UnsetType

from topics.canonical import Decision, InputOutcome


class _Chat(Struct, frozen=True, kw_only=True, tag_field="type"):
    session_id: Annotated[str, Meta(description=(
        "The session's id in the fleet (the canonical sessionId)."))]
    provider: Annotated[str, Meta(description=(
        "The runtime that produced the session (the canonical provider)."))]
    seq: Annotated[int, Meta(description=(
        "The record's number in its session's chat, gapless from 1 (its own count, not "
        "the canonical seq)."))]
    event_id: Annotated[str, Meta(description=(
        "The record's id, deterministic: a record with an event_id already handled is a "
        "copy."))]
    source_event_id: Annotated[str, Meta(description=(
        "The eventId of the canonical event the record comes from."))]
    turn_id: Annotated[str | None, Meta(description=(
        "The canonical turnId of the turn the record belongs to; null outside a turn."))] = None


class ChatUser(_Chat, tag="user", frozen=True, kw_only=True):
    """What the user asked: the prompt's whole text, once, when its message completes.
    Only the person's own words: never text the runtime, a hook or a parent agent put
    on the user's side (a canonical user_message whose `author` is not "user")."""

    content: Annotated[str, Meta(description="The user's prompt, whole.")]
    item_id: Annotated[str | None, Meta(description=(
        "The canonical itemId of the user_message; null when none."))] = None


class ChatText(_Chat, tag="text", frozen=True, kw_only=True):
    """New assistant text (`content`) and the message's text so far (`accumulated`),
    while the message is short (adapters.projections.chat.ACCUMULATED_MAX, 2,048 characters). Past
    that, `accumulated` is "" and `accumulated_length` (absent until then) is the
    message's length so far: join the item's `content`s (gapless `seq`), or wait for
    `done`, which carries the final answer whole."""

    content: Annotated[str, Meta(description=(
        "The new assistant text (append it; never the text so far)."))]
    accumulated: Annotated[str, Meta(description=(
        "The message's text so far while it is at most 2,048 characters; past that \"\" "
        "(see accumulated_length)."))]
    phase: Annotated[str | None, Meta(description=(
        "The runtime's word for what the message is (Codex's commentary or final_answer); "
        "null when it does not say."))] = None
    item_id: Annotated[str | None, Meta(description=(
        "The canonical itemId of the assistant_message; null when none."))] = None
    parent_tool_use_id: Annotated[str | None, Meta(description=(
        "The tool_use_id of the tool call (a Task) this text is nested in; null at the "
        "top level."))] = None
    accumulated_length: Annotated[int | UnsetType, Meta(description=(
        "The message's length so far in characters, once `accumulated` is \"\"; absent "
        "until then."))] = UNSET


class ChatReasoning(_Chat, tag="reasoning", frozen=True, kw_only=True):
    """Reasoning text: as ChatText."""

    content: Annotated[str, Meta(description=(
        "The new reasoning text (append it; never the text so far)."))]
    accumulated: Annotated[str, Meta(description=(
        "The reasoning so far while it is at most 2,048 characters; past that \"\" (see "
        "accumulated_length)."))]
    item_id: Annotated[str | None, Meta(description=(
        "The canonical itemId of the reasoning item; null when none."))] = None
    parent_tool_use_id: Annotated[str | None, Meta(description=(
        "The tool_use_id of the tool call (a Task) this reasoning is nested in; null at "
        "the top level."))] = None
    accumulated_length: Annotated[int | UnsetType, Meta(description=(
        "The reasoning's length so far in characters, once `accumulated` is \"\"; absent "
        "until then."))] = UNSET


class ChatToolUse(_Chat, tag="tool_use", frozen=True, kw_only=True):
    """A tool call, with its normalised name (Bash, Read, Edit, ..., mcp__server__tool),
    and for a file change the files it touches (`paths`) and the unified `diff` the
    call proposes, as the canonical item normalises them (null when it has none)."""

    tool_use_id: Annotated[str, Meta(description=(
        "The tool call's id: the runtime's own call id (providerItemId), else the "
        "canonical itemId; its tool_result carries the same."))]
    name: Annotated[str, Meta(description=(
        "The tool's normalised name (Bash, Read, Edit, ..., mcp__server__tool)."))]
    input: Annotated[Any, Meta(description=(
        "The tool's input, in the runtime's own keys (null when not known)."))]
    parent_tool_use_id: Annotated[str | None, Meta(description=(
        "The tool_use_id of the tool call (a Task) this call is nested in; null at the "
        "top level."))] = None
    ui_resource_uri: Annotated[str | None, Meta(description=(
        "The URI of a UI resource the tool offers to render (an MCP UI resource); null "
        "when none."))] = None
    paths: Annotated[list[str] | None, Meta(description=(
        "For a file change: the files it touches; null otherwise."))] = None
    diff: Annotated[str | None, Meta(description=(
        "For a file change: the unified diff the call proposes; null otherwise."))] = None


class ChatToolResult(_Chat, tag="tool_result", frozen=True, kw_only=True):
    """The tool's whole output, once, when it completes; for a file change, its `paths`
    and the `diff` of what was done (against the file when the runtime said it, so it
    may differ from the tool_use's proposal), null when the completion has none."""

    tool_use_id: Annotated[str, Meta(description="The id of the tool_use this result answers.")]
    content: Annotated[str, Meta(description="The tool's whole output.")]
    is_error: Annotated[bool, Meta(description="True when the tool failed.")]
    parent_tool_use_id: Annotated[str | None, Meta(description=(
        "The tool_use_id of the tool call (a Task) this call is nested in; null at the "
        "top level."))] = None
    ui_resource_uri: Annotated[str | None, Meta(description=(
        "The URI of a UI resource the tool offers to render (an MCP UI resource); null "
        "when none."))] = None
    paths: Annotated[list[str] | None, Meta(description=(
        "For a file change: the files it touched; null otherwise."))] = None
    diff: Annotated[str | None, Meta(description=(
        "For a file change: the unified diff of what was done (it may differ from the "
        "tool_use's proposal); null when none."))] = None


class ChatApproval(_Chat, tag="approval", frozen=True, kw_only=True):
    """A permission request: `state` opened, then resolved with the runtime's own
    `decision` word and the `outcome` every runtime shares: accept and
    accept_for_session allowed it, decline and cancel did not (topics.canonical.Decision;
    null when the runtime did not say)."""

    state: Annotated[Literal["opened", "resolved"], Meta(description=(
        "opened (the runtime asks), then resolved (with decision and outcome)."))]
    request_id: Annotated[str, Meta(description=(
        "The approval's id (the canonical requestId): its opened and resolved records "
        "share it."))]
    request_type: Annotated[str, Meta(description=(
        "What is to be approved (the canonical requestType: command_execution_approval, "
        "file_change_approval, ...)."))]
    tool_use_id: Annotated[str | None, Meta(description=(
        "The tool call the approval is for; null when none."))] = None
    tool_name: Annotated[str | None, Meta(description=(
        "That tool's normalised name; null when none."))] = None
    detail: Annotated[str | None, Meta(description=(
        "A human description of what is asked; null when none."))] = None
    options: Annotated[list[Any] | None, Meta(description=(
        "The answers the runtime offers, in its own shape; null when none."))] = None
    decision: Annotated[str | None, Meta(description=(
        "On resolved: the runtime's own word for the answer; null when opened or not "
        "said."))] = None
    outcome: Annotated[Decision | None, Meta(description=(
        "On resolved: accept or accept_for_session (allowed), decline or cancel (not "
        "allowed); null when opened or not said."))] = None


class ChatQuestion(_Chat, tag="question", frozen=True, kw_only=True):
    """Questions for the user: `state` asked (with `questions`), then answered, with the
    `outcome`: answered, declined or cancelled (null when the runtime did not say)."""

    state: Annotated[Literal["asked", "answered"], Meta(description=(
        "asked (with questions), then answered (with answers and outcome)."))]
    request_id: Annotated[str, Meta(description=(
        "The question's id (the canonical requestId): its asked and answered records "
        "share it."))]
    questions: Annotated[Any, Meta(description=(
        "The questions, in the runtime's own shape; null on answered."))] = None
    answers: Annotated[Any, Meta(description=(
        "The answers, in the runtime's own shape; null on asked or when none came."))] = None
    outcome: Annotated[InputOutcome | None, Meta(description=(
        "On answered: answered, declined or cancelled; null when asked or not said."))] = None


class ChatError(_Chat, tag="error", frozen=True, kw_only=True):
    message: Annotated[str, Meta(description="The error, in the runtime's words.")]
    error_class: Annotated[str | None, Meta(description=(
        "provider_error, transport_error, permission_error, validation_error or unknown; "
        "null when unclassified."))] = None
    will_retry: Annotated[bool | None, Meta(description=(
        "True when the runtime retries on its own; null when it does not say."))] = None


class ChatDone(_Chat, tag="done", frozen=True, kw_only=True):
    """The turn is over: its final answer (`result`, whole), and whether it failed.
    `final_text` repeats `result` while it is at most 2,048 characters
    (adapters.projections.chat.ACCUMULATED_MAX); past that it is "": read `result`."""

    result: Annotated[str | None, Meta(description=(
        "The turn's final answer, whole; null when it had none."))]
    final_text: Annotated[str | None, Meta(description=(
        "`result` again while at most 2,048 characters; past that \"\" (read result)."))]
    is_error: Annotated[bool, Meta(description="True when the turn failed.")]
    subtype: Annotated[str, Meta(description=(
        "How the turn ended: success, error, interrupted or cancelled (from the canonical "
        "turn state completed, failed, interrupted, cancelled)."))]


ChatRecord = Union[
    ChatUser, ChatText, ChatReasoning, ChatToolUse, ChatToolResult, ChatApproval, ChatQuestion,
    ChatError, ChatDone,
]

encode_chat = msgspec.json.Encoder().encode
decode_chat = msgspec.json.Decoder(ChatRecord).decode
