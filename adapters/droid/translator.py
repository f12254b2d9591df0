"""droid: Factory droid `droid exec --output-format stream-json` -> canonical events.

droid writes flat lines of its own: `system/init` (borrowed from Claude Code), `message`
(a user or assistant text, whole), `reasoning`, `tool_call`, `tool_result`, `completion`
and `error`, each with `session_id` and an epoch-ms `timestamp`. Each line is read as the
Claude Code line it stands for, so the blocks, tools, turns and usage are
adapters.claude's, with droid's table:

| line | read as |
| --- | --- |
| `system/init` | `system/init` (a turn opens) |
| `message` role user | the user's prompt (droid echoes it) |
| `message` role assistant, `reasoning` | an assistant message of one text / thinking block |
| `tool_call` | an assistant message of one `tool_use` block (its own message: the call's id) |
| `tool_result` | a `tool_result` block; `error.message` is the output of a failed call |
| `completion` | `result` success: the turn ends, with `usage` (the session's totals) |
| `error` | `runtime.error`; the turn fails at the `cli` error that ends the run |

| runtime (recordings) | releases verified | written against |
| --- | --- | --- |
| `droid-stream-json` (`droid exec --output-format stream-json`) | 0.225.2 | the recordings (Factory publishes no schema) |

What the format cannot say, and how it is read
* No streaming: every text and reasoning arrives whole, as one synthetic
  `content.delta` before its `item.completed`.
* No approvals: droid asks the model for a risk level and decides alone; nothing on
  the wire is a request, and none is invented.
* No turn end on interrupt or on an API failure droid is still retrying: the stream just
  stops, and the turn stays open until the worker's idle close.
* No release on the wire.
"""

from __future__ import annotations

from typing import Any, Final

from adapters.claude.messages import _on_assistant as live_assistant
from adapters.claude.messages import _on_user as live_user
from adapters.claude.session import Handler, _emit, open_turn, restated
from adapters.claude.state import State
from adapters.claude.system import _on_init
from adapters.claude.translator import dispatch, system_dispatch
from adapters.claude.turns import _on_result, end_turn
from adapters.core.contract import MalformedRecord, Message
from adapters.core.emitter import Emitter
from adapters.core.emitter import replace as _replace
from topics.canonical import RuntimeErrorEvent, RuntimeErrorPayload, TurnCompletedPayload

provider = "droid"
raw_source = "droid.stream-json"

state_type = State


def message_id(obj: dict[str, Any], origin: str) -> str | None:
    """A native message's id: a message's or reasoning's `id` (a UUID); a tool call's and
    its result's share the call id, so each is told apart by its type."""
    kind, mid = obj.get("type"), obj.get("id")
    if not isinstance(mid, str):
        return None
    return mid if kind in ("message", "reasoning") else f"{kind}:{mid}"


def initial() -> State:
    return State()


def translate(state: State, msg: Message, out: Emitter) -> State:
    return dispatch(state, msg, out, _HANDLERS, IGNORED)


def _on_system(state: State, msg: Message, out: Emitter) -> State:
    return system_dispatch(state, msg, out, _SYSTEM, IGNORED)



def _envelope(obj: dict[str, Any]) -> dict[str, Any]:
    return {"session_id": obj["session_id"]} if isinstance(obj.get("session_id"), str) else {}


def _text(obj: dict[str, Any], kind: str) -> str:
    text = obj.get("text")
    if not isinstance(text, str):
        raise MalformedRecord(f"droid {kind}: 'text' must be a string")
    return text


def _assistant(state: State, msg: Message, out: Emitter, mid: str,
               block: dict[str, Any]) -> State:
    message = {"role": "assistant", "id": mid, "content": [block]}
    return live_assistant(state, restated(msg, {"type": "assistant", "message": message,
                                           **_envelope(msg.obj)}), out)


