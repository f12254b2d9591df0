"""claude: Claude Code / Claude Agent SDK stream-json -> canonical events.

Reads the stream-json lines of `claude -p --output-format stream-json --verbose`
(with or without `--include-partial-messages`) and of the SDK stdio mode
(`--input-format stream-json --permission-prompt-tool stdio`, both directions:
`control_request` / `control_response`), as declared by
`@anthropic-ai/claude-agent-sdk` 0.2.62 .. 0.3.332 (`sdk.d.ts`: SDKMessage,
SDKControlRequest) and written by Claude Code 2.0.77 .. 2.1.332. Mapping: seed 002
§4, seed 000 (Claude rows). `adapters.amp` reuses this module for Amp's
Claude-like `--stream-json`.

Releases (every recording of each is replayed against its oracle by
tests/adapters/test_drift.py, which also checks this table; README.md "Verified runtime
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
  precedes `item.completed` (seed 000 delta policy).
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

import re
from collections.abc import Callable
from typing import Any

import msgspec
from msgspec import Struct, UnsetType

from adapters.claude.state import Block, Msg, Pending, State, Tool
from adapters.core.contract import MalformedRecord, Message
from adapters.core.decisions import elicitation_outcome
from adapters.core.diff import diff_fields, records_diff, text_diff
from adapters.core.emitter import UNSET, Emitter
from adapters.core.emitter import replace as _replace
from adapters.core.lifecycle import At, complete_item, rest, start_item, taken
from adapters.core.lifecycle import delta as stream_delta
from adapters.core.lifecycle import end_turn as complete_turn
from adapters.core.shape import native_count, native_list
from adapters.core.tools import (
    item_type_for_tool,
    mcp_tool_name,
    normalize_tool_name,
    tool_fields,
)
from topics.canonical import (
    AccountRateLimitsUpdated,
    AccountRateLimitsUpdatedPayload,
    Author,
    AuthStatus,
    AuthStatusPayload,
    ContentDelta,
    ContentDeltaPayload,
    Decision,
    FailedFile,
    FilesPersisted,
    FilesPersistedPayload,
    HookCompleted,
    HookCompletedPayload,
    HookProgress,
    HookProgressPayload,
    HookStarted,
    HookStartedPayload,
    InputOutcome,
    ItemPayload,
    ItemUpdated,
    ModelRerouted,
    ModelReroutedPayload,
    PersistedFile,
    PlanStep,
    ProviderRefs,
    RequestOpened,
    RequestOpenedPayload,
    RequestResolved,
    RequestResolvedPayload,
    RuntimeErrorEvent,
    RuntimeErrorPayload,
    SessionConfigured,
    SessionConfiguredPayload,
    SessionExited,
    SessionExitedPayload,
    SessionStarted,
    SessionStartedPayload,
    SessionStateChanged,
    SessionStateChangedPayload,
    TaskCompleted,
    TaskCompletedPayload,
    TaskProgress,
    TaskProgressPayload,
    TaskStarted,
    TaskStartedPayload,
    ThreadMetadataUpdated,
    ThreadMetadataUpdatedPayload,
    ThreadStarted,
    ThreadStartedPayload,
    ThreadStateChanged,
    ThreadStateChangedPayload,
    ThreadTokenUsageUpdated,
    ThreadTokenUsageUpdatedPayload,
    ToolProgress,
    ToolProgressPayload,
    ToolSummary,
    ToolSummaryPayload,
    TurnCompletedPayload,
    TurnPlanUpdated,
    TurnPlanUpdatedPayload,
    TurnStarted,
    TurnStartedPayload,
    UserInputRequested,
    UserInputRequestedPayload,
    UserInputResolved,
    UserInputResolvedPayload,
    _Event,
)
from topics.usage import Cost, TokenUsage, add, tokens

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


Handler = Callable[[State, Message, Emitter], State]


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
    handler = handlers.get(kind)
    if handler is None:
        if kind not in ignored:
            out.unknown(kind, thread=_thread(state, out), turn=_turn(state, out))
        return state
    return handler(state, msg, out)


# ---- envelope helpers -------------------------------------------------------------


def _thread(state: State, out: Emitter) -> str | UnsetType:
    return out.id("thr", state.session) if state.session else UNSET


def _turn(state: State, out: Emitter) -> str | UnsetType:
    return out.id("trn", str(state.turns)) if state.turnOpen else UNSET


def _refs(state: State, item_ref: str | None, request_ref: str | None, parent: str | None
          ) -> ProviderRefs | UnsetType:
    """The event's providerRefs: only when one of its ids is set (not built, then compared
    with an empty one, for every event)."""
    if state.session or item_ref or request_ref or parent:
        return ProviderRefs(providerThreadId=state.session or UNSET,
                            providerItemId=item_ref or UNSET,
                            providerRequestId=request_ref or UNSET,
                            providerParentItemId=parent or UNSET)
    return UNSET


def _at(state: State, out: Emitter, item: str | None = None, item_ref: str | None = None,
        request: str | None = None, request_ref: str | None = None,
        parent: str | None = None) -> At:
    """Where an event goes: the current thread/turn; `item`, `request`, `parent` are
    native keys."""
    refs = _refs(state, item_ref, request_ref, parent)
    return At(_thread(state, out), _turn(state, out), out.id("itm", item) if item else UNSET,
              out.id("itm", parent) if parent else UNSET, refs,
              out.id("req", request) if request else UNSET)


def _emit(state: State, out: Emitter, cls: type[_Event], payload: Struct, *,
          synthetic: bool = False, item: str | None = None, item_ref: str | None = None,
          request: str | None = None, request_ref: str | None = None,
          parent: str | None = None) -> None:
    """Emit with the current thread/turn (as _at says, without building an At)."""
    refs = _refs(state, item_ref, request_ref, parent)
    out.emit(cls, payload, synthetic=synthetic, thread=_thread(state, out), turn=_turn(state, out),
             item=out.id("itm", item) if item else UNSET,
             request=out.id("req", request) if request else UNSET,
             parent=out.id("itm", parent) if parent else UNSET,
             refs=refs)


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _obj(obj: dict[str, Any], key: str) -> dict[str, Any]:
    value = obj.get(key)
    if not isinstance(value, dict):
        raise MalformedRecord(f"{obj.get('type')}: {key!r} must be an object")
    return value


# ---- session and turn -------------------------------------------------------------


def _start_session(state: State, msg: Message, out: Emitter) -> State:
    sid = _str(msg.obj.get("session_id")) if msg.origin == "agent" else None
    state = _replace(state, started=True, session=sid)
    _emit(state, out, SessionStarted, SessionStartedPayload(), synthetic=True)
    if sid:
        _emit(state, out, ThreadStarted, ThreadStartedPayload(providerThreadId=sid), synthetic=True)
    return state


def _adopt_session(state: State, msg: Message, out: Emitter) -> State:
    """A new provider session id (first seen, resumed or forked) starts a thread."""
    sid = _str(msg.obj.get("session_id")) if msg.origin == "agent" else None
    if sid is None or sid == state.session:
        return state
    state = _replace(state, session=sid)
    _emit(state, out, ThreadStarted, ThreadStartedPayload(providerThreadId=sid), synthetic=True)
    return state


def open_turn(state: State, out: Emitter) -> State:
    if state.turnOpen:
        return state
    state = _replace(state, turns=state.turns + 1, turnOpen=True, interrupting=False, failed=False)
    _emit(state, out, TurnStarted, TurnStartedPayload(model=state.model or UNSET), synthetic=True)
    return state


def end_turn(state: State, out: Emitter, payload: TurnCompletedPayload) -> State:
    """Close what is still open in the turn, then complete it."""
    why = "the turn ended before the item completed"
    for m in list(state.msgs.values()):
        state = _close_blocks(state, out, m, "failed", why)
    for key in list(state.blocks):  # tool blocks cut off before their stop
        state = _drop_block(state, out, key)
    for rid, pending in state.pending.items():
        if pending.origin == "agent" and pending.subtype in _REQUESTS:
            state = _resolve_cancelled(state, out, rid, pending)
    for tid, tool in state.tools.items():
        if tool.question == 1:
            _emit(state, out, UserInputResolved,
                  UserInputResolvedPayload(answers=None, outcome="cancelled"),
                  synthetic=True, request=tid, item=tid, item_ref=tid, parent=tool.parent)
        complete_item(out, _at(state, out, tid, tid, parent=tool.parent),
                      _tool_payload(tool, "declined" if tool.denied else "failed", out.cap,
                                    detail=why), True)
    if state.turnOpen:
        complete_turn(out, _at(state, out), payload)
    kept = {k: v for k, v in state.pending.items() if v.origin == "client"}
    return _replace(state, turnOpen=False, interrupting=False, msgs={}, streams={}, blocks={},
                    tools={}, pending=kept)


def claude_tokens(usage: Any) -> TokenUsage | None:
    """TokenUsage of Anthropic's `usage` (snake_case: a message's or a result's) or of a
    Claude Code `modelUsage` entry (camelCase); None when `usage` is no dict. Anthropic's
    input count leaves the cache reads and writes out (they are added to it); its output
    count includes thinking (`output_tokens_details.thinking_tokens`, `thinkingTokens`)."""
    if not isinstance(usage, dict):
        return None
    read = native_count(usage, "cache_read_input_tokens", "cacheReadInputTokens")
    write = native_count(usage, "cache_creation_input_tokens", "cacheCreationInputTokens")
    details = usage.get("output_tokens_details")
    return tokens(input=native_count(usage, "input_tokens", "inputTokens") + read + write,
                  cachedInput=read, cacheWrite=write,
                  output=native_count(usage, "output_tokens", "outputTokens"),
                  reasoningOutput=native_count(details, "thinking_tokens")
                  or native_count(usage, "thinkingTokens"))


def result_tokens(obj: dict[str, Any]) -> TokenUsage | None:
    """The turn's own tokens from a `result` line: its per-model usage since the last
    result where Claude Code sends it (`model_usage_since_last_result`; `modelUsage`
    adds up every turn of the session), else `usage` (a `-p` run is one turn)."""
    since = obj.get("model_usage_since_last_result")
    if isinstance(since, dict) and since:
        total = tokens()
        for entry in since.values():
            total = add(total, claude_tokens(entry) or tokens())
        return total
    return claude_tokens(obj.get("usage"))


def result_cost(obj: dict[str, Any]) -> Cost | None:
    """The turn's cost as Claude Code reported it: the sum of the per-model `costUSD`
    since the last result where it sends them (its `total_cost_usd` then runs over the
    session), else `total_cost_usd` (a `-p` run is one turn); None when it reports none."""
    since = obj.get("model_usage_since_last_result")
    if isinstance(since, dict) and since:
        entries = [e.get("costUSD") if isinstance(e, dict) else None for e in since.values()]
        costs = [float(c) for c in entries
                 if isinstance(c, int | float) and not isinstance(c, bool)]
        if len(costs) == len(entries):
            return Cost(source="provider", usd=sum(costs),
                        priceSource="result.model_usage_since_last_result",
                        model=next(iter(since)) if len(since) == 1 else UNSET)
    total = obj.get("total_cost_usd")
    if isinstance(total, int | float) and not isinstance(total, bool):
        models = obj.get("modelUsage")
        one = next(iter(models)) if isinstance(models, dict) and len(models) == 1 else UNSET
        return Cost(source="provider", usd=float(total), priceSource="result.total_cost_usd",
                    model=one)
    return None


def _on_result(state: State, msg: Message, out: Emitter) -> State:
    obj = msg.obj
    state = _adopt_session(state, msg, out)
    state = open_turn(state, out)  # a result always ends one turn, even a turn never seen
    subtype = _str(obj.get("subtype")) or "success"
    usage = obj.get("usage", UNSET)
    if isinstance(usage, dict):
        _emit(state, out, ThreadTokenUsageUpdated, ThreadTokenUsageUpdatedPayload(usage=usage))
    for denial in native_list(obj.get("permission_denials"), "result.permission_denials"):
        tid = _str(denial.get("tool_use_id")) if isinstance(denial, dict) else None
        if tid and tid in state.tools:
            state = _set_tool(state, tid, denied=True)
    reason = _str(obj.get("terminal_reason"))
    interrupted = subtype == "error_during_execution" and (
        state.interrupting or (reason or "").startswith("aborted"))
    is_error = subtype != "success" or obj.get("is_error") is True or state.failed
    fields: dict[str, Any] = {}
    if "stop_reason" in obj and (obj["stop_reason"] is None or isinstance(obj["stop_reason"], str)):
        fields["stopReason"] = obj["stop_reason"]
    if isinstance(usage, dict):
        fields["usage"] = usage
    turn_tokens = result_tokens(obj)
    if turn_tokens is not None:
        fields["tokens"] = turn_tokens
    cost = result_cost(obj)
    if cost is not None:
        fields["cost"] = cost
    if isinstance(obj.get("modelUsage"), dict):
        fields["modelUsage"] = obj["modelUsage"]
    if isinstance(obj.get("total_cost_usd"), int | float):
        fields["totalCostUsd"] = float(obj["total_cost_usd"])
    if isinstance(obj.get("duration_ms"), int | float):
        fields["durationMs"] = int(obj["duration_ms"])
    if isinstance(obj.get("result"), str) and not is_error:
        fields["resultText"] = obj["result"]  # the runtime's own final answer (chat `done`)
    if not is_error:
        return end_turn(state, out, TurnCompletedPayload(state="completed", **fields))
    message = _error_text(obj, subtype, interrupted)
    detail = {k: obj[k] for k in ("subtype", "is_error", "errors", "error", "terminal_reason",
                                  "api_error_status", "permission_denials") if k in obj}
    _emit(state, out, RuntimeErrorEvent,
          RuntimeErrorPayload(message=message,
                              errorClass="unknown" if interrupted else "provider_error",
                              willRetry=False, detail=detail))
    return end_turn(state, out, TurnCompletedPayload(
        state="interrupted" if interrupted else "failed", errorMessage=message, **fields))


def _error_text(obj: dict[str, Any], subtype: str, interrupted: bool) -> str:
    errors = [e for e in native_list(obj.get("errors"), "result.errors")
              if isinstance(e, str) and e]
    if errors:
        return "; ".join(errors)
    for key in ("error", "result"):
        if _str(obj.get(key)):
            return obj[key]
    if interrupted:
        return f"turn interrupted ({obj.get('terminal_reason') or subtype})"
    return f"turn ended with {subtype}"


# ---- system messages ----------------------------------------------------------------


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


_INIT_SKIP = frozenset({"type", "subtype", "uuid", "session_id"})


def _on_init(state: State, msg: Message, out: Emitter) -> State:
    obj = msg.obj
    state = _replace(state, cwd=_str(obj.get("cwd")) or state.cwd,
                     model=_str(obj.get("model")) or state.model)
    config = {k: v for k, v in obj.items() if k not in _INIT_SKIP}
    version = _str(obj.get("claude_code_version"))  # Amp's init has none
    _emit(state, out, SessionConfigured,
          SessionConfiguredPayload(config=config, runtimeVersion=version or UNSET))
    # init opens each turn ("Session metadata the CLI emits at the start of each turn")
    return open_turn(state, out)


def _on_status(state: State, msg: Message, out: Emitter) -> State:
    obj = msg.obj
    status = _str(obj.get("status"))
    if status == "requesting":
        state = open_turn(state, out)
    detail = {k: obj[k] for k in ("permissionMode", "compact_result", "compact_error") if k in obj}
    _emit(state, out, SessionStateChanged,
          SessionStateChangedPayload(state="running", reason=status or "status_cleared",
                                     detail=detail or UNSET))
    return state


_SESSION_STATES = {"idle": "ready", "running": "running", "requires_action": "waiting"}


def _on_session_state_changed(state: State, msg: Message, out: Emitter) -> State:
    native = _str(msg.obj.get("state")) or "unknown"
    _emit(state, out, SessionStateChanged,
          SessionStateChangedPayload(state=_SESSION_STATES.get(native, "running"),  # type: ignore[arg-type]
                                     reason=native))
    return state


def _on_compact_boundary(state: State, msg: Message, out: Emitter) -> State:
    _emit(state, out, ThreadStateChanged,
          ThreadStateChangedPayload(state="compacted", detail=msg.obj.get("compact_metadata", UNSET)))
    return state


def _on_api_retry(state: State, msg: Message, out: Emitter) -> State:
    obj = msg.obj
    state = open_turn(state, out)
    status = obj.get("error_status")
    message = (f"API {obj.get('error') or 'error'}"
               f"{f' (HTTP {status})' if status is not None else ''}: retry "
               f"{obj.get('attempt')}/{obj.get('max_retries')} in {obj.get('retry_delay_ms')} ms")
    detail = {k: v for k, v in obj.items() if k not in _INIT_SKIP}
    _emit(state, out, RuntimeErrorEvent,
          RuntimeErrorPayload(message=message,
                              errorClass="transport_error" if status is None else "provider_error",
                              willRetry=True, detail=detail))
    return state


def _on_permission_denied(state: State, msg: Message, out: Emitter) -> State:
    """A tool call refused without a prompt: its tool item becomes declined."""
    obj = msg.obj
    tid = _str(obj.get("tool_use_id"))
    if tid is None:
        raise MalformedRecord("permission_denied without a tool_use_id")
    tool = state.tools.get(tid) or _new_tool(state, _str(obj.get("tool_name")) or "unknown", {},
                                             None)
    _emit(state, out, ItemUpdated,
          _tool_payload(tool, "declined", out.cap, detail=_str(obj.get("message")) or UNSET),
          item=tid, item_ref=tid, parent=tool.parent)
    return _set_tool(state, tid, denied=True) if tid in state.tools else state


def _on_task_started(state: State, msg: Message, out: Emitter) -> State:
    obj = msg.obj
    _emit(state, out, TaskStarted,
          TaskStartedPayload(taskId=_task_id(obj), description=_str(obj.get("description")) or UNSET,
                             taskType=_str(obj.get("task_type")) or _str(obj.get("subagent_type"))
                             or UNSET),
          parent=_str(obj.get("tool_use_id")))
    return state


def _on_task_progress(state: State, msg: Message, out: Emitter) -> State:
    obj = msg.obj
    _emit(state, out, TaskProgress,
          TaskProgressPayload(taskId=_task_id(obj),
                              description=_str(obj.get("summary")) or _str(obj.get("description"))
                              or "",
                              usage=obj.get("usage", UNSET),
                              lastToolName=_str(obj.get("last_tool_name")) or UNSET),
          parent=_str(obj.get("tool_use_id")))
    return state


def _on_task_updated(state: State, msg: Message, out: Emitter) -> State:
    obj = msg.obj
    patch = _dict(obj.get("patch"))
    description = _str(patch.get("description")) or _str(patch.get("error")) or \
        f"status {patch.get('status') or 'updated'}"
    _emit(state, out, TaskProgress, TaskProgressPayload(taskId=_task_id(obj),
                                                        description=description))
    return state


_TASK_STATUS = {"completed": "completed", "failed": "failed", "stopped": "stopped",
                "killed": "stopped"}


def _on_task_notification(state: State, msg: Message, out: Emitter) -> State:
    obj = msg.obj
    _emit(state, out, TaskCompleted,
          TaskCompletedPayload(taskId=_task_id(obj),
                               status=_TASK_STATUS.get(str(obj.get("status")), "completed"),  # type: ignore[arg-type]
                               summary=_str(obj.get("summary")) or UNSET,
                               usage=obj.get("usage", UNSET)),
          parent=_str(obj.get("tool_use_id")))
    return state


def _task_id(obj: dict[str, Any]) -> str:
    tid = _str(obj.get("task_id"))
    if tid is None:
        raise MalformedRecord(f"{obj.get('subtype')} without a task_id")
    return tid


def _on_hook_started(state: State, msg: Message, out: Emitter) -> State:
    obj = msg.obj
    _emit(state, out, HookStarted,
          HookStartedPayload(hookId=str(obj["hook_id"]), hookName=str(obj.get("hook_name", "")),
                             hookEvent=str(obj.get("hook_event", ""))))
    return state


def _on_hook_progress(state: State, msg: Message, out: Emitter) -> State:
    obj = msg.obj
    _emit(state, out, HookProgress,
          HookProgressPayload(hookId=str(obj["hook_id"]), **_streams(obj)))
    return state


def _on_hook_response(state: State, msg: Message, out: Emitter) -> State:
    obj = msg.obj
    outcome = _HOOK_OUTCOMES.get(str(obj.get("outcome")),
                                 "success" if obj.get("exit_code") in (0, None) else "error")
    exit_code = obj.get("exit_code")
    _emit(state, out, HookCompleted,
          HookCompletedPayload(hookId=str(obj["hook_id"]), outcome=outcome, **_streams(obj),
                               exitCode=exit_code if isinstance(exit_code, int) else UNSET))
    return state


_HOOK_OUTCOMES: dict[str, Any] = {"success": "success", "error": "error",
                                  "cancelled": "cancelled"}


def _streams(obj: dict[str, Any]) -> dict[str, Any]:
    return {k: obj[k] for k in ("output", "stdout", "stderr") if isinstance(obj.get(k), str)}


def _on_files_persisted(state: State, msg: Message, out: Emitter) -> State:
    obj = msg.obj
    files = [PersistedFile(filename=str(f.get("filename", "")), fileId=str(f.get("file_id", "")))
             for f in native_list(obj.get("files"), "files_persisted files")
             if isinstance(f, dict)]
    failed = [FailedFile(filename=str(f.get("filename", "")), error=str(f.get("error", "")))
              for f in native_list(obj.get("failed"), "files_persisted failed")
              if isinstance(f, dict)]
    _emit(state, out, FilesPersisted, FilesPersistedPayload(files=files, failed=failed or UNSET))
    return state


def _on_commands_changed(state: State, msg: Message, out: Emitter) -> State:
    _emit(state, out, SessionConfigured,
          SessionConfiguredPayload(config={"commands": msg.obj.get("commands")}))
    return state


def _on_model_refusal_fallback(state: State, msg: Message, out: Emitter) -> State:
    obj = msg.obj
    _emit(state, out, ModelRerouted,
          ModelReroutedPayload(fromModel=str(obj.get("original_model", "")),
                               toModel=str(obj.get("fallback_model", "")),
                               reason=str(obj.get("trigger") or "refusal")))
    return state


def _on_local_command_output(state: State, msg: Message, out: Emitter) -> State:
    # shown "as assistant-style text" by Claude Code, but not model output: an item
    # with its text and no assistant_text delta, so assistant text stays the model's
    key = _str(msg.obj.get("uuid")) or f"local-{state.anon}"
    state = _replace(state, anon=state.anon + 1)
    payload = ItemPayload(itemType="unknown", status="completed", title="local command output",
                          text=str(msg.obj.get("content", "")))
    at = _at(state, out, key)
    start_item(out, at, ItemPayload(itemType="unknown", status="inProgress",
                                    title="local command output"), True)
    complete_item(out, at, payload)
    return state


def _on_worker_shutting_down(state: State, msg: Message, out: Emitter) -> State:
    _emit(state, out, SessionExited,
          SessionExitedPayload(reason=_str(msg.obj.get("reason")) or UNSET, exitKind="graceful"))
    return state


# ---- top-level telemetry ------------------------------------------------------------


def _on_tool_progress(state: State, msg: Message, out: Emitter) -> State:
    obj = msg.obj
    state = _adopt_session(state, msg, out)
    tid = _str(obj.get("tool_use_id"))
    name = _str(obj.get("tool_name"))
    elapsed = obj.get("elapsed_time_seconds")
    _emit(state, out, ToolProgress,
          ToolProgressPayload(toolUseId=tid or UNSET,
                              toolName=normalize_tool_name(name) if name else UNSET,
                              elapsedSeconds=float(elapsed) if isinstance(elapsed, int | float)
                              else UNSET),
          item=tid, item_ref=tid, parent=_str(obj.get("parent_tool_use_id")))
    return state


def _on_tool_use_summary(state: State, msg: Message, out: Emitter) -> State:
    obj = msg.obj
    state = _adopt_session(state, msg, out)
    ids = [i for i in native_list(obj.get("preceding_tool_use_ids"), "tool_use_summary ids")
           if isinstance(i, str)]
    _emit(state, out, ToolSummary, ToolSummaryPayload(summary=str(obj.get("summary", "")),
                                                      precedingToolUseIds=ids or UNSET))
    return state


def _on_auth_status(state: State, msg: Message, out: Emitter) -> State:
    obj = msg.obj
    lines = [s for s in native_list(obj.get("output"), "auth_status output") if isinstance(s, str)]
    _emit(state, out, AuthStatus,
          AuthStatusPayload(isAuthenticating=obj["isAuthenticating"]
                            if isinstance(obj.get("isAuthenticating"), bool) else UNSET,
                            output=lines, error=_str(obj.get("error")) or UNSET))
    return state


def _on_rate_limit_event(state: State, msg: Message, out: Emitter) -> State:
    state = _adopt_session(state, msg, out)
    _emit(state, out, AccountRateLimitsUpdated,
          AccountRateLimitsUpdatedPayload(rateLimits=msg.obj.get("rate_limit_info")))
    return state


def _on_active_goal(state: State, msg: Message, out: Emitter) -> State:
    _emit(state, out, ThreadMetadataUpdated,
          ThreadMetadataUpdatedPayload(metadata={"goal": msg.obj.get("value")}))
    return state


def _on_conversation_reset(state: State, msg: Message, out: Emitter) -> State:
    obj = msg.obj
    detail = {k: obj[k] for k in ("new_conversation_id", "trigger") if k in obj}
    _emit(state, out, ThreadStateChanged, ThreadStateChangedPayload(state="closed", detail=detail))
    return state


# ---- assistant output -------------------------------------------------------------

_BLOCK_ITEM = {"text": "assistant_message", "thinking": "reasoning"}
_BLOCK_STREAM = {"text": "assistant_text", "thinking": "reasoning_text"}
_TEXT = "text"  # the stream of a text or thinking block's deltas, on its item
_JSON = "input_json"  # the stream of a tool block's input_json_delta parts, on the tool's item
_TOOL_BLOCKS = frozenset({"tool_use", "server_tool_use", "mcp_tool_use"})
_TEXT_BLOCKS = {"text": ("text", "text"), "thinking": ("thinking", "thinking"),
                "redacted_thinking": ("thinking", "")}  # block type -> (kind, text field)


def _on_assistant(state: State, msg: Message, out: Emitter) -> State:
    obj = msg.obj
    message = _obj(obj, "message")
    content = message.get("content")
    if isinstance(content, str):
        content = [{"type": "text", "text": content}]
    if not isinstance(content, list):
        raise MalformedRecord("assistant: message.content must be a list or a string")
    state = _adopt_session(state, msg, out)
    state = open_turn(state, out)
    parent = _str(obj.get("parent_tool_use_id"))
    state, m = _message_for(state, _str(message.get("id")), parent)
    blocks = [b for b in content if isinstance(b, dict)]
    if m.streamed and len(blocks) == 1 and m.cur >= 0:
        indices = [m.cur]  # the line of the block being streamed (arrives before its stop)
    elif len(blocks) == 1:
        indices = [m.next]
    else:  # a whole message: its blocks from index 0; completed ones are skipped below
        indices = list(range(len(blocks)))
    for index, block in zip(indices, blocks, strict=True):
        state = _assistant_block(state, out, m.key, index, block, parent, obj)
        m = state.msgs[m.native or m.key]
    if indices:
        state = _put_msg(state, _replace(m, next=max(m.next, indices[-1] + 1)))
    error = _str(obj.get("error"))
    if error is not None:  # the synthetic message Claude Code writes after an API error
        text = "".join(t for b in blocks
                       if b.get("type") == "text" and isinstance(t := b.get("text"), str))
        _emit(state, out, RuntimeErrorEvent,
              RuntimeErrorPayload(message=text or error,
                                  errorClass=_ERROR_CLASS.get(error, "unknown"), willRetry=False,
                                  detail={"error": error, "model": message.get("model")}),
              parent=parent)
    return state


_ERROR_CLASS: dict[str, Any] = {
    "authentication_failed": "permission_error", "oauth_org_not_allowed": "permission_error",
    "account_on_hold": "permission_error", "verification_required": "permission_error",
    "billing_error": "permission_error", "cloud_credential_error": "permission_error",
    "rate_limit": "provider_error", "overloaded": "provider_error",
    "server_error": "provider_error", "max_output_tokens": "provider_error",
    "invalid_request": "validation_error", "model_not_found": "validation_error",
}


def _message_for(state: State, native: str | None, parent: str | None,
                 streamed: bool = False) -> tuple[State, Msg]:
    """The Msg of an assistant line or stream event, created on first sight."""
    if native is not None and native in state.msgs:
        m = state.msgs[native]
        if streamed and not m.streamed:
            m = _replace(m, streamed=True)
            state = _put_msg(state, m)
        return state, m
    current = state.streams.get(parent or "")
    if current is not None and current in state.msgs and state.msgs[current].native is None:
        # stream events without message_start (the SDK's StreamEvent alone): this line
        # is the message they streamed, whatever id it brings
        m = _replace(state.msgs[current], native=native)
        msgs = dict(state.msgs)
        del msgs[current]
        msgs[native or m.key] = m
        streams = dict(state.streams)
        if native:
            streams[parent or ""] = native
        return _replace(state, msgs=msgs, streams=streams), m
    key = native or f"{_ANON}msg{state.anon}"
    m = Msg(key=key, native=native, parent=parent, streamed=streamed)
    state = _replace(state, anon=state.anon + (native is None))
    return _put_msg(state, m), m


def _put_msg(state: State, m: Msg) -> State:
    msgs = dict(state.msgs)
    msgs[m.native or m.key] = m
    return _replace(state, msgs=msgs)


def _mark_done(state: State, m_key: str, index: int) -> State:
    m = next((v for v in state.msgs.values() if v.key == m_key), None)
    if m is None or index in m.done:
        return state
    return _put_msg(state, _replace(m, done=(*m.done, index)))


def _block_type(block: dict[str, Any]) -> Any:
    """A content block's `type`: any JSON value but a list or an object (an unknown
    type is an unknown block). Raises MalformedRecord for those."""
    btype = block.get("type")
    if isinstance(btype, list | dict):
        raise MalformedRecord("a content block's type must be a string")
    return btype


def _is_done(state: State, m_key: str, index: int) -> bool:
    return any(v.key == m_key and index in v.done for v in state.msgs.values())


def _assistant_block(state: State, out: Emitter, m_key: str, index: int, block: dict[str, Any],
                     parent: str | None, obj: dict[str, Any]) -> State:
    btype = _block_type(block)
    key = f"{m_key}#{index}"
    if btype in _TEXT_BLOCKS:
        if _is_done(state, m_key, index):
            return state
        kind, field = _TEXT_BLOCKS[str(btype)]
        full = block.get(field, "") if field else ""
        full = full if isinstance(full, str) else ""
        open_block = state.blocks.get(key)
        streamed = open_block is not None and open_block.kind == kind
        if not streamed:
            _start_text(state, out, kind, key, parent, synthetic=True)
        at = _at(state, out, key, _msg_ref(m_key), parent=parent)
        if streamed:  # the line's text less what the deltas carried
            rest(out, at, _BLOCK_STREAM[kind], full, _TEXT)
        elif full:  # all of it, as one delta
            at.emit(out, ContentDelta, ContentDeltaPayload(
                streamKind=_BLOCK_STREAM[kind], delta=full), True)  # type: ignore[arg-type]
        # the line's text, or (a line without it) what the deltas carried
        state = _complete_text(state, out, kind, key, full if full or not streamed else None,
                               parent, redacted=btype == "redacted_thinking")
        return _mark_done(state, m_key, index)
    if btype in _TOOL_BLOCKS:
        tid = _str(block.get("id"))
        if tid is None:
            raise MalformedRecord(f"assistant: {btype} block without an id")
        state = _drop_block(state, out, key)  # the line has the whole input
        if tid in state.tools:
            state = _finalize_tool(state, out, tid, block.get("input"))
        elif not _is_done(state, m_key, index):
            state = _start_tool(state, out, tid, _block_tool_name(block), block.get("input"),
                                parent, final=True)
        return _mark_done(state, m_key, index)
    if isinstance(btype, str) and btype.endswith("_tool_result"):
        if not _is_done(state, m_key, index):
            state = _tool_result(state, out, block, parent, obj)
        return _mark_done(state, m_key, index)
    if _is_done(state, m_key, index):
        return state
    # a block type this adapter does not know (image, document, container_upload...)
    at = _at(state, out, key, _msg_ref(m_key), parent=parent)
    start_item(out, at, ItemPayload(itemType="unknown", status="inProgress"), True)
    complete_item(out, at, ItemPayload(itemType="unknown", status="completed", data=block))
    return _mark_done(state, m_key, index)


_ANON = "anon:"  # prefix of synthesised message keys (never a provider id)


def _msg_ref(m_key: str) -> str | None:
    """The provider's message id behind a message key (none for synthesised keys)."""
    return None if m_key.startswith(_ANON) else m_key


