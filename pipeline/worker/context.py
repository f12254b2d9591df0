"""What a normalize agent's parts share: `ProcessingContext`.

One agent reads one raw topic. Its batches (pipeline.worker.app), its idle close
(pipeline.worker.idle) and its stall watch (pipeline.worker.stall) all read and write
the same tables and publish through the same checkpoint (pipeline.worker.checkpoint);
the context is everything they share, built once per agent by the app factory.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from pipeline.ops.metrics import WorkerMetrics
from pipeline.privacy.redact import Redactor
from pipeline.settings import Settings
from pipeline.worker.faust_internals import local
from pipeline.worker.fleet import FleetStage
from pipeline.worker.normalize import BatchSpool, Normalizer
from pipeline.worker.output import OutputProducer
from pipeline.worker.waits import Waits

__all__ = ["ProcessingContext", "Sessions", "Tables"]


class Tables:
    """A normalize agent's two tables: session states, and their items' spooled chunks."""

    def __init__(self, sessions: Any, items: Any, redactor: Redactor | None = None):
        self.sessions = sessions
        self.items = items
        self.redactor = redactor  # redacts the spooled chunks before they are stored

    def spool(self) -> BatchSpool:
        data = local(self.items)
        return BatchSpool(lambda key: data.get(key), self.redactor)


class Sessions:
    """What an agent shares with its idle close and stall watch: the lock that keeps
    them from interleaving on one table, its pending changelog
    (pipeline.worker.checkpoint.PendingChangelog), when each local session last had a
    record, and what each waits on since its last event (pipeline.worker.waits)."""

    def __init__(self, pending: Any) -> None:
        self.lock = asyncio.Lock()
        self.pending = pending
        self.last_seen: dict[bytes, float] = {}
        self.waits = Waits()


@dataclass(frozen=True)
class ProcessingContext:
    """One normalize agent's shared parts (see the module doc)."""

    app: Any  # the Faust app
    settings: Settings
    name: str  # the agent's name: normalize.<provider>
    provider: str
    tables: Tables
    step: Normalizer
    sessions: Sessions
    sink: OutputProducer
    metrics: WorkerMetrics
    fleet: FleetStage | None
