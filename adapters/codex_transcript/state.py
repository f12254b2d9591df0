"""Codex rollouts: the adapter's stored state (a session table value, encoded as arrays).

Kept apart from the translator module, which may be compiled with mypyc: mypyc drops
the class keywords (frozen, kw_only) these msgspec structs are declared with."""

from __future__ import annotations

from typing import Any

from adapters.codex.state import State as LiveState
from adapters.core.contract import HighWater, Stored


class State(Stored, frozen=True, kw_only=True):
    """Bounded: `calls` holds the open tool calls of the open turn only (dropped when
    their output or the turn's end comes), `kinds` at most the handful of item types
    Codex has, `done` a short ring of ids, `ordinals` and `times` a bounded mark each
    (adapters.core.resent); no text is kept (the live state's streams hold none
    either)."""

    #: the app-server translator's state (adapters.codex), fed the v2 notifications
    #: the rollout's lines amount to
    live: LiveState = LiveState()
    thread: str | None = None  # session_meta's id, once the session is announced
    turn: str | None = None  # the open turn (task_started .. task_complete | turn_aborted)
    pending: bool = False  # its turn.started waits for turn_context, which names the model
    cwd: str | None = None  # the session's working directory (a command's, when it names none)
    lines: int = 0  # lines read: the ids of the items an older rollout does not name
    #: open tool calls by call id: the v2 item each started (its completion, when it
    #: comes as a bare output, keeps the command and arguments)
    calls: dict[str, Any] = {}
    #: item_completed types seen (0.171): the legacy events that repeat them are skipped
    kinds: tuple[str, ...] = ()
    #: the last items completed (translator._DONE_KEPT): one completed again adds nothing
    done: tuple[str, ...] = ()
    #: the greatest `ordinal` translated (translator, "Rewritten files"; `key` only)
    ordinals: HighWater = HighWater()
    #: how far the lines without an ordinal were translated, by their times (`key`: the
    #: latest time of any line translated)
    times: HighWater = HighWater()