def _start_text(state: State, out: Emitter, kind: str, key: str, parent: str | None,
                synthetic: bool) -> None:
    start_item(out, _at(state, out, key, _msg_ref(key.rsplit("#", 1)[0]), parent=parent),
               ItemPayload(itemType=_BLOCK_ITEM[kind], status="inProgress",  # type: ignore[arg-type]
                           role="assistant" if kind == "text" else UNSET), synthetic)


def _complete_text(state: State, out: Emitter, kind: str, key: str, text: str | None,
                   parent: str | None, redacted: bool = False, status: str = "completed",
                   detail: str | UnsetType = UNSET, synthetic: bool = False) -> State:
    """Complete a text or thinking item with `text`, or (None) with what its block
    streamed, read back from the spool."""
    at = _at(state, out, key, _msg_ref(key.rsplit("#", 1)[0]), parent=parent)
    fields = taken(out, at.item_id, _TEXT, "text") if text is None else {"text": text}
    complete_item(out, at, ItemPayload(
        itemType=_BLOCK_ITEM[kind], status=status,  # type: ignore[arg-type]
        role="assistant" if kind == "text" else UNSET,
        detail="redacted thinking" if redacted else detail, **fields), synthetic)
    blocks = dict(state.blocks)
    blocks.pop(key, None)
    return _replace(state, blocks=blocks)


