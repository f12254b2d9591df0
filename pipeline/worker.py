"""Running the worker: on a given cluster, or on an embedded broker of its own."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import IO

from pipeline.broker import EmbeddedBroker, stop_process
from pipeline.settings import Settings, to_env

#: Tansu's ListOffsets(latest) is exact only when every record is its own batch
#: (DESIGN.md "Embedded default"), which table recovery depends on.
EMBEDDED_PRODUCER_BATCH = 1
#: Tansu completes a group join only after the rebalance timeout (measured: 30 s
#: with Faust's default, 5 s with 5 s), so the embedded broker gets a short one.
EMBEDDED_REBALANCE_TIMEOUT = 3.0


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


def embedded_settings(settings: Settings, url: str) -> Settings:
    """Settings for a worker on the embedded broker at `url` (see the constants above)."""
    return settings.replace(
        broker=url,
        producer_max_batch_size=settings.producer_max_batch_size or EMBEDDED_PRODUCER_BATCH,
        rebalance_timeout=min(settings.rebalance_timeout, EMBEDDED_REBALANCE_TIMEOUT))


def ensure_topics(settings: Settings) -> list[str]:
    """Create the catalog's missing topics; returns their names."""
    from pipeline.admin import create_topics

    return asyncio.run(create_topics(settings))


def run_worker(settings: Settings) -> None:
    """Run the Faust worker in the foreground until SIGINT/SIGTERM (returns then)."""
    import faust

    from pipeline.app import create_app

    app = create_app(settings)
    worker = faust.Worker(app, loglevel=settings.log_level, quiet=True,
                          redirect_stdouts=False)
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


class WorkerProcess:
    """`canonflow run --broker URL` as a child process, stopped by its own PID."""

    def __init__(self, settings: Settings, *, log_path: str | None = None,
                 env: dict[str, str] | None = None):
        self.settings = settings
        self.log_path = log_path
        self.env = env or {}
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> WorkerProcess:
        env = {k: v for k, v in os.environ.items() if not k.startswith("CANONFLOW_")}
        env.update(to_env(self.settings))
        env.update(self.env)
        out = open(self.log_path, "ab") if self.log_path else subprocess.DEVNULL  # noqa: SIM115
        self.proc = subprocess.Popen([sys.executable, "-m", "pipeline.cli", "run"],
                                     stdin=subprocess.DEVNULL, stdout=out,
                                     stderr=subprocess.STDOUT, env=env)
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
