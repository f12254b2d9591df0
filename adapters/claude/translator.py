"""claude: Claude Code / Claude Agent SDK stream-json -> canonical events.

Reads the stream-json lines of `claude -p --output-format stream-json --verbose`
(with or without `--include-partial-messages`) and of the SDK stdio mode
(`--input-format stream-json --permission-prompt-tool stdio`, both directions:
`control_request` / `control_response`), as declared by
`@anthropic-ai/claude-agent-sdk` 0.2.62 .. 0.3.332 (`sdk.d.ts`: SDKMessage,
SDKControlRequest) and written by Claude Code 2.0.77 .. 2.1.332. `adapters.amp` reuses this package for Amp's
Claude-like `--stream-json`, `adapters.claude_transcript` for the session files.

This module is the dispatch: the handler tables and what the registry reads. The
handlers live by what the protocol talks about: `session` (thread, turn, where an event
goes), `messages` (assistant and user lines, content blocks as items), `stream`
(stream_event partial messages), `tools` (tool items), `control` (the SDK control
protocol), `system` (system/* and telemetry lines), `turns` (result: the end of a
turn), `usage` (tokens, cost, the thread's total).

Releases (every recording of each is replayed against its oracle by
tests/adapters/test_drift.py, which also checks this table; docs/runtimes "Verified runtime
releases")

| runtime (recordings) | releases verified | written against |
| --- | --- | --- |
| `claude-code-stream-json` | 2.0.77, 2.1.332 | claude-agent-sdk 0.3.332 `sdk.d.ts` |
| `claude-code-stream-json-partial` | 2.0.77, 2.1.332 | the same |
| `claude-code-sdk-stdio` | 2.0.77, 2.1.332 | the same (SDKControlRequest) |

(print mode; print mode with `--include-partial-messages`; SDK stdio mode, both directions)

The stream states its release in `system/init` (`claude_code_version`): session.configured
`runtimeVersion`. Amp's init does not.

Invariants
* Claude gives text no item id: a content block's item id derives from its
  message id and block index (`msg_…#1`, as the captures' oracles name them), a
  tool item's from its tool_use id. A message without an id gets one from a
  per-session counter in the state, never from a clock or a global counter.
* Text is never sent twice. With partial messages, `text_delta` /
  `thinking_delta` become `content.delta` and the full `assistant` line adds only
  the suffix the deltas did not carry; without them, one synthetic full-text delta
  precedes `item.completed` (never text twice).
* A tool item starts at its tool_use block and completes, whole output and
  is_error, at the tool_result block of a later `user` line (or a server tool's
  `*_tool_result` block). Items still open when a turn ends are completed as
  failed (declined when permission was refused), open requests are resolved as
  cancelled, so nothing waits forever.
* The state holds no streamed text: what a block streamed is a stream of the
  conversation core (Emitter, "Streams"), lengths and a digest in the session and
  the bytes in the spool. Both streams are spooled:
  - "text" on a text or thinking item: `text_delta` / `thinking_delta`. The
    completed item carries the whole text, and it is completed from the stream
    when the block stops before its `assistant` line, when the line has no text,
    when the stream breaks off and when the turn ends first.
  - "input_json" on a tool item: `input_json_delta`. A `content_block_stop` before
    the block's `assistant` line finalizes the tool's input from it.
  A tool's whole input (Tool.input) stays in the state until its result: one
  message's tool_use block, bounded by a message.
* Claude has no turn start: a turn opens (synthetic `turn.started`) at the first
  message of the conversation (client prompt, `system/init`, assistant output,
  a permission request) and ends at `result`, one `result` per turn.
* A subagent's message carries `parent_tool_use_id`: every event translated from it
  carries the subagent's agentId and its parent's (adapters.claude.agents, said in
  `dispatch` before each message). The thread's token total adds each `result`'s
  turn tokens (adapters.claude.usage).

Tricky parts
* Claude Code writes one `assistant` line per content block, all with the same
  message.id; with partial messages that line arrives *before* the block's
  `content_block_stop`, so the line belongs to the block being streamed. Older
  writers (and the Python SDK's AssistantMessage) carry several blocks in one
  line: those are the message's blocks from index 0, and blocks already completed
  are skipped. A stream that breaks off (a new `message_start` in its place, as
  when Claude Code retries or falls back to a non-streaming request) ends its
  unfinished text item as failed with the text it streamed: deltas sent stay sent.
* `system/init` is sent again at every turn in SDK stdio mode; the result line
  does not start with "type"; after an API error Claude Code writes a synthetic
  assistant message (model `<synthetic>`, top-level `error`) and a result with
  subtype success but `is_error: true`; an interrupt ends with
  `error_during_execution` and `terminal_reason: aborted_*`.
* AskUserQuestion is a tool whose question opens `user-input.requested`; in SDK
  mode its `can_use_tool` request shares that request id, so one question is one
  request, resolved by the client's answer or else by the tool result.
"""