def _on_message(state: State, msg: Message, out: Emitter) -> State:
    obj = msg.obj
    text = _text(obj, "message")
    if obj.get("role") == "user":
        user = {"type": "user", "message": {"role": "user", "content": [
            {"type": "text", "text": text}]}, **_envelope(obj)}
        return live_user(state, restated(msg, user), out, echoes_prompt=True)
    mid = obj.get("id") if isinstance(obj.get("id"), str) else None
    return _assistant(state, msg, out, mid or f"msg:{state.turns}",
                      {"type": "text", "text": text})


def _on_reasoning(state: State, msg: Message, out: Emitter) -> State:
    obj = msg.obj
    mid = obj.get("id") if isinstance(obj.get("id"), str) else None
    return _assistant(state, msg, out, mid or f"reasoning:{state.turns}",
                      {"type": "thinking", "thinking": _text(obj, "reasoning")})


def _on_tool_call(state: State, msg: Message, out: Emitter) -> State:
    obj = msg.obj
    call_id = obj.get("id")
    if not isinstance(call_id, str):
        raise MalformedRecord("droid tool_call: 'id' must be a string")
    name = obj.get("toolName") or obj.get("toolId")
    params = obj.get("parameters")
    block = {"type": "tool_use", "id": call_id, "name": name if isinstance(name, str) else "unknown",
             "input": params if isinstance(params, dict) else {}}
    # the call is a message of its own: droid's messageId is the text's, whose blocks
    # Claude's reading numbers from 0
    return _assistant(state, msg, out, f"call:{call_id}", block)


def _on_tool_result(state: State, msg: Message, out: Emitter) -> State:
    obj = msg.obj
    call_id = obj.get("id")
    if not isinstance(call_id, str):
        raise MalformedRecord("droid tool_result: 'id' must be the id of its tool call")
    error = obj.get("error")
    value = obj.get("value")
    if isinstance(value, str):
        content = value
    elif isinstance(error, dict) and isinstance(error.get("message"), str):
        content = error["message"]
    else:
        content = "" if value is None else str(value)
    block = {"type": "tool_result", "tool_use_id": call_id, "content": content,
             "is_error": obj.get("isError") is True or isinstance(error, dict)}
    user = {"type": "user", "message": {"role": "user", "content": [block]}, **_envelope(obj)}
    return live_user(state, restated(msg, user), out)


def _on_completion(state: State, msg: Message, out: Emitter) -> State:
    obj = msg.obj
    result: dict[str, Any] = {"type": "result", "subtype": "success", "is_error": False,
                              **_envelope(obj)}
    for native, claude in (("finalText", "result"), ("numTurns", "num_turns"),
                           ("durationMs", "duration_ms"), ("usage", "usage")):
        if native in obj:
            result[claude] = obj[native]
    return _on_result(state, restated(msg, result), out)


def _on_error(state: State, msg: Message, out: Emitter) -> State:
    obj = msg.obj
    state = open_turn(state, out)
    message = obj.get("message")
    text = message if isinstance(message, str) and message else "droid error"
    _emit(state, out, RuntimeErrorEvent,
          RuntimeErrorPayload(message=text, errorClass="provider_error", willRetry=False,
                              detail={k: v for k, v in obj.items() if k != "type"}))
    if obj.get("source") != "cli":  # the agent loop's failure: a completion may follow
        return _replace(state, failed=True)
    # the command itself gave up ("Exec failed"): nothing follows, the turn ends here
    return end_turn(state, out, TurnCompletedPayload(state="failed", errorMessage=text))


_SYSTEM: dict[str, Handler] = {
    "init": _on_init,
}

_HANDLERS: Final[dict[str, Handler]] = {
    "system": _on_system,
    "message": _on_message,
    "reasoning": _on_reasoning,
    "tool_call": _on_tool_call,
    "tool_result": _on_tool_result,
    "completion": _on_completion,
    "error": _on_error,
}

#: Native types read on purpose and mapped to nothing (none: droid's set is small).
IGNORED: Final[frozenset[str]] = frozenset()
