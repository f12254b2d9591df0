"""The canonical contract's words (event families, item and request types) and the parts every payload and
the envelope share: the payload base and the envelope's `providerRefs` and `raw`.

The Literal types are the vocabulary consumers match on (item types, request types,
stream kinds, states, decisions); the event and payload classes live in
topics.canonical and the family modules beside this one.
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec
from msgspec import UNSET, Meta, Struct, UnsetType

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
#: How an approval ended, in the same words for every runtime (docs/contract, "Decisions"):
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


class Payload(Struct, frozen=True, kw_only=True, omit_defaults=True):
    """The base of every payload: frozen, keyword-only, its unset fields off the wire."""


# ---- envelope parts -----------------------------------------------------------


class ProviderRefs(Payload, frozen=True, kw_only=True):
    """The provider's own ids, kept for correlation; never used as canonical ids."""

    providerSessionId: Annotated[str | UnsetType, Meta(description=(
        "The runtime's own session id; absent when the runtime gave none."))] = UNSET
    providerThreadId: Annotated[str | UnsetType, Meta(description=(
        "The runtime's own thread (conversation) id; absent when the runtime gave none."))] = UNSET
    providerTurnId: Annotated[str | UnsetType, Meta(description=(
        "The runtime's own turn id; absent when the runtime gave none."))] = UNSET
    providerItemId: Annotated[str | UnsetType, Meta(description=(
        "The runtime's own item id (a message id, a tool_use id, ...); absent when the "
        "runtime gave none."))] = UNSET
    providerRequestId: Annotated[str | UnsetType, Meta(description=(
        "The runtime's own id of the approval or question (a JSON-RPC request id, a "
        "control request id); absent when the runtime gave none."))] = UNSET
    providerParentItemId: Annotated[str | UnsetType, Meta(description=(
        "The runtime's own id of the enclosing item (Claude's parent_tool_use_id); absent "
        "when the runtime gave none."))] = UNSET


class RawSource(Payload, frozen=True, kw_only=True):
    """The native message an event came from (only when the deployment opts in)."""

    source: Annotated[str, Meta(description=(
        "The native format the message is in, as the adapter names it (codex.app-server, "
        "qwen.stream-json, opencode.db, ...)."))]
    origin: Annotated[Literal["agent", "client"], Meta(description=(
        "Who sent the native message: the agent runtime (agent) or its client (client, "
        "e.g. an approval answer)."))] = "agent"
    method: Annotated[str | UnsetType, Meta(description=(
        "The native message's JSON-RPC method (Codex app-server, ACP); absent for formats "
        "without one."))] = UNSET
    messageType: Annotated[str | UnsetType, Meta(description=(
        "The native message's own type (Claude's `type`, an OpenCode event's `type`); "
        "absent where the format has none."))] = UNSET
    payload: Annotated[msgspec.Raw, Meta(description=(
        "The native message itself, as the runtime wrote it (JSON, not re-encoded); null "
        "when it was left out (see payloadTruncated)."))]
    payloadTruncated: Annotated[bool | UnsetType, Meta(description=(
        "True when `payload` was left out (null) because the event would not fit its "
        "topic's max.message.bytes with it; the native message is in its raw topic. "
        "Absent otherwise."))] = UNSET
    payloadBytes: Annotated[int | UnsetType, Meta(description=(
        "With payloadTruncated: the native message's size in bytes; absent otherwise."))] = UNSET
    payloadSha256: Annotated[str | UnsetType, Meta(description=(
        "With payloadTruncated: the SHA-256 of the native message's bytes, lowercase hex; "
        "absent otherwise."))] = UNSET
