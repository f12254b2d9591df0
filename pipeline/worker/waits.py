"""What each session waits on, and since when: the worker's stall watch.

A session waits on the model (a turn open, no tool running), on a tool (a tool item
started and not completed), on an approval (a request or a question opened and not
resolved), or on its user (no turn open: `idle`, never a stall). canonflow reads it from
the canonical events it publishes, never from a runtime's protocol: the session's stored
state already follows the open turn and items (adapters.core Session.turn, .open), and
`Watch`, kept in the session's table value, counts the open requests.

Each normalize agent keeps, per session of its tables, what it waits on and the worker's
clock at its last event (`Waits`: one small tuple per session, whatever the session's
length). Its stall scan (pipeline.worker.stall) reads only that: a tick costs one tuple
look per session, and a session that waits past its threshold gets one synthetic
`session.state.changed` (health "stalled"); its next event is preceded by another
(health "recovered"), made by the normalizer (pipeline.worker.normalize).

Nothing here imports asyncio: the normalizer and the tests use it as it is.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

import msgspec

from topics.canonical import (
    RequestOpened,
    RequestResolved,
    SessionExited,
    TurnAborted,
    TurnCompleted,
    UserInputRequested,
    UserInputResolved,
)

MODEL: Final = "model"
TOOL: Final = "tool"
APPROVAL: Final = "approval"
#: No turn, tool or request open: the session waits on its user, which is never a stall.
IDLE: Final = "idle"
#: The item types of a tool call: while one is open, the session waits on the tool.
TOOL_ITEMS: Final = frozenset({"command_execution", "file_change", "mcp_tool_call",
                               "dynamic_tool_call", "collab_agent_tool_call", "web_search",
                               "image_view"})
_OPENS: Final = (RequestOpened, UserInputRequested)
_RESOLVES: Final = (RequestResolved, UserInputResolved)
#: After these no request of the turn is waited on any more (one the runtime dropped
#: without a resolution would otherwise keep the session "waiting on approval").
_ENDS: Final = (TurnCompleted, TurnAborted, SessionExited)


class Watch(msgspec.Struct, frozen=True, array_like=True, omit_defaults=True):
    """The stall watch's part of a session's table value (normalize.SessionEntry):
    `requests` opened and not resolved (a count, never a list); `stalled`, what the
    session was said to be stalled on ("" when it was not), and `sinceMs`, the worker's
    wall clock at the session's last event before that stall (the recovery's
    `waitedMs` counts from it). Stored, so that whichever worker translates the
    session's next record says it recovered."""

    requests: int = 0
    stalled: str = ""
    sinceMs: int = 0


def open_requests(events: Iterable[Any], requests: int) -> int:
    """The requests left open after `events`, `requests` being open before them."""
    for ev in events:
        if isinstance(ev, _OPENS):
            requests += 1
        elif isinstance(ev, _RESOLVES):
            requests = max(0, requests - 1)
        elif isinstance(ev, _ENDS):
            requests = 0
    return requests


def waiting_on(turn: str | None, items: Iterable[str], requests: int) -> str:
    """What a session waits on, from its open turn, the types of its open items and its
    open requests: APPROVAL before TOOL before MODEL (an approval is asked for a tool
    that is already started), IDLE when nothing is open."""
    if requests > 0:
        return APPROVAL
    for item_type in items:
        if item_type in TOOL_ITEMS:
            return TOOL
    return MODEL if turn is not None else IDLE


def state_label(on: str, stalled: bool) -> str:
    """The session's state as the gauge says it: idle, model, tool, approval, or
    stalled_<model|tool|approval>."""
    return f"stalled_{on}" if stalled else on


class Waits:
    """Per session of one normalize agent's tables: (what it waits on, the worker's
    monotonic clock at its last event, is it said to be stalled), and how many sessions
    are in each state (`counts`, kept as entries change, so the gauge costs nothing
    per session at a scrape)."""

    def __init__(self) -> None:
        self.entries: dict[bytes, tuple[str, float, bool]] = {}
        self.counts: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self.entries)

    def __contains__(self, key: bytes) -> bool:
        return key in self.entries

    def get(self, key: bytes) -> tuple[str, float, bool] | None:
        return self.entries.get(key)

    def put(self, key: bytes, on: str, since: float, stalled: bool = False) -> None:
        old = self.entries.get(key)
        if old is not None:
            self._count(state_label(old[0], old[2]), -1)
        self.entries[key] = (on, since, stalled)
        self._count(state_label(on, stalled), 1)

    def drop(self, key: bytes) -> None:
        old = self.entries.pop(key, None)
        if old is not None:
            self._count(state_label(old[0], old[2]), -1)

    def keep_only(self, live: set[bytes]) -> None:
        """Forget the sessions not in `live` (a rebalance moved them away)."""
        for key in [k for k in self.entries if k not in live]:
            self.drop(key)

    def shift(self, seconds: float) -> None:
        """Count `seconds` out of every wait (the worker could not publish meanwhile: its
        sessions' events were held back by it, not by their runtimes)."""
        for key, (on, since, stalled) in self.entries.items():
            self.entries[key] = (on, since + seconds, stalled)

    def overdue(self, now: float, limits: dict[str, float]) -> list[bytes]:
        """The sessions not said stalled yet whose wait is at least its limit at `now`
        (a limit of 0 or less, or none, never). One look per session."""
        out = []
        for key, (on, since, stalled) in self.entries.items():
            if not stalled:
                limit = limits.get(on, 0.0)
                if limit > 0 and now - since >= limit:
                    out.append(key)
        return out

    def _count(self, label: str, n: int) -> None:
        left = self.counts.get(label, 0) + n
        if left:
            self.counts[label] = left
        else:
            self.counts.pop(label, None)
