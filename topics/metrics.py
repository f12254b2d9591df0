"""The fleet-metrics record (`agents.metrics`): what one window saw of one provider and
model, on one partition.

The fleet stage (pipeline.fleet) counts canonical events in event-time windows:
tumbling 1 minute (`tumbling-1m`) and hopping 5 minutes advancing by 1 minute
(`hopping-5m`). Each partition of agents.canonical is counted on its own, with no
repartitioning, so a window's fleet-wide value is the SUM of its records over
`partition`. The topic is an upsert stream: the record key is
`<window>|<provider>|<model>|<windowStartMs>|<partition>`, every update of a window
carries its whole value so far (not a delta), a consumer keeps the last record per
key, and the last record of a window has `closed: true`.
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec
from msgspec import Meta, Struct

FLEET_SCHEMA_VERSION = 1

WindowKind = Literal["tumbling-1m", "hopping-5m"]


class FleetMetrics(Struct, frozen=True, kw_only=True):
    """Counts of one window (`windowStartMs` inclusive to `windowEndMs` exclusive, epoch
    ms of the events' time) for one provider and model on one partition.

    `model` is the session's model as its last turn.started (or model.rerouted)
    named it, "unknown" before any. Turns: started, and ended as completed, failed or
    interrupted (interrupted, cancelled, aborted). Tool calls: item.started of tool
    items by normalised tool name. Approvals: request.opened / request.resolved of
    *_approval requests; denied = a decision starting with deny, decline or reject;
    `approvalDecisionMsSum` / `approvalDecisions` is the time from opening to
    decision, for the decisions whose opening this stage saw. Tokens and cost: from
    turn.completed (`usage`, in each runtime's shape, and `totalCostUsd`). Errors:
    runtime.error by `class`.
    """

    schemaVersion: Annotated[int, Meta(description="The fleet-metrics record's version, 1.")]
    window: Annotated[WindowKind, Meta(description=(
        "The window's kind: tumbling-1m (1 minute) or hopping-5m (5 minutes, advancing by "
        "1)."))]
    windowStartMs: Annotated[int, Meta(description=(
        "The window's start, inclusive, epoch milliseconds of the events' createdAt."))]
    windowEndMs: Annotated[int, Meta(description=(
        "The window's end, exclusive, epoch milliseconds."))]
    provider: Annotated[str, Meta(description="The runtime counted.")]
    model: Annotated[str, Meta(description=(
        "The model counted: the session's model as its last turn.started (or "
        "model.rerouted) named it; unknown before any."))]
    partition: Annotated[int, Meta(description=(
        "The agents.canonical partition counted: a fleet-wide value is the sum over "
        "partitions."))]
    closed: Annotated[bool, Meta(description=(
        "True on the window's last record (its final value); false while it can still "
        "change."))] = False
    turnsStarted: Annotated[int, Meta(description="turn.started events in the window.")] = 0
    turnsCompleted: Annotated[int, Meta(description="Turns that ended completed.")] = 0
    turnsFailed: Annotated[int, Meta(description="Turns that ended failed.")] = 0
    turnsInterrupted: Annotated[int, Meta(description=(
        "Turns that ended interrupted, cancelled or aborted."))] = 0
    toolCalls: Annotated[dict[str, int], Meta(description=(
        "Tool items started, by normalised tool name (Bash, Read, ...)."))] = {}
    approvalsRequested: Annotated[int, Meta(description=(
        "Approval requests opened (request.opened of *_approval requests)."))] = 0
    approvalsResolved: Annotated[int, Meta(description="Approval requests resolved.")] = 0
    approvalsDenied: Annotated[int, Meta(description=(
        "Approvals resolved with a decision starting with deny, decline or reject."))] = 0
    approvalDecisions: Annotated[int, Meta(description=(
        "Resolved approvals whose opening this stage saw (the count behind "
        "approvalDecisionMsSum)."))] = 0
    approvalDecisionMsSum: Annotated[int, Meta(description=(
        "Milliseconds from opening to decision, summed over approvalDecisions: divide for "
        "the mean."))] = 0
    approvalDecisionMsMax: Annotated[int, Meta(description=(
        "The longest time from opening to decision, milliseconds."))] = 0
    tokensIn: Annotated[int, Meta(description=(
        "Input tokens of the window's completed turns (from turn.completed `usage`, in "
        "each runtime's shape)."))] = 0
    tokensOut: Annotated[int, Meta(description=(
        "Output tokens of the window's completed turns."))] = 0
    costUsd: Annotated[float, Meta(description=(
        "Cost of the window's completed turns in US dollars (from turn.completed "
        "totalCostUsd)."))] = 0.0
    errors: Annotated[dict[str, int], Meta(description=(
        "runtime.error events by `class` (provider_error, transport_error, ...)."))] = {}


encode_fleet_metrics = msgspec.json.Encoder().encode
decode_fleet_metrics = msgspec.json.Decoder(FleetMetrics).decode
