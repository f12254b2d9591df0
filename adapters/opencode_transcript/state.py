"""OpenCode's database: the adapter's stored state (a session table value, encoded as arrays).

Kept apart from the translator module, which may be compiled with mypyc: mypyc drops
the class keywords (frozen, kw_only) these msgspec structs are declared with."""

from __future__ import annotations

from adapters.core.contract import HighWater, Stored
from adapters.opencode.state import State as LiveState


class State(Stored, frozen=True, kw_only=True):
    """Bounded: two short rings of message ids (opencode_transcript._RING) and a mark
    (its `key` only) beside the bus translator's own state."""

    #: the bus translator's state (adapters.opencode), fed the event rows as bus events
    live: LiveState = LiveState()
    #: assistant messages whose completion ended or continued a turn (OpenCode writes a
    #: message's row again after it completed: that must not end a turn twice)
    done: tuple[str, ...] = ()
    #: assistant messages with a tool call the user refused: OpenCode stops the turn there
    refused: tuple[str, ...] = ()
    #: the greatest event `seq` translated (translator, "Rewritten databases"). Last, as
    #: a stored field added later must be.
    mark: HighWater = HighWater()
