"""deploy/compose.yaml, the Prometheus scrape config and the Grafana provisioning,
checked against each other, the CLI and the worker settings (no container engine here);
and its defaults are the secure ones (issue 25): public images pinned by digest, Kafka
asks every client for a SASL login, no password has a default, Grafana has no
anonymous access."""

from __future__ import annotations

import base64
import json
import re
import subprocess
from pathlib import Path, PurePosixPath
from typing import Any

import click
import pytest
import yaml

from pipeline.cli import main as cli
from pipeline.settings import Settings, from_env
from tests.deploy.files import (
    DASHBOARD,
    DEPLOY,
    ROOT,
    compose,
    environment,
    interpolate,
    load_yaml,
    pyproject,
)

LOOPBACK = {"127.0.0.1", "::1", "[::1]", "localhost"}
SETTING_VARS = {f"CANONFLOW_{name.upper()}" for name in Settings.__struct_fields__}
#: A public image, pinned: repository:tag@sha256:<digest of the multi-platform index>.
PINNED = re.compile(r"[a-z0-9./_-]+:[A-Za-z0-9._-]+@sha256:[0-9a-f]{64}")
#: The secrets `docker compose up` must be given: none may have a default.
SECRETS = {"CANONFLOW_KAFKA_PASSWORD", "KAFKA_BROKER_PASSWORD", "GRAFANA_ADMIN_PASSWORD"}
#: Values for them, as an operator would set them (README: letters and digits).
SECRET_VALUES = {"CANONFLOW_KAFKA_PASSWORD": "c4nonfl0w", "KAFKA_BROKER_PASSWORD": "br0ker",
                 "GRAFANA_ADMIN_PASSWORD": "gr4fana"}


@pytest.fixture(scope="module")
def services() -> dict[str, dict[str, Any]]:
    return compose()["services"]


def command(service: dict[str, Any]) -> list[str]:
    cmd = service.get("command")
    if cmd is None:
        return ["canonflow", "run"]  # the image's CMD (checked in test_dockerfile)
    return cmd.split() if isinstance(cmd, str) else [str(c) for c in cmd]


