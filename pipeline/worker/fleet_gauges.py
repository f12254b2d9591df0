"""The fleet's current windows as Prometheus gauges, and the stage's own counters
(late, clamped, folded, absurd, unpriced and uncounted events)."""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from typing import Any, Protocol

from pipeline.ops.metrics import WorkerMetrics
from pipeline.ops.prometheus import OTHER, Counter, Gauge, Labels, Registry
from pipeline.worker.fleet_counts import (
    HOPPING,
    MAX_MODELS,
    MAX_TURN_COST_USD,
    MAX_TURN_TOKENS,
    MINUTE_MS,
    TUMBLING,
    Group,
    hopping_window,
)
from topics.metrics import FleetMetrics

_W = ("window", "provider", "model")
#: (the name after canonflow_fleet_, its help, its labels) of each gauge of the windows.
GAUGES: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("turns", "Turns in the current window, by state (started, completed, failed, "
              "interrupted).", (*_W, "state")),
    ("tool_calls", "Tool calls started in the current window, by normalised tool name.",
     (*_W, "tool")),
    ("approvals", "Approval requests in the current window: requested, resolved, "
                  "denied.", (*_W, "outcome")),
    ("approval_decision_seconds_summed", "Seconds from approval request to decision, "
                                      "summed over the current window's decisions.", _W),
    ("approval_decision_seconds_max", "Longest approval decision in the current "
                                      "window, seconds.", _W),
    ("approval_decisions", "Approval decisions with a known request time in the "
                           "current window.", _W),
    ("tokens", "Tokens reported by turn.completed in the current window "
               "(direction in, out).", (*_W, "direction")),
    ("cost_usd", "Cost of the turns completed in the current window, USD: the "
                 "runtime's own, else computed from their tokens and model "
                 "(turn.completed `cost`; unpriced turns add nothing).", _W),
    ("errors", "runtime.error events in the current window, by class.",
     (*_W, "error_class")),
)


class Panes(Protocol):
    """What the gauges read of the stage (pipeline.worker.fleet.FleetStage)."""

    windows: Any

    def index(self) -> dict[Group, dict[int, bytes]]: ...

    def clock(self, partition: int, event: Any = None) -> int: ...

    def decoded(self, keys: dict[int, bytes]) -> dict[int, FleetMetrics]: ...


