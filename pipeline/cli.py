"""The `canonflow` command line.

Heavy imports (faust, aiokafka) happen inside the commands that need a broker, so
`canonflow replay` and `canonflow schema` start fast.
"""

from __future__ import annotations

import sys
from typing import IO

import click

from topics.catalog import PROVIDERS


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """canonflow: AI coding-agent runtime events -> one canonical event stream on Kafka."""


@main.command()
@click.option("--provider", "-p", required=True, type=click.Choice(PROVIDERS),
              help="Which runtime wrote the input.")
@click.option("--format", "fmt", type=click.Choice(["native", "capture"]), default="native",
              show_default=True,
              help="native: one native message per line, all from the agent; capture: "
                   '{"origin": "agent"|"client", "t": <epoch ms>, "msg": <native message>} lines.')
@click.option("--session", "-s", default=None,
              help="Session id for every input (default: each file's name).")
@click.option("--include-raw", is_flag=True, help="Copy each native message into its events.")
@click.argument("files", nargs=-1, type=click.Path(dir_okay=False, allow_dash=True))
def replay(provider: str, fmt: str, session: str | None, include_raw: bool,
           files: tuple[str, ...]) -> None:
    """Translate native messages offline, no broker: canonical events as JSON lines on stdout.

    Reads FILES (stdin when none). Lines that cannot be translated produce a dead-letter
    record (JSON) on stderr and replay goes on. Exit status 0 unless a file cannot be read.
    """
    from pipeline.replay import replay as run_replay

    opened: list[tuple[str, IO[bytes]]] = []
    try:
        for path in files or ("-",):
            opened.append((path, sys.stdin.buffer if path == "-" else open(path, "rb")))
    except OSError as e:
        raise click.ClickException(f"cannot read {e.filename}: {e.strerror}") from None
    try:
        run_replay(provider, opened, sys.stdout.buffer, sys.stderr.buffer, fmt=fmt,  # type: ignore[arg-type]
                   session=session, include_raw=include_raw)
    finally:
        for path, stream in opened:
            if path != "-":
                stream.close()


@main.command()
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


if __name__ == "__main__":
    main()
