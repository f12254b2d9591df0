"""The `canonflow` command line.

Heavy imports (faust, aiokafka) happen inside the commands that need a broker, so
`canonflow replay` and `canonflow schema` start fast.
"""

from __future__ import annotations

import sys
from collections.abc import Coroutine
from typing import IO, Any, TypeVar

import click

from pipeline.transcripts.discovery import RUNTIMES as TRANSCRIPT_RUNTIMES
from topics.catalog import PROVIDERS

T = TypeVar("T")

#: Exit status of a command whose broker does not answer (1 is `topics check`'s drift).
UNREACHABLE = 3
#: Exit status after Ctrl-C (SIGINT), as a shell reports it.
INTERRUPTED = 130


class BrokerUnreachable(click.ClickException):
    exit_code = UNREACHABLE


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
            _error(f"{where}: {e.format_message()} (see '{where} -h')")
            sys.exit(e.exit_code)
        except click.ClickException as e:
            _error(f"canonflow: {e.format_message()}")
            sys.exit(e.exit_code)
        sys.exit(status if isinstance(status, int) else 0)


def _error(message: str) -> None:
    """One line on stderr: a message that spans lines (an error's text) is joined."""
    click.echo(" ".join(message.split()), err=True)


@click.group(cls=_Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="canonflow", message="canonflow %(version)s")
def main() -> None:
    """canonflow: AI coding-agent runtime events -> one canonical event stream on Kafka."""


def _settings(**overrides: object):  # noqa: ANN202
    from pipeline.settings import from_env

    try:
        return from_env(**overrides)
    except ValueError as e:
        raise click.UsageError(str(e)) from None


def _on_broker(settings: Any, coro: Coroutine[Any, Any, T]) -> T:
    """Run `coro` (which talks to the broker of `settings`); a broker that does not
    answer, or refuses, is one line (BrokerUnreachable, or exit 1), not a traceback.
    aiokafka logs each failed connection (through Python's last-resort handler, with no
    logging set up): the last of them becomes the line's reason instead."""
    import asyncio
    import logging

    from aiokafka.errors import KafkaConnectionError, KafkaError, KafkaTimeoutError

    said: list[str] = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = lambda record: said.append(record.getMessage())  # type: ignore[method-assign]
    log = logging.getLogger("aiokafka")
    log.addHandler(handler)
    propagate, log.propagate = log.propagate, False
    try:
        return asyncio.run(coro)
    except (KafkaConnectionError, KafkaTimeoutError, OSError, TimeoutError) as e:
        reason = said[-1] if said else _short(e)
        raise BrokerUnreachable(f"no broker answers at {settings.bootstrap} "
                                f"({reason})") from None
    except KafkaError as e:
        raise click.ClickException(f"the broker at {settings.bootstrap}: {_short(e)}") from None
    finally:
        log.removeHandler(handler)
        log.propagate = propagate


def _short(error: BaseException) -> str:
    """An error's text without its class name repeated and without aiokafka's address
    tuples (`Unable to bootstrap from [('127.0.0.1', 1, <AddressFamily...>)]`)."""
    text = str(error) or type(error).__name__
    name = type(error).__name__ + ": "
    text = text[len(name):] if text.startswith(name) else text
    return "unable to connect" if text.startswith("Unable to bootstrap") else text


def _for_cluster(settings: Any) -> Coroutine[Any, Any, Any]:
    """The settings for the cluster (the embedded broker's on Tansu): for_cluster."""
    from pipeline.worker.process import for_cluster

    return for_cluster(settings)


def _quiet_repeats() -> None:
    """Log lines (aiokafka's, one per failed connection) on stderr, each shape at most
    once a minute (pipeline.worker.process.Repeats), as the worker's."""
    import logging

    from pipeline.worker.process import Repeats

    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    for handler in logging.getLogger().handlers:
        handler.addFilter(Repeats())


_broker_option = click.option(
    "--broker", "-b", envvar="CANONFLOW_BROKER", default=None,
    help="kafka://host:port[;host:port] of the cluster (env CANONFLOW_BROKER); required.")
_run_broker_option = click.option(
    "--broker", "-b", envvar="CANONFLOW_BROKER", default=None,
    help="kafka://host:port[;host:port] of an existing cluster (env CANONFLOW_BROKER). "
         "Default: start an embedded broker on 127.0.0.1.")
_partitions_option = click.option(
    "--partitions", type=int, default=None,
    help="Partitions of every co-partitioned topic (env CANONFLOW_PARTITIONS, default 12).")


@main.command()
@_run_broker_option
@_partitions_option
@click.option("--include-raw", is_flag=True, default=None,
              help="Copy native messages into canonical events (env CANONFLOW_INCLUDE_RAW).")
