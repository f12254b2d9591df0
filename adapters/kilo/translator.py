"""kilo: Kilo (`@kilocode/cli`, an OpenCode fork) `kilo run --format json` -> canonical events.

Kilo's run command prints OpenCode's run lines (`step_start`, `text`, `tool_use`,
`step_finish`, `error`), so this adapter is `adapters.opencode` under its own provider
name: adapters.opencode.run says how those lines are read. Kilo's `kilo acp` mode is the
`acp` provider's.

| runtime (recordings) | releases verified | written against |
| --- | --- | --- |
| `kilo-run-json` (`kilo run --format json`) | 7.7.7 | the recordings (Kilo publishes no schema) |

What the run output cannot say, and how it is read
* No deltas and no reasoning: each text part arrives whole, as one synthetic
  `content.delta` before its `item.completed`.
* No approvals: with `--auto` every tool runs. Without it a call that needs permission is
  refused by the command itself: the tool part ends in error, then an `error` line with a
  plain string; the turn fails with that message. No request is invented.
* An interrupt prints nothing: the turn stays open until the worker's idle close.
* The release is not on the wire.

Kilo's own additions (`step_finish.part.metrics`, `time.elapsed`, a tool's
`metadata.approval`) are carried in the events' native payloads, not read.
"""

from __future__ import annotations

from adapters.opencode.state import State
from adapters.opencode.translator import IGNORED as IGNORED
from adapters.opencode.translator import message_id as message_id
from adapters.opencode.translator import translate as translate

provider = "kilo"
raw_source = "kilo.run-json"

state_type = State


def initial() -> State:
    return State()
