"""deploy/k8s: the objects pass the Kubernetes API schemas and agree with each other,
the image and the worker settings (no cluster here)."""

from __future__ import annotations

import re
from pathlib import PurePosixPath
from typing import Any

import kubernetes_validate
import pytest

from pipeline.settings import Settings, from_env
from tests.deploy.files import K8S, dockerfile, k8s_objects, load_yaml, pyproject

#: The oldest Kubernetes minor still widely run, and the newest the schemas know.
VERSIONS = ("1.29", kubernetes_validate.latest_version())
SETTING_VARS = {f"CANONFLOW_{name.upper()}" for name in Settings.__struct_fields__}
WORKER_LABELS = {"app.kubernetes.io/name": "canonflow", "app.kubernetes.io/component": "worker"}


def one(kind: str) -> dict[str, Any]:
    (obj,) = [o for _, o in k8s_objects() if o["kind"] == kind]
    return obj


@pytest.fixture(scope="module")
def statefulset() -> dict[str, Any]:
    return one("StatefulSet")


@pytest.fixture(scope="module")
def container(statefulset) -> dict[str, Any]:
    (c,) = statefulset["spec"]["template"]["spec"]["containers"]
    return c


@pytest.fixture(scope="module")
def settings_env(container) -> dict[str, str]:
    """The worker's CANONFLOW_* environment that comes from the ConfigMap and literals."""
    maps = {o["metadata"]["name"]: o["data"] for _, o in k8s_objects() if o["kind"] == "ConfigMap"}
    env: dict[str, str] = {}
    for source in container.get("envFrom", []):
        env.update(maps[source["configMapRef"]["name"]])
    env.update({e["name"]: e["value"] for e in container.get("env", []) if "value" in e})
    return env


def quantity(text: str | int) -> float:
    """A Kubernetes quantity as a number (cpu in cores, memory in bytes)."""
    units = {"m": 1e-3, "": 1, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "k": 1e3, "M": 1e6, "G": 1e9}
    m = re.fullmatch(r"([0-9.]+)([A-Za-z]*)", str(text))
    assert m and m.group(2) in units, f"unreadable quantity {text!r}"
    return float(m.group(1)) * units[m.group(2)]


def port_number(container: dict[str, Any], port: int | str) -> int:
    if isinstance(port, int):
        return port
    (number,) = [p["containerPort"] for p in container["ports"] if p.get("name") == port]
    return number


@pytest.mark.parametrize("version", VERSIONS)
def test_every_object_passes_the_kubernetes_schemas(version):
    checked = 0
    for name, obj in k8s_objects():
        if obj["apiVersion"].startswith("kafka.strimzi.io/"):
            continue  # a custom resource: tests/deploy/test_manifests.py checks it
        try:
            kubernetes_validate.validate(obj, version, strict=True)
        except kubernetes_validate.ValidationError as e:
            pytest.fail(f"{name} {obj['kind']}: {str(e).splitlines()[0]}")
        checked += 1
    assert checked >= 4


def test_kustomization_lists_every_worker_object_and_not_the_topics():
    kustomization = load_yaml(K8S / "kustomization.yaml")
    files = {p.name for p in K8S.glob("*.yaml")} - {"kustomization.yaml", "topics.yaml"}
    assert set(kustomization["resources"]) == files
    assert len(kustomization["resources"]) == len(files)


def test_settings_are_valid_and_credentials_come_from_a_secret(container, settings_env):
    assert set(settings_env) <= SETTING_VARS, set(settings_env) - SETTING_VARS
    settings = from_env(settings_env)
    assert settings.broker.startswith("kafka://")
    assert settings.store == "rocksdb://"
    assert settings.web_enabled and settings.web_host == "0.0.0.0"
    secret_vars = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in container["env"]
                   if "secretKeyRef" in e.get("valueFrom", {})}
    assert set(secret_vars) == {"CANONFLOW_SASL_USERNAME", "CANONFLOW_SASL_PASSWORD"}
    assert not set(secret_vars) & set(settings_env)
    assert all(ref["optional"] is True for ref in secret_vars.values())


def test_the_table_store_lives_on_a_claim_template_volume(statefulset, container, settings_env):
    claims = {t["metadata"]["name"] for t in statefulset["spec"]["volumeClaimTemplates"]}
    data_dir = PurePosixPath(from_env(settings_env).data_dir)
    holders = [m for m in container["volumeMounts"]
               if data_dir == PurePosixPath(m["mountPath"])
               or PurePosixPath(m["mountPath"]) in data_dir.parents]
    assert holders, f"no volume holds CANONFLOW_DATA_DIR {data_dir}"
    assert holders[-1]["name"] in claims and not holders[-1].get("readOnly")
    assert data_dir.is_absolute()


def test_probes_and_ports_target_the_worker_web_server(statefulset, container, settings_env):
    web_port = from_env(settings_env).web_port
    assert web_port == 6066
    assert any(p["containerPort"] == web_port for p in container["ports"])
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        get = container[probe]["httpGet"]
        assert port_number(container, get["port"]) == web_port, probe
        # readiness: canonflow's /health (degraded while the broker is away); the others
        # Faust's index, so a broker outage never restarts a worker
        assert get["path"] == ("/health" if probe == "readinessProbe" else "/"), probe
    annotations = statefulset["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/port"] == str(web_port)
    assert annotations["prometheus.io/path"] == "/metrics"


def test_resources_have_requests_within_limits(container):
    resources = container["resources"]
    for kind in ("cpu", "memory"):
        assert quantity(resources["requests"][kind]) <= quantity(resources["limits"][kind]), kind


def test_pods_run_as_the_images_non_root_user(statefulset, container):
    pod = statefulset["spec"]["template"]["spec"]["securityContext"]
    (user,) = [i.args for i in dockerfile() if i.keyword == "USER"][-1:]
    uid, _, gid = user.partition(":")
    assert pod["runAsNonRoot"] is True
    assert (str(pod["runAsUser"]), str(pod["runAsGroup"])) == (uid, gid) and uid != "0"
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    version = pyproject()["project"]["version"]
    assert container["image"] == f"canonflow:{version}"
    assert container["command"] == ["canonflow", "run"]


def test_service_and_pdb_select_the_statefulset_pods(statefulset, container):
    pod_labels = statefulset["spec"]["template"]["metadata"]["labels"]
    assert statefulset["spec"]["selector"]["matchLabels"] == WORKER_LABELS
    assert WORKER_LABELS.items() <= pod_labels.items()
    service = one("Service")
    assert statefulset["spec"]["serviceName"] == service["metadata"]["name"]
    assert service["spec"]["clusterIP"] == "None"  # headless
    assert service["spec"]["selector"].items() <= pod_labels.items()
    (port,) = service["spec"]["ports"]
    assert port_number(container, port["targetPort"]) == port["port"] == 6066
    pdb = one("PodDisruptionBudget")
    assert pdb["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    assert pdb["spec"]["maxUnavailable"] == 1
    assert statefulset["spec"]["replicas"] >= 2
