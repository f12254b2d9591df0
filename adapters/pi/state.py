"""pi: the adapter's stored state (a session table value).

Kept apart from the translator module, which may be compiled with mypyc: mypyc drops
the class keywords (frozen, kw_only) these msgspec structs are declared with."""

from __future__ import annotations

from typing import Any

from adapters.core.contract import Stored
from topics.usage import TokenUsage


class Tool(Stored, frozen=True, kw_only=True):
    """A tool call from its `toolcall_end` (or execution start) to its execution's end."""

    name: str  # normalised
    # The call's arguments, kept because tool_execution_end does not repeat them.
    # Bounded by one model response, held only until the call ends.
    input: Any = None


class State(Stored, frozen=True, kw_only=True):
    started: bool = False  # session.started emitted
    session: str | None = None  # the json mode's `session` header id
    model: str | None = None
    turns: int = 0  # turns started so far (the ordinal names the turn)
    turnOpen: bool = False
    messages: int = 0  # messages so far (the ordinal names their items)
    # the blocks of the assistant message streaming now: contentIndex -> "text" |
    # "thinking" while the block streams, "" once it ended
    blocks: dict[str, str] = {}
    tools: dict[str, Tool] = {}
    error: str | None = None  # the last model call's errorMessage (stopReason error)
    aborted: bool = False  # the last model call was aborted
    retrying: bool = False  # between auto_retry_start and the loop that follows
    tokens: TokenUsage | None = None  # this turn's, summed over its model calls
    cost: float | None = None  # this turn's reported cost, summed likewise
    total: TokenUsage | None = None  # the thread's running total