@click.option("--web-port", type=int, default=None, help="Worker web server port (127.0.0.1).")
@click.option("--no-web", is_flag=True, help="Do not start the worker's web server.")
def run(broker: str | None, partitions: int | None, include_raw: bool | None,
        web_port: int | None, no_web: bool) -> None:
    """Run the worker. With no broker configured, start an embedded one first.

    Creates the catalog's topics (waiting, with backoff, for a broker that does not
    answer yet), runs the normalize agents until Ctrl-C / SIGTERM, then stops the
    embedded broker.
    """
    from pipeline.cluster.broker import BrokerError, port_in_use
    from pipeline.worker.process import Stopped, broker_for, ensure_topics_waiting, run_worker

    settings = _settings(broker=broker, partitions=partitions, include_raw=include_raw,
                         web_port=web_port, web_enabled=False if no_web else None)
    if settings.web_enabled and port_in_use(settings.web_host, settings.web_port):
        raise click.ClickException(f"cannot listen on {settings.web_host}:{settings.web_port}"
                                   " (the worker's web server): the port is in use; "
                                   "--web-port N, or --no-web")
    try:
        with broker_for(settings) as live:
            try:  # a worker of a fleet may start before its broker: it waits for it
                live, created = ensure_topics_waiting(live, say=lambda s: click.echo(s, err=True))
            except Stopped as e:
                click.echo(f"canonflow: stopped ({e}) before the broker answered", err=True)
                sys.exit(e.code)
            kind = "Tansu: the embedded broker's settings" if live.broker_kind == "tansu" \
                else "Kafka"
            click.echo(f"canonflow: broker {live.broker} ({kind}); topics created: "
                       f"{len(created)}; providers: {', '.join(live.providers)}", err=True)
            status = run_worker(live)
    except BrokerError as e:
        raise click.ClickException(str(e)) from None
    sys.exit(status)


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


@main.command()
@_broker_option
@click.option("--provider", "-p", required=True, type=click.Choice(PROVIDERS))
@click.option("--session", "-s", required=True, help="Session id (the record key).")
@click.option("--format", "fmt", type=click.Choice(["native", "capture"]), default="native",
              show_default=True)
@click.option("--batch", type=click.IntRange(min=1), default=1, show_default=True,
              help="Native messages per record (consecutive lines of one origin).")
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
def produce(broker: str | None, provider: str, session: str, fmt: str, batch: int,
            file: str) -> None:
    """Send a native file into the provider's raw topic (key = session; origin and
    capture time as headers)."""
    import msgspec

    from pipeline.tools.kafka_io import produce as send
    from pipeline.tools.kafka_io import records_from_file
    from pipeline.tools.replay import WrongFormat

    settings = _settings(broker=broker)
    if not settings.broker:
        raise click.UsageError("produce needs --broker (or CANONFLOW_BROKER)")
    try:
        records = records_from_file(file, fmt, batch)  # type: ignore[arg-type]
    except WrongFormat as e:
        raise click.ClickException(f"{file}: {e}") from None
    except (msgspec.DecodeError, msgspec.ValidationError) as e:
        raise click.ClickException(f"{file}: not a capture file: {e}") from None
    settings = _on_broker(settings, _for_cluster(settings))
    n = _on_broker(settings, send(settings, provider, session, records))
    click.echo(f"canonflow: {n} record(s) -> {settings.broker} agents.raw.{provider} "
               f"key {session!r}", err=True)


_runtime_option = click.option(
    "--runtime", "-r", type=click.Choice(list(TRANSCRIPT_RUNTIMES)), default=None,
    help="Only this runtime's sessions (default: every runtime, recognised by its files).")


@main.command("import")
@_runtime_option
@click.option("--session", "-s", default=None,
              help="The sessionId of the one session found; with several, each one's id "
                   "becomes S/<its id>.")
@click.option("--view", type=click.Choice(["canonical", "chat"]), default="canonical",
              show_default=True, help="chat: the readable chat records instead of events.")
@click.option("--include-raw", is_flag=True, help="Copy each native record into its events.")
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

    sys.exit(run_import(list(paths), sys.stdout.buffer, sys.stderr.buffer, runtime=runtime,
                        session=session, view=view, include_raw=include_raw))  # type: ignore[arg-type]


@main.command()
@_broker_option
@_runtime_option
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

    settings = _settings(broker=broker)
    if not settings.broker:
        raise click.UsageError("ship needs --broker (or CANONFLOW_BROKER)")
    checkpoint = checkpoint or os.path.join(settings.data_dir, "ship-checkpoint.json")
    with contextlib.suppress(click.ClickException):  # unreachable: ship waits for it itself
        settings = _on_broker(settings, _for_cluster(settings))
    _quiet_repeats()  # ship says each failed attempt itself
    sys.exit(run_ship(settings, list(paths), checkpoint=checkpoint, runtime=runtime,
                      once=once, interval=interval))


