"""codex: the legacy mirror, `codex/event/<type>` notifications (the translator's
docstring says what it was): each kind ignored with the v2 message that carries its
content, translated where none did, or warned about once per session."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from adapters.codex.agents import speak_for
from adapters.codex.common import Place, ensure_session, get_str, need_dict
from adapters.codex.state import State
from adapters.core.emitter import UNSET, Emitter
from adapters.core.emitter import replace as _replace
from topics.canonical import (
    ConfigWarning,
    ConfigWarningPayload,
    McpStatusUpdated,
    McpStatusUpdatedPayload,
    RuntimeWarningEvent,
    RuntimeWarningPayload,
)

# ---- the legacy mirror: codex/event/<type> ------------------------------------------


LEGACY_PREFIX: Final = "codex/event/"  # tested at every notification: a C static compiled
LEGACY_WARNED_KEPT: Final = 32  # kinds remembered as warned (State.legacyWarned)

_LegacyHandler = Callable[[State, dict[str, Any], dict[str, Any], Emitter], State]


def on_legacy(state: State, obj: dict[str, Any], method: str, out: Emitter) -> State:
    """A `codex/event/<type>` notification: a core event of the mirror (module docstring),
    params `{id: turn id, msg: {type, ...}, conversationId: thread id}`.

    Raises MalformedRecord when a translated kind's `msg` is not an object."""
    kind = method[len(LEGACY_PREFIX):]
    if kind in LEGACY_IGNORED:
        return state  # before session.started too: the mirror alone adds nothing
    params = obj.get("params")
    params = params if isinstance(params, dict) else {}
    state = ensure_session(state, out)
    speak_for(state, out, get_str(params, "conversationId"))
    handler = LEGACY_HANDLERS.get(kind)
    if handler is not None:
        return handler(state, params, need_dict(params.get("msg"), f"{method} msg"), out)
    if kind in state.legacyWarned:
        return state
    conversation = get_str(params, "conversationId")
    thread = out.id("thr", conversation) if conversation is not None else UNSET
    reason = LEGACY_WARNED.get(kind)
    if reason is None:
        out.unknown(method, thread=thread)
    else:
        out.emit(RuntimeWarningEvent, RuntimeWarningPayload(
            message=f"codex legacy event {kind!r} carries what no app-server v2 notification "
                    f"does ({reason}); reported once per session",
            detail={"nativeType": method}), with_raw=True, thread=thread)
    warned = (*state.legacyWarned, kind)[-LEGACY_WARNED_KEPT:]
    return _replace(state, legacyWarned=warned)


def on_legacy_mcp_startup(state: State, p: dict[str, Any], msg: dict[str, Any],
                           out: Emitter) -> State:
    """McpStartupUpdateEvent `{server, status: {state, error?}}`, in the shape of
    `mcpServer/startupStatus/updated` (2026-03-19), which no mirrored release had."""
    status = msg.get("status")
    status = status if isinstance(status, dict) else {}
    out.emit(McpStatusUpdated, McpStatusUpdatedPayload(status={
        "name": msg.get("server"), "status": status.get("state"), "error": status.get("error")}))
    return state


def on_legacy_warning(state: State, p: dict[str, Any], msg: dict[str, Any],
                       out: Emitter) -> State:
    # the app-server of the mirror years translated core warnings into nothing
    out.emit(ConfigWarning, ConfigWarningPayload(summary=str(msg.get("message"))),
             **Place(out, thread=get_str(p, "conversationId")).kw)
    return state


LEGACY_HANDLERS: dict[str, _LegacyHandler] = {
    "mcp_startup_update": on_legacy_mcp_startup,
    "warning": on_legacy_warning,
}

