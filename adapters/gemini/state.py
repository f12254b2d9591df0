"""Gemini CLI: the adapter's stored state (a session table value, encoded as arrays).

Kept apart from the translator module, which may be compiled with mypyc: mypyc drops
the class keywords (frozen, kw_only) these msgspec structs are declared with."""

from __future__ import annotations

from typing import Any

from adapters.core.contract import Stored
from topics.usage import TokenUsage


class Tool(Stored, frozen=True, kw_only=True):
    """A tool_use waiting for its tool_result."""

    name: str  # normalised
    # The call's parameters (as large as the model wrote them: a written file's content),
    # kept whole because tool_result does not repeat them. Not spooled: bounded by one
    # model response, and held only from the tool_use to its tool_result, which
    # stream-json separates by that response's other lines at most (it writes nothing
    # while a tool runs), so it never grows with the session.
    input: Any = None


class Reply(Stored, frozen=True, kw_only=True):
    """The assistant message that delta chunks are appended to (its text is the item's
    `assistant_text` stream, spooled by the conversation core, never held here)."""

    n: int  # session-wide item ordinal (names the item)


class State(Stored, frozen=True, kw_only=True):
    session: str | None = None  # init.session_id
    started: bool = False  # session.started emitted
    turns: int = 0  # turns started so far (the ordinal names the turn)
    turnOpen: bool = False
    items: int = 0  # message items so far
    reply: Reply | None = None
    tools: dict[str, Tool] = {}
    errorLine: str | None = None  # the first severity-error line of this turn
    # the thread's running token total (topics.usage): its runs' results so far
    total: TokenUsage | None = None
