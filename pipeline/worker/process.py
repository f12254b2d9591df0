"""Running the worker: on a given cluster, or on an embedded broker of its own."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import IO

from pipeline.cluster.admin import unreachable
from pipeline.cluster.broker import EmbeddedBroker, die_with_parent, stop_process
from pipeline.settings import Settings, child_env
from pipeline.worker.exceptions import Stopped

#: Tansu's ListOffsets(latest) is exact only when every record is its own batch
#: (see docs/operating/broker.md), which table recovery depends on.
EMBEDDED_PRODUCER_BATCH = 1
#: Tansu completes a group join only after the rebalance timeout (measured: 30 s
#: with Faust's default, 5 s with 5 s), so the embedded broker gets a short one.
EMBEDDED_REBALANCE_TIMEOUT = 3.0
#: Tansu answers a fetch only when its wait is over, even when records came meanwhile
#: (see docs/operating/broker.md), so the embedded broker gets a short one.
EMBEDDED_FETCH_MAX_WAIT = 0.05
#: The start of the line `canonflow run` prints per attempt while the broker does not answer.
WAITING = "canonflow: waiting for the broker"
#: Seconds between two attempts to reach the broker at start: first, doubling to max.
CONNECT_FIRST_SECONDS = 1.0
CONNECT_MAX_SECONDS = 30.0


@contextlib.contextmanager
def broker_for(settings: Settings, *, say: IO[str] = sys.stderr,
               log_path: str | None = None) -> Iterator[Settings]:
    """Yield settings pointing at a broker: the configured one, or an embedded Tansu
    started here (and stopped on exit, whatever happens)."""
    if settings.broker:
        yield settings
        return
    broker = EmbeddedBroker(log_path=log_path).start()
    try:
        print(f"canonflow: embedded broker (Tansu, memory storage) at {broker.url} "
              f"pid {broker.pid}", file=say, flush=True)
        yield embedded_settings(settings, broker.url)
    finally:
        broker.stop()


def embedded_settings(settings: Settings, url: str, engine: str = "tansu") -> Settings:
    """Settings for a worker on the broker at `url` that canonflow started itself: on
    the embedded Tansu (`engine` "tansu"), its settings (see the constants above); on
    Apache Kafka ("kafka"), none of them, only the broker's address and kind."""
    if engine != "tansu":
        return settings.replace(broker=url, broker_kind=engine)
    return settings.replace(
        broker=url, broker_kind="tansu",
        producer_max_batch_size=settings.producer_max_batch_size or EMBEDDED_PRODUCER_BATCH,
        fetch_max_wait=(EMBEDDED_FETCH_MAX_WAIT if settings.fetch_max_wait is None
                        else settings.fetch_max_wait),
        rebalance_timeout=min(settings.rebalance_timeout, EMBEDDED_REBALANCE_TIMEOUT))


async def for_cluster(settings: Settings) -> Settings:
    """`settings` for the cluster they point at: the embedded broker's (embedded_settings)
    when it is Tansu, however it was started (`canonflow broker`, a test's fixture, a
    Tansu of its own), else unchanged. `broker_kind` says what it is ("tansu", "kafka"),
    or "auto": then the cluster's id says it (pipeline.cluster.admin.is_tansu).

    Raises aiokafka's errors when the broker does not answer."""
    from pipeline.cluster.admin import is_tansu

    kind = settings.broker_kind
    if kind == "auto":
        kind = "tansu" if await is_tansu(settings) else "kafka"
    if kind == "tansu":
        return embedded_settings(settings, settings.broker)
    return settings.replace(broker_kind=kind)


def ensure_topics(settings: Settings) -> list[str]:
    """Create the catalog's missing topics; returns their names."""
    from pipeline.cluster.admin import create_topics

    return asyncio.run(create_topics(settings))


class SignalHold:
    """SIGINT and SIGTERM recorded instead of acted on, between their two owners: the
    wait for the broker (its event loop's handlers) and the Faust worker (mode's, once it
    runs), which acts on what was held (run_worker). Python's own Ctrl-C raises
    KeyboardInterrupt wherever the main thread is, and one raised in a finalizer
    (`__del__`) is printed and lost: the worker then went on to ready and ran on (the
    Ctrl-C-while-starting test, under load: 2 runs in 15)."""

    def __init__(self) -> None:
        self.signals: list[int] = []

    def start(self) -> None:
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, self._record)

    def _record(self, signum: int, _frame: object) -> None:
        self.signals.append(signum)

    def take(self) -> list[int]:
        """The signals that came, in order, and forgotten."""
        came, self.signals = self.signals, []
        return came


