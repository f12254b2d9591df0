"""The session summary (topics.sessions.SessionSummary) as a pure function of a
session's canonical events: `summarize(previous, events)` folds one record's events
into the summary so far, in one pass, one new summary per call (not per event: a
record's deltas cost a comparison each).

Counts and sums only, so that its size does not grow with the session.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from msgspec import UNSET

from topics.sessions import SessionSummary, StoredSummary
from topics.usage import add

#: The event types that change more than the summary's last seq and activity.
_COUNTED = frozenset({
    "session.configured", "session.state.changed", "session.exited",
    "thread.metadata.updated", "turn.started", "turn.completed", "turn.aborted",
    "request.opened", "request.resolved", "user-input.requested", "user-input.resolved",
})


def summarize(previous: SessionSummary | None, events: Sequence[Any], *,
              closing: bool = False) -> SessionSummary | None:
    """The summary after `events` (one session's, in seq order) given the summary before
    them (None: the session's first events). `closing`: these are the events that close
    it for idleness (`closedAt` is their time). Returns `previous` when there are none,
    else a StoredSummary (the stored state's form; topics.sessions.published gives the
    topic's)."""
    if not events:
        return previous
    last = events[-1]
    s = previous if previous is not None else SessionSummary(
        sessionId=last.sessionId, provider=last.provider, firstActivity=events[0].createdAt,
        lastActivity=last.createdAt, lastSeq=0, lastEventId="")
    state, version, name, model = s.state, s.runtimeVersion, s.runtimeName, s.model
    turns, turn_open, requests = s.turns, s.turnOpen, s.openRequests
    tokens, cost, unpriced = s.tokens, s.costUsd, s.unpricedTurns
    for e in events:
        tag = e.__struct_config__.tag
        if tag not in _COUNTED:
            continue
        p = e.payload
        if tag == "turn.started":
            turns, turn_open = turns + 1, True
            if p.model is not UNSET:
                model = p.model
        elif tag == "turn.completed":
            turn_open = False
            if p.tokens is not UNSET:
                tokens = add(tokens, p.tokens)
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
    return StoredSummary(
        sessionId=s.sessionId, provider=s.provider, state=state, runtimeVersion=version,
        runtimeName=name, model=model, turns=turns, turnOpen=turn_open,
        openRequests=requests, tokens=tokens,
        costUsd=cost, unpricedTurns=unpriced, firstActivity=s.firstActivity,
        lastActivity=last.createdAt, lastSeq=last.seq, lastEventId=last.eventId,
        closedAt=last.createdAt if closing else s.closedAt)