def _drop_block(state: State, out: Emitter, key: str) -> State:
    """Forget block `key` without completing anything: its stream is closed."""
    block = state.blocks.get(key)
    if block is None:
        return state
    if block.kind == "tool":
        if block.tool:
            out.drop(out.id("itm", block.tool), _JSON)
    else:
        out.drop(out.id("itm", key), _TEXT)
    blocks = dict(state.blocks)
    del blocks[key]
    return _replace(state, blocks=blocks)


# ---- stream_event (partial messages) ------------------------------------------------


def _on_stream_event(state: State, msg: Message, out: Emitter) -> State:
    obj = msg.obj
    event = _obj(obj, "event")
    etype = event.get("type")
    if not isinstance(etype, str):
        raise MalformedRecord("stream_event: event without a string 'type'")
    out.native_type = f"stream_event/{etype}"
    state = _adopt_session(state, msg, out)
    if etype in ("ping", "message_delta"):
        # ping is a keep-alive; message_delta's stop reason and usage come whole in
        # `result` (and in the next `assistant` line)
        return state
    if etype == "error":
        err = _dict(event.get("error"))
        _emit(state, out, RuntimeErrorEvent,
              RuntimeErrorPayload(message=str(err.get("message") or "stream error"),
                                  errorClass="provider_error", detail=err))
        return state
    if etype not in _STREAM_EVENTS:
        out.unknown(out.native_type, thread=_thread(state, out), turn=_turn(state, out))
        return state
    state = open_turn(state, out)
    parent = _str(obj.get("parent_tool_use_id"))
    pkey = parent or ""
    if etype == "message_start":
        native = _str(_dict(event.get("message")).get("id")) or _str(obj.get("api_message_id"))
        previous = state.streams.get(pkey)
        if previous is not None and previous in state.msgs and previous != native:
            # a stream that broke off (Claude Code retries, or falls back to a
            # non-streaming request): its unfinished text ends here, as streamed
            state = _close_blocks(state, out, state.msgs[previous], "failed")
        state, m = _message_for(state, native, parent, streamed=True)
        return _replace(state, streams={**state.streams, pkey: m.native or m.key})
    native = _str(obj.get("api_message_id")) or state.streams.get(pkey)
    if native is None or native not in state.msgs:
        if etype == "message_stop":
            return state
        if native is None:  # events without message_start: a message with a synthesised id
            m = Msg(key=f"{_ANON}stream{state.anon}", parent=parent, streamed=True)
            state = _replace(state, anon=state.anon + 1)
        else:
            m = Msg(key=native, native=native, parent=parent, streamed=True)
        state = _put_msg(state, m)
        state = _replace(state, streams={**state.streams, pkey: m.native or m.key})
    m = state.msgs[native or state.streams[pkey]]
    if etype == "message_stop":
        state = _close_blocks(state, out, m, "completed")
        streams = dict(state.streams)
        if streams.get(pkey) == (m.native or m.key):
            del streams[pkey]
        return _replace(state, streams=streams)
    index = event.get("index")
    if not isinstance(index, int) or isinstance(index, bool):
        raise MalformedRecord(f"stream_event {etype} without an integer index")
    key = f"{m.key}#{index}"
    if m.cur != index:
        state = _put_msg(state, _replace(m, cur=index, streamed=True))
    if etype == "content_block_start":
        return _block_start(state, out, m.key, index, _dict(event.get("content_block")), parent,
                            obj)
    if etype == "content_block_delta":
        return _block_delta(state, out, m.key, key, _dict(event.get("delta")), parent)
    return _block_stop(state, out, m.key, index, parent)