@main.command()
@_broker_option
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

    settings = _settings(broker=broker)
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
            click.echo(visible(f"(gap: session {g.sessionId}: seq {g.after + 1} to "
                               f"{g.before - 1} never arrived)", lines=False))

    chat = ChatRenderer(lambda s: (sys.stdout.write(s), sys.stdout.flush()))
    topic = (DEADLETTER_TOPIC if deadletters else CHAT_TOPIC if view == "chat"
             else CANONICAL_TOPIC)
    if deadletters:
        work = follow(settings, [topic], show, from_beginning=from_beginning,
                      idle_timeout=idle_timeout)
    else:  # the consumer library: copies dropped, gaps said
        work = follow_events(settings, topic, show, on_gap=gap,
                             from_beginning=from_beginning, idle_timeout=idle_timeout)
    _on_broker(settings, work)


@main.group()
def topics() -> None:
    """Create or verify the topic catalog on a cluster."""


@topics.command("create")
@_broker_option
@_partitions_option
def topics_create(broker: str | None, partitions: int | None) -> None:
    """Create the catalog's missing topics (partitions, cleanup policy, retention)."""
    from pipeline.cluster.admin import create_topics

    settings = _settings(broker=broker, partitions=partitions)
    if not settings.broker:
        raise click.UsageError("topics create needs --broker (or CANONFLOW_BROKER)")
    created = _on_broker(settings, create_topics(settings))
    click.echo("created: " + (", ".join(created) if created else "nothing (all present)"))


@topics.command("check")
@_broker_option
@_partitions_option
def topics_check(broker: str | None, partitions: int | None) -> None:
    """Report drift between the cluster and the catalog; exit 1 if any."""
    from pipeline.cluster.admin import check_topics

    settings = _settings(broker=broker, partitions=partitions)
    if not settings.broker:
        raise click.UsageError("topics check needs --broker (or CANONFLOW_BROKER)")
    drift = _on_broker(settings, check_topics(settings))
    for d in drift:
        click.echo(f"DRIFT {d}")
    if drift:
        sys.exit(1)
    click.echo("catalog and cluster agree")


@main.command()
@click.option("--port", type=int, default=None, help="Port on 127.0.0.1 (default: a free one).")
def broker(port: int | None) -> None:
    """Run the embedded broker alone in the foreground (stopped by Ctrl-C / SIGTERM)."""
    import signal
    import threading

    from pipeline.cluster.broker import BrokerError, EmbeddedBroker

    stop = threading.Event()
    stopped_by: list[int] = []

    def on_signal(signum: int, _frame: object) -> None:
        stopped_by.append(signum)
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, on_signal)
    try:
        with EmbeddedBroker(port=port) as b:
            click.echo(f"canonflow: embedded broker at {b.url} (pid {b.pid}); Ctrl-C stops it")
            sys.stdout.flush()
            while not stop.wait(0.5):
                if b.proc is None or b.proc.poll() is not None:
                    status = b.proc.returncode if b.proc is not None else None
                    raise BrokerError(f"the embedded broker exited with status {status} "
                                      f"({b.last_words()})")
    except BrokerError as e:
        raise click.ClickException(str(e)) from None
    if stopped_by and stopped_by[0] == signal.SIGINT:
        sys.exit(INTERRUPTED)


@main.command()
@click.option("--timeout", type=float, default=90.0, show_default=True,
              help="Give up after this many seconds.")
def demo(timeout: float) -> None:
    """Embedded broker + worker + the bundled sample sessions, shown as they arrive."""
    from pipeline.tools.demo import run_demo

    sys.exit(run_demo(_settings(), timeout=timeout))


@main.command()
@_run_broker_option
@_partitions_option
@click.option("--messages", type=int, default=20000, show_default=True,
              help="Native messages in the workload (copies of the captured conversations).")
@click.option("--repeat", type=int, default=3, show_default=True, help="Runs per measurement.")
@click.option("--batch", type=click.IntRange(min=1), default=50, show_default=True,
              help="Native messages per record in the batched run.")
@click.option("--fixtures", type=click.Path(file_okay=False, exists=True), default=None,
              help="Captured conversations (default ../shared/fixtures/captured).")
@click.option("--timeout", type=float, default=300.0, show_default=True)
@click.option("--recovery-sessions", type=int, default=100_000, show_default=True,
              help="Sessions in the table for the recovery measurement (0 skips it).")
