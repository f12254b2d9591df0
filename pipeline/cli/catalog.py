"""`canonflow topics` (create, check, and the manifest from pipeline.tools.manifests) and
`canonflow schema`: the catalog on a cluster, and the contract's JSON Schema."""

from __future__ import annotations

import sys

import click

from pipeline.cli.common import broker_option, load_settings, on_broker, partitions_option


@click.group()
def topics() -> None:
    """Create or verify the topic catalog on a cluster."""


@topics.command("create")
@broker_option
@partitions_option
def topics_create(broker: str | None, partitions: int | None) -> None:
    """Create the catalog's missing topics (partitions, cleanup policy, retention)."""
    from pipeline.cluster.admin import create_topics

    settings = load_settings(broker=broker, partitions=partitions)
    if not settings.broker:
        raise click.UsageError("topics create needs --broker (or CANONFLOW_BROKER)")
    created = on_broker(settings, create_topics(settings))
    click.echo("created: " + (", ".join(created) if created else "nothing (all present)"))


@topics.command("check")
@broker_option
@partitions_option
def topics_check(broker: str | None, partitions: int | None) -> None:
    """Report drift between the cluster and the catalog; exit 1 if any."""
    from pipeline.cluster.admin import check_topics

    settings = load_settings(broker=broker, partitions=partitions)
    if not settings.broker:
        raise click.UsageError("topics check needs --broker (or CANONFLOW_BROKER)")
    drift = on_broker(settings, check_topics(settings))
    for d in drift:
        click.echo(f"DRIFT {d}")
    if drift:
        sys.exit(1)
    click.echo("catalog and cluster agree")


@click.command()
@click.option("--output", "-o", type=click.Path(dir_okay=False), default=None,
              help="Write to this file instead of stdout.")
def schema(output: str | None) -> None:
    """Print the JSON Schema of the canonical event, chat record and dead letter."""
    from topics.schema import schema_json

    data = schema_json()
    if output:
        with open(output, "wb") as fh:
            fh.write(data)
    else:
        sys.stdout.buffer.write(data)
