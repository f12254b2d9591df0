"""The commands that move records: `replay` and `import` (offline, no broker), `produce`
and `ship` (into the raw topics), `tail` (the output topics, readably)."""

from __future__ import annotations

import sys
from typing import IO

import click

from pipeline.cli.common import (
    broker_option,
    check_translation_env,
    for_cluster,
    load_settings,
    on_broker,
    quiet_repeats,
    runtime_option,
)
from topics.catalog import PROVIDERS


@click.command()
@click.option("--provider", "-p", required=True, type=click.Choice(PROVIDERS),
              help="Which runtime wrote the input.")
@click.option("--format", "fmt", type=click.Choice(["native", "capture"]), default="native",
              show_default=True,
              help="native: one native message per line, without origin (Codex app-server and "
                   "ACP read it from the message, the others take the agent's); capture: "
                   '{"origin": "agent"|"client", "t": <epoch ms>, "msg": <native message>} lines.')
@click.option("--session", "-s", default=None,
              help="Session id for every input (default: each file's name).")
@click.option("--include-raw", is_flag=True,
              help="Copy each native message into its events (env CANONFLOW_INCLUDE_RAW).")
@click.option("--view", type=click.Choice(["canonical", "chat"]), default="canonical",
              show_default=True, help="chat: the readable chat records instead of events.")
@click.argument("files", nargs=-1, type=click.Path(dir_okay=False, allow_dash=True))
def replay(provider: str, fmt: str, session: str | None, include_raw: bool, view: str,
           files: tuple[str, ...]) -> None:
    """Translate native messages offline, no broker: canonical events as JSON lines on stdout.

    Reads FILES (stdin when none). Lines that cannot be translated produce a dead-letter
    record (JSON) on stderr and replay goes on. Exit status 0 unless a file cannot be read.
    """
    from pipeline.tools.replay import WrongFormat
    from pipeline.tools.replay import replay as run_replay

    include_raw = check_translation_env() or include_raw
    opened: list[tuple[str, IO[bytes]]] = []
    try:
        for path in files or ("-",):
            opened.append((path, sys.stdin.buffer if path == "-" else open(path, "rb")))
    except OSError as e:
        raise click.ClickException(f"cannot read {e.filename}: {e.strerror}") from None
    try:
        run_replay(provider, opened, sys.stdout.buffer, sys.stderr.buffer, fmt=fmt,  # type: ignore[arg-type]
                   session=session, include_raw=include_raw, view=view)  # type: ignore[arg-type]
    except WrongFormat as e:
        sys.stdout.flush()
        raise click.ClickException(str(e)) from None
    finally:
        for path, stream in opened:
            if path != "-":
                stream.close()


@click.command()
@broker_option
@click.option("--provider", "-p", required=True, type=click.Choice(PROVIDERS))
@click.option("--session", "-s", required=True, help="Session id (the record key).")
@click.option("--format", "fmt", type=click.Choice(["native", "capture"]), default="native",
              show_default=True)
@click.option("--batch", type=click.IntRange(min=1), default=1, show_default=True,
              help="Native messages per record (consecutive lines of one origin).")
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
def produce(broker: str | None, provider: str, session: str, fmt: str, batch: int,
            file: str) -> None:
    """Send a native file into the provider's raw topic (key = session; origin, capture
    time and record id as headers: the same file sent again sends the same ids). Every
    line is checked first: a file the worker could not take (a capture read as native,
    a line that is not a capture line or not one JSON object, no line of the provider's)
    is refused, naming it, and nothing is sent."""
    from pipeline.tools.kafka_io import check_file, iter_records
    from pipeline.tools.kafka_io import produce as send
    from pipeline.tools.replay import WrongFormat
    from topics.records import BadRecordId

    settings = load_settings(broker=broker)
    if not settings.broker:
        raise click.UsageError("produce needs --broker (or CANONFLOW_BROKER)")
    try:  # every line checked before anything is sent, then read again as it is sent:
        check_file(file, fmt, provider)  # type: ignore[arg-type]  # memory for one line
    except WrongFormat as e:
        raise click.ClickException(f"{file}: {e}") from None
    except BadRecordId as e:
        raise click.ClickException(f"{file}: not a capture file: {e}") from None
    settings = on_broker(settings, for_cluster(settings))
    n = on_broker(settings, send(settings, provider, session,
                                 iter_records(file, fmt, batch)))  # type: ignore[arg-type]
    click.echo(f"canonflow: {n} record(s) -> {settings.broker} agents.raw.{provider} "
               f"key {session!r}", err=True)


@click.command("import")
@runtime_option
@click.option("--session", "-s", default=None,
              help="The sessionId of the one session found; with several, each one's id "
                   "becomes S/<its id>.")
@click.option("--view", type=click.Choice(["canonical", "chat"]), default="canonical",
              show_default=True, help="chat: the readable chat records instead of events.")
@click.option("--include-raw", is_flag=True,
              help="Copy each native record into its events (env CANONFLOW_INCLUDE_RAW).")
