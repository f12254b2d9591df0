"""codex exec: the adapter's stored state (a session table value, encoded as arrays).

Kept apart from the translator module, which may be compiled with mypyc: mypyc drops
the class keywords (frozen, kw_only) these msgspec structs are declared with."""

from __future__ import annotations

from adapters.core.contract import Stored
from topics.usage import TokenUsage


class OpenItem(Stored, frozen=True):
    """An item started and not completed yet. A command's output streamed so far is its
    `command_output` stream (spooled by the conversation core), never held here."""

    itemType: str


class State(Stored, frozen=True, kw_only=True):
    thread: str | None = None  # provider thread id
    turns: int = 0  # turns started so far (the ordinal names the turn)
    turnOpen: bool = False
    started: bool = False  # session.started emitted
    items: dict[str, OpenItem] = {}
    # the thread's running total: the sum of its turns' tokens (None before the first),
    # and the ordinal of the turn last added to it (a repeated turn.completed adds
    # nothing). Last, as fields added to a stored array must be.
    total: TokenUsage | None = None
    totalTurn: int = 0