def workers(services: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {name: s for name, s in services.items()
            if s.get("image", "").startswith("canonflow:") and command(s)[:2] == ["canonflow", "run"]}


def published(service: dict[str, Any]) -> list[tuple[str | None, str]]:
    """(host address or None, host port) of every port a service publishes."""
    out: list[tuple[str | None, str]] = []
    for port in service.get("ports", []):
        if isinstance(port, dict):
            out.append((port.get("host_ip"), str(port.get("published", ""))))
            continue
        text = str(port).split("/", 1)[0]
        # [host_ip:][host_port:]container_port, host_ip possibly [v6]
        m = re.fullmatch(r"(?:(\[[^\]]+\]|[^:]+):)?(?:([^:]*):)?([^:]+)", text)
        assert m, f"unreadable port {port!r}"
        host_ip, host_port, _ = m.groups()
        if host_port is None and host_ip is not None and host_ip.isdigit():
            host_ip, host_port = None, host_ip
        out.append((host_ip, host_port or "(ephemeral)"))
    return out


def mounts(service: dict[str, Any]) -> dict[str, str]:
    """container path -> host path (resolved against deploy/) of a service's bind mounts."""
    out = {}
    for volume in service.get("volumes", []):
        source, target = (volume["source"], volume["target"]) if isinstance(volume, dict) \
            else str(volume).split(":")[:2]
        if source.startswith((".", "/")):
            out[target] = str((DEPLOY / source).resolve())
    return out


def kafka_listeners(env: dict[str, str], key: str) -> dict[str, str]:
    return dict(item.split("://", 1) for item in env[key].split(","))


def jaas(text: str) -> dict[str, str]:
    """The options of a one-module JAAS configuration (`Module required k="v" ...;`)."""
    assert text.strip().endswith(";"), text
    return dict(re.findall(r'(\w+)="([^"]*)"', text))


def test_every_public_image_is_pinned_by_digest_and_kafka_is_the_official_one_in_kraft_mode(
        services):
    version = pyproject()["project"]["version"]
    for name, service in services.items():
        image = service["image"]
        if image == f"canonflow:{version}":
            assert "build" in service, name  # built here, from this checkout
            continue
        assert PINNED.fullmatch(image), f"{name}: {image} is not pinned by digest"
        assert not image.split("@")[0].endswith(":latest"), name
    kafka = services["kafka"]
    assert re.fullmatch(r"apache/kafka:\d+\.\d+\.\d+@sha256:[0-9a-f]{64}", kafka["image"])
    env = environment(kafka)
    assert set(env["KAFKA_PROCESS_ROLES"].split(",")) == {"broker", "controller"}
    assert not any("ZOOKEEPER" in key for key in env)
    node_id, _, voter = env["KAFKA_CONTROLLER_QUORUM_VOTERS"].partition("@")
    assert node_id == env["KAFKA_NODE_ID"]
    listeners = kafka_listeners(env, "KAFKA_LISTENERS")
    assert voter == listeners[env["KAFKA_CONTROLLER_LISTENER_NAMES"]]
    protocols = dict(item.split(":") for item in env["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"].split(","))
    assert set(listeners) <= set(protocols)
    assert set(kafka_listeners(env, "KAFKA_ADVERTISED_LISTENERS")) <= set(listeners)
    assert len(base64.urlsafe_b64decode(env["CLUSTER_ID"] + "==")) == 16
    assert env["KAFKA_AUTO_CREATE_TOPICS_ENABLE"] == "false"
    assert "kafka-data:/var/lib/kafka/data" in kafka["volumes"]
    assert env["KAFKA_LOG_DIRS"] == "/var/lib/kafka/data"


def test_nothing_is_published_beyond_loopback(services):
    for name, service in services.items():
        assert service.get("network_mode") != "host", name
        for host_ip, host_port in published(service):
            assert host_ip in LOOPBACK, f"{name} publishes port {host_port} on {host_ip or 'all addresses'}"


def test_topic_init_runs_a_real_canonflow_command_against_the_workers_broker(services):
    init = services["topic-init"]
    argv = command(init)
    assert argv[0] == "canonflow"
    # resolve and parse it with the CLI itself (nothing runs)
    cmd: click.Command = cli
    args = argv[1:]
    ctx = click.Context(cli, info_name="canonflow")
    path = []
    while isinstance(cmd, click.Group):
        name, sub, args = cmd.resolve_command(ctx, args)
        assert sub is not None, f"no canonflow command {argv}"
        path.append(name)
        cmd, ctx = sub, click.Context(sub, info_name=name, parent=ctx)
    assert path == ["topics", "create"]
    params = cmd.make_context("create", list(args), parent=ctx).params
    broker = params["broker"]
    assert init["restart"] == "no"
    assert init["depends_on"]["kafka"]["condition"] == "service_healthy"
    for name, worker in workers(services).items():
        assert environment(worker)["CANONFLOW_BROKER"] == broker, name
        assert from_env(environment(init)).partitions == from_env(environment(worker)).partitions
    # the broker address is Kafka's advertised in-network listener
    advertised = kafka_listeners(environment(services["kafka"]), "KAFKA_ADVERTISED_LISTENERS")
    assert broker.split("://", 1)[1] in advertised.values()
    assert broker.split("://", 1)[1].split(":")[0] in {"kafka", services["kafka"].get("hostname")}


def test_kafka_asks_every_client_for_a_sasl_login_and_knows_the_workers_user(services):
    """No listener a client can reach is PLAINTEXT: the controller's listens on the
    container's loopback; every other one takes SASL, with the user and password the
    workers and topic-init log in with (the same compose variable), and the broker's own
    login for its inter-broker listener."""
    env = environment(services["kafka"])
    listeners = kafka_listeners(env, "KAFKA_LISTENERS")
    protocols = dict(item.split(":") for item in env["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"].split(","))
    mechanisms = env["KAFKA_SASL_ENABLED_MECHANISMS"].split(",")
    controller = env["KAFKA_CONTROLLER_LISTENER_NAMES"]
    assert listeners[controller].rpartition(":")[0] in LOOPBACK
    clients = {n: s for n, s in services.items() if n != "kafka"
               and environment(s).get("CANONFLOW_BROKER", "").startswith("kafka://")}
    assert set(clients) == {"topic-init", "ui"} | set(workers(services))
    for name in set(listeners) - {controller}:
        assert protocols[name].startswith("SASL_"), f"listener {name} takes no login"
        for mechanism in mechanisms:
            options = jaas(env[f"KAFKA_LISTENER_NAME_{name}_{mechanism.replace('-', '_')}"
                               "_SASL_JAAS_CONFIG"])
            for client, service in clients.items():
                settings = from_env(environment(service))
                assert settings.sasl_mechanism in mechanisms, client
                assert options[f"user_{settings.sasl_username}"] == settings.sasl_password, \
                    f"{client} cannot log in on {name}"
    for client, service in clients.items():
        settings = from_env(environment(service))
        assert settings.security_protocol == protocols["CLIENT"] == "SASL_PLAINTEXT", client
        assert settings.sasl_password == "${CANONFLOW_KAFKA_PASSWORD:?set CANONFLOW_KAFKA_PASSWORD, see deploy/README.md}"
    inter = env["KAFKA_INTER_BROKER_LISTENER_NAME"]
    assert env["KAFKA_SASL_MECHANISM_INTER_BROKER_PROTOCOL"] in mechanisms
    own = jaas(env[f"KAFKA_LISTENER_NAME_{inter}_"
                   f"{env['KAFKA_SASL_MECHANISM_INTER_BROKER_PROTOCOL']}_SASL_JAAS_CONFIG"])
    assert own[f"user_{own['username']}"] == own["password"]
    # every listener's address the broker hands out to clients outside the container
    advertised = kafka_listeners(env, "KAFKA_ADVERTISED_LISTENERS")
    assert advertised["HOST"].rpartition(":")[0] == "127.0.0.1"
    assert controller not in advertised


def test_no_secret_has_a_default_and_up_refuses_to_start_without_them():
    text = (DEPLOY / "compose.yaml").read_text(encoding="utf-8")
    used = set(re.findall(r"\$\{([A-Za-z_][A-Za-z0-9_]*)", text))
    assert used == SECRETS
    for name in SECRETS:
        assert not re.search(r"\$\{" + name + r"(:?-)", text), f"{name} has a default"
        missing = {k: v for k, v in SECRET_VALUES.items() if k != name}
        with pytest.raises(KeyError, match=name):
            interpolate(text, missing)
    assert not re.search(r"(?i)password\W+(admin|changeme|secret)\b", text)
    interpolated = yaml.safe_load(interpolate(text, SECRET_VALUES))
    grafana = environment(interpolated["services"]["grafana"])
    assert grafana["GF_SECURITY_ADMIN_PASSWORD"] == SECRET_VALUES["GRAFANA_ADMIN_PASSWORD"]
    assert grafana["GF_AUTH_ANONYMOUS_ENABLED"] == "false"
    assert grafana["GF_USERS_ALLOW_SIGN_UP"] == "false"


def test_kafkas_healthcheck_logs_in_as_the_broker_user(services, tmp_path):
    """The healthcheck's client settings, written by a real shell from the interpolated
    command, are a login the broker accepts (its JAAS user_broker)."""
    text = interpolate((DEPLOY / "compose.yaml").read_text(encoding="utf-8"), SECRET_VALUES)
    kafka = yaml.safe_load(text)["services"]["kafka"]
    kind, command = kafka["healthcheck"]["test"]
    assert kind == "CMD-SHELL"
    write, _, check = command.partition(" && ")
    props = tmp_path / "healthcheck.properties"
    assert "> /tmp/healthcheck.properties" in write
    subprocess.run(["sh", "-c", write.replace("/tmp/healthcheck.properties", str(props))],
                   check=True)
    settings = dict(line.split("=", 1) for line in props.read_text().splitlines())
    assert settings["security.protocol"] == "SASL_PLAINTEXT"
    assert settings["sasl.mechanism"] == "PLAIN"
    login = jaas(settings["sasl.jaas.config"])
    accepted = jaas(environment(kafka)["KAFKA_LISTENER_NAME_CLIENT_PLAIN_SASL_JAAS_CONFIG"])
    assert accepted[f"user_{login['username']}"] == login["password"] == "br0ker"
    assert "--command-config /tmp/healthcheck.properties" in check
    assert "--bootstrap-server localhost:9092" in check


def test_workers_get_the_broker_a_rocksdb_store_and_the_web_port_and_start_after_topics(services):
    found = workers(services)
    assert found, "no service runs `canonflow run`"
    assert sum(w.get("deploy", {}).get("replicas", 1) for w in found.values()) >= 2
    for name, worker in found.items():
        env = environment(worker)
        assert env["CANONFLOW_BROKER"].startswith("kafka://")
        settings = from_env(env)
        assert settings.store == "rocksdb://"
        assert settings.web_enabled and settings.web_host == "0.0.0.0"
        assert settings.web_port == 6066
        assert not worker.get("ports"), f"{name}: workers are reached inside the network only"
        deps = worker["depends_on"]
        assert deps["topic-init"]["condition"] == "service_completed_successfully"
        assert deps["kafka"]["condition"] == "service_healthy"


def test_every_canonflow_variable_is_a_valid_setting(services):
    for name, service in services.items():
        env = {k: v for k, v in environment(service).items() if k.startswith("CANONFLOW_")}
        assert set(env) <= SETTING_VARS, f"{name}: unknown settings {set(env) - SETTING_VARS}"
        from_env(env)  # raises ValueError on a bad value


def test_the_canonflow_image_is_built_from_the_deploy_dockerfile(services):
    version = pyproject()["project"]["version"]
    for name, service in services.items():
        if not service["image"].startswith("canonflow:"):
            continue
        assert service["image"] == f"canonflow:{version}", name
        build = service["build"]
        context = (DEPLOY / build["context"]).resolve()
        assert context == ROOT
        assert (context / build["dockerfile"]).resolve() == DEPLOY / "Dockerfile"


def test_bind_mounts_exist_and_the_dashboard_is_the_one_in_deploy_grafana(services):
    for name, service in services.items():
        for target, source in mounts(service).items():
            assert Path(source).exists(), f"{name}: {source} (for {target}) does not exist"
    assert DASHBOARD in {Path(s) for s in mounts(services["grafana"]).values()}


def test_prometheus_scrapes_every_workers_metrics_port(services):
    prometheus = services["prometheus"]
    config_path = mounts(prometheus)["/etc/prometheus/prometheus.yml"]
    assert "command" not in prometheus  # the image reads /etc/prometheus/prometheus.yml
    config = load_yaml(Path(config_path))
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    job = jobs["canonflow"]
    assert job.get("metrics_path", "/metrics") == "/metrics"
    targets = set()
    for sd in job.get("dns_sd_configs", []):
        assert sd.get("type", "SRV") == "A"
        targets |= {f"{n}:{sd['port']}" for n in sd["names"]}
    for static in job.get("static_configs", []):
        targets |= set(static["targets"])
    expected = {f"{name}:{from_env(environment(w)).web_port}" for name, w in workers(services).items()}
    assert targets == expected


def test_grafana_provisions_the_prometheus_source_and_the_dashboard(services):
    grafana = services["grafana"]
    grafana_mounts = mounts(grafana)
    provisioning = Path(grafana_mounts["/etc/grafana/provisioning"])
    assert provisioning == DEPLOY / "grafana" / "provisioning"
    sources = [s for f in sorted((provisioning / "datasources").glob("*.yaml"))
               for s in load_yaml(f)["datasources"]]
    (prom,) = [s for s in sources if s["type"] == "prometheus"]
    host, port = prom["url"].removeprefix("http://").split(":")
    assert host in services and host == "prometheus"
    assert any(p.endswith(f":{port}") for p in services["prometheus"]["ports"])
    assert prom["uid"] == "prometheus" and prom["isDefault"] is True

    target = next(t for t, s in grafana_mounts.items() if Path(s) == DASHBOARD)
    providers = [p for f in sorted((provisioning / "dashboards").glob("*.yaml"))
                 for p in load_yaml(f)["providers"]]
    assert [p["options"]["path"] for p in providers] == [str(PurePosixPath(target).parent)]
    assert environment(grafana)["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"] == target


def test_the_dashboard_uses_the_provisioned_data_source():
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    uids = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            source = node.get("datasource")
            if isinstance(source, dict) and "uid" in source:
                uids.add(source["uid"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(dashboard)
    assert {u for u in uids if not u.startswith("$")} <= {"prometheus", "-- Grafana --", "grafana"}


def test_the_chat_ui_reads_the_workers_broker_and_is_published_on_loopback_only(services):
    ui = services["ui"]
    argv = command(ui)
    assert argv[:2] == ["canonflow", "ui"]
    # parsed by the CLI itself (nothing runs)
    ctx = click.Context(cli, info_name="canonflow")
    name, sub, args = cli.resolve_command(ctx, argv[1:])
    assert name == "ui" and sub is not None
    params = sub.make_context("ui", list(args), parent=ctx).params
    assert params["host"] == "0.0.0.0"  # inside its container; the host sees loopback only
    assert published(ui) == [("127.0.0.1", str(params["port"]))]
    for worker in workers(services).values():
        assert environment(ui)["CANONFLOW_BROKER"] == environment(worker)["CANONFLOW_BROKER"]
    assert ui["depends_on"]["topic-init"]["condition"] == "service_completed_successfully"
    # its healthcheck asks the UI's port, not the worker's the image checks by default
    assert f"http://127.0.0.1:{params['port']}/api/status" in " ".join(ui["healthcheck"]["test"])
