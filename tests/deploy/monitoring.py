"""deploy/k8s/monitoring/prometheusrule.yaml, made from deploy/prometheus/alerts.yml:
the rules file's groups, comments included, under a PrometheusRule's `spec`, so that
the Prometheus Operator loads exactly the alerts the compose Prometheus loads.

    python -m tests.deploy.monitoring    # writes the file again after alerts.yml changed

tests/deploy/test_monitoring.py fails while the committed file differs from this.
"""

from __future__ import annotations

import textwrap

from tests.deploy.files import DEPLOY, K8S

ALERTS = DEPLOY / "prometheus" / "alerts.yml"
PROMETHEUS_RULE = K8S / "monitoring" / "prometheusrule.yaml"

HEAD = """\
# canonflow's alerts for the Prometheus Operator: deploy/prometheus/alerts.yml's groups
# under `spec`, written by `python -m tests.deploy.monitoring` (do not edit by hand;
# tests/deploy/test_monitoring.py checks that it is current). The operator loads a
# PrometheusRule its Prometheus' ruleSelector matches: add that label in
# kustomization.yaml's `labels` (kube-prometheus-stack selects `release: <its name>`).
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata:
  name: canonflow
  labels:
    app.kubernetes.io/name: canonflow
    app.kubernetes.io/component: worker
spec:
"""


def prometheus_rule_text() -> str:
    """The PrometheusRule's text: HEAD, then alerts.yml from its `groups:` on, indented."""
    text = ALERTS.read_text(encoding="utf-8")
    start = text.index("\ngroups:\n") + 1
    return HEAD + textwrap.indent(text[start:], "  ")


if __name__ == "__main__":
    PROMETHEUS_RULE.write_text(prometheus_rule_text(), encoding="utf-8")
    print(PROMETHEUS_RULE)
