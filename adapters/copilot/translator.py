"""copilot: GitHub Copilot CLI `copilot -p … --output-format json` -> canonical events.

Copilot prints its internal session events, one per line: `{type, data, id, timestamp,
parentId, ephemeral?}`, and a last `result` line that is not an event
(`{type, sessionId, exitCode, usage}`).

| runtime (recordings) | releases verified | written against |
| --- | --- | --- |
| `copilot-json` (`copilot -p --output-format json`) | 1.0.102 | the recordings (Copilot publishes no schema for this mode) |

Turns. Copilot's `assistant.turn_start` / `turn_end` wrap one model call, not what a
person calls a turn. A canonical turn is one prompt: it opens at `user.message` and
ends at `assistant.idle` (completed; failed after a `session.error`; interrupted after
`agent.interrupted` / `abort` or `idle {aborted: true}`). `result` ends a turn that
never went idle (failed when `exitCode` is not 0) and exits the session.

Items
* Text streams as `assistant.message_delta {messageId, deltaContent}` and ends whole in
  `assistant.message {content}`: the deltas go out as they come, the final text adds only
  what they did not carry (never twice). One item per `messageId`. A message cut off by
  an interrupt has no `assistant.message`: it completes, failed, with what it streamed.
* Reasoning is the same with `assistant.reasoning_delta` / `assistant.reasoning`
  (`reasoningId`).
* A tool item starts at the first of its request (`assistant.message.toolRequests`) and
  `tool.execution_start`; `tool.shell_output` chunks stream as `command_output`;
  `tool.execution_complete` completes it with `result.content` (or `error.message`).
  A call refused for want of permission is `declined`.
* `model.call_failure` is a `runtime.error` that will be retried; `session.error` is the
  one that ends the turn.

What the format cannot say
* No approvals on the wire: with `--allow-all-tools` everything runs; without it a call
  that needs permission is refused by Copilot itself (a declined tool). No request is
  invented.
* No token counts: `result.usage` has premium requests and durations only, carried on
  `session.exited`'s refs and the last turn's `usage`, never as `tokens`.
* No session id before `result.sessionId`.
"""

from __future__ import annotations

from typing import Any, Final

from msgspec import UnsetType

from adapters.copilot.state import State, Tool
from adapters.core.contract import MalformedRecord, Message
from adapters.core.emitter import UNSET, Emitter
from adapters.core.emitter import replace as _replace
from adapters.core.lifecycle import (
    At,
    close_item,
    complete_item,
    delta,
    end_turn,
    rest,
    start_item,
    taken,
)
from adapters.core.tools import normalize_tool_name, tool_item
from topics.canonical import (
    ItemPayload,
    ProviderRefs,
    RuntimeErrorEvent,
    RuntimeErrorPayload,
    SessionConfigured,
    SessionConfiguredPayload,
    SessionExited,
    SessionExitedPayload,
    SessionStarted,
    SessionStartedPayload,
    TurnCompletedPayload,
    TurnStarted,
    TurnStartedPayload,
)

provider = "copilot"
raw_source = "copilot.json"

state_type = State

_STREAMS: Final = {"text": ("assistant_message", "assistant_text"),
                   "reasoning": ("reasoning", "reasoning_text")}


def message_id(obj: dict[str, Any], origin: str) -> str | None:
    """A native message's id: every event's `id` (a UUID); the `result` line has none."""
    eid = obj.get("id")
    return eid if isinstance(eid, str) else None


def initial() -> State:
    return State()


def translate(state: State, msg: Message, out: Emitter) -> State:
    """Apply one line. Raises MalformedRecord when it has no string `type`, or a known
    type whose `data` is not an object."""
    obj = msg.obj
    kind = obj.get("type")
    if not isinstance(kind, str):
        raise MalformedRecord("copilot event without a string 'type'")
    out.native_type = kind
    if not state.started:
        out.emit(SessionStarted, SessionStartedPayload(), synthetic=True)
        state = _replace(state, started=True)
    if kind == "result":  # not an event: no `data`
        return _on_result(state, obj, out)
    handler = _HANDLERS.get(kind)
    if handler is None:
        if kind not in IGNORED:
            out.unknown(kind, turn=_turn(state, out))
        return state
    data = obj.get("data", {})
    if not isinstance(data, dict):
        raise MalformedRecord(f"copilot {kind}: 'data' must be an object")
    return handler(state, data, out)


