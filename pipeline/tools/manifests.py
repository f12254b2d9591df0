"""Kubernetes resources generated from the topic catalog (`canonflow topics manifest`).

On a cluster run by the Strimzi operator, topics are declared as `KafkaTopic`
resources and the operator creates them. They are generated here from
`topics.catalog.CATALOG`, so the catalog stays the one place where a topic's name,
cleanup policy and retention are written down; `deploy/k8s/topics.yaml` is this
module's output, committed, and a test keeps it current.

Every catalog topic gets the deployment's one partition count (the topics are
co-partitioned, see topics/catalog.py). The workers' table changelogs
(`canonflow-sessions.<provider>-changelog`, `canonflow-items.<provider>-changelog`, the
fleet tables'; topics.catalog.changelog_topics, for the default app id) are declared here
too, with the same configuration the worker gives them (compacted, an explicit
max.message.bytes). Faust's `<app id>-__assignor-__leader` topic is left to the worker.

The resources are `kafka.strimzi.io/v1`, the API Strimzi 0.49 introduced and the only
one Strimzi 1.0 serves; `--api-version v1beta2` writes them for an operator older than
0.49 (a KafkaTopic is the same in both). Strimzi 0.46 and later run Kafka 4.x only.

The YAML is written here by hand (no YAML library at run time): a string is plain
when it cannot be read as anything else (a number, a boolean, null), otherwise a
JSON string, which is a valid YAML double-quoted scalar.
"""

from __future__ import annotations

import json
import re

import click

from topics.catalog import CATALOG, TopicSpec, changelog_topics

#: The Strimzi API versions a KafkaTopic can be written in, by option value.
STRIMZI_API_VERSIONS = {"v1": "kafka.strimzi.io/v1", "v1beta2": "kafka.strimzi.io/v1beta2"}
DEFAULT_API_VERSION = "v1"
#: The name of the Strimzi `Kafka` resource the topics belong to, unless told.
DEFAULT_CLUSTER = "canonflow"
#: The workers' app id (CANONFLOW_APP_ID) whose table changelogs the manifests declare.
DEFAULT_APP_ID = "canonflow"

# A Kubernetes object name: an RFC 1123 DNS subdomain (lowercase alphanumerics,
# '-' and '.', alphanumeric at both ends, at most 253 characters).
_K8S_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?")
# A label value: at most 63 characters, alphanumeric at both ends, '-', '_', '.' inside.
_LABEL_VALUE = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?")
# Strings safe to write as plain YAML scalars, minus the YAML 1.1 booleans and null.
_PLAIN = re.compile(r"[A-Za-z][A-Za-z0-9_./-]*")
_NOT_PLAIN = frozenset({"y", "n", "yes", "no", "true", "false", "on", "off", "null"})


def resource_name(topic_name: str) -> str:
    """The Kubernetes object name for a Kafka topic: lowercased, '_' -> '-'.

    Kafka topic names may hold capitals and underscores, object names may not;
    `spec.topicName` keeps the literal topic name either way.
    Raises ValueError when no valid object name can be made from `topic_name`.
    """
    name = topic_name.lower().replace("_", "-")
    if len(name) > 253 or not _K8S_NAME.fullmatch(name):
        raise ValueError(f"topic {topic_name!r} gives no valid Kubernetes name ({name!r})")
    return name


def strimzi_topics(partitions: int, replication: int, cluster: str,
                   api_version: str = DEFAULT_API_VERSION) -> list[dict[str, object]]:
    """One `KafkaTopic` resource (as a dict) per catalog topic, in catalog order, in
    `api_version` (a key of STRIMZI_API_VERSIONS).

    Raises ValueError for a partition count or replication factor below 1, a
    cluster name that is not a valid label value, an unknown API version, or two
    topics that map to the same Kubernetes name.
    """
    if api_version not in STRIMZI_API_VERSIONS:
        raise ValueError(f"Strimzi API version {api_version!r} is not one of "
                         f"{', '.join(STRIMZI_API_VERSIONS)}")
    if partitions < 1 or replication < 1:
        raise ValueError(f"partitions ({partitions}) and replication ({replication}) must be >= 1")
    if not cluster or len(cluster) > 63 or not _LABEL_VALUE.fullmatch(cluster):
        raise ValueError(f"cluster {cluster!r} is not a valid Kubernetes label value")
    resources: list[dict[str, object]] = []
    seen: dict[str, str] = {}
    for spec in (*CATALOG, *changelog_topics(DEFAULT_APP_ID)):
        name = resource_name(spec.name)
        if name in seen:
            raise ValueError(f"topics {seen[name]!r} and {spec.name!r} both map to {name!r}")
        seen[name] = spec.name
        resources.append(_kafka_topic(spec, name, partitions, replication, cluster,
                                      STRIMZI_API_VERSIONS[api_version]))
    return resources


