"""What every `canonflow` command shares: its settings, its exit statuses, running a
coroutine against a broker that may not answer (one line, never a traceback), and the
options several commands take."""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any, TypeVar

import click

from pipeline.transcripts.discovery import RUNTIMES as TRANSCRIPT_RUNTIMES

T = TypeVar("T")

#: Exit status of a command whose broker does not answer (1 is `topics check`'s drift).
UNREACHABLE = 3
#: Exit status after Ctrl-C (SIGINT), as a shell reports it.
INTERRUPTED = 130


class BrokerUnreachable(click.ClickException):
    exit_code = UNREACHABLE


def say_error(message: str) -> None:
    """One line on stderr: a message that spans lines (an error's text) is joined."""
    click.echo(" ".join(message.split()), err=True)


def load_settings(**overrides: object):  # noqa: ANN202
    from pipeline.settings import from_env

    try:
        return from_env(**overrides)
    except ValueError as e:
        raise click.UsageError(str(e)) from None


def check_translation_env() -> bool:
    """The settings a translation reads from the environment, as the worker reads them
    (CANONFLOW_REDACT and its companions, CANONFLOW_ITEM_CAP, CANONFLOW_INCLUDE_RAW),
    checked before any input is read or any broker started: a bad one is a usage error,
    one line, not a traceback once the work has begun. Returns CANONFLOW_INCLUDE_RAW's
    value (the offline translations' --include-raw is its stand-in)."""
    from pipeline.privacy.redact import Redactor
    from pipeline.settings import include_raw_from_env, item_cap_from_env

    try:
        Redactor.from_env()
        item_cap_from_env()
        return include_raw_from_env()
    except ValueError as e:  # RedactionError is one
        raise click.UsageError(str(e)) from None


def on_broker(settings: Any, coro: Coroutine[Any, Any, T]) -> T:
    """Run `coro` (which talks to the broker of `settings`); a broker that does not
    answer, or refuses, is one line (BrokerUnreachable, or exit 1), not a traceback.
    aiokafka logs each failed connection (through Python's last-resort handler, with no
    logging set up): the last of them becomes the line's reason instead. The SASL login
    is tried first: a refused one is its own line (exit 1), not a broker that is down."""
    import asyncio
    import logging

    from aiokafka.errors import KafkaConnectionError, KafkaError, KafkaTimeoutError

    from pipeline.cluster.admin import LoginRefused, check_login

    async def logged_in() -> T:
        try:
            await check_login(settings)
        except BaseException:
            coro.close()  # never started: no "never awaited" warning on stderr
            raise
        return await coro

    said: list[str] = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = lambda record: said.append(record.getMessage())  # type: ignore[method-assign]
    log = logging.getLogger("aiokafka")
    log.addHandler(handler)
    propagate, log.propagate = log.propagate, False
    try:
        return asyncio.run(_interruptible(logged_in()))
    except LoginRefused as e:
        raise click.ClickException(str(e)) from None
    except (KafkaConnectionError, KafkaTimeoutError, OSError, TimeoutError) as e:
        reason = said[-1] if said else short(e)
        raise BrokerUnreachable(f"no broker answers at {settings.bootstrap} "
                                f"({reason})") from None
    except KafkaError as e:
        raise click.ClickException(f"the broker at {settings.bootstrap}: {short(e)}") from None
    finally:
        log.removeHandler(handler)
        log.propagate = propagate


#: How long Ctrl-C waits for a command's work to end once cancelled.
CTRL_C_GRACE = 2.0


async def _interruptible(coro: Coroutine[Any, Any, T]) -> T:
    """Run `coro` so that Ctrl-C stops it: cancelled, then KeyboardInterrupt (exit 130).
    asyncio.run's own handler cancels once and waits; aiokafka may swallow a
    cancellation that lands while a client bootstraps (a `tail` told to stop in its
    first seconds went on forever, seen under load), so the work is cancelled again
    every tenth of a second, and after CTRL_C_GRACE seconds the process exits 130
    whatever the library does (a command's partial work is what Ctrl-C asks to drop)."""
    import asyncio
    import os
    import signal
    import sys

    loop = asyncio.get_running_loop()
    work = asyncio.ensure_future(coro)
    interrupted = asyncio.Event()
    loop.add_signal_handler(signal.SIGINT, interrupted.set)
    waiter = asyncio.ensure_future(interrupted.wait())
    try:
        await asyncio.wait({work, waiter}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        loop.remove_signal_handler(signal.SIGINT)
    waiter.cancel()
    if work.done():
        return work.result()
    deadline = loop.time() + CTRL_C_GRACE
    while not work.done() and loop.time() < deadline:
        work.cancel()
        await asyncio.wait({work}, timeout=0.1)
    if not work.done():
        sys.stdout.flush()
        os._exit(INTERRUPTED)
    raise KeyboardInterrupt


def short(error: BaseException) -> str:
    """An error's text without its class name repeated and without aiokafka's address
    tuples (`Unable to bootstrap from [('127.0.0.1', 1, <AddressFamily...>)]`)."""
    text = str(error) or type(error).__name__
    name = type(error).__name__ + ": "
    text = text[len(name):] if text.startswith(name) else text
    return "unable to connect" if text.startswith("Unable to bootstrap") else text


def for_cluster(settings: Any) -> Coroutine[Any, Any, Any]:
    """The settings for the cluster (the embedded broker's on Tansu): for_cluster."""
    from pipeline.worker.process import for_cluster as settings_for

    return settings_for(settings)


def quiet_repeats() -> None:
    """Log lines (aiokafka's, one per failed connection) on stderr, each shape at most
    once a minute (pipeline.worker.process.Repeats), as the worker's."""
    import logging

    from pipeline.worker.process import Repeats

    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    for handler in logging.getLogger().handlers:
        handler.addFilter(Repeats())


broker_option = click.option(
    "--broker", "-b", envvar="CANONFLOW_BROKER", default=None,
    help="kafka://host:port[;host:port] of the cluster (env CANONFLOW_BROKER); required.")
run_broker_option = click.option(
    "--broker", "-b", envvar="CANONFLOW_BROKER", default=None,
    help="kafka://host:port[;host:port] of an existing cluster (env CANONFLOW_BROKER). "
         "Default: start an embedded broker on 127.0.0.1.")
partitions_option = click.option(
    "--partitions", type=int, default=None,
    help="Partitions of every co-partitioned topic (env CANONFLOW_PARTITIONS, default 12).")

runtime_option = click.option(
    "--runtime", "-r", type=click.Choice(list(TRANSCRIPT_RUNTIMES)), default=None,
    help="Only this runtime's sessions (default: every runtime, recognised by its files).")