from __future__ import annotations

from typing import Any, Final

from adapters.claude import agents
from adapters.claude.control import (
    IGNORED_REQUESTS,
    _on_control_cancel_request,
    _on_control_request,
    _on_control_response,
)
from adapters.claude.messages import _on_assistant, _on_user
from adapters.claude.session import Handler, _adopt_session, _start_session, _thread, _turn
from adapters.claude.state import State
from adapters.claude.stream import _on_stream_event
from adapters.claude.system import (
    _on_active_goal,
    _on_api_retry,
    _on_auth_status,
    _on_commands_changed,
    _on_compact_boundary,
    _on_conversation_reset,
    _on_files_persisted,
    _on_hook_progress,
    _on_hook_response,
    _on_hook_started,
    _on_init,
    _on_local_command_output,
    _on_model_refusal_fallback,
    _on_permission_denied,
    _on_rate_limit_event,
    _on_session_state_changed,
    _on_status,
    _on_task_notification,
    _on_task_progress,
    _on_task_started,
    _on_task_updated,
    _on_tool_progress,
    _on_tool_use_summary,
    _on_worker_shutting_down,
)
from adapters.claude.turns import _on_result
from adapters.claude.usage import claude_tokens as claude_tokens  # re-exported: docs "Token usage"
from adapters.claude.usage import result_tokens as result_tokens  # and test_token_usage
from adapters.core.contract import MalformedRecord, Message
from adapters.core.emitter import Emitter

provider = "claude"
raw_source = "claude.sdk.message"


def message_id(obj: dict[str, Any], origin: str) -> str | None:
    """A native message's id (adapters.core.ids, "Native message ids"): every agent
    line's `uuid` (stream_event deltas included); a control_request's `request_id`; a
    control_response's `response.request_id`."""
    uuid = obj.get("uuid")
    if isinstance(uuid, str):
        return uuid
    kind = obj.get("type")
    if kind == "control_request":
        rid = obj.get("request_id")
        return f"{origin}:req:{rid}" if isinstance(rid, str) else None
    if kind == "control_response":
        resp = obj.get("response")
        rid = resp.get("request_id") if isinstance(resp, dict) else None
        return f"{origin}:res:{rid}" if isinstance(rid, str) else None
    return None


state_type = State


def initial() -> State:
    return State()


def translate(state: State, msg: Message, out: Emitter) -> State:
    return dispatch(state, msg, out, _HANDLERS, IGNORED)


def dispatch(state: State, msg: Message, out: Emitter, handlers: dict[str, Handler],
             ignored: frozenset[str]) -> State:
    """Route one native message through `handlers` (shared with adapters.amp)."""
    kind = msg.obj.get("type")
    if not isinstance(kind, str):
        raise MalformedRecord(f"{out.provider} message without a string 'type'")
    out.native_type = kind
    if not state.started:
        state = _start_session(state, msg, out)
    state = agents.enter(state, msg.obj, out)
    handler = handlers.get(kind)
    if handler is None:
        if kind not in ignored:
            out.unknown(kind, thread=_thread(state, out), turn=_turn(state, out))
        return state
    return handler(state, msg, out)