_STREAM_EVENTS = frozenset({"message_start", "message_stop", "content_block_start",
                            "content_block_delta", "content_block_stop"})


def _block_start(state: State, out: Emitter, m_key: str, index: int, block: dict[str, Any],
                 parent: str | None, obj: dict[str, Any]) -> State:
    btype = _block_type(block)
    key = f"{m_key}#{index}"
    if _is_done(state, m_key, index) or key in state.blocks:
        return state
    if btype in _TEXT_BLOCKS:
        kind, field = _TEXT_BLOCKS[str(btype)]
        _start_text(state, out, kind, key, parent, synthetic=False)
        state = _replace(state, blocks={**state.blocks, key: Block(kind=kind)})
        first = block.get(field) if field else None
        if isinstance(first, str) and first:
            state = _block_delta(state, out, m_key, key, {"type": f"{kind}_delta", kind: first},
                                 parent)
        return state
    if btype in _TOOL_BLOCKS:
        tid = _str(block.get("id"))
        if tid is None:
            raise MalformedRecord(f"content_block_start: {btype} block without an id")
        state = _replace(state, blocks={**state.blocks, key: Block(kind="tool", tool=tid)})
        if tid in state.tools:
            return state
        streamed_input = block.get("input")
        return _start_tool(state, out, tid, _block_tool_name(block), streamed_input, parent,
                           final=False)
    # server tool results and unknown blocks arrive whole: treat them as the full line
    return _assistant_block(state, out, m_key, index, block, parent, obj)