def ensure_topics_waiting(settings: Settings, *,
                          say: Callable[[str], None] = lambda s: print(s, file=sys.stderr),
                          hold: SignalHold | None = None) -> tuple[Settings, list[str]]:
    """Create the catalog's missing topics, waiting for the broker as long as it does not
    answer: a worker of a fleet may start before its cluster (or while it restarts).
    Each failed attempt is one line through `say` (what it waits for, the error, when it
    tries again), and attempts are CONNECT_FIRST_SECONDS apart, doubling up to
    CONNECT_MAX_SECONDS. Returns the settings for that cluster (for_cluster) and the
    topics created.

    Raises Stopped when SIGINT or SIGTERM arrives meanwhile (at once, during an attempt
    or between two), and what the cluster answers that waiting cannot change (a refused
    login, an unauthorised operation). With `hold`, the signals that come after the
    wait are held for the next owner (SignalHold)."""
    try:
        return asyncio.run(_ensure_topics_waiting(settings, say))
    finally:
        if hold is not None:  # the loop's handlers went with it
            hold.start()


async def _prepare(settings: Settings) -> tuple[Settings, list[str]]:
    from pipeline.cluster.admin import check_login, create_topics

    await check_login(settings)  # a refused login: LoginRefused, not worth waiting for
    settings = await for_cluster(settings)
    return settings, await create_topics(settings)


async def _ensure_topics_waiting(settings: Settings, say: Callable[[str], None]
                                 ) -> tuple[Settings, list[str]]:
    loop = asyncio.get_running_loop()
    stop: asyncio.Future[int] = loop.create_future()
    signals = (signal.SIGINT, signal.SIGTERM)
    for signum in signals:
        loop.add_signal_handler(signum, lambda n=signum: stop.done() or stop.set_result(n))
    # aiokafka logs every refused connection at error level (Python's last-resort handler
    # prints them with no logging configured yet): one line per attempt says it here.
    aiokafka_log = logging.getLogger("aiokafka")
    level = aiokafka_log.level
    aiokafka_log.setLevel(logging.CRITICAL)
    try:
        delay, attempt = CONNECT_FIRST_SECONDS, 0
        while True:
            attempt += 1
            creating = asyncio.ensure_future(_prepare(settings))
            await _until(creating, stop)
            try:
                return creating.result()
            except Exception as e:
                if not unreachable(e):
                    raise
                error = str(e) if str(e).startswith(type(e).__name__) else \
                    f"{type(e).__name__}: {e}".rstrip(": ")
                error = " ".join(error.split())[:300]  # one line
            say(f"{WAITING} at {settings.bootstrap} (attempt {attempt}: {error}); "
                f"next attempt in {delay:.0f} s")
            await _until(asyncio.ensure_future(asyncio.sleep(delay)), stop)
            delay = min(delay * 2, CONNECT_MAX_SECONDS)
    finally:
        aiokafka_log.setLevel(level)
        for signum in signals:
            loop.remove_signal_handler(signum)


async def _until(task: asyncio.Future[object], stop: asyncio.Future[int]) -> None:
    """Wait for `task` or `stop`; once `stop` has come, cancel `task` and raise Stopped."""
    await asyncio.wait({task, stop}, return_when=asyncio.FIRST_COMPLETED)
    if stop.done():
        task.cancel()
        with contextlib.suppress(BaseException):
            await task
        raise Stopped(stop.result())


#: Seconds between two log lines of the same shape (Repeats): during a broker outage
#: aiokafka logs each failed connection, fetch and metadata update of each client, 2,779
#: lines in 40 s measured, where one of each kind a minute says as much.
REPEAT_SECONDS = 60.0
#: Seconds the worker may take to stop after Ctrl-C before it exits anyway: with the
#: broker down, Faust's orderly stop waited 61 s measured for clients that cannot close.
#: Exiting then loses nothing (as SIGKILL: nothing undelivered was acknowledged).
INTERRUPT_SECONDS = 5.0
_VARYING = re.compile(r"0x[0-9a-fA-F]+|\d+")