#: Legacy kinds whose content a v2 notification, server request or response of the same
#: app-server carries: read on purpose and mapped to nothing, with that carrier.
LEGACY_IGNORED_REASONS: dict[str, str] = {
    # turns and threads
    "task_started": "turn/started",
    "task_complete": "turn/completed",
    "turn_aborted": "turn/completed with status interrupted",
    "error": "error",
    "stream_error": "error with willRetry",
    "token_count": "thread/tokenUsage/updated and account/rateLimits/updated",
    "session_configured": "the thread/start|resume|fork response (the core's first event, "
                          "consumed by the app-server)",
    "thread_name_updated": "thread/name/updated",
    "thread_rolled_back": "the thread/rollback response",
    "context_compacted": "thread/compacted and the contextCompaction item",
    "turn_diff": "turn/diff/updated",
    "plan_update": "turn/plan/updated",
    "model_reroute": "model/rerouted",
    "deprecation_notice": "deprecationNotice",
    "shutdown_complete": "the thread's end; it carries no content",
    "skills_update_available": "skills/changed; it carries no content",
    "mcp_startup_complete": "the summary of the mcp_startup_update events, translated one by one",
    # items and their streams (the legacy twins the core derives from its items)
    "item_started": "item/started",
    "item_completed": "item/completed",
    "user_message": "item/completed of the userMessage item",
    "agent_message": "item/completed of the agentMessage item",
    "agent_message_delta": "item/agentMessage/delta",
    "agent_message_content_delta": "item/agentMessage/delta",
    "plan_delta": "item/plan/delta",
    "agent_reasoning": "item/completed of the reasoning item (summary)",
    "agent_reasoning_delta": "item/reasoning/summaryTextDelta",
    "reasoning_content_delta": "item/reasoning/summaryTextDelta",
    "agent_reasoning_raw_content": "item/completed of the reasoning item (content)",
    "agent_reasoning_raw_content_delta": "item/reasoning/textDelta",
    "reasoning_raw_content_delta": "item/reasoning/textDelta",
    "agent_reasoning_section_break": "item/reasoning/summaryPartAdded",
    "exec_command_begin": "item/started of the commandExecution item",
    "exec_command_output_delta": "item/commandExecution/outputDelta (item/fileChange/outputDelta)",
    "exec_command_end": "item/completed of the commandExecution item",
    "terminal_interaction": "item/commandExecution/terminalInteraction",
    "patch_apply_begin": "item/started of the fileChange item",
    "patch_apply_end": "item/completed of the fileChange item",
    "mcp_tool_call_begin": "item/started of the mcpToolCall item",
    "mcp_tool_call_end": "item/completed of the mcpToolCall item",
    "web_search_begin": "item/started of the webSearch item",
    "web_search_end": "item/completed of the webSearch item",
    "view_image_tool_call": "item/started and item/completed of the imageView item",
    "image_generation_begin": "item/started of the imageGeneration item",
    "image_generation_end": "item/completed of the imageGeneration item",
    "dynamic_tool_call_response": "item/completed of the dynamicToolCall item",
    "entered_review_mode": "the enteredReviewMode item",
    "exited_review_mode": "the exitedReviewMode item",
    "raw_response_item": "rawResponseItem/completed (experimental raw events only)",
    **{f"collab_{k}_{edge}": f"item/{'started' if edge == 'begin' else 'completed'} of the "
                             "collabAgentToolCall item"
       for k in ("agent_spawn", "agent_interaction", "waiting", "close", "resume")
       for edge in ("begin", "end")},
    "hook_started": "hook/started",
    "hook_completed": "hook/completed",
    "realtime_conversation_started": "thread/realtime/started",
    "realtime_conversation_realtime": "thread/realtime/itemAdded, outputAudio/delta and error",
    "realtime_conversation_closed": "thread/realtime/closed",
    # requests to the client: the v2 server request opens them
    "exec_approval_request": "item/commandExecution/requestApproval (execCommandApproval)",
    "apply_patch_approval_request": "item/fileChange/requestApproval (applyPatchApproval)",
    "request_user_input": "item/tool/requestUserInput",
    "dynamic_tool_call_request": "item/tool/call",
    "request_permissions": "item/permissions/requestApproval",
    "skill_request_approval": "the skill approval server request (withdrawn before a release)",
    # answers to v1 queries (Op::GetHistoryEntry, ListMcpTools, ...), never conversation
    **{k: "the answer to a v1 client query, not conversation content" for k in (
        "get_history_entry_response", "mcp_list_tools_response", "list_custom_prompts_response",
        "list_skills_response", "list_remote_skills_response", "remote_skill_downloaded",
        "list_models_response", "conversation_path", "conversation_history")},
}
LEGACY_IGNORED: frozenset[str] = frozenset(LEGACY_IGNORED_REASONS)

#: Legacy kinds that carry something no v2 notification of their releases did, and that
#: no canonical event fits: a runtime.warning with the raw message, once per kind and
#: session (a kind this adapter does not know is treated the same way).
LEGACY_WARNED: dict[str, str] = {
    "background_event": "a progress notice of the core (compaction, approval review, agent jobs)",
    "undo_started": "progress of a v1 undo",
    "undo_completed": "the end of a v1 undo",
    "elicitation_request": "an MCP server asking the user; v2 opens mcpServer/elicitation/request "
                           "only from 2026-03",
    "session_renamed": "a thread rename of 2025-10, before thread/name/updated",
}