# ---- where events go ----------------------------------------------------------


def _turn(state: State, out: Emitter) -> str | UnsetType:
    return out.id("trn", str(state.turns)) if state.turnOpen else UNSET


def _at(state: State, out: Emitter, native: str | None = None) -> At:
    """The turn's place, or a native item's (its refs name it)."""
    if native is None:
        return At(turn=_turn(state, out))
    return At(turn=_turn(state, out), item=out.id("itm", native),
              refs=ProviderRefs(providerItemId=native))


def _str(data: dict[str, Any], key: str) -> str | None:
    value = data.get(key)
    return value if isinstance(value, str) and value else None


def _need(data: dict[str, Any], key: str, kind: str) -> str:
    value = _str(data, key)
    if value is None:
        raise MalformedRecord(f"copilot {kind}: '{key}' must be a string")
    return value


# ---- turns ---------------------------------------------------------------------


def _open_turn(state: State, out: Emitter, synthetic: bool) -> State:
    state = _replace(state, turns=state.turns + 1, turnOpen=True, error=None, aborted=False)
    out.emit(TurnStarted, TurnStartedPayload(model=state.model or UNSET), synthetic=synthetic,
             turn=_turn(state, out))
    return state


def _ensure_turn(state: State, out: Emitter) -> State:
    return state if state.turnOpen else _open_turn(state, out, synthetic=True)


def _end_turn(state: State, out: Emitter, payload: TurnCompletedPayload,
              synthetic: bool = False) -> State:
    if not state.turnOpen:
        return state
    why = "the turn ended before the item completed"
    for native, kind in state.open.items():
        item_type, stream = _STREAMS[kind]
        close_item(out, _at(state, out, native), item_type, "failed", why, text_stream=stream)
    for native, tool in state.tools.items():
        complete_item(out, _at(state, out, native),
                      tool_item(tool.name, tool.input, "failed", out.cap, detail=why), True)
    end_turn(out, _at(state, out), payload, synthetic)
    return _replace(state, turnOpen=False, open={}, tools={}, error=None, aborted=False)


def _ending(state: State, aborted: bool = False) -> TurnCompletedPayload:
    if aborted or state.aborted:
        return TurnCompletedPayload(state="interrupted")
    if state.error is not None:
        return TurnCompletedPayload(state="failed", errorMessage=state.error)
    return TurnCompletedPayload(state="completed")


def _on_user_message(state: State, data: dict[str, Any], out: Emitter) -> State:
    content = data.get("content")
    if not isinstance(content, str):
        raise MalformedRecord("copilot user.message: 'content' must be a string")
    if state.turnOpen:  # a new prompt while the last one never went idle
        state = _end_turn(state, out, TurnCompletedPayload(state="interrupted"), synthetic=True)
    state = _open_turn(state, out, synthetic=True)
    native = _str(data, "messageId")
    if native is None:
        state = _replace(state, items=state.items + 1)
        native = f"user:{state.items}"
    at = _at(state, out, native)
    # `content` is what the person typed; `transformedContent` adds Copilot's context
    start_item(out, at, ItemPayload(itemType="user_message", status="inProgress", role="user",
                                    author="user"))
    complete_item(out, at, ItemPayload(itemType="user_message", status="completed", role="user",
                                       text=content, author="user"))
    return state


def _on_idle(state: State, data: dict[str, Any], out: Emitter) -> State:
    return _end_turn(state, out, _ending(state, aborted=data.get("aborted") is True))


def _on_interrupted(state: State, data: dict[str, Any], out: Emitter) -> State:
    return _replace(state, aborted=True) if state.turnOpen else state


def _on_session_error(state: State, data: dict[str, Any], out: Emitter) -> State:
    state = _ensure_turn(state, out)
    message = _str(data, "message") or _str(data, "errorType") or "copilot session error"
    _error(state, out, message, data, will_retry=False)
    return _replace(state, error=state.error or message)


def _on_call_failure(state: State, data: dict[str, Any], out: Emitter) -> State:
    message = _str(data, "errorMessage") or _str(data, "errorType") or "model call failed"
    _error(state, out, message, data, will_retry=True)
    return state