def _kafka_topic(spec: TopicSpec, name: str, partitions: int, replication: int,
                 cluster: str, api_version: str) -> dict[str, object]:
    return {
        "apiVersion": api_version,
        "kind": "KafkaTopic",
        "metadata": {
            "name": name,
            "labels": {
                "strimzi.io/cluster": cluster,
                "app.kubernetes.io/part-of": "canonflow",
                "app.kubernetes.io/component": spec.role,
            },
            "annotations": {
                "canonflow/key": spec.key,
                "canonflow/value": spec.value,
                "canonflow/owner": spec.owner,
            },
        },
        "spec": {
            "topicName": spec.name,
            "partitions": partitions,
            "replicas": replication,
            "config": spec.config(),
        },
    }


def command_line(partitions: int, replication: int, cluster: str,
                 api_version: str = DEFAULT_API_VERSION) -> str:
    """The `canonflow` command that prints these manifests (written into their header)."""
    line = (f"canonflow topics manifest --format strimzi --partitions {partitions} "
            f"--replication {replication} --cluster {cluster}")
    return line if api_version == DEFAULT_API_VERSION else f"{line} --api-version {api_version}"


def strimzi_manifests(partitions: int, replication: int, cluster: str,
                      api_version: str = DEFAULT_API_VERSION) -> str:
    """Strimzi `KafkaTopic` resources for every catalog topic, as a multi-document YAML text.

    The text opens with a comment naming the command that regenerates it.
    Raises ValueError as `strimzi_topics` does.
    """
    resources = strimzi_topics(partitions, replication, cluster, api_version)
    lines = [
        "# Strimzi KafkaTopic resources for the canonflow topic catalog (topics/catalog.py).",
        f"# {STRIMZI_API_VERSIONS[api_version]}: Strimzi "
        + ("0.49 or later (Kafka 4.x)." if api_version == "v1" else
           "0.51 or earlier (not served by Strimzi 1.0)."),
        "# Generated; do not edit. Regenerate with:",
        f"#   {command_line(partitions, replication, cluster, api_version)}",
    ]
    for resource in resources:
        lines.append("---")
        lines.extend(_yaml_lines(resource, 0))
    return "\n".join(lines) + "\n"


def _yaml_lines(mapping: dict[str, object], indent: int) -> list[str]:
    """Block-style YAML for nested dicts of str/int (all that a KafkaTopic holds)."""
    pad = " " * indent
    out: list[str] = []
    for key, value in mapping.items():
        k = _scalar(key)
        if isinstance(value, dict):
            out.append(f"{pad}{k}:")
            out.extend(_yaml_lines(value, indent + 2))
        elif isinstance(value, bool) or not isinstance(value, int | str):
            raise TypeError(f"cannot write {type(value).__name__} for {key!r}")
        elif isinstance(value, int):
            out.append(f"{pad}{k}: {value}")
        else:
            out.append(f"{pad}{k}: {_scalar(value)}")
    return out


def _scalar(text: str) -> str:
    if _PLAIN.fullmatch(text) and text.lower() not in _NOT_PLAIN:
        return text
    return json.dumps(text, ensure_ascii=False)


def _default(field: str) -> int:
    """A partitions/replication default from CANONFLOW_* (as `canonflow run` reads it)."""
    from pipeline.settings import from_env

    try:
        return int(getattr(from_env(), field))
    except ValueError as e:
        raise click.UsageError(str(e)) from None


@click.command("manifest")
@click.option("--format", "fmt", type=click.Choice(["strimzi"]), default="strimzi",
              show_default=True, help="strimzi: KafkaTopic resources.")
@click.option("--api-version", type=click.Choice(list(STRIMZI_API_VERSIONS)),
              default=DEFAULT_API_VERSION, show_default=True,
              help="kafka.strimzi.io API version: v1 for Strimzi 0.49 and later (the only "
                   "one Strimzi 1.0 serves), v1beta2 for an older operator.")
@click.option("--partitions", type=click.IntRange(min=1), default=None,
              help="Partitions of every topic (env CANONFLOW_PARTITIONS, default 12). Must "
                   "equal the workers' CANONFLOW_PARTITIONS.")
@click.option("--replication", type=click.IntRange(min=1), default=None,
              help="Replicas of every topic (env CANONFLOW_REPLICATION, default 1; use 3 "
                   "on a production cluster).")
@click.option("--cluster", default=DEFAULT_CLUSTER, show_default=True,
              help="Name of the Strimzi Kafka resource (the strimzi.io/cluster label).")
@click.option("--output", "-o", type=click.Path(dir_okay=False), default=None,
              help="Write to this file instead of stdout.")
def topics_manifest(fmt: str, api_version: str, partitions: int | None,
                    replication: int | None, cluster: str, output: str | None) -> None:
    """Print the topic catalog as Kubernetes resources for a topic operator."""
    try:
        text = strimzi_manifests(partitions or _default("partitions"),
                                 replication or _default("replication"), cluster,
                                 api_version)
    except ValueError as e:
        raise click.UsageError(str(e)) from None
    if output:
        with open(output, "w", encoding="utf-8") as fh:
            fh.write(text)
    else:
        click.echo(text, nl=False)