class Repeats(logging.Filter):
    """Lets through one warning or error of each shape (logger, level, message with its
    numbers left out: node ids, ports, addresses, times) per `every` seconds; the next
    one through says how many were held back meanwhile. The shapes kept are bounded.
    Info and debug records (a log level asked for) all pass."""

    def __init__(self, every: float = REPEAT_SECONDS,
                 clock: Callable[[], float] = time.monotonic, most: int = 1000):
        super().__init__()
        self.every, self.clock, self.most = every, clock, most
        self.shapes: dict[tuple[str, int, str], list[float]] = {}  # -> [next time, held]

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:  # asked for with CANONFLOW_LOG_LEVEL: all of it
            return True
        shape = (record.name, record.levelno, _VARYING.sub("#", record.getMessage()))
        now = self.clock()
        seen = self.shapes.get(shape)
        if seen is not None and now < seen[0]:
            seen[1] += 1
            return False
        if seen is None and len(self.shapes) >= self.most:
            self.shapes = {k: v for k, v in self.shapes.items() if now < v[0]}
            if len(self.shapes) >= self.most:
                return True  # too many shapes to follow: let it through, keep nothing
        if seen is not None and seen[1]:
            # the message made whole, as the one argument of "%s": a record's args are
            # formatted again by every handler that formats it
            record.args = (f"{record.getMessage()} ({seen[1]:.0f} more like this in "
                           f"{self.every:.0f} s)",)
            record.msg = "%s"
        self.shapes[shape] = [now + self.every, 0]
        return True


#: The line `canonflow run` prints once, when the worker has its partitions, its tables
#: recovered and its web server up (followed by the web address, or "no web server").
READY = "canonflow: ready"


#: Allocations between two young-generation collections in a running worker (Python's
#: default is 700). See _tune_gc.
GC_YOUNG_THRESHOLD = 20_000


def _tune_gc() -> None:
    """The cyclic garbage collector, once the worker has started. A batch allocates
    tens of thousands of short-lived objects (records, events, their encodings), which
    reference counting frees, not the collector; with Python's defaults it ran every 700
    allocations, each time walking the batch's live objects and, after at most 100 such
    runs, all of the process's (the app, its tables, every module's objects). Here: what exists once
    the worker is up is frozen (gc.freeze: never walked again; reference counting still
    frees it), and the young generation is collected every GC_YOUNG_THRESHOLD
    allocations. Measured (`canonflow bench`'s workload, 100k messages, alternated 4
    times): up to 50 per record 18.6-18.8k -> 20.4-21.1k msg/s; one per record unchanged
    (5.8-6.3k either way). py-spy had put 6% of the worker's samples in gc_collect_main."""
    import gc

    gc.freeze()
    gc.set_threshold(GC_YOUNG_THRESHOLD, 10, 10)


