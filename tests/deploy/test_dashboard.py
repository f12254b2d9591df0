"""deploy/grafana/canonflow.json: every panel queries the provisioned Prometheus, and
every metric (and label) a query names is one the worker exports.

The exported metrics come from the worker's metric registry (`pipeline.ops.metrics`), the
same definitions /metrics renders; tests/pipeline/test_metrics.py checks on a real
worker that its /metrics declares exactly those names.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest

from pipeline.ops.metrics import WorkerMetrics
from pipeline.ops.prometheus import Histogram, Metric
from pipeline.worker.fleet_gauges import FleetGauges, metric_names
from tests.deploy.files import DASHBOARD

#: Labels Prometheus adds to every scraped series.
TARGET_LABELS = {"job", "instance"}
_METRIC = re.compile(r"\b(?:canonflow|process)_[a-z0-9_]+\b")
_SELECTOR = re.compile(r"\b((?:canonflow|process)_[a-z0-9_]+)\s*\{([^}]*)\}")
_MATCHER = re.compile(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*\"")
_GROUPING = re.compile(r"\b(?:by|without)\s*\(([^)]*)\)")


@pytest.fixture(scope="module")
def dashboard() -> dict[str, Any]:
    return json.loads(DASHBOARD.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def exported() -> dict[str, Metric]:
    """Every series name the worker exports -> its metric (histograms: _bucket, _sum,
    _count too)."""
    registry = WorkerMetrics().registry
    FleetGauges(registry, None)
    names: dict[str, Metric] = {}
    for name, metric in registry.metrics.items():
        names[name] = metric
        if isinstance(metric, Histogram):
            for suffix in ("_bucket", "_sum", "_count"):
                names[name + suffix] = metric
    assert set(registry.metrics) == set(metric_names())
    return names


def panels(dashboard: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for panel in dashboard["panels"]:
        yield panel
        yield from panel.get("panels", [])  # collapsed rows hold their panels


def queries(dashboard: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(where, PromQL) for every panel target and template variable query."""
    for panel in panels(dashboard):
        for target in panel.get("targets", []):
            yield f"panel {panel['title']!r}", target["expr"]
    for var in dashboard.get("templating", {}).get("list", []):
        if var.get("type") == "query":
            query = var["query"]
            yield f"variable {var['name']}", query["query"] if isinstance(query, dict) else query


def test_the_dashboard_is_a_provisionable_grafana_dashboard(dashboard):
    assert dashboard["uid"] == "canonflow" and dashboard["title"]
    assert isinstance(dashboard["schemaVersion"], int)
    ids = [p["id"] for p in panels(dashboard)]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    for panel in panels(dashboard):
        grid = panel["gridPos"]
        assert 0 <= grid["x"] and grid["x"] + grid["w"] <= 24, panel["title"]


#: Every query's data source: the dashboard's `datasource` variable, never a uid, so the
#: dashboard imports into a Grafana whose Prometheus has any uid.
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}


def test_every_panel_queries_the_prometheus_the_datasource_variable_picks(dashboard):
    (variable,) = [v for v in dashboard["templating"]["list"] if v["type"] == "datasource"]
    assert variable["name"] == "datasource" and variable["query"] == "prometheus"
    assert not variable.get("current"), "the default data source, whatever its uid"
    graphs = [p for p in panels(dashboard) if p["type"] != "row"]
    assert len(graphs) >= 20
    for panel in graphs:
        assert panel["datasource"] == DATASOURCE, panel["title"]
        assert panel["targets"], f"{panel['title']} has no query"
        for target in panel["targets"]:
            assert target["datasource"] == DATASOURCE, panel["title"]
            assert target["expr"].strip(), panel["title"]
    for var in dashboard["templating"]["list"]:
        if var["type"] == "query":
            assert var["datasource"] == DATASOURCE, var["name"]
    # no uid anywhere but the variable's and Grafana's own annotations
    uids = set(re.findall(r'"uid": "([^"]*)"', DASHBOARD.read_text()))
    assert uids == {"canonflow", "${datasource}", "-- Grafana --"}, uids


def test_every_query_names_metrics_the_worker_exports(dashboard, exported):
    used = set()
    for where, expr in queries(dashboard):
        names = set(_METRIC.findall(expr))
        assert names, f"{where}: {expr!r} reads no canonflow metric"
        unknown = names - set(exported)
        assert not unknown, f"{where}: {sorted(unknown)} are not exported"
        used |= {exported[n].name for n in names}
    # the dashboard covers what the issue asks to watch
    for name in ("canonflow_native_messages_total", "canonflow_canonical_events_total",
                 "canonflow_consumer_lag", "canonflow_deadletters_total",
                 "canonflow_unknown_native_types_total", "canonflow_end_to_end_lag_seconds",
                 "canonflow_fleet_turns", "canonflow_fleet_tool_calls",
                 "canonflow_fleet_approvals", "canonflow_fleet_tokens",
                 "canonflow_fleet_cost_usd", "canonflow_fleet_errors"):
        assert name in used, f"no panel shows {name}"


def test_every_label_a_query_uses_is_one_its_metrics_carry(dashboard, exported):
    for where, expr in queries(dashboard):
        metrics = {exported[n] for n in _METRIC.findall(expr)}
        carried = set(TARGET_LABELS)
        for metric in metrics:
            carried |= set(metric.labelnames)
            if isinstance(metric, Histogram):
                carried.add("le")
        for name, matchers in _SELECTOR.findall(expr):
            labels = set(exported[name].labelnames) | TARGET_LABELS
            if name.endswith("_bucket"):
                labels.add("le")
            for label, _ in _MATCHER.findall(matchers):
                assert label in labels, f"{where}: {name} has no label {label!r}"
        for group in _GROUPING.findall(expr):
            for label in (x.strip() for x in group.split(",") if x.strip()):
                assert label in carried, f"{where}: no metric in {expr!r} has label {label!r}"
        for label in re.findall(r"label_values\([^,]+,\s*([a-z_]+)\)", expr):
            assert label in carried, f"{where}: label_values of a missing label {label!r}"