def _block_delta(state: State, out: Emitter, m_key: str, key: str, delta: dict[str, Any],
                 parent: str | None) -> State:
    dtype = delta.get("type")
    kind = {"text_delta": "text", "thinking_delta": "thinking"}.get(str(dtype))
    if kind is not None:
        text = delta.get("text" if kind == "text" else "thinking")
        if not isinstance(text, str):
            raise MalformedRecord(f"{dtype} without a string {kind!r}")
        if key not in state.blocks:
            if _is_done(state, m_key, int(key.rsplit("#", 1)[1])):
                return state  # late delta of a completed block: its text is already out
            # a delta before any content_block_start (seed 000: stub the item first)
            _start_text(state, out, kind, key, parent, synthetic=True)
            state = _replace(state, blocks={**state.blocks, key: Block(kind=kind)})
        if text:
            stream_delta(out, _at(state, out, key, _msg_ref(m_key), parent=parent),
                         _BLOCK_STREAM[kind], text, _TEXT)
        return state
    if dtype == "input_json_delta":
        block = state.blocks.get(key)
        part = delta.get("partial_json")
        if block is not None and block.kind == "tool" and block.tool and isinstance(part, str):
            out.append(out.id("itm", block.tool), _JSON, part)
        return state
    # signature_delta (thinking signature), citations_delta: nothing a reader shows
    return state