def run_worker(settings: Settings, *, say: Callable[[str], None] = lambda s: print(
        s, file=sys.stderr, flush=True), hold: SignalHold | None = None) -> int:
    """Run the Faust worker in the foreground until SIGINT/SIGTERM; returns the exit
    status (130 after SIGINT, as a shell reports Ctrl-C; 0 after SIGTERM). Says READY
    through `say` once, when Faust's start is over. The signals `hold` held until the
    worker's own handlers are in place are acted on then, in order."""
    import warnings

    import faust

    from pipeline.worker.app import create_app

    # pipeline.ops.web sets Faust's web options after the app is made but before its
    # web server is (which it checks): the warning Faust gives for that is noise here.
    warnings.filterwarnings("ignore", message=".*web_application_options")
    app = create_app(settings)
    worker = faust.Worker(app, loglevel=settings.log_level, quiet=True,
                          redirect_stdouts=False)
    if not sys.stdout.isatty():  # Faust's spinner writes cursor codes whatever stdout is
        worker.spinner = None
    web = (f"http://{settings.web_host}:{settings.web_port}/health"
           if settings.web_enabled else "no web server")
    started = worker.on_startup_finished  # Faust's "the worker is running" callback
    said: list[bool] = []

    async def on_startup_finished() -> None:
        await started()
        if not said:
            _tune_gc()
            said.append(True)
            say(f"{READY}: {web}")

    worker.on_startup_finished = on_startup_finished  # type: ignore[method-assign]
    root_logger_set = worker.on_setup_root_logger  # Faust's hook, once its handlers exist
    repeats = Repeats()

    def on_setup_root_logger(logger: logging.Logger, level: int) -> None:
        root_logger_set(logger, level)
        for handler in logger.handlers:
            handler.addFilter(repeats)

    worker.on_setup_root_logger = on_setup_root_logger  # type: ignore[method-assign]
    interrupted: list[bool] = []
    on_sigint = worker._on_sigint  # mode's handler: it stops the worker in order

    def sigint() -> None:
        if interrupted:  # a second Ctrl-C: at once
            _exit_now("canonflow: stopped at a second Ctrl-C")
        interrupted.append(True)
        threading.excepthook = _thread_stopped
        deadline = threading.Timer(INTERRUPT_SECONDS, _exit_now, [
            f"canonflow: not stopped {INTERRUPT_SECONDS:.0f} s after Ctrl-C (the broker "
            "unreachable?): exiting; nothing unpublished was acknowledged"])
        deadline.daemon = True
        deadline.start()
        on_sigint()

    worker._on_sigint = sigint  # type: ignore[method-assign]
    on_sigterm = worker._on_sigterm

    def sigterm() -> None:
        threading.excepthook = _thread_stopped
        on_sigterm()

    worker._on_sigterm = sigterm  # type: ignore[method-assign]
    install = worker.install_signal_handlers  # mode's, as Faust's start begins

    def install_signal_handlers() -> None:
        install()
        for signum in hold.take() if hold is not None else []:
            if signum == signal.SIGINT:
                sigint()
            else:
                sigterm()

    worker.install_signal_handlers = install_signal_handlers  # type: ignore[method-assign]
    # Measured: aiokafka and faust log at debug level on every send, and with the
    # root logger left at DEBUG each call built a LogRecord that was then dropped.
    level = logging.getLevelName(settings.log_level.upper())
    for name in ("aiokafka", "faust", "mode"):
        logging.getLogger(name).setLevel(level if isinstance(level, int) else logging.WARNING)
    try:
        worker.execute_from_commandline()
    except SystemExit as e:
        if e.code not in (0, None):
            raise
    return 130 if interrupted else 0


def _thread_stopped(args: threading.ExceptHookArgs) -> None:
    """Once the worker stops, a thread that ends with an error (Faust's consumer thread,
    its broker gone) is one line, not a traceback: the stop goes on regardless."""
    error = f"{args.exc_type.__name__}: {args.exc_value}".rstrip(": ")
    name = args.thread.name if args.thread is not None else "a thread"
    print(f"canonflow: while stopping, {name} ended with {' '.join(error.split())[:300]}",
          file=sys.stderr, flush=True)


def _exit_now(why: str) -> None:
    """Leave at once with the Ctrl-C status, as SIGKILL would (nothing is lost: the
    records of an undelivered batch were not acknowledged, and are read again)."""
    print(why, file=sys.stderr, flush=True)
    os._exit(130)


class WorkerProcess:
    """`canonflow run --broker URL` as a child process, stopped by its own PID."""

    def __init__(self, settings: Settings, *, log_path: str | None = None,
                 env: dict[str, str] | None = None):
        self.settings = settings
        self.log_path = log_path
        self.env = env or {}
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> WorkerProcess:
        env = child_env(self.settings)
        env.update(self.env)
        out = open(self.log_path, "ab") if self.log_path else subprocess.DEVNULL  # noqa: SIM115
        self.proc = subprocess.Popen([sys.executable, "-m", "pipeline.cli", "run"],
                                     stdin=subprocess.DEVNULL, stdout=out,
                                     stderr=subprocess.STDOUT, env=env,
                                     preexec_fn=die_with_parent())  # no orphan worker
        if out is not subprocess.DEVNULL:
            out.close()
        return self

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout: float = 20.0) -> int | None:
        """SIGTERM, then SIGKILL after `timeout`; returns the exit status."""
        proc, self.proc = self.proc, None
        return stop_process(proc, timeout) if proc is not None else None

    def kill(self) -> None:
        """SIGKILL: a crash, for tests."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc = None
