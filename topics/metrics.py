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

from typing import Literal

import msgspec
from msgspec import Struct

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

    schemaVersion: int
    window: WindowKind
    windowStartMs: int
    windowEndMs: int
    provider: str
    model: str
    partition: int
    closed: bool = False
    turnsStarted: int = 0
    turnsCompleted: int = 0
    turnsFailed: int = 0
    turnsInterrupted: int = 0
    toolCalls: dict[str, int] = {}
    approvalsRequested: int = 0
    approvalsResolved: int = 0
    approvalsDenied: int = 0
    approvalDecisions: int = 0
    approvalDecisionMsSum: int = 0
    approvalDecisionMsMax: int = 0
    tokensIn: int = 0
    tokensOut: int = 0
    costUsd: float = 0.0
    errors: dict[str, int] = {}


encode_fleet_metrics = msgspec.json.Encoder().encode
decode_fleet_metrics = msgspec.json.Decoder(FleetMetrics).decode
