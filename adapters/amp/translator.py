"""amp: Amp (Sourcegraph) `amp --stream-json` -> canonical events.

Reads the `--stream-json` lines of the Amp CLI as declared by npm
`@sourcegraph/amp-sdk` 0.1.0-20260126121723 (`dist/types.d.ts`, "compatible with
the Amp CLI --stream-json output"): StreamMessage = system(init) | assistant |
user | result(success) | result(error_during_execution | error_max_turns). The
shape is Claude Code's stream-json, so this adapter is `adapters.claude` with
another table: the same state, the same block, tool and turn handling. It also
reads the older flat lines (`message`, `tool_call`, `tool_result`, `error`,
`done`; the StreamJSONMessage of the sandbox-agent schema).

Releases (every recording of each is replayed against its oracle by
tests/adapters/test_drift.py, which also checks this table; docs/runtimes "Verified runtime
releases")

| runtime (recordings) | releases verified | written against |
| --- | --- | --- |
| `amp --stream-json` | none recorded (goldens only) | amp-sdk 0.1.0-20260126121723 `types.d.ts` |

Its init states no release (adapters.claude reads `claude_code_version`, which Amp does
not send), so nothing records it.

Invariants (those of adapters.claude, plus)
* Amp sends no deltas: every text block becomes one synthetic full-text
  `content.delta` before its `item.completed` (never text twice).
* A turn opens at the first message (init, assistant, user) and ends at
  `result`, or at `done` in the flat format; an `error` line before `done` makes
  that turn failed.
* A subagent (Amp's Task tool) is marked as Claude Code marks it: its lines carry
  `parent_tool_use_id` (the flat lines too), read by adapters.claude.agents.

Amp-specific: the Bash tool's input names the command `cmd` (the canonical input
gets `command` too); the session id is Amp's thread id (`T-…`); an error result
carries `error` (a string) instead of Claude's `errors` list;
`permission_denials` is a list of strings. Amp has no partial messages and no
control protocol, so a `stream_event` or `control_request` is an unknown type.
"""

from __future__ import annotations

from typing import Any, Final

from adapters.claude.messages import _on_assistant as live_assistant
from adapters.claude.messages import _on_user as live_user
from adapters.claude.session import Handler, _emit, open_turn, restated
from adapters.claude.state import State
from adapters.claude.stream import _parse_json
from adapters.claude.system import _on_init
from adapters.claude.translator import dispatch, system_dispatch
from adapters.claude.translator import message_id as message_id  # Claude Code's: uuids, request ids
from adapters.claude.turns import _on_result, end_turn
from adapters.core.contract import MalformedRecord, Message
from adapters.core.emitter import Emitter
from adapters.core.emitter import replace as _replace
from topics.canonical import (
    RuntimeErrorEvent,
    RuntimeErrorPayload,
    SessionExited,
    SessionExitedPayload,
    TurnCompletedPayload,
)

provider = "amp"
raw_source = "amp.stream-json"

state_type = State


def initial() -> State:
    return State()


def translate(state: State, msg: Message, out: Emitter) -> State:
    return dispatch(state, msg, out, _HANDLERS, IGNORED)


def _on_system(state: State, msg: Message, out: Emitter) -> State:
    return system_dispatch(state, msg, out, _SYSTEM, IGNORED)



def _on_user(state: State, msg: Message, out: Emitter) -> State:
    # Amp echoes the user's prompt as its own `user` line (Claude Code never does)
    return live_user(state, msg, out, echoes_prompt=True)


def _envelope(obj: dict[str, Any]) -> dict[str, Any]:
    return {k: obj[k] for k in ("session_id", "parent_tool_use_id") if k in obj}


# ---- the flat format (sandbox-agent's StreamJSONMessage) ---------------------------


def _on_message(state: State, msg: Message, out: Emitter) -> State:
    obj = msg.obj
    content = obj.get("content", "")
    if not isinstance(content, str):
        raise MalformedRecord("amp message: 'content' must be a string")
    block = {"type": "text", "text": content}
    if obj.get("role") == "user":
        user = {"type": "user", "message": {"role": "user", "content": [block]}, **_envelope(obj)}
        return _on_user(state, restated(msg, user), out)
    message: dict[str, Any] = {"role": "assistant", "content": [block]}
    if isinstance(obj.get("id"), str):
        message["id"] = obj["id"]
    return live_assistant(state, restated(msg, {"type": "assistant", "message": message,
                                                 **_envelope(obj)}), out)


def _on_tool_call(state: State, msg: Message, out: Emitter) -> State:
    obj = msg.obj
    call = obj.get("tool_call")
    if not isinstance(call, dict) or not isinstance(call.get("id"), str):
        raise MalformedRecord("amp tool_call: 'tool_call' must be an object with a string id")
    arguments = call.get("arguments")
    if isinstance(arguments, str):
        parsed = _parse_json(arguments)
        arguments = parsed if isinstance(parsed, dict) else {"arguments": arguments}
    block = {"type": "tool_use", "id": call["id"], "name": str(call.get("name") or "unknown"),
             "input": arguments if isinstance(arguments, dict) else {}}
    # each flat tool_call is its own message: its id, or the call's when it has none
    message = {"role": "assistant", "id": obj.get("id") or f"call:{call['id']}",
               "content": [block]}
    return live_assistant(state, restated(msg, {"type": "assistant", "message": message,
                                                 **_envelope(obj)}), out)


def _on_tool_result(state: State, msg: Message, out: Emitter) -> State:
    obj = msg.obj
    call_id = obj.get("tool_use_id") or obj.get("id")
    if not isinstance(call_id, str):
        raise MalformedRecord("amp tool_result without the id of its tool call")
    content = obj.get("content", "")
    block = {"type": "tool_result", "tool_use_id": call_id, "content": content,
             "is_error": obj.get("is_error") is True or isinstance(obj.get("error"), str)}
    user = {"type": "user", "message": {"role": "user", "content": [block]}, **_envelope(obj)}
    return _on_user(state, restated(msg, user), out)


def _on_error(state: State, msg: Message, out: Emitter) -> State:
    state = open_turn(state, out)
    error = msg.obj.get("error")
    message = error if isinstance(error, str) and error else "amp error"
    _emit(state, out, RuntimeErrorEvent,
                 RuntimeErrorPayload(message=message, errorClass="provider_error",
                                     detail={k: v for k, v in msg.obj.items() if k != "type"}))
    return _replace(state, failed=True)


def _on_done(state: State, msg: Message, out: Emitter) -> State:
    state = open_turn(state, out)  # `done` ends one turn, even one never seen
    if state.failed:
        payload = TurnCompletedPayload(state="failed", errorMessage="amp reported an error")
    else:
        payload = TurnCompletedPayload(state="completed")
    state = end_turn(state, out, payload)
    _emit(state, out, SessionExited, SessionExitedPayload(reason="done",
                                                                 exitKind="graceful"))
    return state


_SYSTEM: dict[str, Handler] = {
    "init": _on_init,
}

_HANDLERS: Final[dict[str, Handler]] = {
    "system": _on_system,
    "assistant": live_assistant,
    "user": _on_user,
    "result": _on_result,
    # the flat format
    "message": _on_message,
    "tool_call": _on_tool_call,
    "tool_result": _on_tool_result,
    "error": _on_error,
    "done": _on_done,
}

#: Native types read on purpose and mapped to nothing (none: Amp's set is small).
IGNORED: Final[frozenset[str]] = frozenset()
