"""The `canonflow` command line.

Heavy imports (faust, aiokafka) happen inside the commands that need a broker, so
`canonflow replay` and `canonflow schema` start fast.
"""

from __future__ import annotations

import sys
from typing import Any

import click

from pipeline.cli import bench, catalog, records, worker
from pipeline.cli.common import INTERRUPTED, say_error


class _Commands(click.Group):
    """The `canonflow` group: every failure it knows is one line on stderr, never a
    traceback. A usage error says what is wrong and where the help is; Ctrl-C exits
    130 at once, at any stage (click's own handling says "Aborted!" and exits 1)."""

    def main(self, args: Any = None, prog_name: str | None = None,  # type: ignore[override]
             complete_var: str | None = None, standalone_mode: bool = True,
             **extra: Any) -> Any:
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, False, **extra)
        try:
            status = super().main(args, prog_name, complete_var, False, **extra)
        except (click.exceptions.Abort, KeyboardInterrupt):
            sys.exit(INTERRUPTED)
        except click.UsageError as e:
            where = e.ctx.command_path if e.ctx is not None else "canonflow"
            say_error(f"{where}: {e.format_message()} (see '{where} -h')")
            sys.exit(e.exit_code)
        except click.ClickException as e:
            say_error(f"canonflow: {e.format_message()}")
            sys.exit(e.exit_code)
        sys.exit(status if isinstance(status, int) else 0)


@click.group(cls=_Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="canonflow", message="canonflow %(version)s")
def main() -> None:
    """canonflow: AI coding-agent runtime events -> one canonical event stream on Kafka."""


def _add_commands() -> None:
    """Every command, from the module of its group (their heavy imports stay inside them)."""
    from pipeline.tools.manifests import topics_manifest
    from pipeline.views.otel import otel_export
    from pipeline.views.ui import ui

    for command in (worker.run, worker.broker, worker.demo, records.replay, records.produce,
                    records.import_, records.ship, records.tail, catalog.topics,
                    catalog.schema, bench.bench, otel_export, ui):
        main.add_command(command)
    catalog.topics.add_command(topics_manifest)


_add_commands()
