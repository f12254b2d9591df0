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

from typing import Any, Literal, Union

import msgspec
from msgspec import UNSET, Struct, UnsetType

from topics.canonical import Decision, InputOutcome


class _Chat(Struct, frozen=True, kw_only=True, tag_field="type"):
    #: The session (the record's key), as on agents.canonical.
    session_id: str
    #: The runtime's provider id.
    provider: str
    #: The record's position in its session's chat, gapless from 1.
    seq: int
    #: The record's own id, deterministic: the same when it is computed again.
    event_id: str
    #: The eventId of the canonical event the record came from.
    source_event_id: str
    #: The canonical turn the record belongs to (null outside a turn).
    turn_id: str | None = None


class ChatUser(_Chat, tag="user", frozen=True, kw_only=True):
    """What the user asked: the prompt's whole text, once, when its message completes.
    Only the person's own words: never text the runtime, a hook or a parent agent put
    on the user's side (a canonical user_message whose `author` is not "user")."""

    #: The prompt's whole text.
    content: str
    #: The canonical user_message item.
    item_id: str | None = None


class ChatText(_Chat, tag="text", frozen=True, kw_only=True):
    """New assistant text (`content`) and the message's text so far (`accumulated`),
    while the message is short (adapters.projections.chat.ACCUMULATED_MAX, 2,048 characters). Past
    that, `accumulated` is "" and `accumulated_length` (absent until then) is the
    message's length so far: join the item's `content`s (gapless `seq`), or wait for
    `done`, which carries the final answer whole."""

    content: str
    accumulated: str
    #: The message's phase when the runtime names one.
    phase: str | None = None
    #: The canonical item the text belongs to.
    item_id: str | None = None
    #: The tool call that started the subagent that wrote it (null: the root agent).
    parent_tool_use_id: str | None = None
    accumulated_length: int | UnsetType = UNSET


class ChatReasoning(_Chat, tag="reasoning", frozen=True, kw_only=True):
    """Reasoning text: as ChatText."""

    #: New reasoning text.
    content: str
    #: The reasoning's text so far, while it is short (as ChatText).
    accumulated: str
    #: The canonical item the text belongs to.
    item_id: str | None = None
    #: The tool call that started the subagent that wrote it (null: the root agent).
    parent_tool_use_id: str | None = None
    #: The reasoning's length so far, once `accumulated` is empty.
    accumulated_length: int | UnsetType = UNSET


class ChatToolUse(_Chat, tag="tool_use", frozen=True, kw_only=True):
    """A tool call, with its normalised name (Bash, Read, Edit, ..., mcp__server__tool),
    and for a file change the files it touches (`paths`) and the unified `diff` the
    call proposes, as the canonical item normalises them (null when it has none)."""

    #: The tool call's id (its canonical item id).
    tool_use_id: str
    #: The normalised tool name (Bash, Read, Edit, ..., mcp__server__tool).
    name: str
    #: The tool's arguments, as the runtime sent them.
    input: Any
    #: The tool call that started the subagent that made this call (null: the root agent).
    parent_tool_use_id: str | None = None
    #: An MCP UI resource the tool declares, when it has one.
    ui_resource_uri: str | None = None
    paths: list[str] | None = None
    diff: str | None = None


class ChatToolResult(_Chat, tag="tool_result", frozen=True, kw_only=True):
    """The tool's whole output, once, when it completes; for a file change, its `paths`
    and the `diff` of what was done (against the file when the runtime said it, so it
    may differ from the tool_use's proposal), null when the completion has none."""

    #: The tool call this result answers.
    tool_use_id: str
    #: The tool's output as text.
    content: str
    #: Whether the tool failed.
    is_error: bool
    #: The tool call that started the subagent that ran it (null: the root agent).
    parent_tool_use_id: str | None = None
    #: An MCP UI resource the result points to, when it has one.
    ui_resource_uri: str | None = None
    paths: list[str] | None = None
    diff: str | None = None


class ChatApproval(_Chat, tag="approval", frozen=True, kw_only=True):
    """A permission request: `state` opened, then resolved with the runtime's own
    `decision` word and the `outcome` every runtime shares: accept and
    accept_for_session allowed it, decline and cancel did not (topics.canonical.Decision;
    null when the runtime did not say)."""

    state: Literal["opened", "resolved"]
    #: The canonical request id (request.opened's requestId).
    request_id: str
    #: The canonical requestType.
    request_type: str
    #: The tool call the approval is for (its canonical item id).
    tool_use_id: str | None = None
    #: The normalised name of the tool the approval is for.
    tool_name: str | None = None
    #: What is asked, in words (a command line, a file), when known.
    detail: str | None = None
    #: The answers the runtime offers, as it lists them.
    options: list[Any] | None = None
    decision: str | None = None
    outcome: Decision | None = None


class ChatQuestion(_Chat, tag="question", frozen=True, kw_only=True):
    """Questions for the user: `state` asked (with `questions`), then answered, with the
    `outcome`: answered, declined or cancelled (null when the runtime did not say)."""

    state: Literal["asked", "answered"]
    #: The canonical request id of the question.
    request_id: str
    questions: Any = None
    #: The answers, once the question is resolved.
    answers: Any = None
    outcome: InputOutcome | None = None


class ChatError(_Chat, tag="error", frozen=True, kw_only=True):
    #: The error's message.
    message: str
    #: The runtime.error class (provider_error, ...).
    error_class: str | None = None
    #: Whether the runtime says it retries.
    will_retry: bool | None = None


class ChatDone(_Chat, tag="done", frozen=True, kw_only=True):
    """The turn is over: its final answer (`result`, whole), and whether it failed.
    `final_text` repeats `result` while it is at most 2,048 characters
    (adapters.projections.chat.ACCUMULATED_MAX); past that it is "": read `result`."""

    result: str | None
    final_text: str | None
    #: Whether the turn ended in failure.
    is_error: bool
    #: How the turn ended: success, error, interrupted or cancelled.
    subtype: str


ChatRecord = Union[
    ChatUser, ChatText, ChatReasoning, ChatToolUse, ChatToolResult, ChatApproval, ChatQuestion,
    ChatError, ChatDone,
]

encode_chat = msgspec.json.Encoder().encode
decode_chat = msgspec.json.Decoder(ChatRecord).decode
