"""Claude Code transcripts: the adapter's stored state (a session table value, encoded
as arrays).

Kept apart from the translator module, which may be compiled with mypyc: mypyc drops
the class keywords (frozen, kw_only) these msgspec structs are declared with."""

from __future__ import annotations

import msgspec

from adapters.claude.state import State as LiveState
from adapters.core.contract import HighWater, Stored


class State(Stored, frozen=True, kw_only=True):
    #: the live adapter's state (adapters.claude), which its functions advance: the
    #: transcript's rows are read as the stream-json lines they stand for
    live: LiveState = msgspec.field(default_factory=LiveState)
    configured: bool = False  # session.configured emitted (from the first row's version)
    #: message.id of the message that stopped the turn (stop_reason end_turn, ...): the
    #: turn ends at the next row that can only come after it (translator, "Turns")
    ending: str | None = None
    stop: str | None = None  # that message's stop_reason
    counted: str | None = None  # message.id whose usage `usage` holds already
    usage: dict[str, int] = {}  # the turn's token counts, summed over its messages
    #: the time of the last row that had one (ms): rows without (cost-state) and the
    #: turn ends they cause are stamped with it, never with the record's time (a
    #: shipper sends none, so that would read 1970). Last: an added stored field.
    lastMs: int = 0
    #: how far the file has been translated, by the rows' times (translator, "Rewritten
    #: files"). Last, as a stored field added later must be.
    mark: HighWater = HighWater()
