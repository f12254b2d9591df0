"""deploy/k8s/monitoring: the Prometheus Operator's ServiceMonitor and PrometheusRule.
kubernetes-validate knows no custom resource, so their structure is checked here
against the fields of the operator's monitoring.coreos.com/v1 CRDs, and against the
objects they point at: the Service, its port, the worker's web port, and the alerts
of deploy/prometheus/alerts.yml (the PrometheusRule is made from them)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from pipeline.settings import from_env
from tests.deploy.files import DEPLOY, K8S, k8s_objects, load_yaml, load_yaml_all
from tests.deploy.monitoring import ALERTS, PROMETHEUS_RULE, prometheus_rule_text

MONITORING = K8S / "monitoring"
#: The fields of monitoring.coreos.com/v1 this project may use (a typo is not a field).
SERVICE_MONITOR_SPEC = {"jobLabel", "targetLabels", "podTargetLabels", "endpoints",
                        "selector", "namespaceSelector", "sampleLimit", "targetLimit"}
ENDPOINT = {"port", "targetPort", "path", "scheme", "params", "interval", "scrapeTimeout",
            "honorLabels", "honorTimestamps", "relabelings", "metricRelabelings",
            "tlsConfig", "authorization", "followRedirects", "enableHttp2"}
RULE_GROUP = {"name", "interval", "rules", "limit"}
RULE = {"alert", "record", "expr", "for", "keep_firing_for", "labels", "annotations"}
DURATION = re.compile(r"([0-9]+(ms|s|m|h|d|w|y))+")
DNS_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


def objects() -> dict[str, dict[str, Any]]:
    """kind -> the one object of that kind in deploy/k8s/monitoring."""
    found = [doc for path in sorted(MONITORING.glob("*.yaml"))
             if path.name != "kustomization.yaml" for doc in load_yaml_all(path)]
    by_kind = {o["kind"]: o for o in found}
    assert len(by_kind) == len(found), "one object of each kind"
    return by_kind


def worker(kind: str) -> dict[str, Any]:
    (obj,) = [o for _, o in k8s_objects() if o["kind"] == kind
              and o["metadata"]["labels"].get("app.kubernetes.io/component") == "worker"]
    return obj


def assert_custom_resource(obj: dict[str, Any], kind: str) -> None:
    assert obj["apiVersion"] == "monitoring.coreos.com/v1" and obj["kind"] == kind
    assert set(obj) == {"apiVersion", "kind", "metadata", "spec"}
    assert DNS_NAME.fullmatch(obj["metadata"]["name"]), obj["metadata"]["name"]
    assert "namespace" not in obj["metadata"]  # kubectl apply -n puts it beside the workers


def test_the_monitoring_kustomization_lists_both_and_the_workers_one_neither():
    kustomization = load_yaml(MONITORING / "kustomization.yaml")
    files = {p.name for p in MONITORING.glob("*.yaml")} - {"kustomization.yaml"}
    assert sorted(kustomization["resources"]) == sorted(files)
    assert set(objects()) == {"ServiceMonitor", "PrometheusRule"}
    # a cluster without the operator has no such kinds: the workers' kustomization
    # applies there all the same
    assert not any("monitoring" in r for r in load_yaml(K8S / "kustomization.yaml")["resources"])


def test_the_prometheus_rule_is_alerts_yml_as_written():
    committed = PROMETHEUS_RULE.read_text(encoding="utf-8")
    assert committed == prometheus_rule_text(), (
        "deploy/k8s/monitoring/prometheusrule.yaml is not alerts.yml's rules: run "
        "`python -m tests.deploy.monitoring`")
    rule = objects()["PrometheusRule"]
    assert_custom_resource(rule, "PrometheusRule")
    assert rule["spec"] == {"groups": load_yaml(ALERTS)["groups"]}


def test_the_prometheus_rule_has_the_structure_of_the_crd():
    groups = objects()["PrometheusRule"]["spec"]["groups"]
    assert groups
    names = [g["name"] for g in groups]
    assert len(names) == len(set(names)), "group names are unique"
    for group in groups:
        assert set(group) <= RULE_GROUP, set(group) - RULE_GROUP
        assert group["rules"]
        for rule in group["rules"]:
            assert set(rule) <= RULE, set(rule) - RULE
            assert ("alert" in rule) != ("record" in rule), rule
            assert isinstance(rule["expr"], str) and rule["expr"].strip()
            assert DURATION.fullmatch(rule.get("for", "0s")), rule.get("for")
            for key in ("labels", "annotations"):
                assert all(isinstance(v, str) for v in rule.get(key, {}).values()), (rule, key)


def test_the_service_monitor_scrapes_the_workers_web_port_as_job_canonflow():
    monitor = objects()["ServiceMonitor"]
    assert_custom_resource(monitor, "ServiceMonitor")
    spec = monitor["spec"]
    assert set(spec) <= SERVICE_MONITOR_SPEC, set(spec) - SERVICE_MONITOR_SPEC
    service = worker("Service")
    assert spec["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert set(spec["selector"]) == {"matchLabels"}
    # the job: the Service's label jobLabel names, the one the alerts and compose use
    job = service["metadata"]["labels"][spec["jobLabel"]]
    compose_jobs = [c["job_name"] for c in
                    load_yaml(DEPLOY / "prometheus" / "prometheus.yml")["scrape_configs"]]
    assert job == "canonflow" and job in compose_jobs
    assert 'up{job="canonflow"}' in ALERTS.read_text()

    (endpoint,) = spec["endpoints"]
    assert set(endpoint) <= ENDPOINT, set(endpoint) - ENDPOINT
    assert endpoint["path"] == "/metrics" and endpoint["scheme"] == "http"
    assert DURATION.fullmatch(endpoint["interval"]) and DURATION.fullmatch(endpoint["scrapeTimeout"])
    (port,) = [p for p in service["spec"]["ports"] if p["name"] == endpoint["port"]]
    # the Service's port reaches the container's web port, the worker's CANONFLOW_WEB_PORT
    statefulset = worker("StatefulSet")
    (container,) = statefulset["spec"]["template"]["spec"]["containers"]
    (web,) = [p for p in container["ports"] if p["name"] == port["targetPort"]]
    settings_env = {}
    for source in container.get("envFrom", []):
        (config,) = [o for _, o in k8s_objects() if o["kind"] == "ConfigMap"
                     and o["metadata"]["name"] == source["configMapRef"]["name"]]
        settings_env.update(config["data"])
    assert web["containerPort"] == from_env(settings_env).web_port
    # the pods the Service selects are the workers
    assert service["spec"]["selector"].items() <= \
        statefulset["spec"]["template"]["metadata"]["labels"].items()


@pytest.mark.parametrize("kind", ["ServiceMonitor", "PrometheusRule"])
def test_the_custom_resources_carry_the_worker_labels(kind):
    labels = objects()[kind]["metadata"]["labels"]
    assert labels == {"app.kubernetes.io/name": "canonflow",
                      "app.kubernetes.io/component": "worker"}
