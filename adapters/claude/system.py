"""claude: `system/*` messages (init, status, tasks, hooks, ...) and the top-level
telemetry lines (tool progress, summaries, auth, rate limits), each a handler of one
native type mapped to the canonical event that says the same."""

from __future__ import annotations

from typing import Any

from adapters.claude.session import _adopt_session, _at, _dict, _emit, _str, open_turn
from adapters.claude.state import State
from adapters.claude.tools import _new_tool, _set_tool, _tool_payload
from adapters.core.contract import MalformedRecord, Message
from adapters.core.emitter import UNSET, Emitter
from adapters.core.emitter import replace as _replace
from adapters.core.lifecycle import complete_item, start_item
from adapters.core.shape import native_list
from adapters.core.tools import (
    normalize_tool_name,
)
from topics.canonical import (
    AccountRateLimitsUpdated,
    AccountRateLimitsUpdatedPayload,
    AuthStatus,
    AuthStatusPayload,
    FailedFile,
    FilesPersisted,
    FilesPersistedPayload,
    HookCompleted,
    HookCompletedPayload,
    HookProgress,
    HookProgressPayload,
    HookStarted,
    HookStartedPayload,
    ItemPayload,
    ItemUpdated,
    ModelRerouted,
    ModelReroutedPayload,
    PersistedFile,
    RuntimeErrorEvent,
    RuntimeErrorPayload,
    SessionConfigured,
    SessionConfiguredPayload,
    SessionExited,
    SessionExitedPayload,
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
    ThreadStateChanged,
    ThreadStateChangedPayload,
    ToolProgress,
    ToolProgressPayload,
    ToolSummary,
    ToolSummaryPayload,
)

_INIT_SKIP = frozenset({"type", "subtype", "uuid", "session_id"})


def _on_init(state: State, msg: Message, out: Emitter) -> State:
    return configure(state, msg, out, "claude_code_version")  # Amp's init has none


def configure(state: State, msg: Message, out: Emitter, version_key: str) -> State:
    """`system/init`: the session's configuration, its release under `version_key`
    (each Claude-shaped runtime names it its own way), and a turn opened."""
    obj = msg.obj
    state = _replace(state, cwd=_str(obj.get("cwd")) or state.cwd,
                     model=_str(obj.get("model")) or state.model)
    config = {k: v for k, v in obj.items() if k not in _INIT_SKIP}
    version = _str(obj.get(version_key))
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