def _error(state: State, out: Emitter, message: str, data: dict[str, Any],
           will_retry: bool) -> None:
    out.emit(RuntimeErrorEvent,
             RuntimeErrorPayload(message=message, errorClass="provider_error",
                                 willRetry=will_retry, detail=data or UNSET),
             turn=_turn(state, out))


def _on_result(state: State, obj: dict[str, Any], out: Emitter) -> State:
    code = obj.get("exitCode")
    failed = isinstance(code, int) and code != 0
    usage = obj.get("usage")
    if state.turnOpen:
        ending = _ending(state)
        if failed and ending.state == "completed":
            ending = TurnCompletedPayload(state="failed", errorMessage=f"copilot exited {code}")
        if isinstance(usage, dict):
            ending = _replace(ending, usage=usage)
        state = _end_turn(state, out, ending)
    sid = _str(obj, "sessionId")
    out.emit(SessionExited, SessionExitedPayload(reason="exit", exitKind="error" if failed
                                                 else "graceful"),
             refs=ProviderRefs(providerSessionId=sid) if sid else UNSET)
    return state


def _on_tools_updated(state: State, data: dict[str, Any], out: Emitter) -> State:
    model = _str(data, "model")
    if model is not None:
        state = _replace(state, model=model)
    out.emit(SessionConfigured, SessionConfiguredPayload(config=data))
    return state


# ---- texts and reasonings --------------------------------------------------------


def _stream_delta(state: State, out: Emitter, native: str, kind: str, text: str) -> State:
    state = _ensure_turn(state, out)
    item_type, stream = _STREAMS[kind]
    at = _at(state, out, native)
    if native not in state.open:
        start_item(out, at, ItemPayload(itemType=item_type, status="inProgress",  # type: ignore[arg-type]
                                        role="assistant"), streams=(stream,))
        state = _replace(state, open={**state.open, native: kind})
    delta(out, at, stream, text)
    return state


def _stream_end(state: State, out: Emitter, native: str, kind: str, text: str) -> State:
    """The whole text of a message or reasoning: what its deltas did not carry, then the
    item completed (an empty message that streamed nothing is no item)."""
    if native not in state.open:
        if not text:
            return state
        state = _stream_delta(state, out, native, kind, "")
    item_type, stream = _STREAMS[kind]
    at = _at(state, out, native)
    rest(out, at, stream, text)
    complete_item(out, at, ItemPayload(itemType=item_type, status="completed",  # type: ignore[arg-type]
                                       role="assistant", **taken(out, at.item_id, stream, "text")))
    return _replace(state, open={k: v for k, v in state.open.items() if k != native})


def _delta(state: State, data: dict[str, Any], out: Emitter, kind: str, id_key: str) -> State:
    """A message's or a reasoning's `deltaContent`, on the item its `id_key` names."""
    text = data.get("deltaContent")
    if not isinstance(text, str):
        raise MalformedRecord(f"copilot {out.native_type}: 'deltaContent' must be a string")
    return _stream_delta(state, out, _need(data, id_key, str(out.native_type)), kind, text)


def _on_message_delta(state: State, data: dict[str, Any], out: Emitter) -> State:
    return _delta(state, data, out, "text", "messageId")


def _on_message(state: State, data: dict[str, Any], out: Emitter) -> State:
    native = _need(data, "messageId", "assistant.message")
    content = data.get("content")
    model = _str(data, "model")
    if model is not None and model != state.model:
        state = _replace(state, model=model)
    state = _stream_end(_ensure_turn(state, out), out, native,
                        "text", content if isinstance(content, str) else "")
    requests = data.get("toolRequests")
    for request in requests if isinstance(requests, list) else ():
        if isinstance(request, dict) and isinstance(request.get("toolCallId"), str):
            state = _start_tool(state, out, request["toolCallId"], request.get("name"),
                                request.get("arguments"))
    return state


def _on_reasoning_delta(state: State, data: dict[str, Any], out: Emitter) -> State:
    return _delta(state, data, out, "reasoning", "reasoningId")


def _on_reasoning(state: State, data: dict[str, Any], out: Emitter) -> State:
    native = _need(data, "reasoningId", "assistant.reasoning")
    content = data.get("content")
    return _stream_end(_ensure_turn(state, out), out, native, "reasoning",
                       content if isinstance(content, str) else "")


