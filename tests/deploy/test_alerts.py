"""deploy/prometheus/alerts.yml with Prometheus' own tool: promtool checks the rules
and runs their unit tests (deploy/prometheus/alerts_test.yml: series in, alerts out),
every alert has a test that fires it, and every alert says what, why and where its
runbook is (a section of docs/operating/runbook.md that exists). The promtool tests are skipped where
Debian's prometheus package (promtool) is not installed."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from pipeline.ops.prometheus import Histogram
from tests.deploy.files import DEPLOY, compose, load_yaml
from tests.deploy.test_dashboard import _GROUPING, _MATCHER, _METRIC, _SELECTOR, TARGET_LABELS
from tests.deploy.test_dashboard import exported as exported  # noqa: F401 (a fixture)

ALERTS = DEPLOY / "prometheus" / "alerts.yml"
ALERTS_TEST = DEPLOY / "prometheus" / "alerts_test.yml"
RUNBOOK = DEPLOY.parent / "docs" / "operating" / "runbook.md"
#: Every runbook_url is a section of the runbook page on the project's main branch.
RUNBOOK_BASE = "https://github.com/canonflow/canonflow/blob/main/docs/operating/runbook.md#"


@pytest.fixture
def promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        pytest.skip("promtool is missing: `apt-get install -y --no-install-recommends "
                    "prometheus` (.ci/run does)")
    return found


def alerts() -> list[dict[str, Any]]:
    return [rule for group in load_yaml(ALERTS)["groups"] for rule in group["rules"]
            if "alert" in rule]


def github_anchors(markdown: str) -> set[str]:
    """The anchors GitHub gives the headings of a Markdown file: lowercased, every
    character but letters, digits, `-`, `_` and spaces dropped, spaces made `-`; a
    repeated anchor gets `-1`, `-2`..."""
    seen: dict[str, int] = {}
    anchors = set()
    in_code = False
    for line in markdown.splitlines():
        if line.startswith("```"):
            in_code = not in_code
        m = re.match(r"(#{1,6}) +(.*?) *#* *$", line)
        if in_code or not m:
            continue
        slug = re.sub(r"[^\w\- ]", "", m.group(2).lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        anchors.add(slug if n == 0 else f"{slug}-{n}")
    return anchors


def test_the_alert_rules_are_valid_and_loaded_by_the_shipped_prometheus(promtool):
    checked = subprocess.run([promtool, "check", "rules", str(ALERTS)],
                             capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    config = load_yaml(DEPLOY / "prometheus" / "prometheus.yml")
    assert config["rule_files"] == ["alerts.yml"]
    mounts = compose()["services"]["prometheus"]["volumes"]
    assert "./prometheus/alerts.yml:/etc/prometheus/alerts.yml:ro" in mounts


def test_the_alerts_cover_what_stops_or_slows_a_worker():
    names = {rule["alert"] for rule in alerts()}
    assert {"CanonflowWorkerDown", "CanonflowWorkersAbsent", "CanonflowBrokerUnreachable",
            "CanonflowConsumerLagHigh", "CanonflowEventsLate", "CanonflowDeadLettersHigh", "CanonflowInternalErrors",
            "CanonflowOutputRefused", "CanonflowOutputDeliveryFailing",
            "CanonflowTableRecoverySlow", "CanonflowSessionsStalled"} <= names
    exprs = {rule["alert"]: rule["expr"] for rule in alerts()}
    # consumer lag in records and in seconds, from the metrics the worker exports
    assert "canonflow_consumer_lag" in exprs["CanonflowConsumerLagHigh"]
    assert "canonflow_end_to_end_lag_seconds_bucket" in exprs["CanonflowEventsLate"]
    assert "canonflow_output_refused_total" in exprs["CanonflowOutputRefused"]


def test_every_alert_reads_metrics_and_labels_the_worker_exports(exported):
    for rule in alerts():
        where, expr = rule["alert"], rule["expr"]
        names = set(_METRIC.findall(expr))
        assert names or "up{" in expr, f"{where} reads no canonflow metric"
        assert not names - set(exported), f"{where}: {sorted(names - set(exported))} not exported"
        carried = set(TARGET_LABELS)
        for name in names:
            carried |= set(exported[name].labelnames)
            if isinstance(exported[name], Histogram):
                carried.add("le")
        for name, matchers in _SELECTOR.findall(expr):
            for label, _ in _MATCHER.findall(matchers):
                assert label in set(exported[name].labelnames) | TARGET_LABELS, (where, label)
        for group in _GROUPING.findall(expr):
            for label in (x.strip() for x in group.split(",") if x.strip()):
                assert label in carried, f"{where}: no metric of it has label {label!r}"


def test_every_alert_has_a_severity_a_summary_a_description_and_a_runbook_section():
    anchors = github_anchors(RUNBOOK.read_text())
    for rule in alerts():
        name = rule["alert"]
        assert rule["labels"]["severity"] in ("warning", "critical"), name
        notes = rule["annotations"]
        assert set(notes) == {"summary", "description", "runbook_url"}, name
        assert notes["summary"].strip() and notes["description"].strip(), name
        url = notes["runbook_url"]
        assert url == RUNBOOK_BASE + f"runbook-{name.lower()}", name
        assert url.removeprefix(RUNBOOK_BASE) in anchors, f"{name}: no runbook section {url}"


def test_the_runbook_anchors_are_githubs():
    anchors = github_anchors("# Operating canonflow\n## Runbook: CanonflowWorkerDown\n"
                             "### `canonflow bench --long`\n```\n# not a heading\n```\n"
                             "## Runbook: CanonflowWorkerDown\n")
    assert anchors == {"operating-canonflow", "runbook-canonflowworkerdown",
                       "canonflow-bench---long", "runbook-canonflowworkerdown-1"}


def test_every_alert_has_a_unit_test_that_fires_it():
    tests = load_yaml(ALERTS_TEST)
    assert tests["rule_files"] == ["alerts.yml"]
    fired = {case["alertname"] for test in tests["tests"]
             for case in test.get("alert_rule_test", []) if case.get("exp_alerts")}
    quiet = {case["alertname"] for test in tests["tests"]
             for case in test.get("alert_rule_test", []) if not case.get("exp_alerts")}
    names = {rule["alert"] for rule in alerts()}
    assert names - fired == set(), "alerts no test fires"
    assert names - quiet == set(), "alerts no test holds back"
    assert fired <= names


def test_the_unit_tests_pass_and_can_fail(promtool, tmp_path: Path):
    ran = subprocess.run([promtool, "test", "rules", str(ALERTS_TEST)],
                         capture_output=True, text=True)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    # a wrong expectation is reported as such
    wrong = tmp_path / "alerts_test.yml"
    shutil.copy(ALERTS, tmp_path / "alerts.yml")
    wrong.write_text(ALERTS_TEST.read_text().replace('"3 codex', '"4 codex'))
    ran = subprocess.run([promtool, "test", "rules", str(wrong)], capture_output=True, text=True)
    assert ran.returncode != 0 and "FAILED" in ran.stdout + ran.stderr