def _block_stop(state: State, out: Emitter, m_key: str, index: int, parent: str | None) -> State:
    key = f"{m_key}#{index}"
    block = state.blocks.get(key)
    if block is None:
        return state  # the `assistant` line completed it already (the usual order)
    if block.kind == "tool":
        tid = block.tool
        if tid and tid in state.tools and not state.tools[tid].final:
            # the input as streamed; never cut: one message's output (max output
            # tokens) is far below the per-item cap
            whole = out.whole(out.id("itm", tid), _JSON)
            state = _drop_block(state, out, key)
            state = _finalize_tool(state, out, tid,
                                   _parse_json(whole.text if whole is not None else ""))
        else:
            state = _drop_block(state, out, key)
        return _mark_done(state, m_key, index)
    state = _complete_text(state, out, block.kind, key, None, parent)
    return _mark_done(state, m_key, index)


def _close_blocks(state: State, out: Emitter, m: Msg, status: str,
                  why: str = "the stream ended before the block did") -> State:
    """Complete the text and thinking blocks of `m` still open, with what they streamed."""
    prefix = f"{m.key}#"
    for key, block in list(state.blocks.items()):
        if not key.startswith(prefix) or block.kind == "tool":
            continue
        index = int(key[len(prefix):])
        state = _complete_text(state, out, block.kind, key, None, m.parent, status=status,
                               detail=why if status == "failed" else UNSET, synthetic=True)
        state = _mark_done(state, m.key, index)
    return state


def _parse_json(text: str) -> Any:
    if not text:
        return {}
    try:
        return msgspec.json.decode(text)
    except msgspec.DecodeError:
        return {"partial_json": text}


# ---- tools --------------------------------------------------------------------------


def _block_tool_name(block: dict[str, Any]) -> str:
    name = str(block.get("name") or "unknown")
    server = _str(block.get("server_name"))
    if block.get("type") == "mcp_tool_use" and server and not name.startswith("mcp__"):
        return mcp_tool_name(server, name)
    return name


def _new_tool(state: State, native_name: str, raw_input: Any, parent: str | None,
              final: bool = False) -> Tool:
    name = normalize_tool_name(native_name)
    item_type = item_type_for_tool(name)
    return Tool(itemType=item_type, toolName=name,
                input=_tool_input(item_type, raw_input, state.cwd), parent=parent, final=final)


def _tool_input(item_type: str, raw_input: Any, cwd: str | None) -> Any:
    if not isinstance(raw_input, dict) or not raw_input:
        return raw_input  # not known yet (a streamed tool_use starts with {})
    value = dict(raw_input)
    if item_type == "command_execution":
        # a command execution always carries `command` (Amp names it `cmd`) and `cwd`
        if "command" not in value and isinstance(value.get("cmd"), str):
            value["command"] = value["cmd"]
        if cwd and "cwd" not in value:
            value["cwd"] = cwd
    return value


def _tool_payload(tool: Tool, status: str, cap: int, diff: dict[str, Any] | None = None,
                  **fields: Any) -> ItemPayload:
    """`cap`: the per-item cap (a diff's); `diff`: the diff fields from the tool's result,
    which replace those its input gives."""
    title = UNSET
    if isinstance(tool.input, dict):
        for k in ("description", "file_path", "path", "notebook_path", "url", "query", "pattern"):
            if isinstance(tool.input.get(k), str) and tool.input[k]:
                title = tool.input[k]
                break
    norm = tool_fields(tool.toolName, tool.input, cap, diff=diff is None)
    if diff is not None:
        norm.update(diff)
    return ItemPayload(itemType=tool.itemType, status=status, toolName=tool.toolName,  # type: ignore[arg-type]
                       input=tool.input, title=title, **norm, **fields)


def _set_tool(state: State, tid: str, **changes: Any) -> State:
    tools = dict(state.tools)
    tools[tid] = _replace(tools[tid], **changes)
    return _replace(state, tools=tools)


def _start_tool(state: State, out: Emitter, tid: str, native_name: str, raw_input: Any,
                parent: str | None, final: bool) -> State:
    tool = _new_tool(state, native_name, raw_input, parent, final)
    start_item(out, _at(state, out, tid, tid, parent=parent),
               _tool_payload(tool, "inProgress", out.cap))
    state = _replace(state, tools={**state.tools, tid: tool})
    return _tool_input_known(state, out, tid) if final else state


def _finalize_tool(state: State, out: Emitter, tid: str, raw_input: Any) -> State:
    tool = state.tools[tid]
    if tool.final:
        return state
    tool = _replace(tool, input=_tool_input(tool.itemType, raw_input, state.cwd), final=True)
    state = _replace(state, tools={**state.tools, tid: tool})
    _emit(state, out, ItemUpdated, _tool_payload(tool, "inProgress", out.cap), item=tid,
          item_ref=tid, parent=tool.parent)
    return _tool_input_known(state, out, tid)


def _tool_input_known(state: State, out: Emitter, tid: str) -> State:
    """What a tool's whole input means beyond the tool call: a question, a plan."""
    tool = state.tools[tid]
    data = tool.input if isinstance(tool.input, dict) else {}
    if tool.toolName == "AskUserQuestion" and tool.question == 0:
        _emit(state, out, UserInputRequested,
              UserInputRequestedPayload(questions=data.get("questions", data)),
              request=tid, item=tid, item_ref=tid, parent=tool.parent)
        return _set_tool(state, tid, question=1)
    if tool.toolName == "TodoWrite" and isinstance(data.get("todos"), list):
        steps = [PlanStep(step=str(t.get("content") or t.get("activeForm") or ""),
                          status=_PLAN_STATUS.get(str(t.get("status")), "pending"))  # type: ignore[arg-type]
                 for t in data["todos"] if isinstance(t, dict)]
        _emit(state, out, TurnPlanUpdated, TurnPlanUpdatedPayload(plan=steps), parent=tool.parent)
    if tool.toolName == "ExitPlanMode" and isinstance(data.get("plan"), str):
        # the plan as an item of its own: its text, whole, as its one delta
        at = _at(state, out, f"{tid}:plan", tid, parent=tool.parent)
        start_item(out, at, ItemPayload(itemType="plan", status="inProgress"), True)
        rest(out, at, "plan_text", data["plan"])
        complete_item(out, at, ItemPayload(itemType="plan", status="completed",
                                           text=data["plan"]), True)
    return state


_PLAN_STATUS = {"pending": "pending", "todo": "pending", "in_progress": "inProgress",
                "in-progress": "inProgress", "completed": "completed", "done": "completed"}
_EXIT_CODE = re.compile(r"^Exit code (\d+)")


