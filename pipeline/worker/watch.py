"""The source watch: every health probe interval, a look at the worker's topics and
source partitions (pipeline.ops.progress says what is wrong), a repair where the
worker can make one, and an exit where it cannot.

A broker that restarts with its storage gone (the embedded broker keeps everything
in memory) comes back without the worker's topics, or with topics made again by
whoever wrote first, their logs shorter than the worker's read positions. The
consumer does not notice: a fetch above the log's end returns nothing, so the worker
processes nothing while everything else looks fine. The watch repairs it:

- Topics missing: created again by the code `canonflow run` creates them with
  (pipeline.cluster.admin.create_topics: the catalog's partitions and configuration).
- A read position above its partition's end: reset to the partition's start
  (faust_internals.rewind); its records are read from there.

Each repair is one warning line and counted on /health (`sources.repairs`). A problem
/health still reports CANONFLOW_STUCK_AFTER seconds after it first did (a topic that
cannot be created, too few partitions, records that wait and are not processed) makes
the worker exit with status 1 and one line that says why, so that its orchestrator
restarts it. Nothing is lost by that exit: what was not published was not
acknowledged, and is read again. While the broker is unreachable, the output is being
sent again, or the group rebalances, the worker can process nothing anyway and /health
says so: no partition is stuck then, and nothing makes it exit. (The positions are
left alone during a rebalance: Faust is setting them.)
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import time
from typing import Any

from pipeline.cluster.admin import create_topics, unreachable, wanted
from pipeline.ops.progress import (
    PartitionView,
    Progress,
    missing_topics,
    read_partitions,
    reasons,
)
from pipeline.ops.web import Health, recovering, source_partitions
from pipeline.settings import Settings
from pipeline.worker.faust_internals import rewind
from pipeline.worker.output import OutputProducer

log = logging.getLogger("canonflow")

#: The exit status of a worker that could not repair what /health reports.
EXIT_UNREPAIRED = 1
#: The start of the line it says as it exits.
UNREPAIRED = "canonflow: exiting"


def add_source_watch(app: Any, settings: Settings, health: Health,
                     sink: OutputProducer) -> None:
    """Run the source watch as a task of `app`."""
    watch = SourceWatch(app, settings, health, sink)

    async def run() -> None:
        while True:
            await asyncio.sleep(settings.health_probe_interval)
            await watch.look()

    app.task(run)


class SourceWatch:
    """One look at a time (`look`): what /health says of the source partitions, the
    repairs, and the time each problem was first said (for the exit)."""

    def __init__(self, app: Any, settings: Settings, health: Health, sink: OutputProducer):
        self.app, self.settings, self.health, self.sink = app, settings, health, sink
        self.owned = [t.name for t in wanted(settings)]
        self.progress = Progress(settings.stuck_after)
        self.first_said: dict[str, float] = {}  # reason's first words -> monotonic time

    async def look(self) -> None:
        health, settings = self.health, self.settings
        now = time.monotonic()
        if health.broker_ok is not True:
            self._judged([], now, sure=False)  # "broker unreachable" says it all
            return
        try:
            present = await asyncio.wait_for(self.sink.topics(),
                                             timeout=settings.health_probe_timeout)
        except Exception:  # the probe will say it
            return
        missing, short = missing_topics(self.owned, present, settings.partitions)
        if missing:
            await self._create(missing)
        views: list[PartitionView] = []
        ahead: list[PartitionView] = []
        stuck: list[PartitionView] = []
        rebalancing = recovering(self.app)  # Faust is setting the positions
        if not rebalancing:
            views = await read_partitions(self.app, source_partitions(self.app))
            health.sources, health.sources_at = views, time.time()
            ahead = [v for v in views if v.ahead]
            if ahead:
                await self._rewind(ahead)
        judged = not (rebalancing or health.output_failing)
        if judged:
            stuck = self.progress.stuck([v for v in views if not v.ahead], now)
        self._judged(reasons(missing=missing, short=short, ahead=ahead, stuck=stuck,
                             progress=self.progress, now=now), now, sure=judged)

    def _judged(self, found: list[str], now: float, *, sure: bool) -> None:
        """Say `found` on /health; exit when one of them has been said for longer than
        stuck_after (only when `sure`: the worker could have processed meanwhile)."""
        self.health.sources_found(found)
        if not sure:
            self.progress.forget()
            self.first_said.clear()
            return
        kinds = {reason.split(":", 1)[0]: reason for reason in found}
        self.first_said = {k: self.first_said.get(k, now) for k in kinds}
        for kind, since in self.first_said.items():
            if now - since > self.settings.stuck_after:
                _exit(f"{kinds[kind]}; still so {now - since:.0f} s after /health first "
                      "said it")

    async def _create(self, missing: list[str]) -> None:
        try:
            created = await asyncio.wait_for(create_topics(self.settings),
                                             timeout=max(10.0, self.settings.health_probe_timeout))
        except Exception as e:
            if unreachable(e):  # tried again at the next look
                log.warning("canonflow: the topics missing on the broker could not be "
                            "created yet: %s", e or type(e).__name__)
                return
            _exit(f"topics missing on the broker ({', '.join(missing[:5])}) and creating "
                  f"them failed: {type(e).__name__}: {e}")
        if created:
            what = f"created {len(created)} missing topics again ({', '.join(created[:5])})"
            log.warning("canonflow: the broker lost topics: %s", what)
            self.health.repaired(what)

    async def _rewind(self, ahead: list[PartitionView]) -> None:
        tps = {(v.topic, v.partition) for v in ahead}
        await rewind(self.app, [tp for tp in source_partitions(self.app)
                                if (tp.topic, tp.partition) in tps])
        what = ("read positions reset to the start of their new log: "
                + ", ".join(f"{v.name()} {v.position} -> {v.start or 0} (end {v.end})"
                            for v in ahead[:5]))
        log.warning("canonflow: %s", what)
        self.health.repaired(what)


def _exit(why: str) -> None:
    """Leave at once with EXIT_UNREPAIRED and one line (as SIGKILL would: nothing that
    was not published was acknowledged)."""
    line = " ".join(f"{UNREPAIRED} (status {EXIT_UNREPAIRED}): {why}".split())
    print(line[:1000], file=sys.stderr, flush=True)
    os._exit(EXIT_UNREPAIRED)
