"""deploy/k8s: the objects pass the Kubernetes API schemas and agree with each other,
the image and the worker settings (no cluster here); and their defaults are the secure
ones (issue 25): no service-account token, a restricted security context, a
NetworkPolicy, a web server that answers the names the probes and Prometheus use only."""

from __future__ import annotations

import re
from pathlib import PurePosixPath
from typing import Any

import kubernetes_validate
import pytest

from pipeline.ops.web import AllowedHosts
from pipeline.settings import Settings, from_env
from tests.deploy.files import K8S, dockerfile, k8s_objects, load_yaml, pyproject

#: The oldest Kubernetes minor still widely run, and the newest the schemas know.
VERSIONS = ("1.29", kubernetes_validate.latest_version())
SETTING_VARS = {f"CANONFLOW_{name.upper()}" for name in Settings.__struct_fields__}
WORKER_LABELS = {"app.kubernetes.io/name": "canonflow", "app.kubernetes.io/component": "worker"}


def one(kind: str, component: str = "worker") -> dict[str, Any]:
    """The one object of `kind` for the workers (or, with `component`, the UI)."""
    (obj,) = [o for _, o in k8s_objects() if o["kind"] == kind
              and o["metadata"].get("labels", {}).get("app.kubernetes.io/component",
                                                       component) == component]
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


# ---- secure defaults (issue 25) ---------------------------------------------------------


def pod_spec(statefulset) -> dict[str, Any]:
    return statefulset["spec"]["template"]["spec"]


def test_pods_get_no_service_account_token_and_an_account_of_their_own(statefulset):
    spec = pod_spec(statefulset)
    assert spec["automountServiceAccountToken"] is False
    assert spec["enableServiceLinks"] is False
    accounts = {o["metadata"]["name"]: o for _, o in k8s_objects() if o["kind"] == "ServiceAccount"}
    account = accounts[spec["serviceAccountName"]]
    assert account["automountServiceAccountToken"] is False
    assert not [o for _, o in k8s_objects() if o["kind"] in ("Role", "ClusterRole",
                                                             "RoleBinding", "ClusterRoleBinding")]


def test_every_container_runs_restricted(statefulset):
    """What Pod Security's `restricted` profile asks, each setting checked where the
    container gets it (its own securityContext, else the pod's)."""
    spec = pod_spec(statefulset)
    pod = spec.get("securityContext", {})
    containers = spec["containers"] + spec.get("initContainers", [])
    for c in containers:
        sc = c.get("securityContext", {})
        name = c["name"]
        assert sc.get("runAsNonRoot", pod.get("runAsNonRoot")) is True, name
        assert sc.get("runAsUser", pod.get("runAsUser")) != 0, name
        assert sc["allowPrivilegeEscalation"] is False, name
        assert sc.get("privileged", False) is False, name
        assert sc["readOnlyRootFilesystem"] is True, name
        assert sc["capabilities"]["drop"] == ["ALL"] and not sc["capabilities"].get("add"), name
        seccomp = sc.get("seccompProfile", pod.get("seccompProfile"))
        assert seccomp == {"type": "RuntimeDefault"}, name
    assert not any(spec.get(k) for k in ("hostNetwork", "hostPID", "hostIPC"))


def test_every_public_image_is_pinned_by_digest():
    """The workers' own image is built and pushed by you (a comment says how to pin it);
    any other image must name its digest."""
    version = pyproject()["project"]["version"]
    for file, obj in k8s_objects():
        spec = obj.get("spec", {}).get("template", {}).get("spec", {})
        for c in spec.get("containers", []) + spec.get("initContainers", []):
            image = c["image"]
            assert image == f"canonflow:{version}" or re.fullmatch(
                r"[a-z0-9./_-]+(:[A-Za-z0-9._-]+)?@sha256:[0-9a-f]{64}", image), (file, image)


def kubelet_env(container: dict[str, Any], settings_env: dict[str, str],
                fields: dict[str, str]) -> dict[str, str]:
    """The container's environment as the kubelet makes it: ConfigMap, then `env` in
    order, `$(VAR)` replaced by a variable defined before it, downward-API fields from
    `fields`."""
    env = dict(settings_env)
    for e in container.get("env", []):
        if "value" in e:
            env[e["name"]] = re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)",
                                    lambda m: env.get(m.group(1), m.group()), e["value"])
        elif "fieldRef" in e.get("valueFrom", {}):
            env[e["name"]] = fields[e["valueFrom"]["fieldRef"]["fieldPath"]]
    return env