def _on_system(state: State, msg: Message, out: Emitter) -> State:
    return system_dispatch(state, msg, out, _SYSTEM, IGNORED)


def system_dispatch(state: State, msg: Message, out: Emitter, table: dict[str, Handler],
                    ignored: frozenset[str]) -> State:
    subtype = msg.obj.get("subtype")
    if not isinstance(subtype, str):
        raise MalformedRecord("system message without a string 'subtype'")
    out.native_type = f"system/{subtype}"
    state = _adopt_session(state, msg, out)
    handler = table.get(subtype)
    if handler is None:
        if out.native_type not in ignored:
            out.unknown(out.native_type, thread=_thread(state, out), turn=_turn(state, out))
        return state
    return handler(state, msg, out)


_SYSTEM: dict[str, Handler] = {
    "init": _on_init,
    "status": _on_status,
    "session_state_changed": _on_session_state_changed,
    "compact_boundary": _on_compact_boundary,
    "api_retry": _on_api_retry,
    "permission_denied": _on_permission_denied,
    "task_started": _on_task_started,
    "task_progress": _on_task_progress,
    "task_updated": _on_task_updated,
    "task_notification": _on_task_notification,
    "hook_started": _on_hook_started,
    "hook_progress": _on_hook_progress,
    "hook_response": _on_hook_response,
    "files_persisted": _on_files_persisted,
    "commands_changed": _on_commands_changed,
    "model_refusal_fallback": _on_model_refusal_fallback,
    "local_command_output": _on_local_command_output,
    "worker_shutting_down": _on_worker_shutting_down,
}


_HANDLERS: Final[dict[str, Handler]] = {
    "system": _on_system,
    "assistant": _on_assistant,
    "user": _on_user,
    "result": _on_result,
    "stream_event": _on_stream_event,
    "control_request": _on_control_request,
    "control_response": _on_control_response,
    "control_cancel_request": _on_control_cancel_request,
    "tool_progress": _on_tool_progress,
    "tool_use_summary": _on_tool_use_summary,
    "auth_status": _on_auth_status,
    "rate_limit_event": _on_rate_limit_event,
    "active_goal": _on_active_goal,
    "conversation_reset": _on_conversation_reset,
}


#: Native types read on purpose and mapped to nothing, with the reason.
IGNORED_REASONS: dict[str, str] = {
    "keep_alive": "a liveness heartbeat with no payload",
    "prompt_suggestion": "a predicted next prompt, not part of the conversation",
    "transcript_mirror": "transcript entries for an SDK SessionStore, a copy of the "
                         "conversation the other messages already carry",
    "system/thinking_tokens": "a token estimate for spinners; the thinking text itself comes "
                              "in thinking blocks",
    "system/informational": "a display banner (hook feedback, command output level info)",
    "system/notification": "a REPL-style toast with no conversational content",
    "system/memory_recall": "memories surfaced into context, not conversation output",
    "system/plugin_install": "plugin installation progress",
    "system/background_tasks_changed": "a level signal that repeats the task_* events",
    "system/elicitation_complete": "an MCP server's URL elicitation done; the elicitation "
                                   "request itself is resolved by its control_response",
    "system/control_request_progress": "progress of a client's side question",
    "system/session_writes_lost": "the CLI could not save its transcript; safe to ignore",
    "system/mirror_error": "a transcript mirroring failure, not a runtime error",
    "system/model_refusal_no_fallback": "the refusal shows as the result's stop_reason",
    **IGNORED_REQUESTS,
}
IGNORED: Final[frozenset[str]] = frozenset(IGNORED_REASONS)
