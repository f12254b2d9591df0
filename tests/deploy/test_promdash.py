"""tests/deploy/promdash.py, the tool that draws the dashboard without Grafana: its
Grafana rules (variables, $__rate_interval, units) and a page that needs no network.
On a real Prometheus and worker: tests/pipeline/test_dashboard_live.py."""

from __future__ import annotations

import json
import re

import pytest

from tests.deploy import promdash
from tests.deploy.files import DASHBOARD


def test_rate_interval_follows_grafanas_rule():
    assert promdash.rate_interval(step=1, scrape_interval=1) == 4
    assert promdash.rate_interval(step=30, scrape_interval=1) == 31
    assert promdash.rate_interval(step=15, scrape_interval=15) == 60


def test_variables_and_builtins_are_substituted_longest_name_first():
    expr = ('sum(rate(m{provider=~"$provider", p="${provider}"}[$__rate_interval]))'
            " + $__interval + $providers")
    got = promdash.substitute(expr, {"provider": ".*"}, step=2, rate=4, window=90)
    assert got == 'sum(rate(m{provider=~".*", p=".*"}[4s])) + 2s + $providers'


@pytest.mark.parametrize("value, unit, text", [
    (1, "bool_yes_no", "Yes"), (0, "bool_yes_no", "No"), (0.00642, "s", "6.42 ms"),
    (95, "s", "1.58 min"), (1234, "short", "1.23 K"), (12, "short", "12"),
    (0.0112, "currencyUSD", "$0.0112"), (84.5, "ops", "84.5 ops/s"),
    (float("nan"), "s", "NaN"),
])
def test_values_are_written_in_the_panels_units(value, unit, text):
    assert promdash.fmt(value, unit) == text


def test_legends_follow_legend_format():
    labels = {"provider": "codex", "model": "gpt-5.5"}
    assert promdash.legend("{{provider}} {{ model }}", labels, "q") == "codex gpt-5.5"
    assert promdash.legend("", {"__name__": "up", "job": "x"}, "q") == 'up{job="x"}'
    assert promdash.legend(None, {}, "sum(up)") == "sum(up)"


def test_the_page_has_every_panel_and_loads_nothing_from_outside():
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    results = []
    for panel in promdash.panels(dashboard):
        for target in panel.get("targets", []):
            series = promdash.Series({"provider": "codex"},
                                     [(1000.0 + t, float(t % 7)) for t in range(0, 60, 2)])
            series.name = promdash.legend(target.get("legendFormat"), series.labels, "q")
            results.append(promdash.QueryResult(panel["id"], panel["title"], target["refId"],
                                                "range", target["expr"], target["expr"],
                                                "success", "", [series]))
    ev = promdash.Evaluation(dashboard, "http://127.0.0.1:9", 1000.0, 1060.0, 2.0, 4.0,
                             results, {"provider": ["codex"]})
    page = promdash.render_html(ev)
    graphs = [p for p in promdash.panels(dashboard) if p["type"] != "row"]
    assert page.count('class="panel"') == len(graphs)
    assert page.count('class="row"') == len(dashboard["panels"]) - len(graphs)
    assert page.count("<polyline") >= sum(p["type"] == "timeseries" for p in graphs)
    assert "<script" not in page and not re.search(r"\b(src|href)=|@import|url\(", page)