def _output_text(content: Any) -> str:
    """A tool result's whole text: text blocks joined by newlines; a server search
    result lists its hits (title and URL), since it has no text of its own."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for b in content:
            if isinstance(b, dict) and isinstance(b.get("text"), str):
                parts.append(b["text"])
            elif isinstance(b, dict) and isinstance(b.get("url"), str):
                parts.append(f"{b.get('title') or b['url']} <{b['url']}>")
        return "\n".join(parts)
    if isinstance(content, dict):  # server tool results (web_fetch_tool_result, errors...)
        if "content" in content:
            return _output_text(content["content"])
        return str(content.get("error_code") or content.get("data") or "")
    return ""


def complete_tool(state: State, out: Emitter, tid: str, output: str, is_error: bool,
                  parent: str | None, data: Any = UNSET) -> State:
    """Complete a tool item with its whole output (started first if never seen)."""
    tool = state.tools.get(tid)
    if tool is None:  # a result for a call this stream never showed (resumed session)
        tool = _new_tool(state, "unknown", None, parent)
        start_item(out, _at(state, out, tid, tid, parent=parent),
                   _tool_payload(tool, "inProgress", out.cap), True)
    status = "declined" if tool.denied else "failed" if is_error else "completed"
    fields: dict[str, Any] = {"output": output, "isError": is_error or tool.denied}
    background = isinstance(tool.input, dict) and tool.input.get("run_in_background") is True
    if tool.itemType == "command_execution" and not tool.denied and not background:
        # Claude's Bash reports a non-zero exit as an error result "Exit code N\n..."
        code = _EXIT_CODE.match(output) if is_error else None
        fields["exitCode"] = int(code.group(1)) if code else None if is_error else 0
    if tool.question == 1:
        answers = _dict(data).get("toolUseResult")
        answers = _dict(answers).get("answers", output)
        # an error result (a refused permission among them) is a question left unanswered
        answered: InputOutcome = "declined" if is_error or tool.denied else "answered"
        _emit(state, out, UserInputResolved,
              UserInputResolvedPayload(answers=answers, outcome=answered),
              request=tid, item=tid, item_ref=tid, parent=tool.parent)
    diff = _result_diff(tool, data, out.cap) if tool.itemType == "file_change" else None
    complete_item(out, _at(state, out, tid, tid, parent=tool.parent),
                  _tool_payload(tool, status, out.cap, diff, data=data, **fields))
    tools = dict(state.tools)
    tools.pop(tid, None)
    return _replace(state, tools=tools)


def _result_diff(tool: Tool, data: Any, cap: int) -> dict[str, Any] | None:
    """The diff fields of a file change from Claude's `tool_use_result`: its
    structuredPatch (hunks of the file, with the file's line numbers), or the content
    of a file it says it created; no diff for a file it rewrote unchanged; None when
    the result tells none of these (the input's excerpts or content then give it)."""
    result = _dict(data).get("toolUseResult")
    path = _str(result.get("filePath")) if isinstance(result, dict) else None
    if not isinstance(result, dict) or path is None:
        return None
    patch = result.get("structuredPatch")
    if isinstance(patch, list) and patch:
        text = records_diff(path, patch)
        return diff_fields([(text, "file")], cap) if text else None
    if result.get("type") == "create" and isinstance(result.get("content"), str):
        return diff_fields([(text_diff(path, None, result["content"]), "file")], cap)
    if result.get("type") == "update" and patch == []:
        return {}
    return None


def _tool_result(state: State, out: Emitter, block: dict[str, Any], parent: str | None,
                 obj: dict[str, Any], single: bool = False) -> State:
    tid = _str(block.get("tool_use_id"))
    if tid is None:
        raise MalformedRecord(f"{block.get('type')} block without a tool_use_id")
    content = block.get("content")
    data: dict[str, Any] = {}
    if isinstance(content, list | dict):
        data["content"] = content
    result = obj.get("tool_use_result")
    if single and result is not None:
        if isinstance(result, dict) and "originalFile" in result:
            # the whole file before the edit: too big for an event (raw keeps it)
            result = {k: v for k, v in result.items() if k != "originalFile"}
        data["toolUseResult"] = result
    is_error = block.get("is_error") is True or (
        isinstance(content, dict) and str(content.get("type", "")).endswith("_error"))
    return complete_tool(state, out, tid, _output_text(content), is_error, parent,
                         data or UNSET)


# ---- user messages ------------------------------------------------------------------


def _author(obj: dict[str, Any], origin: str, parent: str | None, echoes_prompt: bool
            ) -> Author:
    """Who wrote a user line's text. Claude Code never echoes the prompt on stdout but as
    an `isReplay` line (skipped: the client's line is the prompt), so the text of a user
    line it writes itself is its own ("[Request interrupted by user]", a compaction
    summary); Amp echoes the prompt (`echoes_prompt`)."""
    if parent is not None:
        return "agent"  # the Task tool's prompt to its subagent
    if obj.get("isSynthetic") is True:
        return "runtime"
    return "user" if origin == "client" or echoes_prompt else "runtime"


def _on_user(state: State, msg: Message, out: Emitter, echoes_prompt: bool = False) -> State:
    obj = msg.obj
    message = _obj(obj, "message")
    content = message.get("content")
    if isinstance(content, str):
        content = [{"type": "text", "text": content}]
    if not isinstance(content, list):
        raise MalformedRecord("user: message.content must be a list or a string")
    if msg.origin == "agent" and obj.get("isReplay") is True:
        # the CLI echoing a prompt the client sent: that client line is the user message
        return state
    state = _adopt_session(state, msg, out)
    if msg.origin == "agent" or obj.get("shouldQuery") is not False:
        state = open_turn(state, out)
    parent = _str(obj.get("parent_tool_use_id"))
    blocks = [b for b in content if isinstance(b, dict)]
    results = [b for b in blocks if b.get("type") == "tool_result"]
    for block in results:
        state = _tool_result(state, out, block, parent, obj, single=len(results) == 1)
    texts = [b["text"] for b in blocks if b.get("type") == "text" and isinstance(b.get("text"), str)]
    others = [b for b in blocks if b.get("type") not in ("text", "tool_result")]
    if not texts and not others:
        return state
    key = f"user-{_str(obj.get('uuid')) or state.anon}"
    state = _replace(state, anon=state.anon + (_str(obj.get("uuid")) is None))
    data: dict[str, Any] = {k: obj[k] for k in ("isSynthetic", "origin", "priority") if k in obj}
    if others:
        data["content"] = others
    author = _author(obj, msg.origin, parent, echoes_prompt)
    at = _at(state, out, key, _str(obj.get("uuid")), parent=parent)
    start_item(out, at, ItemPayload(itemType="user_message", status="inProgress", role="user",
                                    author=author), True)
    complete_item(out, at, ItemPayload(itemType="user_message", status="completed", role="user",
                                       text="\n".join(texts), data=data or UNSET, author=author))
    return state


# ---- the control protocol -----------------------------------------------------------

#: control_request subtypes that open a canonical request, by the requestType rule
_REQUESTS = frozenset({"can_use_tool", "elicitation", "request_user_dialog", "hook_callback"})
_APPROVAL = {"command_execution": "command_execution_approval",
             "file_change": "file_change_approval"}
#: client requests whose success changes the session configuration
_CONFIG_REQUESTS = {"set_permission_mode": ("mode", "permissionMode"),
                    "set_model": ("model", "model"),
                    "set_max_thinking_tokens": ("max_thinking_tokens", "maxThinkingTokens")}


def _on_control_request(state: State, msg: Message, out: Emitter) -> State:
    obj = msg.obj
    rid = obj.get("request_id")
    request = _obj(obj, "request")
    subtype = request.get("subtype")
    if not isinstance(rid, str | int) or not isinstance(subtype, str):
        raise MalformedRecord("control_request needs a request_id and a request.subtype")
    rid = str(rid)
    native = out.native_type = f"control_request/{subtype}"
    if msg.origin == "agent":
        if subtype == "can_use_tool":
            return _permission_request(state, out, rid, request)
        if subtype in ("elicitation", "request_user_dialog"):
            state = open_turn(state, out)
            tid = _str(request.get("tool_use_id"))
            questions = {k: v for k, v in request.items() if k != "subtype"}
            _emit(state, out, UserInputRequested, UserInputRequestedPayload(questions=questions),
                  request=rid, request_ref=rid, item=tid, item_ref=tid)
            return _pend(state, rid, Pending(subtype=subtype, origin="agent", request=rid,
                                             requestType="tool_user_input"))
        if subtype == "hook_callback":
            hook_input = _dict(request.get("input"))
            _emit(state, out, HookStarted,
                  HookStartedPayload(hookId=rid, hookName=str(request.get("callback_id", "")),
                                     hookEvent=str(hook_input.get("hook_event_name", ""))))
            return _pend(state, rid, Pending(subtype=subtype, origin="agent"))
    elif subtype == "interrupt" or subtype == "initialize" or subtype in _CONFIG_REQUESTS:
        # the client's commands: their effect shows when the agent answers
        if subtype == "interrupt" and state.turnOpen:
            state = _replace(state, interrupting=True)
        value = request.get(_CONFIG_REQUESTS[subtype][0]) if subtype in _CONFIG_REQUESTS else None
        return _pend(state, rid, Pending(subtype=subtype, origin="client", value=value))
    if native not in IGNORED:
        out.unknown(native, thread=_thread(state, out), turn=_turn(state, out))
    return state


def _pend(state: State, rid: str, pending: Pending) -> State:
    return _replace(state, pending={**state.pending, rid: pending})


def _permission_request(state: State, out: Emitter, rid: str, request: dict[str, Any]) -> State:
    state = open_turn(state, out)
    tid = _str(request.get("tool_use_id"))
    name = normalize_tool_name(str(request.get("tool_name") or "unknown"))
    args = {k: request[k] for k in ("input", "blocked_path", "decision_reason",
                                    "decision_reason_type", "title", "display_name",
                                    "agent_id") if k in request}
    detail = _str(request.get("title")) or _str(request.get("description")) or \
        _str(request.get("display_name")) or name
    if name == "AskUserQuestion" and tid:
        # the question is the request: one request id for both, from the tool call
        if tid not in state.tools:
            state = _start_tool(state, out, tid, name, request.get("input"), None, final=True)
        elif not state.tools[tid].final:
            state = _finalize_tool(state, out, tid, request.get("input"))
        elif state.tools[tid].question == 0:
            state = _tool_input_known(state, out, tid)
        kind, req = "tool_user_input", tid
    else:
        kind = _APPROVAL.get(item_type_for_tool(name), "unknown")
        req = rid
    parent = state.tools[tid].parent if tid and tid in state.tools else None
    _emit(state, out, RequestOpened,
          RequestOpenedPayload(requestType=kind, detail=detail, toolName=name,  # type: ignore[arg-type]
                               options=request.get("permission_suggestions") or UNSET, args=args),
          request=req, request_ref=rid, item=tid, item_ref=tid, parent=parent)
    return _pend(state, rid, Pending(subtype="can_use_tool", origin="agent", requestType=kind,
                                     request=req, tool=tid))


def _on_control_response(state: State, msg: Message, out: Emitter) -> State:
    response = _obj(msg.obj, "response")
    rid = response.get("request_id")
    if not isinstance(rid, str | int):
        raise MalformedRecord("control_response without a request_id")
    rid = str(rid)
    pending = state.pending.get(rid)
    out.native_type = f"control_response/{pending.subtype if pending else 'unmatched'}"
    if pending is None:
        return state  # a late answer to a request already resolved or never seen
    rest = dict(state.pending)
    del rest[rid]
    state = _replace(state, pending=rest)
    ok = response.get("subtype") != "error"
    body = _dict(response.get("response"))
    error = _str(response.get("error"))
    if pending.subtype == "can_use_tool":
        return _permission_resolved(state, out, rid, pending, body if ok else
                                    {"behavior": "error", "message": error})
    if pending.subtype in ("elicitation", "request_user_dialog"):
        _emit(state, out, UserInputResolved,
              UserInputResolvedPayload(answers=body if ok else {"error": error},
                                       outcome=elicitation_outcome(body) if ok else UNSET),
              request=rid, request_ref=rid)
        return state
    if pending.subtype == "hook_callback":
        _emit(state, out, HookCompleted,
              HookCompletedPayload(hookId=rid, outcome="success" if ok else "error",
                                   output=msgspec.json.encode(body).decode() if ok else
                                   error or UNSET))
        return state
    if not ok:
        _emit(state, out, RuntimeErrorEvent,
              RuntimeErrorPayload(message=f"control request {pending.subtype} failed: {error}",
                                  errorClass="validation_error", willRetry=False))
        return state
    if pending.subtype == "initialize":
        _emit(state, out, SessionConfigured, SessionConfiguredPayload(config=body))
    elif pending.subtype in _CONFIG_REQUESTS:
        name = _CONFIG_REQUESTS[pending.subtype][1]
        if name == "model" and isinstance(pending.value, str):
            state = _replace(state, model=pending.value)
        _emit(state, out, SessionConfigured, SessionConfiguredPayload(config={name: pending.value}))
    return state


#: PermissionUpdates that spare the user the next question: an allow rule, a directory
#: added, or a mode that stops asking.
_GRANTING_MODES = frozenset({"acceptEdits", "bypassPermissions", "dontAsk"})


def _grants(updates: Any) -> bool:
    for u in updates if isinstance(updates, list) else []:
        kind = u.get("type") if isinstance(u, dict) else None
        if (kind in ("addRules", "replaceRules") and u.get("behavior") == "allow") \
                or kind == "addDirectories" \
                or (kind == "setMode" and u.get("mode") in _GRANTING_MODES):
            return True
    return False


def _outcome(behavior: str, body: dict[str, Any]) -> Decision | UnsetType:
    """The shared word for a permission answer: `allow` with permission updates that
    grant the like from now on is accept_for_session; `deny` with `interrupt` stops the
    turn too (cancel); an error answer says nothing."""
    if behavior == "allow":
        return "accept_for_session" if _grants(body.get("updatedPermissions")) else "accept"
    if behavior == "deny":
        return "cancel" if body.get("interrupt") is True else "decline"
    return UNSET


def _permission_resolved(state: State, out: Emitter, rid: str, pending: Pending,
                         body: dict[str, Any]) -> State:
    behavior = _str(body.get("behavior")) or "allow"
    resolution = {k: body[k] for k in ("updatedInput", "updatedPermissions", "message",
                                       "interrupt", "decisionClassification") if k in body}
    tid = pending.tool
    tool = state.tools.get(tid) if tid else None
    parent = tool.parent if tool else None
    _emit(state, out, RequestResolved,
          RequestResolvedPayload(requestType=pending.requestType, decision=behavior,  # type: ignore[arg-type]
                                 resolution=resolution or UNSET,
                                 outcome=_outcome(behavior, body)),
          request=pending.request, request_ref=rid, item=tid, item_ref=tid, parent=parent)
    if tool is None or tid is None:
        return state
    if behavior != "allow":
        return _set_tool(state, tid, denied=True)
    answers = _dict(body.get("updatedInput")).get("answers")
    if tool.question == 1 and answers is not None:
        _emit(state, out, UserInputResolved,
              UserInputResolvedPayload(answers=answers, outcome="answered"),
              request=tid, item=tid, item_ref=tid, parent=parent)
        return _set_tool(state, tid, question=2)
    return state


def _resolve_cancelled(state: State, out: Emitter, rid: str, pending: Pending) -> State:
    if pending.subtype == "hook_callback":
        _emit(state, out, HookCompleted, HookCompletedPayload(hookId=rid, outcome="cancelled"),
              synthetic=True)
    elif pending.subtype == "can_use_tool":
        _emit(state, out, RequestResolved,
              RequestResolvedPayload(requestType=pending.requestType, decision="cancelled",  # type: ignore[arg-type]
                                     outcome="cancel"),
              synthetic=True, request=pending.request, request_ref=rid, item=pending.tool,
              item_ref=pending.tool)
        if pending.requestType == "tool_user_input" and pending.tool in state.tools:
            return _set_tool(state, pending.tool, question=2)  # answered by nobody
    else:
        _emit(state, out, UserInputResolved,
              UserInputResolvedPayload(answers=None, outcome="cancelled"),
              synthetic=True, request=rid, request_ref=rid)
    return state


def _on_control_cancel_request(state: State, msg: Message, out: Emitter) -> State:
    rid = msg.obj.get("request_id")
    if not isinstance(rid, str | int):
        raise MalformedRecord("control_cancel_request without a request_id")
    pending = state.pending.get(str(rid))
    if pending is None:
        return state
    rest = dict(state.pending)
    del rest[str(rid)]
    state = _replace(state, pending=rest)
    if pending.origin == "agent" and pending.subtype in _REQUESTS:
        state = _resolve_cancelled(state, out, str(rid), pending)
    return state


# ---- tables -------------------------------------------------------------------------

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

_HANDLERS: dict[str, Handler] = {
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
    "control_request/mcp_message": "SDK MCP server transport; the tool call shows as tool_use",
    # client queries and commands with no effect on the conversation until answered
    **{f"control_request/{s}": "a client query or command; nothing to show"
       for s in ("get_context_usage", "get_session_cost", "list_models", "get_usage",
                 "get_binary_version", "mcp_status", "mcp_call", "file_suggestions",
                 "rewind_files", "cancel_async_message", "read_file", "seed_read_state",
                 "mcp_set_servers", "register_repo_root", "reload_plugins", "reload_skills",
                 "reload_output_styles", "mcp_reconnect", "mcp_toggle", "set_has_subscribers",
                 "stop_task", "background_tasks", "get_task_output", "apply_flag_settings",
                 "get_settings", "get_hooks_listing", "update_settings",
                 "list_permission_rules", "mcp_read_resource", "rename_session", "set_color")},
}
IGNORED: frozenset[str] = frozenset(IGNORED_REASONS)
