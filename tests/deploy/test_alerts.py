"""deploy/prometheus/alerts.yml with Prometheus' own tool: promtool checks the rules
and runs a rule unit test (series in, alerts out), and the compose file's Prometheus
loads them. Skipped where Debian's prometheus package (promtool) is not installed."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.deploy.files import DEPLOY, compose, load_yaml

ALERTS = DEPLOY / "prometheus" / "alerts.yml"
#: Five samples a minute of a stalled approval session, of a waiting one, and of the
#: stall gone after ten minutes; the alert fires after its `for` (5 minutes), by
#: provider and state, and is gone once the gauge is.
UNIT_TEST = """
rule_files:
  - {alerts}
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      - series: 'canonflow_sessions_by_state{{provider="codex", state="stalled_approval", instance="w1"}}'
        values: '0 0 1x10 0x10'
      - series: 'canonflow_sessions_by_state{{provider="codex", state="stalled_approval", instance="w2"}}'
        values: '0 0 0 0 2x20'
      - series: 'canonflow_sessions_by_state{{provider="claude", state="approval", instance="w1"}}'
        values: '3x20'
    alert_rule_test:
      - eval_time: 5m
        alertname: CanonflowSessionsStalled
        exp_alerts: []
      - eval_time: 8m
        alertname: CanonflowSessionsStalled
        exp_alerts:
          - exp_labels: {{severity: warning, provider: codex, state: stalled_approval}}
            exp_annotations:
              summary: "3 codex session(s) stalled_approval"
              description: >-
                3 codex session(s) have waited on the approval past the worker's
                threshold for more than 5 minutes with no event. Their
                session.state.changed events (health "stalled") on agents.canonical
                name the sessions.
      - eval_time: 20m
        alertname: CanonflowSessionsStalled
        exp_alerts:
          - exp_labels: {{severity: warning, provider: codex, state: stalled_approval}}
            exp_annotations:
              summary: "2 codex session(s) stalled_approval"
              description: >-
                2 codex session(s) have waited on the approval past the worker's
                threshold for more than 5 minutes with no event. Their
                session.state.changed events (health "stalled") on agents.canonical
                name the sessions.
      - eval_time: 30m
        alertname: CanonflowSessionsStalled
        exp_alerts: []
"""


@pytest.fixture
def promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        pytest.skip("promtool is missing: `apt-get install -y --no-install-recommends "
                    "prometheus` (.ci/run does)")
    return found


def test_the_alert_rules_are_valid_and_loaded_by_the_shipped_prometheus(promtool):
    checked = subprocess.run([promtool, "check", "rules", str(ALERTS)],
                             capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    config = load_yaml(DEPLOY / "prometheus" / "prometheus.yml")
    assert config["rule_files"] == ["alerts.yml"]
    mounts = compose()["services"]["prometheus"]["volumes"]
    assert "./prometheus/alerts.yml:/etc/prometheus/alerts.yml:ro" in mounts


def test_stalled_sessions_raise_an_alert_by_provider_and_state_after_five_minutes(
        promtool, tmp_path: Path):
    test = tmp_path / "alerts_test.yml"
    test.write_text(UNIT_TEST.format(alerts=ALERTS))
    ran = subprocess.run([promtool, "test", "rules", str(test)], capture_output=True, text=True)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    # the test can fail: a wrong expectation is reported as such
    test.write_text(UNIT_TEST.format(alerts=ALERTS).replace('"3 codex', '"4 codex'))
    ran = subprocess.run([promtool, "test", "rules", str(test)], capture_output=True, text=True)
    assert ran.returncode != 0 and "FAILED" in ran.stdout + ran.stderr
