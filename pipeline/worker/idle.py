"""Closing idle sessions: a normalize agent's timer that ends the sessions without a
record for settings.idle_timeout seconds, so that no consumer waits forever on a turn
that will never end, and removes their state.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from pipeline.ops.metrics import Item, WorkerMetrics
from pipeline.settings import Settings
from pipeline.worker.checkpoint import Sessions, Tables, outputs, summary_item
from pipeline.worker.faust_door import (
    Entry,
    local,
    note_persisted,
    partition_stand_in,
    write_entries,
)
from pipeline.worker.fleet import Counted, FleetStage
from pipeline.worker.normalize import Normalizer, closed_at, closed_mark
from pipeline.worker.output import Abandoned, OutputProducer, until_stopped
from topics.catalog import SESSIONS_TOPIC

log = logging.getLogger("canonflow")


def add_idle_expiry(app: Any, settings: Settings, name: str, tables: Tables,
                    step: Normalizer, sessions: Sessions, sink: OutputProducer,
                    metrics: WorkerMetrics, fleet: FleetStage | None) -> None:
    """Close sessions without a record for settings.idle_timeout seconds, so that no
    consumer waits forever on a turn that will never end, and remove their state.

    Idleness is measured on this worker's clock since the session's last record here;
    a session this worker only recovered from the changelog counts from the first
    scan that sees it.

    The scan closes `chunk` sessions at a time, and lets the loop run between chunks.
    The agent's lock is held only while a chunk's closing events are made and its
    sessions leave the local tables (no await): a record of one of them that comes
    after starts a new life. Their delivery and their tombstones, sent again until the
    cluster takes them, hold nothing the agent needs, and stop when the worker stops:
    then no tombstone was delivered, and the worker that recovers the sessions closes
    them again (the same eventIds). (Issue 25: 100,000 sessions closed in one go, their
    delivery retried under the agent's lock, stopped the worker for 12 minutes.)

    A closed session's last summary goes to agents.sessions with its closing events.
    With a retention (settings.sessions_retention), its table entry becomes a mark of
    the close time until a scan past the retention tombstones the summary and the
    mark (a mark outlives a restart: it is in the changelog); without, the summary's
    tombstone follows the summary at once."""
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
        closed: list[tuple[bytes, int]] = []
        forgotten: list[bytes] = []  # closed earlier: their summaries' retention is over
        entries: list[Entry] = []  # the table's: tombstones, or marks of closed sessions
        items: list[Item] = []
        counted: list[Counted] = []
        stand_ins: dict[int, Any] = {}
        drops: list[Entry] = []
        async with sessions.lock:
            try:  # the states the agent owes go before these sessions' tombstones
                await sessions.owed.flush()
            except Abandoned:
                return False
            for key in keys:
                seen = sessions.last_seen.get(key)
                stored = local(table).get(key)
                if seen is None or seen > cutoff or stored is None:
                    continue  # a record came since the scan began, or the session ended
                mark = closed_at(stored)
                if mark is not None:  # closed, its summary kept: until the retention ends
                    if now_ms - mark[0] >= retention_ms:
                        items.append((SESSIONS_TOPIC, None, key, mark[1], now_ms))
                        entries.append((key, mark[1], None, None))
                        forgotten.append(key)
                    continue
                spool = tables.spool()  # its chunks live on the session's partition
                try:
                    partition, out = step.expire(stored, key, now_ms=now_ms, idle_ms=idle_ms,
                                                  spool=spool)
                except Exception:  # an unreadable state is left alone, and said so
                    log.exception("%s: cannot close idle session %r", name, key)
                    continue
                drops.extend((k, partition, None, None) for k, *_ in spool.entries(drops=True))
                items.extend(outputs(out, key, partition, now_ms))
                at = stand_ins.setdefault(partition, partition_stand_in(partition))
                if out.summary is not None:
                    items.append(summary_item(out.summary, key, partition, now_ms))
                if out.summary is not None and retention_ms > 0:
                    entries.append((key, partition, closed_mark(now_ms, partition), at))
                else:
                    if out.summary is not None:
                        items.append((SESSIONS_TOPIC, None, key, partition, now_ms))
                    entries.append((key, partition, None, None))
                if fleet is not None:
                    counted.extend(Counted(key, v, partition, None, now_ms, at)
                                   for v in out.records)
                closed.append((key, partition))
            for key in [*(key for key, _ in closed), *forgotten]:
                sessions.last_seen.pop(key, None)
                sessions.waits.drop(key)
            tombstones = write_entries(table, entries)
            chunk_tombstones = write_entries(tables.items, drops)
        if not closed and not forgotten:
            return True

        async def deliver() -> None:
            if items:
                await sink.publish(items, f"{name}.idle")
            # a session that came back meanwhile has a new life, whose state stands
            for t, records in ((table, tombstones), (tables.items, chunk_tombstones)):
                records = [r for r in records if local(t).get(r[2]) == r[1]]
                if records:
                    note_persisted([t], await sink.publish(records, f"{name}.idle",
                                                       exact_ends=sink.exact_ends))

        if not await until_stopped(app, deliver()):
            return False
        if counted and fleet is not None:
            await fleet.count(counted)
        metrics.closed_idle(step.provider, (key for key, _ in closed), items)
        log.info("%s: closed %d idle session(s), tombstoned %d summaries", name, len(closed),
                 len(forgotten))
        return True

    app.timer(settings.idle_scan_interval, name=f"{name}.idle")(scan)