def test_the_web_server_answers_the_probes_and_prometheus_and_no_other_name(container,
                                                                            settings_env):
    """The kubelet's probes and Prometheus (pod discovery) reach the pod by its address
    and send it as Host; the allow-list the manifests give names it, with no help from
    the address the connection came in on (local=None), and nothing else."""
    pod_ip = "10.244.3.17"
    env = kubelet_env(container, settings_env, {"status.podIP": pod_ip,
                                                 "metadata.name": "canonflow-worker-0",
                                                 "metadata.namespace": "canonflow"})
    settings = from_env({k: v for k, v in env.items() if k.startswith("CANONFLOW_")})
    allowed = AllowedHosts.parse(settings.web_allowed_hosts, bound=settings.web_host)
    assert not allowed.any_host and "$(" not in settings.web_allowed_hosts
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        get = container[probe]["httpGet"]
        host = get.get("host", pod_ip)  # the kubelet's default: the pod's IP
        headers = {h["name"].lower(): h["value"] for h in get.get("httpHeaders", [])}
        header = headers.get("host", f"{host}:{port_number(container, get['port'])}")
        assert allowed.allows(header, None), probe
    assert allowed.allows(f"{pod_ip}:{settings.web_port}", None)  # Prometheus' target
    for foreign in ("attacker.example", f"{pod_ip}.nip.io", "10.244.3.18:6066"):
        assert not allowed.allows(foreign, None), foreign


def network_policy() -> dict[str, Any]:
    return one("NetworkPolicy")


def test_a_network_policy_lets_only_prometheus_in_and_only_kafka_and_dns_out(statefulset,
                                                                            container,
                                                                            settings_env):
    policy = network_policy()["spec"]
    pod_labels = statefulset["spec"]["template"]["metadata"]["labels"]
    assert policy["podSelector"]["matchLabels"].items() <= pod_labels.items()
    assert sorted(policy["policyTypes"]) == ["Egress", "Ingress"]

    def peers_are_selected(rules: list[dict[str, Any]]) -> None:
        for rule in rules:
            assert rule.get("to", rule.get("from")), "a rule open to every peer"
            for peer in rule.get("to", rule.get("from")):
                assert "ipBlock" not in peer, peer
                assert peer["namespaceSelector"]["matchLabels"], peer
                assert peer["podSelector"]["matchLabels"], peer

    (ingress,) = policy["ingress"]
    peers_are_selected([ingress])
    assert [p["app.kubernetes.io/name"] for p in
            (peer["podSelector"]["matchLabels"] for peer in ingress["from"])] == ["prometheus"]
    assert [port_number(container, p["port"]) for p in ingress["ports"]] == [
        from_env(settings_env).web_port]

    peers_are_selected(policy["egress"])
    by_port = {(p["port"], p.get("protocol", "TCP")): rule for rule in policy["egress"]
               for p in rule["ports"]}
    broker_port = int(from_env(settings_env).broker.rsplit(":", 1)[1])
    assert (broker_port, "TCP") in by_port
    assert {(53, "UDP"), (53, "TCP")} <= set(by_port)
    assert set(by_port) <= {(9092, "TCP"), (9093, "TCP"), (53, "UDP"), (53, "TCP")}
    # the Strimzi cluster and namespace of CANONFLOW_BROKER (<cluster>-kafka-bootstrap.<ns>.svc)
    kafka = by_port[(broker_port, "TCP")]["to"][0]
    service, namespace = from_env(settings_env).broker.split("://")[1].split(".")[:2]
    assert service == kafka["podSelector"]["matchLabels"]["strimzi.io/cluster"] + "-kafka-bootstrap"
    assert namespace == kafka["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"]


# ---- the chat UI (ui.yaml) ----------------------------------------------------------


def test_the_chat_ui_runs_restricted_reads_the_workers_broker_and_admits_no_one():
    deployment = one("Deployment", "ui")
    spec = deployment["spec"]["template"]["spec"]
    (c,) = spec["containers"]
    assert c["command"][:2] == ["canonflow", "ui"]
    assert c["envFrom"] == [{"configMapRef": {"name": "canonflow"}}]  # the workers' broker
    test_every_container_runs_restricted(deployment)
    assert spec["automountServiceAccountToken"] is False
    accounts = {o["metadata"]["name"] for _, o in k8s_objects() if o["kind"] == "ServiceAccount"}
    assert spec["serviceAccountName"] in accounts
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert deployment["spec"]["selector"]["matchLabels"].items() <= labels.items()
    service = one("Service", "ui")
    assert service["spec"]["selector"].items() <= labels.items()
    (port,) = service["spec"]["ports"]
    assert port_number(c, port["targetPort"]) == port["port"]
    assert c["command"][c["command"].index("--port") + 1] == str(port["port"])
    for probe in ("readinessProbe", "livenessProbe"):
        assert port_number(c, c[probe]["httpGet"]["port"]) == port["port"]
    policy = one("NetworkPolicy", "ui")["spec"]
    assert policy["podSelector"]["matchLabels"].items() <= labels.items()
    assert sorted(policy["policyTypes"]) == ["Egress", "Ingress"]
    assert policy["ingress"] == []  # no login: nothing reaches it but port-forward
    assert policy["egress"] == network_policy()["spec"]["egress"]  # Kafka and DNS
