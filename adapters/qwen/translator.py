"""qwen: Qwen Code `qwen --output-format stream-json -p` -> canonical events.

Qwen Code is a Gemini CLI fork, but its stream-json is Claude Code's print mode, not
Gemini CLI's: `system/init`, `assistant`, `user` and `result` lines with Claude's
content blocks (`text`, `thinking`, `tool_use`, `tool_result`). So this adapter is
`adapters.claude` under its own provider name, with Qwen's differences below.

| runtime (recordings) | releases verified | written against |
| --- | --- | --- |
| `qwen-stream-json` (`qwen --output-format stream-json -p`) | 0.15.10 | the recordings (Qwen publishes no schema) |

Differences from Claude Code, and how they are read
* The release is `qwen_code_version` in `system/init` (session.configured
  `runtimeVersion`).
* Qwen never streams: every `assistant` line holds one whole block and its own
  message id (Claude repeats one id over a message's block lines). Each block is one
  item with one synthetic full-text `content.delta`, as for Claude without partial
  messages.
* An API failure is written as assistant text (`[API Error: 500 …]`) followed by a
  `result` of subtype `success` with `is_error: false`. Nothing else marks it, so it
  stays what the runtime says it is: the assistant's text and a completed turn.
* Approvals are never on the wire. Without `--yolo` a refused tool shows as a
  `tool_result` with `is_error: true` and the name in `result.permission_denials`.
* An interrupted run stops writing: its turn stays open until the worker's idle close.
"""

from __future__ import annotations

from typing import Final

from adapters.claude.session import Handler
from adapters.claude.state import State
from adapters.claude.system import configure
from adapters.claude.translator import _HANDLERS as CLAUDE_HANDLERS
from adapters.claude.translator import _SYSTEM as CLAUDE_SYSTEM
from adapters.claude.translator import IGNORED as IGNORED
from adapters.claude.translator import dispatch, system_dispatch
from adapters.claude.translator import message_id as message_id  # a `uuid` on every line
from adapters.core.contract import Message
from adapters.core.emitter import Emitter

provider = "qwen"
raw_source = "qwen.stream-json"

state_type = State


def initial() -> State:
    return State()


def translate(state: State, msg: Message, out: Emitter) -> State:
    return dispatch(state, msg, out, _HANDLERS, IGNORED)


def _on_init(state: State, msg: Message, out: Emitter) -> State:
    return configure(state, msg, out, "qwen_code_version")


def _on_system(state: State, msg: Message, out: Emitter) -> State:
    return system_dispatch(state, msg, out, _SYSTEM, IGNORED)


_SYSTEM: dict[str, Handler] = {**CLAUDE_SYSTEM, "init": _on_init}
_HANDLERS: Final[dict[str, Handler]] = {**CLAUDE_HANDLERS, "system": _on_system}
