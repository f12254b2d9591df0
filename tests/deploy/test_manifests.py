"""Strimzi KafkaTopic resources generated from the catalog (pipeline.tools.manifests), and the
committed deploy/k8s/topics.yaml."""

from __future__ import annotations

import shlex

import jsonschema
import pytest
import yaml
from click.testing import CliRunner

from pipeline.tools import manifests
from pipeline.tools.manifests import (
    resource_name,
    strimzi_manifests,
    strimzi_topics,
    topics_manifest,
)
from tests.deploy.files import K8S, load_yaml, load_yaml_all
from topics.catalog import CATALOG, TopicSpec, changelog_topics

# The KafkaTopic fields canonflow writes, as Strimzi's CRD (kafka.strimzi.io/v1, and
# v1beta2 on request) types them; anything else in spec is a mistake.
KAFKA_TOPIC_SCHEMA = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "additionalProperties": False,
    "properties": {
        "apiVersion": {"enum": ["kafka.strimzi.io/v1", "kafka.strimzi.io/v1beta2"]},
        "kind": {"const": "KafkaTopic"},
        "metadata": {
            "type": "object",
            "required": ["name", "labels"],
            "properties": {
                "name": {"type": "string", "maxLength": 253,
                         "pattern": r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"},
                "labels": {"type": "object", "required": ["strimzi.io/cluster"],
                           "additionalProperties": {"type": "string", "maxLength": 63}},
                "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
            },
        },
        "spec": {
            "type": "object",
            "additionalProperties": False,
            "required": ["topicName", "partitions", "replicas", "config"],
            "properties": {
                "topicName": {"type": "string", "pattern": r"^[a-zA-Z0-9._-]{1,249}$"},
                "partitions": {"type": "integer", "minimum": 1},
                "replicas": {"type": "integer", "minimum": 1, "maximum": 32767},
                "config": {"type": "object"},
            },
        },
    },
}


def committed_command() -> list[str]:
    """The `canonflow topics manifest ...` arguments in deploy/k8s/topics.yaml's header."""
    for line in (K8S / "topics.yaml").read_text(encoding="utf-8").splitlines():
        words = shlex.split(line.lstrip("# "))
        if words[:3] == ["canonflow", "topics", "manifest"]:
            return words[3:]
    raise AssertionError("deploy/k8s/topics.yaml names no `canonflow topics manifest` command")


def test_committed_topics_yaml_is_what_the_command_prints_today():
    args = committed_command()
    result = CliRunner().invoke(topics_manifest, args, env={"CANONFLOW_PARTITIONS": None,
                                                            "CANONFLOW_REPLICATION": None})
    assert result.exit_code == 0, result.output
    assert (K8S / "topics.yaml").read_text(encoding="utf-8") == result.output, (
        "deploy/k8s/topics.yaml is stale: regenerate it with "
        f"`canonflow topics manifest {shlex.join(args)} -o deploy/k8s/topics.yaml`")


def test_committed_topics_agree_with_the_catalog_and_the_worker_settings():
    docs = load_yaml_all(K8S / "topics.yaml")
    settings = load_yaml(K8S / "configmap.yaml")["data"]
    # the catalog, then the table changelogs of the workers' app id, each with the
    # configuration the worker declares it with (an explicit max.message.bytes on all)
    specs = [*CATALOG, *changelog_topics(settings.get("CANONFLOW_APP_ID", "canonflow"))]
    assert [d["spec"]["topicName"] for d in docs] == [t.name for t in specs]
    for doc, spec in zip(docs, specs, strict=True):
        assert int(doc["spec"]["config"]["max.message.bytes"]) == spec.max_message_bytes
        assert doc["spec"]["config"] == spec.config()
        assert doc["spec"]["config"]["cleanup.policy"] == spec.cleanup_policy
        assert int(doc["spec"]["config"]["retention.ms"]) == spec.retention_ms
        # co-partitioned: one count for every topic, the one the workers use
        assert doc["spec"]["partitions"] == int(settings["CANONFLOW_PARTITIONS"])
        assert doc["spec"]["replicas"] == int(settings["CANONFLOW_REPLICATION"])
    broker_host = settings["CANONFLOW_BROKER"].split("://", 1)[1].split(":")[0]
    cluster = {d["metadata"]["labels"]["strimzi.io/cluster"] for d in docs}
    # Strimzi names the bootstrap service <cluster>-kafka-bootstrap
    assert cluster == {broker_host.split("-kafka-bootstrap")[0]}


@pytest.mark.parametrize("partitions,replication,cluster",
                         [(12, 3, "canonflow"), (1, 1, "my-cluster"), (64, 5, "prod.kafka_1")])