@click.argument("paths", nargs=-1, required=True, type=click.Path())
def import_(runtime: str | None, session: str | None, view: str, include_raw: bool,
            paths: tuple[str, ...]) -> None:
    """Translate the runtimes' own session files offline, no broker.

    PATH is a session file, a database, a runtime's home (.claude, .codex, .gemini,
    .local or .local/share/opencode) or a directory holding them (a HOME). Canonical
    events as JSON lines on stdout, session after session in a stable order, each with
    the runtime's own session id; dead letters as JSON on stderr. Byte-identical on
    every run. Exit status 0 unless a path cannot be read."""
    from pipeline.tools.importer import run_import

    include_raw = check_translation_env() or include_raw
    sys.exit(run_import(list(paths), sys.stdout.buffer, sys.stderr.buffer, runtime=runtime,
                        session=session, view=view, include_raw=include_raw))  # type: ignore[arg-type]


@click.command()
@broker_option
@runtime_option
@click.option("--checkpoint", type=click.Path(dir_okay=False), default=None,
              help="Where the positions are kept (default: "
                   "$CANONFLOW_DATA_DIR/ship-checkpoint.json).")
@click.option("--once", is_flag=True,
              help="Ship what exists, then exit (the backfill).")
@click.option("--interval", type=float, default=1.0, show_default=True,
              help="Seconds between two looks at the files.")
@click.argument("paths", nargs=-1, required=True, type=click.Path())
def ship(broker: str | None, runtime: str | None, checkpoint: str | None, once: bool,
         interval: float, paths: tuple[str, ...]) -> None:
    """Follow the runtimes' session files and databases under PATHS and produce each new
    native record to its transcript raw topic, keyed by session (the sidecar of
    interactive sessions). A checkpoint keeps its place: restarted, it sends nothing
    twice and skips nothing. Stops on Ctrl-C / SIGTERM."""
    import contextlib
    import os

    from pipeline.transcripts.ship import ship as run_ship

    settings = load_settings(broker=broker)
    if not settings.broker:
        raise click.UsageError("ship needs --broker (or CANONFLOW_BROKER)")
    checkpoint = checkpoint or os.path.join(settings.data_dir, "ship-checkpoint.json")
    with contextlib.suppress(click.ClickException):  # unreachable: ship waits for it itself
        settings = on_broker(settings, for_cluster(settings))
    quiet_repeats()  # ship says each failed attempt itself
    sys.exit(run_ship(settings, list(paths), checkpoint=checkpoint, runtime=runtime,
                      once=once, interval=interval))


@click.command()
@broker_option
@click.option("--session", "-s", default=None, help="Only this session.")
@click.option("--json", "as_json", is_flag=True, help="Print the events as JSON lines.")
@click.option("--deadletters", is_flag=True, help="Follow agents.deadletter instead.")
@click.option("--view", type=click.Choice(["canonical", "chat"]), default="canonical",
              show_default=True, help="chat: follow agents.chat and render the conversation.")
@click.option("--from-beginning/--from-now", default=True, show_default=True)
@click.option("--idle-timeout", type=float, default=None,
              help="Exit after this many seconds without a record.")
@click.option("--max", "max_events", type=int, default=None, help="Exit after N records.")
def tail(broker: str | None, session: str | None, as_json: bool, deadletters: bool, view: str,
         from_beginning: bool, idle_timeout: float | None, max_events: int | None) -> None:
    """Follow agents.canonical (or the chat) and print it readably (Ctrl-C stops).

    Control characters in what it prints (agent output, session ids: anything a
    producer wrote) are shown as escapes, never sent to the terminal raw."""

    from pipeline.tools.kafka_io import follow, follow_events
    from pipeline.views.render import (
        ChatRenderer,
        decode_record,
        json_text,
        render,
        unreadable,
        visible,
    )
    from topics.catalog import CANONICAL_TOPIC, CHAT_TOPIC, DEADLETTER_TOPIC

    settings = load_settings(broker=broker)
    if not settings.broker:
        raise click.UsageError("tail needs --broker (or CANONFLOW_BROKER)")
    seen = 0
    key = session.encode() if session else None

    def show(rec) -> bool:  # noqa: ANN001
        nonlocal seen
        if key is not None and rec.key != key:
            return False
        seen += 1
        if as_json or deadletters:
            click.echo(json_text(rec.value))
        elif (record := decode_record(rec.value)) is None:
            click.echo(unreadable(rec.value))
        elif view == "chat":
            chat(record)
        else:
            click.echo(render(record))
        return max_events is not None and seen >= max_events

    def gap(g, rec) -> None:  # noqa: ANN001
        if key is None or rec.key == key:
            # not "never": a session on two partitions may bring them later
            click.echo(visible(f"(gap: session {g.sessionId}: seq {g.after + 1} to "
                               f"{g.before - 1} not seen before seq {g.before})",
                               lines=False))

    chat = ChatRenderer(lambda s: (sys.stdout.write(s), sys.stdout.flush()))
    topic = (DEADLETTER_TOPIC if deadletters else CHAT_TOPIC if view == "chat"
             else CANONICAL_TOPIC)
    if deadletters:
        work = follow(settings, [topic], show, from_beginning=from_beginning,
                      idle_timeout=idle_timeout)
    else:  # the consumer library: copies dropped, gaps said
        work = follow_events(settings, topic, show, on_gap=gap,
                             from_beginning=from_beginning, idle_timeout=idle_timeout)
    on_broker(settings, work)
