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

    #: The fleet record's version.
    schemaVersion: int
    #: The window kind: tumbling-1m or hopping-5m.
    window: WindowKind
    #: The window's start (epoch ms, inclusive).
    windowStartMs: int
    #: The window's end (epoch ms, exclusive).
    windowEndMs: int
    #: The provider counted.
    provider: str
    #: The model counted ("unknown" before a turn names one).
    model: str
    #: The agents.canonical partition counted: sum over it for the fleet.
    partition: int
    #: True on the window's last record.
    closed: bool = False
    #: Turns started.
    turnsStarted: int = 0
    #: Turns completed.
    turnsCompleted: int = 0
    #: Turns failed.
    turnsFailed: int = 0
    #: Turns interrupted, cancelled or aborted.
    turnsInterrupted: int = 0
    #: Tool calls by normalised tool name.
    toolCalls: dict[str, int] = {}
    #: Approvals opened (request.opened of *_approval requests).
    approvalsRequested: int = 0
    #: Approvals resolved.
    approvalsResolved: int = 0
    #: Approvals denied, declined or rejected.
    approvalsDenied: int = 0
    #: How many decisions those times cover.
    approvalDecisions: int = 0
    #: The sum of the times from opening to decision (ms).
    approvalDecisionMsSum: int = 0
    #: The longest time from an approval's opening to its decision (ms).
    approvalDecisionMsMax: int = 0
    #: Input tokens of the turns completed.
    tokensIn: int = 0
    #: Output tokens of the turns completed.
    tokensOut: int = 0
    #: The turns' cost (USD).
    costUsd: float = 0.0
    #: runtime.error events by class.
    errors: dict[str, int] = {}


encode_fleet_metrics = msgspec.json.Encoder().encode
decode_fleet_metrics = msgspec.json.Decoder(FleetMetrics).decode
