"""The session summary (topics.sessions) as a pure function of a session's canonical
events: `summarize(previous, events)` folds one record's events into the stored part
of the summary so far (topics.sessions.SummaryState), in one pass, one new value per
call (not per event: a record's deltas cost a comparison each); `topics.sessions.record`
adds what the last event says when it is published.

Counts and sums only, so that its size does not grow with the session.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from msgspec import UNSET

from topics.sessions import SummaryState

#: The event types that change the stored part of the summary.
_COUNTED = frozenset({
    "session.configured", "session.state.changed", "session.exited",
    "thread.metadata.updated", "turn.started", "turn.completed", "turn.aborted",
    "request.opened", "request.resolved", "user-input.requested", "user-input.resolved",
})


def summarize(previous: SummaryState | None, events: Sequence[Any]) -> SummaryState | None:
    """The stored summary after `events` (one session's, in seq order) given the one
    before them (None: the session's first events). Returns `previous` itself when no
    event changes it (a record of deltas)."""
    counted = [e for e in events if e.__struct_config__.tag in _COUNTED]
    if previous is not None and not counted:
        return previous
    if not events:
        return previous
    s = previous if previous is not None else SummaryState(firstActivity=events[0].createdAt)
    state, version, name, model = s.state, s.runtimeVersion, s.runtimeName, s.model
    turns, turn_open, requests = s.turns, s.turnOpen, s.openRequests
    tokens, cost, unpriced = list(s.tokens), s.costUsd, s.unpricedTurns
    for e in counted:
        tag, p = e.__struct_config__.tag, e.payload
        if tag == "turn.started":
            turns, turn_open = turns + 1, True
            if p.model is not UNSET:
                model = p.model
        elif tag == "turn.completed":
            turn_open = False
            if p.tokens is not UNSET:
                t = p.tokens
                for n, v in enumerate((t.input, t.cachedInput, t.cacheWrite, t.output,
                                       t.reasoningOutput)):
                    tokens[n] += v
            if p.cost is not UNSET:
                if p.cost.usd is not UNSET:
                    cost += p.cost.usd
                elif p.cost.source == "unpriced":
                    unpriced += 1
                if p.cost.model is not UNSET:
                    model = p.cost.model
        elif tag == "turn.aborted":
            turn_open = False
        elif tag in ("request.opened", "user-input.requested"):
            requests += 1
        elif tag in ("request.resolved", "user-input.resolved"):
            requests = max(requests - 1, 0)
        elif tag == "session.state.changed":
            state = p.state
        elif tag == "session.exited":
            state = "exited"
        else:  # session.configured, thread.metadata.updated
            if p.runtimeVersion is not UNSET:
                version = p.runtimeVersion
            if tag == "session.configured" and p.runtimeName is not UNSET:
                name = p.runtimeName
    return SummaryState(
        firstActivity=s.firstActivity, state=state, runtimeVersion=version,
        runtimeName=name, model=model, turns=turns, turnOpen=turn_open,
        openRequests=requests, tokens=(tokens[0], tokens[1], tokens[2], tokens[3], tokens[4]),
        costUsd=cost, unpricedTurns=unpriced)
