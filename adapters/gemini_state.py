"""Gemini CLI: the adapter's stored state (a session table value, encoded as arrays).

Kept apart from the translator module, which may be compiled with mypyc: mypyc drops
the class keywords (frozen, kw_only) these msgspec structs are declared with."""

from __future__ import annotations

from typing import Any

from adapters.contract import Stored


class Tool(Stored, frozen=True, kw_only=True):
    """A tool_use waiting for its tool_result."""

    name: str  # normalised
    input: Any = None


class Reply(Stored, frozen=True, kw_only=True):
    """The assistant message that delta chunks are appended to."""

    n: int  # session-wide item ordinal (names the item)
    text: str = ""


class State(Stored, frozen=True, kw_only=True):
    session: str | None = None  # init.session_id
    started: bool = False  # session.started emitted
    turns: int = 0  # turns started so far (the ordinal names the turn)
    turnOpen: bool = False
    items: int = 0  # message items so far
    reply: Reply | None = None
    tools: dict[str, Tool] = {}
    errorLine: str | None = None  # the first severity-error line of this turn
