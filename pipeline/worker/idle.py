"""Closing idle sessions: a normalize agent's timer that ends the sessions without a
record for settings.idle_timeout seconds, so that no consumer waits forever on a turn
that will never end, and removes their state.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from pipeline.ops.records import TableEntry
from pipeline.worker.checkpoint import IDLE, Checkpoint
from pipeline.worker.context import ProcessingContext
from pipeline.worker.faust_internals import local, partition_record
from pipeline.worker.normalize import closed_at, closed_mark
from pipeline.worker.output import until_stopped

log = logging.getLogger("canonflow")


def add_idle_expiry(ctx: ProcessingContext) -> None:
    """Close sessions without a record for settings.idle_timeout seconds, so that no
    consumer waits forever on a turn that will never end, and remove their state.

    Idleness is measured on this worker's clock since the session's last record here;
    a session this worker only recovered from the changelog counts from the first
    scan that sees it.

    The scan closes `chunk` sessions at a time, each chunk one checkpoint under the
    agent's lock (pipeline.worker.checkpoint: its closing events published, then the
    sessions' tombstones stored), and lets the loop run between chunks: a record of a
    closed session that comes after starts a new life. A chunk stays small so that the
    agent waits little for it, even when its delivery is sent again. A worker that stops
    (or dies) before a chunk's tombstones are delivered leaves the sessions to the worker
    that recovers them, which closes them again with the same events (the same
    eventIds).

    A closed session's last summary goes to agents.sessions with its closing events.
    With a retention (settings.sessions_retention), its table entry becomes a mark of
    the close time until a scan past the retention tombstones the summary and the
    mark (a mark outlives a restart: it is in the changelog); without, the summary's
    tombstone follows the summary at once."""
    app, settings, name, tables, step = ctx.app, ctx.settings, ctx.name, ctx.tables, ctx.step
    sessions, metrics = ctx.sessions, ctx.metrics
    table = tables.sessions
    retention_ms = int(settings.sessions_retention * 1000)
    idle_ms = int(settings.idle_timeout * 1000)
    chunk = 500  # sessions: 1,500 to 3,000 records to deliver, made in about 10 ms

    async def scan() -> None:
        if app.should_stop:
            return
        now = time.monotonic()
        cutoff = now - settings.idle_timeout
        live = set(local(table).keys())
        for key in [k for k in sessions.last_seen if k not in live]:
            del sessions.last_seen[key]  # moved away in a rebalance
        metrics.forget_sessions(step.provider, live)
        idle = [key for key in live if sessions.last_seen.setdefault(key, now) <= cutoff]
        for start in range(0, len(idle), chunk):
            if app.should_stop or not await close(idle[start:start + chunk], cutoff):
                return
            await asyncio.sleep(0)  # the agents, the web server, the other timers

    async def close(keys: list[bytes], cutoff: float) -> bool:
        """Close the sessions of `keys` still idle; False when the worker stopped first."""
        now_ms = int(time.time() * 1000)
        forgotten = 0  # closed earlier: their summaries' retention is over
        at_partition: dict[int, Any] = {}  # a partition record per partition
        async with sessions.lock:
            checkpoint = Checkpoint(ctx, IDLE)
            for key in keys:
                seen = sessions.last_seen.get(key)
                stored = local(table).get(key)
                if seen is None or seen > cutoff or stored is None:
                    continue  # a record came since the scan began, or the session ended
                mark = closed_at(stored)
                if mark is not None:  # closed, its summary kept: until the retention ends
                    if now_ms - mark[0] >= retention_ms:
                        checkpoint.add_synthetic(None, key, mark[1], now_ms, None, None,
                                                 summary_tombstone=True)
                        forgotten += 1
                    continue
                spool = tables.spool()  # its chunks live on the session's partition
                try:
                    partition, out = step.expire(stored, key, now_ms=now_ms, idle_ms=idle_ms,
                                                  spool=spool)
                except Exception:  # an unreadable state is left alone, and said so
                    log.exception("%s: cannot close idle session %r", name, key)
                    continue
                checkpoint.dropped.extend(TableEntry(e.key, partition, None)
                                          for e in spool.entries(drops=True))
                at = at_partition.setdefault(partition, partition_record(partition))
                if out.summary is not None and retention_ms > 0:
                    checkpoint.add_synthetic(out, key, partition, now_ms, at,
                                             closed_mark(now_ms, partition))
                else:
                    checkpoint.add_synthetic(out, key, partition, now_ms, at, None,
                                             summary_tombstone=out.summary is not None)
                checkpoint.closed.append(key)
            if not checkpoint:
                return True
            if not await until_stopped(app, checkpoint.commit()):
                return False
            for key in checkpoint.states:
                sessions.last_seen.pop(key, None)
                sessions.waits.drop(key)
        log.info("%s: closed %d idle session(s), tombstoned %d summaries", name,
                 len(checkpoint.closed), forgotten)
        return True

    app.timer(settings.idle_scan_interval, name=f"{name}.idle")(scan)
