"""GitHub Copilot CLI: the adapter's stored state (a session table value).

Kept apart from the translator module, which may be compiled with mypyc: mypyc drops
the class keywords (frozen, kw_only) these msgspec structs are declared with."""

from __future__ import annotations

from typing import Any

from adapters.core.contract import Stored


class Tool(Stored, frozen=True, kw_only=True):
    """A tool call from its request (or its execution start) to its completion."""

    name: str  # normalised
    native: str  # Copilot's own name
    # The call's arguments, kept because tool.execution_complete does not repeat them.
    # Bounded by one model response, held only until the call completes.
    input: Any = None


class State(Stored, frozen=True, kw_only=True):
    started: bool = False  # session.started emitted
    turns: int = 0  # turns started so far (the ordinal names the turn)
    turnOpen: bool = False
    model: str | None = None
    items: int = 0  # user messages without a messageId so far
    # assistant texts and reasonings streaming: native id -> "text" | "reasoning"
    open: dict[str, str] = {}
    tools: dict[str, Tool] = {}
    error: str | None = None  # this turn's session.error
    aborted: bool = False  # this turn was interrupted (agent.interrupted, abort)
