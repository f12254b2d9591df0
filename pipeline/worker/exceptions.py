"""The exceptions the worker raises. `WorkerError` is their root."""

from __future__ import annotations

import signal

__all__ = ["Abandoned", "BadHeader", "Stopped", "WorkerError"]


class WorkerError(Exception):
    """The root of the worker's own exceptions."""


class Abandoned(WorkerError):  # noqa: N818 - a way out, not an error
    """The worker began to stop while a delivery was being sent again: it was given up,
    undelivered (OutputProducer.publish). The batch it belonged to is not acknowledged,
    and is read again after the restart."""


class Stopped(WorkerError):  # noqa: N818 - a way out, not an error
    """SIGINT or SIGTERM came while the worker waited for its broker; `code` is the exit
    status to leave with (130 for SIGINT, as a shell reports Ctrl-C; 0 for SIGTERM, an
    orderly stop)."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.code = 130 if signum == signal.SIGINT else 0


class BadHeader(WorkerError, ValueError):
    """A header canonflow reads holds a value it cannot take."""
