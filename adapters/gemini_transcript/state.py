"""Gemini CLI chats: the adapter's stored state (a session table value, encoded as
arrays).

Kept apart from the translator module, which may be compiled with mypyc: mypyc drops
the class keywords (frozen, kw_only) these msgspec structs are declared with."""

from __future__ import annotations

from adapters.core.contract import HighWater, Stored
from adapters.gemini.state import Tool


class State(Stored, frozen=True, kw_only=True):
    session: str | None = None  # the header's sessionId (the thread)
    started: bool = False  # session.started emitted
    configured: bool = False  # session.configured emitted (from the header)
    context: bool = False  # the injected context (the first `$set` of messages) emitted
    turns: int = 0  # turns opened so far
    #: the open turn: its prompt's message id (or "#<n>" for a turn the file shows no
    #: prompt of); None when no turn is open
    turn: str | None = None
    prompt: bool = False  # the open turn has a prompt (its id is `turn`)
    model: str | None = None  # the last gemini message's model (the next turns' model)
    #: ids of the open turn's gemini messages; what the last one's first write carried
    seen: tuple[str, ...] = ()
    texted: bool = False
    thought: bool = False
    tokened: bool = False
    tools: dict[str, Tool] = {}  # tool calls started, not completed yet, by id
    done: tuple[str, ...] = ()  # tool calls completed in the open turn
    usage: dict[str, int] = {}  # the turn's `tokens`, summed over its messages
    #: how far the file has been translated, by its records' times (translator,
    #: "Rewritten files"). Last, as a stored field added later must be.
    mark: HighWater = HighWater()