def test_the_yaml_reads_back_as_the_resources(partitions, replication, cluster):
    text = strimzi_manifests(partitions, replication, cluster)
    docs = list(yaml.safe_load_all(text))
    assert docs == strimzi_topics(partitions, replication, cluster)
    for doc in docs:
        jsonschema.validate(doc, KAFKA_TOPIC_SCHEMA)
        assert doc["metadata"]["labels"]["strimzi.io/cluster"] == cluster
        assert (doc["spec"]["partitions"], doc["spec"]["replicas"]) == (partitions, replication)


def test_strings_yaml_would_misread_are_quoted(monkeypatch: pytest.MonkeyPatch):
    odd = TopicSpec(name="Agents_Odd", role="metrics", key="yes", value="123",
                    owner='a "quoted": owner # not a comment', cleanup_policy="compact,delete",
                    retention_ms=5)
    monkeypatch.setattr(manifests, "CATALOG", (odd,))
    monkeypatch.setattr(manifests, "changelog_topics", lambda app_id: [])
    (doc,) = yaml.safe_load_all(strimzi_manifests(3, 1, "c"))
    assert doc["metadata"]["name"] == "agents-odd"
    assert doc["spec"]["topicName"] == "Agents_Odd"
    assert doc["metadata"]["annotations"] == {"canonflow/key": "yes", "canonflow/value": "123",
                                              "canonflow/owner": odd.owner}
    assert doc["spec"]["config"] == {"cleanup.policy": "compact,delete", "retention.ms": "5",
                                     "max.message.bytes": "1048588"}


def test_resource_names_are_lowercase_kubernetes_names():
    assert resource_name("agents.raw.codex-exec") == "agents.raw.codex-exec"
    assert resource_name("Fleet_Metrics.v2") == "fleet-metrics.v2"
    for bad in ("-leading", "trailing.", "x" * 254):
        with pytest.raises(ValueError):
            resource_name(bad)


def test_topics_that_map_to_one_name_are_refused(monkeypatch: pytest.MonkeyPatch):
    a = TopicSpec(name="a_b", role="raw", key="k", value="v", owner="o")
    b = TopicSpec(name="a-b", role="raw", key="k", value="v", owner="o")
    monkeypatch.setattr(manifests, "CATALOG", (a, b))
    with pytest.raises(ValueError, match="both map to 'a-b'"):
        strimzi_manifests(1, 1, "c")


@pytest.mark.parametrize("partitions,replication,cluster",
                         [(0, 1, "c"), (1, 0, "c"), (1, 1, ""), (1, 1, "bad cluster"),
                          (1, 1, "x" * 64)])
def test_bad_arguments_raise_value_error(partitions, replication, cluster):
    with pytest.raises(ValueError):
        strimzi_manifests(partitions, replication, cluster)


def test_command_defaults_come_from_the_worker_settings(tmp_path):
    out = tmp_path / "topics.yaml"
    result = CliRunner().invoke(topics_manifest, ["-o", str(out)],
                                env={"CANONFLOW_PARTITIONS": "6", "CANONFLOW_REPLICATION": "2"})
    assert result.exit_code == 0, result.output
    assert out.read_text(encoding="utf-8") == strimzi_manifests(6, 2, "canonflow")


def test_the_api_version_is_v1_unless_v1beta2_is_asked_for(tmp_path):
    committed = load_yaml_all(K8S / "topics.yaml")
    assert {d["apiVersion"] for d in committed} == {"kafka.strimzi.io/v1"}
    out = tmp_path / "topics.yaml"
    result = CliRunner().invoke(topics_manifest, ["--api-version", "v1beta2", "--partitions",
                                                  "3", "--replication", "1", "-o", str(out)])
    assert result.exit_code == 0, result.output
    text = out.read_text(encoding="utf-8")
    docs = list(yaml.safe_load_all(text))
    assert {d["apiVersion"] for d in docs} == {"kafka.strimzi.io/v1beta2"}
    for doc in docs:
        jsonschema.validate(doc, KAFKA_TOPIC_SCHEMA)
    # apart from the API version, the same resources
    assert [{**d, "apiVersion": "-"} for d in docs] == [
        {**d, "apiVersion": "-"} for d in strimzi_topics(3, 1, "canonflow")]
    assert "--api-version v1beta2" in text.splitlines()[3]
    assert CliRunner().invoke(topics_manifest, ["--api-version", "v2"]).exit_code == 2


def test_command_refuses_bad_options_and_settings():
    runner = CliRunner()
    assert runner.invoke(topics_manifest, ["--partitions", "0"]).exit_code == 2
    assert runner.invoke(topics_manifest, ["--format", "helm"]).exit_code == 2
    bad_env = runner.invoke(topics_manifest, [], env={"CANONFLOW_PARTITIONS": "many"})
    assert bad_env.exit_code == 2 and "CANONFLOW_PARTITIONS='many' is not an integer" in bad_env.output
    assert runner.invoke(topics_manifest, ["--cluster", "no spaces"]).exit_code == 2
