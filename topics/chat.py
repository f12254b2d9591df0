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

    content: str
    item_id: str | None = None


class ChatText(_Chat, tag="text", frozen=True, kw_only=True):
    """New assistant text (`content`) and the message's text so far (`accumulated`),
    while the message is short (adapters.projections.chat.ACCUMULATED_MAX, 2,048 characters). Past
    that, `accumulated` is "" and `accumulated_length` (absent until then) is the
    message's length so far: join the item's `content`s (gapless `seq`), or wait for
    `done`, which carries the final answer whole."""

    content: str
    accumulated: str
    phase: str | None = None
    item_id: str | None = None
    parent_tool_use_id: str | None = None
    accumulated_length: int | UnsetType = UNSET


class ChatReasoning(_Chat, tag="reasoning", frozen=True, kw_only=True):
    """Reasoning text: as ChatText."""

    content: str
    accumulated: str
    item_id: str | None = None
    parent_tool_use_id: str | None = None
    accumulated_length: int | UnsetType = UNSET


class ChatToolUse(_Chat, tag="tool_use", frozen=True, kw_only=True):
    """A tool call, with its normalised name (Bash, Read, Edit, ..., mcp__server__tool),
    and for a file change the files it touches (`paths`) and the unified `diff` the
    call proposes, as the canonical item normalises them (null when it has none)."""

    tool_use_id: str
    name: str
    input: Any
    parent_tool_use_id: str | None = None
    ui_resource_uri: str | None = None
    paths: list[str] | None = None
    diff: str | None = None


class ChatToolResult(_Chat, tag="tool_result", frozen=True, kw_only=True):
    """The tool's whole output, once, when it completes; for a file change, its `paths`
    and the `diff` of what was done (against the file when the runtime said it, so it
    may differ from the tool_use's proposal), null when the completion has none."""

    tool_use_id: str
    content: str
    is_error: bool
    parent_tool_use_id: str | None = None
    ui_resource_uri: str | None = None
    paths: list[str] | None = None
    diff: str | None = None


class ChatApproval(_Chat, tag="approval", frozen=True, kw_only=True):
    """A permission request: `state` opened, then resolved with the runtime's own
    `decision` word and the `outcome` every runtime shares: accept and
    accept_for_session allowed it, decline and cancel did not (topics.canonical.Decision;
    null when the runtime did not say)."""

    state: Literal["opened", "resolved"]
    request_id: str
    request_type: str
    tool_use_id: str | None = None
    tool_name: str | None = None
    detail: str | None = None
    options: list[Any] | None = None
    decision: str | None = None
    outcome: Decision | None = None


class ChatQuestion(_Chat, tag="question", frozen=True, kw_only=True):
    """Questions for the user: `state` asked (with `questions`), then answered, with the
    `outcome`: answered, declined or cancelled (null when the runtime did not say)."""

    state: Literal["asked", "answered"]
    request_id: str
    questions: Any = None
    answers: Any = None
    outcome: InputOutcome | None = None


class ChatError(_Chat, tag="error", frozen=True, kw_only=True):
    message: str
    error_class: str | None = None
    will_retry: bool | None = None


class ChatDone(_Chat, tag="done", frozen=True, kw_only=True):
    """The turn is over: its final answer (`result`, whole), and whether it failed.
    `final_text` repeats `result` while it is at most 2,048 characters
    (adapters.projections.chat.ACCUMULATED_MAX); past that it is "": read `result`."""

    result: str | None
    final_text: str | None
    is_error: bool
    subtype: str


ChatRecord = Union[
    ChatUser, ChatText, ChatReasoning, ChatToolUse, ChatToolResult, ChatApproval, ChatQuestion,
    ChatError, ChatDone,
]

encode_chat = msgspec.json.Encoder().encode
decode_chat = msgspec.json.Decoder(ChatRecord).decode
