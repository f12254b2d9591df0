"""`opencode run --format json` (and Kilo's `kilo run --format json`): the run command's
part events, read as the bus events they summarise.

The run command prints one line per finished part of the assistant's messages, with no
deltas, no message records and no session status:

| line | what it holds | read as |
| --- | --- | --- |
| `step_start` | a `step-start` part: a model call begins | the session busy (a turn opens) |
| `text` | a whole text part (`time.end` set) | `message.part.updated` |
| `tool_use` | a tool part in its final state (completed or error) | `message.part.updated` |
| `step_finish` | a `step-finish` part: tokens, cost, `reason` | `message.part.updated`; the session idle unless `reason` is `tool-calls` |
| `error` | `error {name, data{message}}`, or a plain string | `session.error`, then idle |

Every part the command prints is the assistant's (the prompt is its argument, not a
line), so each new `messageID` is announced as an assistant message before its first
part: its text streams at once instead of waiting for a role that never comes.

The loop ends when a model call finishes for another reason than `tool-calls`; an
`error` ends it too, after a failed call or a refused permission. A run cut off by a
signal prints nothing more: its turn stays open until the worker's idle close.
"""

from __future__ import annotations

from typing import Any, Final

from adapters.core.contract import MalformedRecord
from adapters.core.emitter import Emitter
from adapters.opencode.messages import _on_message_part_updated, _on_message_updated
from adapters.opencode.state import State
from adapters.opencode.turns import _busy, _idle, _on_session_error

Run = dict[str, Any]


def _sid(obj: Run) -> str:
    sid = obj.get("sessionID")
    if not isinstance(sid, str) or not sid:
        raise MalformedRecord(f"opencode run {obj.get('type')}: 'sessionID' must be a string")
    return sid


def _part(state: State, obj: Run, out: Emitter) -> State:
    """The line's part, after its message is announced as the assistant's."""
    sid, part = _sid(obj), obj.get("part")
    if not isinstance(part, dict) or not isinstance(part.get("messageID"), str):
        raise MalformedRecord(f"opencode run {obj.get('type')}: 'part' must be an object "
                              "with a messageID")
    mid = part["messageID"]
    if state.roles.get(mid) != "assistant":
        state = _on_message_updated(state, {"sessionID": sid, "info": {
            "id": mid, "sessionID": sid, "role": "assistant"}}, out)
    return _on_message_part_updated(state, {"sessionID": sid, "part": part}, out)


def _on_step_start(state: State, obj: Run, out: Emitter) -> State:
    state = _busy(state, out, _sid(obj))
    return _part(state, obj, out)


def _on_part(state: State, obj: Run, out: Emitter) -> State:
    state = _busy(state, out, _sid(obj))  # a part outside a step still belongs to a turn
    return _part(state, obj, out)


def _on_step_finish(state: State, obj: Run, out: Emitter) -> State:
    state = _on_part(state, obj, out)
    part = obj["part"]
    if part.get("reason") == "tool-calls":
        return state  # the loop goes on with the tools' results
    return _idle(state, out, _sid(obj))


def _on_error(state: State, obj: Run, out: Emitter) -> State:
    sid = _sid(obj)
    error = obj.get("error")
    if isinstance(error, str):  # "run ended with an auto-rejected permission; ..."
        error = {"name": "UnknownError", "data": {"message": error}}
    if not isinstance(error, dict):
        raise MalformedRecord("opencode run error: 'error' must be an object or a string")
    state = _busy(state, out, sid)  # an API failure may come before any step
    state = _on_session_error(state, {"sessionID": sid, "error": error}, out)
    return _idle(state, out, sid)


RUN_HANDLERS: Final = {
    "step_start": _on_step_start,
    "text": _on_part,
    "reasoning": _on_part,
    "tool_use": _on_part,
    "step_finish": _on_step_finish,
    "error": _on_error,
}
