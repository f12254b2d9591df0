"""The session summary (`agents.sessions`): the latest state of each session, keyed by
session id on a compacted topic, so that a dashboard or a UI lists sessions by reading
this topic alone (docs "Session summaries").

The worker publishes a session's summary with the batch of canonical events that
changed it (at most once per batch per session), and keeps it in the session's stored
state: the summary on the topic is never ahead of the events published. Its size does
not grow with the session: counts and sums, never lists.

When a session is closed for idleness (its state removed), its last summary says
`state` "exited" and `closedAt`; after the retention the operator sets
(CANONFLOW_SESSIONS_RETENTION) a tombstone (a null value) removes it.

Evolution as on agents.canonical: new fields get defaults, nothing is renamed or
retyped, readers ignore unknown fields.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
from msgspec import Meta, Struct

from topics.canonical import SCHEMA_VERSION
from topics.usage import TokenUsage


class SessionSummary(Struct, frozen=True, kw_only=True):
    """One session's summary so far.

    - `state`: the session's last `session.state.changed` state (starting, ready,
      running, waiting, stopped, error), "exited" after `session.exited`, "active"
      before the runtime said any.
    - `runtimeVersion`, `runtimeName`: the runtime's release and name where its stream
      says them (session.configured, thread.metadata.updated).
    - `model`: the model of the last turn that named one.
    - `turns`: turns started; `turnOpen`: one is under way.
    - `openRequests`: approvals and questions asked and not answered yet.
    - `tokens`: the session's token usage, the sum of its turns' `tokens`
      (topics.usage.TokenUsage); `costUsd`: the sum of its turns' `cost.usd`;
      `unpricedTurns`: turns with usage but no price (their cost is not in `costUsd`).
    - `firstActivity`, `lastActivity`: the `createdAt` of its first and last event.
    - `lastSeq`, `lastEventId`: its last event (the summary stands for every event up
      to it).
    - `closedAt`: when it was closed for idleness (the closing events' createdAt).
    """

    schemaVersion: Annotated[int, Meta(description=(
        "The contract's version, 1 (as on agents.canonical)."))] = SCHEMA_VERSION
    sessionId: Annotated[str, Meta(description="The session's id in the fleet (the record key).")]
    provider: Annotated[str, Meta(description="The runtime of the session.")]
    state: Annotated[str, Meta(description=(
        "The session's last state: starting, ready, running, waiting, stopped, error "
        "(from session.state.changed), exited after session.exited, active before the "
        "runtime said any."))] = "active"
    runtimeVersion: Annotated[str | None, Meta(description=(
        "The runtime's release where its stream says it; null otherwise."))] = None
    runtimeName: Annotated[str | None, Meta(description=(
        "The runtime's own name for itself where its protocol says it (ACP); null "
        "otherwise."))] = None
    model: Annotated[str | None, Meta(description=(
        "The model of the last turn that named one; null before any."))] = None
    turns: Annotated[int, Meta(description="Turns started so far.")] = 0
    turnOpen: Annotated[bool, Meta(description="True while a turn is under way.")] = False
    openRequests: Annotated[int, Meta(description=(
        "Approvals and questions asked and not answered yet."))] = 0
    tokens: Annotated[TokenUsage, Meta(description=(
        "The session's token usage: the sum of its turns' tokens (TokenUsage)."))] = TokenUsage()
    costUsd: Annotated[float, Meta(description=(
        "The session's cost in US dollars: the sum of its turns' cost.usd (unpriced turns "
        "not included)."))] = 0.0
    unpricedTurns: Annotated[int, Meta(description=(
        "Turns with token usage but no known price: their cost is missing from costUsd."))] = 0
    firstActivity: Annotated[str, Meta(description=(
        "The createdAt of the session's first event (RFC 3339 UTC)."))]
    lastActivity: Annotated[str, Meta(description="The createdAt of its last event.")]
    lastSeq: Annotated[int, Meta(description=(
        "The seq of its last event: the summary stands for every event up to it."))]
    lastEventId: Annotated[str, Meta(description="The eventId of that event.")]
    closedAt: Annotated[str | None, Meta(description=(
        "When canonflow closed the session for idleness (the closing events' createdAt); "
        "null while open."))] = None


class SummaryState(Struct, frozen=True, array_like=True):
    """What the session's stored state keeps of its summary (pipeline.worker.normalize
    SessionEntry, written with every record): only what the next events cannot give,
    without field names (about 70 bytes, where the whole named summary took 403). The
    session id, provider, last seq, last event id and last activity come from the last
    event published (`record`); `tokens` are TokenUsage's five counts in its order."""

    firstActivity: str
    state: str = "active"
    runtimeVersion: str | None = None
    runtimeName: str | None = None
    model: str | None = None
    turns: int = 0
    turnOpen: bool = False
    openRequests: int = 0
    tokens: tuple[int, int, int, int, int] = (0, 0, 0, 0, 0)
    costUsd: float = 0.0
    unpricedTurns: int = 0


def record(state: SummaryState, last: Any, closing: bool = False) -> SessionSummary:
    """The summary agents.sessions carries, from the stored part and the session's last
    event published (`closing`: it closed the session for idleness)."""
    i, c, w, o, r = state.tokens
    return SessionSummary(
        sessionId=last.sessionId, provider=last.provider, state=state.state,
        runtimeVersion=state.runtimeVersion, runtimeName=state.runtimeName,
        model=state.model, turns=state.turns, turnOpen=state.turnOpen,
        openRequests=state.openRequests,
        tokens=TokenUsage(input=i, cachedInput=c, cacheWrite=w, output=o,
                          reasoningOutput=r, total=i + o),
        costUsd=state.costUsd, unpricedTurns=state.unpricedTurns,
        firstActivity=state.firstActivity, lastActivity=last.createdAt, lastSeq=last.seq,
        lastEventId=last.eventId, closedAt=last.createdAt if closing else None)


encode_summary = msgspec.json.Encoder().encode
decode_summary = msgspec.json.Decoder(SessionSummary).decode