class FleetGauges:
    """The current windows as Prometheus gauges, computed from the pane table at
    scrape time: for each partition this worker holds, the tumbling-1m window holding
    the partition's stream time, and the hopping-5m window that holds it and started
    earliest (the last five minutes), summed per provider and model. Across workers,
    sum them. Only the panes of those windows are decoded, once per scrape; the
    models are the table's (at most MAX_MODELS and "other")."""

    def __init__(self, registry: Registry, stage: Panes | None):
        self.stage = stage
        self.registry = registry
        self._cache: tuple[int, dict[str, dict[Labels, float]]] = (-1, {})
        self.gauges: dict[str, Gauge] = {}
        for short, help, labels in GAUGES:
            self.gauges[short] = registry.add(Gauge(
                f"canonflow_fleet_{short}", help, labels, collect=self._collector(short),
                fold=max if short.endswith("_max") else sum))
        self.open_panes = registry.add(Gauge(
            "canonflow_fleet_open_panes",
            "One-minute panes held in this worker's fleet table (each in up to six open "
            "windows).", collect=self._collector("_open")))
        self.late = registry.add(Counter(
            "canonflow_fleet_late_events_total",
            "Canonical events that arrived after their minute had closed (not counted)."))
        self.clamped = registry.add(Counter(
            "canonflow_fleet_clamped_times_total",
            "Canonical events counted at the worker's clock instead of their own time: "
            "a time further ahead than half the grace (future), or none (missing).",
            ["direction"]))
        self.folded = registry.add(Counter(
            "canonflow_fleet_models_folded_total",
            f"Canonical events counted under model \"{OTHER}\": the worker's fleet table "
            f"already held panes of {MAX_MODELS} other models.", ["provider"]))
        self.absurd = registry.add(Counter(
            "canonflow_fleet_absurd_values_total",
            f"Token counts or costs of a turn.completed that no turn has (negative, above "
            f"{MAX_TURN_TOKENS:.0e} tokens or {MAX_TURN_COST_USD:,.0f} USD, not finite): "
            "left out of the windows, the event's other counts kept.", ["field"]))
        self.unpriced = registry.add(Counter(
            "canonflow_unpriced_turns_total",
            "Turns whose cost is unpriced: the runtime reported none and no price is known "
            "for the model (counted here, never as a cost of 0).", ["provider", "model"]))
        self.uncounted = registry.add(Counter(
            "canonflow_fleet_uncounted_events_total",
            "Canonical events the fleet stage failed to count (an error on that event "
            "alone: the batch's other events are counted)."))

    def _collector(self, short: str) -> Callable[[], dict[Labels, float]]:
        return lambda: self._values().get(short, {})

    def _values(self) -> dict[str, dict[Labels, float]]:
        """The gauges' values, computed once per scrape (each gauge reads them)."""
        scrape, values = self._cache
        if scrape == self.registry.scrapes:
            return values
        values = contextvars.Context().run(self._compute)  # no current event: all partitions
        self._cache = (self.registry.scrapes, values)
        return values

    def _compute(self) -> dict[str, dict[Labels, float]]:
        out: dict[str, dict[Labels, float]] = {}
        stage = self.stage
        if stage is None or stage.windows is None:
            return out
        index = stage.index()
        kept = _kept_models(index)
        n_panes = 0
        for (provider, model, p), keys in index.items():
            n_panes += len(keys)
            model = model if model in kept else OTHER
            clock = stage.clock(p)
            minute = clock - clock % MINUTE_MS
            panes = stage.decoded({m: k for m, k in keys.items()
                                   if minute - 4 * MINUTE_MS <= m <= minute})
            current = {TUMBLING: [panes[minute]] if minute in panes else [],
                       HOPPING: [panes[m] for m in sorted(panes)]}
            for kind, members in current.items():
                if members:
                    _add_window(out, (kind, provider, model),
                                hopping_window(members, 0, False, members[0]))
        out["_open"] = {(): float(n_panes)}
        return out


def _kept_models(index: dict[Group, dict[int, bytes]]) -> set[str]:
    """The MAX_MODELS models with the most panes: the models of panes another worker
    wrote (before a rebalance) come on top of this worker's, and the rest are "other"."""
    panes_of: dict[str, int] = {}
    for (_, model, _), keys in index.items():
        if model != OTHER:
            panes_of[model] = panes_of.get(model, 0) + len(keys)
    return set(sorted(panes_of, key=lambda m: (-panes_of[m], m))[:MAX_MODELS])


def _add_window(out: dict[str, dict[Labels, float]], base: Labels, m: FleetMetrics) -> None:
    """Add one window's counts to the gauges' values, labelled (kind, provider, model)."""

    def add(short: str, labels: Labels, value: float) -> None:
        d = out.setdefault(short, {})
        d[labels] = d.get(labels, 0) + value

    for state, n in (("started", m.turnsStarted), ("completed", m.turnsCompleted),
                     ("failed", m.turnsFailed), ("interrupted", m.turnsInterrupted)):
        add("turns", (*base, state), n)
    for tool, n in m.toolCalls.items():
        add("tool_calls", (*base, tool), n)
    for outcome, n in (("requested", m.approvalsRequested),
                       ("resolved", m.approvalsResolved),
                       ("denied", m.approvalsDenied)):
        add("approvals", (*base, outcome), n)
    add("approval_decision_seconds_summed", base, m.approvalDecisionMsSum / 1000)
    longest = out.setdefault("approval_decision_seconds_max", {})
    longest[base] = max(longest.get(base, 0.0), m.approvalDecisionMsMax / 1000)
    add("approval_decisions", base, m.approvalDecisions)
    add("tokens", (*base, "in"), m.tokensIn)
    add("tokens", (*base, "out"), m.tokensOut)
    add("cost_usd", base, m.costUsd)
    for cls, n in m.errors.items():
        add("errors", (*base, cls), n)


def metric_names() -> list[str]:
    """The name of every metric a worker exports (with the fleet stage on). Here, not in
    pipeline.ops.metrics, which knows no stage: the fleet's gauges are the stage's."""
    registry = WorkerMetrics().registry
    FleetGauges(registry, None)
    return list(registry.metrics)
