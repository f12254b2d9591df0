"""`canonflow run`, `broker` and `demo`: the worker, the embedded broker alone, and
the demo of both."""

from __future__ import annotations

import sys
from typing import IO

import click

from pipeline.cli.common import (
    INTERRUPTED,
    check_translation_env,
    load_settings,
    partitions_option,
    run_broker_option,
)

#: The lock file a worker holds in its data directory while it runs (flock: released
#: when the process ends, however it ends), with its PID.
DATA_DIR_LOCK = "worker.lock"


def hold_data_dir(path: str) -> IO[bytes]:
    """Lock the worker's data directory for this process, or raise ClickException: two
    workers on one directory would share its table stores, and the second one hung,
    with Faust's warnings. Returns the open lock file: the lock lasts as long as it."""
    import fcntl
    import os

    where = os.path.abspath(path)
    try:
        os.makedirs(where, exist_ok=True)
        lock = open(os.path.join(where, DATA_DIR_LOCK), "a+b")  # noqa: SIM115
    except OSError as e:
        raise click.ClickException(f"cannot use the data directory {where} "
                                   f"(CANONFLOW_DATA_DIR): {e.strerror}") from None
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.seek(0)
        pid = lock.read(20).decode("ascii", "replace").strip()
        lock.close()
        who = f"another worker (pid {pid})" if pid.isdigit() else "another worker"
        raise click.ClickException(f"{who} runs on the data directory {where}: give each "
                                   "worker its own (CANONFLOW_DATA_DIR)") from None
    lock.truncate(0)
    lock.write(b"%d\n" % os.getpid())
    lock.flush()
    return lock


@click.command()
@run_broker_option
@partitions_option
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
    from pipeline.cluster.admin import LoginRefused
    from pipeline.cluster.broker import BrokerError, port_in_use
    from pipeline.worker.process import (
        SignalHold,
        Stopped,
        broker_for,
        ensure_topics_waiting,
        run_worker,
    )

    settings = load_settings(broker=broker, partitions=partitions, include_raw=include_raw,
                         web_port=web_port, web_enabled=False if no_web else None)
    check_translation_env()
    _held = hold_data_dir(settings.data_dir)  # locked until this process ends
    if settings.web_enabled and port_in_use(settings.web_host, settings.web_port):
        raise click.ClickException(f"cannot listen on {settings.web_host}:{settings.web_port}"
                                   " (the worker's web server): the port is in use; "
                                   "--web-port N, or --no-web")
    hold = SignalHold()  # Ctrl-C between the wait for the broker and the worker's start
    try:
        with broker_for(settings) as live:
            try:  # a worker of a fleet may start before its broker: it waits for it
                live, created = ensure_topics_waiting(live, say=lambda s: click.echo(s, err=True),
                                                      hold=hold)
            except Stopped as e:
                click.echo(f"canonflow: stopped ({e}) before the broker answered", err=True)
                sys.exit(e.code)
            kind = "Tansu: the embedded broker's settings" if live.broker_kind == "tansu" \
                else "Kafka"
            click.echo(f"canonflow: broker {live.broker} ({kind}); topics created: "
                       f"{len(created)}; providers: {', '.join(live.providers)}", err=True)
            status = run_worker(live, hold=hold)
    except (BrokerError, LoginRefused) as e:
        raise click.ClickException(str(e)) from None
    sys.exit(status)


@click.command()
@click.option("--port", type=int, default=None, help="Port on 127.0.0.1 (default: a free one).")
@click.option("--engine", type=click.Choice(["tansu", "kafka"]), default="tansu",
              show_default=True,
              help="tansu: the embedded broker (starts at once, memory storage). kafka: "
                   "Apache Kafka, one KRaft node (needs java 17+, and mvn to fetch its "
                   "jars the first time).")
def broker(port: int | None, engine: str) -> None:
    """Run a broker alone in the foreground (stopped by Ctrl-C / SIGTERM)."""
    import signal
    import threading

    from pipeline.cluster.broker import BrokerError, EmbeddedBroker
    from pipeline.cluster.kafka import KafkaBroker

    stop = threading.Event()
    stopped_by: list[int] = []

    def on_signal(signum: int, _frame: object) -> None:
        stopped_by.append(signum)
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, on_signal)
    try:
        b: EmbeddedBroker | KafkaBroker
        if engine == "kafka":
            b = KafkaBroker(port=port)
            name = f"Apache Kafka {b.version}"
        else:
            b = EmbeddedBroker(port=port)
            name = "embedded broker"
        with b:
            click.echo(f"canonflow: {name} at {b.url} (pid {b.pid}, log {b.log_path}); "
                       "Ctrl-C stops it")
            sys.stdout.flush()
            while not stop.wait(0.5):
                if b.proc is None or b.proc.poll() is not None:
                    status = b.proc.returncode if b.proc is not None else None
                    raise BrokerError(f"the {name} exited with status {status} "
                                      f"({b.last_words()})")
    except BrokerError as e:
        raise click.ClickException(str(e)) from None
    if stopped_by and stopped_by[0] == signal.SIGINT:
        sys.exit(INTERRUPTED)


@click.command()
@click.option("--timeout", type=float, default=90.0, show_default=True,
              help="Give up after this many seconds.")
def demo(timeout: float) -> None:
    """Embedded broker + worker + the bundled sample sessions, shown as they arrive."""
    from pipeline.tools.demo import run_demo

    settings = load_settings()
    check_translation_env()
    sys.exit(run_demo(settings, timeout=timeout))