@click.option("--long", "long_", is_flag=True,
              help="Run only the long-session workload: one session per provider and size, "
                   "its answer and command output that long, through a worker with "
                   "batch_max=1 (changelog, canonical and chat bytes per native byte, largest "
                   "table value, peak RSS, seconds).")
@click.option("--long-sizes", default="64k,1m,8m", show_default=True,
              help="With --long: the sizes of the answer and the output (k = KiB, m = MiB).")
@click.option("--long-providers", default="codex,claude,opencode,acp", show_default=True,
              help="With --long: the providers.")
@click.option("--replay-messages", type=int, default=200_000, show_default=True,
              help="Messages in the offline replay section's Claude stream-json file "
                   "(0 skips it).")
@click.option("--replay", "replay_only", is_flag=True,
              help="Run only the offline replay section: canonflow replay beside a bare "
                   "msgspec decode of the same file, and redaction's share of it.")
@click.option("--latency", "latency_only", is_flag=True,
              help="Run only the latency section: native messages offered at fixed rates to "
                   "a worker, one per record; produce -> agents.canonical p50, p99, max "
                   "(about 90 s).")
@click.option("--latency-rates", default="100,1000,5000", show_default=True,
              help="With --latency: the rates offered, native messages per second.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def bench(broker: str | None, partitions: int | None, messages: int, repeat: int, batch: int,
          fixtures: str | None, timeout: float, recovery_sessions: int, long_: bool,
          long_sizes: str, long_providers: str, replay_messages: int, replay_only: bool,
          latency_only: bool, latency_rates: str, as_json: bool) -> None:
    """Throughput and memory: adapter core, aiokafka and Faust ceilings, canonflow end to end,
    the offline replay against a bare decode.

    With --long, only the long-session workload (pipeline/tools/bench_long.py); with
    --replay, only the offline replay (bench_replay.py); with --latency, only the
    latency at fixed rates (bench_latency.py)."""
    import json
    from pathlib import Path

    settings = _settings(broker=broker, partitions=partitions)
    say = lambda s: click.echo(s, err=True)  # noqa: E731
    if replay_only:
        from pipeline.tools.bench_replay import format_replay_report, run_replay_bench

        result = run_replay_bench(replay_messages or 200_000, repeat, say)
        click.echo(json.dumps(result, indent=2) if as_json
                   else "\n".join(format_replay_report(result)))
        return
    if latency_only:
        from pipeline.tools.bench_latency import format_latency_report, run_latency_bench

        try:
            rates = [int(r) for r in latency_rates.split(",") if r.strip()]
        except ValueError:
            rates = []
        if not rates or min(rates) < 1:
            raise click.BadParameter("positive integers, comma-separated",
                                     param_hint="--latency-rates")
        result = run_latency_bench(settings, rates=rates,
                                   fixtures=Path(fixtures) if fixtures else None, say=say)
        click.echo(json.dumps(result, indent=2) if as_json
                   else "\n".join(format_latency_report(result)))
        return
    if long_:
        from pipeline.tools.bench_long import (
            CAPTURES,
            format_long_report,
            parse_sizes,
            run_long_bench,
        )

        try:
            sizes = parse_sizes(long_sizes)
        except ValueError as e:
            raise click.BadParameter(str(e), param_hint="--long-sizes") from None
        providers = [p.strip() for p in long_providers.split(",") if p.strip()]
        unknown = [p for p in providers if p not in CAPTURES]
        if unknown or not providers:
            raise click.BadParameter(f"{unknown or 'none given'}; use some of "
                                     f"{', '.join(CAPTURES)}", param_hint="--long-providers")
        result = run_long_bench(settings, sizes=sizes, providers=providers,
                                fixtures=Path(fixtures) if fixtures else None, timeout=timeout,
                                say=lambda s: click.echo(s, err=True))
        click.echo(json.dumps(result, indent=2) if as_json else format_long_report(result))
        return

    from pipeline.tools.bench import format_report, run_bench

    result = run_bench(settings, messages=messages, repeat=repeat, batch=batch,
                       fixtures=Path(fixtures) if fixtures else None, timeout=timeout,
                       say=say, recovery_sessions=recovery_sessions,
                       replay_messages=replay_messages)
    click.echo(json.dumps(result, indent=2) if as_json else format_report(result))


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


def _add_commands() -> None:
    """Commands that live in their own modules (their heavy imports stay inside them)."""
    from pipeline.tools.manifests import topics_manifest
    from pipeline.views.otel import otel_export
    from pipeline.views.ui import ui

    topics.add_command(topics_manifest)
    main.add_command(otel_export)
    main.add_command(ui)


_add_commands()

if __name__ == "__main__":
    main(prog_name="canonflow")