# ---- tools -------------------------------------------------------------------------


def _start_tool(state: State, out: Emitter, call: str, name: Any, arguments: Any) -> State:
    if call in state.tools:
        return state
    state = _ensure_turn(state, out)
    native = name if isinstance(name, str) and name else "unknown"
    tool = Tool(name=normalize_tool_name(native), native=native,
                input=arguments if isinstance(arguments, dict) else {})
    start_item(out, _at(state, out, call), tool_item(tool.name, tool.input, "inProgress", out.cap))
    return _replace(state, tools={**state.tools, call: tool})


def _on_execution_start(state: State, data: dict[str, Any], out: Emitter) -> State:
    call = _need(data, "toolCallId", "tool.execution_start")
    return _start_tool(state, out, call, data.get("toolName"), data.get("arguments"))


def _on_shell_output(state: State, data: dict[str, Any], out: Emitter) -> State:
    call = _need(data, "toolCallId", "tool.shell_output")
    text = data.get("text")
    if call not in state.tools or not isinstance(text, str):
        return state
    # the completion carries the whole output: the chunks are counted, not spooled
    delta(out, _at(state, out, call), "command_output", text, spool=False)
    return state


_DENIED: Final = "Permission denied"


def _on_execution_complete(state: State, data: dict[str, Any], out: Emitter) -> State:
    call = _need(data, "toolCallId", "tool.execution_complete")
    if call not in state.tools:
        state = _start_tool(state, out, call, data.get("toolName"), data.get("arguments"))
    tool = state.tools[call]
    result, error = data.get("result"), data.get("error")
    message = error.get("message") if isinstance(error, dict) else None
    if data.get("success") is True:
        status = "completed"
    else:
        status = "declined" if isinstance(message, str) and message.startswith(_DENIED) \
            else "failed"
    content = result.get("content") if isinstance(result, dict) else None
    output = content if isinstance(content, str) else (message if isinstance(message, str)
                                                       else "")
    extra = {k: data[k] for k in ("shellExecution", "error") if k in data}
    complete_item(out, _at(state, out, call),
                  tool_item(tool.name, tool.input, status, out.cap, output=output, data=extra or UNSET,
                                detail=message if status != "completed" else None))
    return _replace(state, tools={k: v for k, v in state.tools.items() if k != call})


_HANDLERS: Final = {
    "session.tools_updated": _on_tools_updated,
    "user.message": _on_user_message,
    "assistant.message_delta": _on_message_delta,
    "assistant.message": _on_message,
    "assistant.reasoning_delta": _on_reasoning_delta,
    "assistant.reasoning": _on_reasoning,
    "tool.execution_start": _on_execution_start,
    "tool.shell_output": _on_shell_output,
    "tool.execution_complete": _on_execution_complete,
    "model.call_failure": _on_call_failure,
    "session.error": _on_session_error,
    "agent.interrupted": _on_interrupted,
    "abort": _on_interrupted,
    "assistant.idle": _on_idle,
}

#: Native types read on purpose and mapped to nothing, with the reason.
IGNORED_REASONS: dict[str, str] = {
    "session.skills_loaded": "the skills on disk at start-up, not part of a conversation",
    "session.mcp_servers_loaded": "the MCP servers at start-up (the tools list follows)",
    "session.background_tasks_changed": "a level signal with no payload",
    "session.info": "a notice shown to a person; a retry's cause is its model.call_failure",
    "assistant.turn_start": "one model call begins: the canonical turn is the whole prompt",
    "assistant.turn_end": "one model call ends: the canonical turn ends at assistant.idle",
    "assistant.turn_retry": "a model call retried; its failure is the model.call_failure",
    "assistant.message_start": "a message begins; its item starts with its first text",
    "assistant.tool_call_delta": "the call's argument fragments; tool.execution_start and the "
                                 "message's toolRequests carry them whole",
    "model.call_start": "HTTP call bookkeeping",
    "model.call_finished": "HTTP call bookkeeping (its outcome is said by the events around it)",
    "model.call_final_result": "HTTP call bookkeeping (a final failure is the session.error)",
    "tool.execution_partial_result": "the output so far, which the shell_output chunks carry",
}
IGNORED: Final[frozenset[str]] = frozenset(IGNORED_REASONS)
