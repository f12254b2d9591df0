"""The stall watch: a normalize agent's timer that says, in the session's own stream,
when a session has waited too long on the model, a tool or an approval.

What each session waits on, and since its last event, is kept per session as the agent
publishes its events (pipeline.worker.waits.Waits). Every settings.stall_scan_interval
seconds the scan looks at each local session once (a tuple, never its state or its
history) and, for each one past its threshold (settings.stall_model, stall_tool,
stall_approval), publishes one synthetic `session.state.changed` (health "stalled",
`waitingOn`, `waitedMs`) with the session's next seq. The session's next event is then
preceded by another (health "recovered"), which the normalizer makes
(pipeline.worker.normalize): so the two are in every consumer's stream, in order, and
a worker that takes the session over says the recovery too (the stall is in the
stored state). While the worker itself keeps events back (broker unreachable, a
delivery being sent again) the scan says nothing, and that time is not counted in any
session's wait.

A chunk of stall events is one checkpoint under the agent's lock
(pipeline.worker.checkpoint): the events published, then the states that remember them
stored, and that changelog delivered at once. A stall event takes a seq in a life that
goes on, so the checkpoint's theory of operation says what a crash between the two
leaves. A chunk is at most `chunk` sessions, and the lock is let go between two.

Worker only: `canonflow replay` reads files with no clock to wait on, and its output
stays a function of its input.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from pipeline.settings import Settings
from pipeline.worker.checkpoint import STALL, Checkpoint
from pipeline.worker.context import ProcessingContext
from pipeline.worker.faust_internals import local, partition_record
from pipeline.worker.normalize import Normalizer
from pipeline.worker.output import OutputProducer, until_stopped
from pipeline.worker.waits import APPROVAL, IDLE, MODEL, TOOL, Waits

log = logging.getLogger("canonflow")


def limits(settings: Settings) -> dict[str, float]:
    """Seconds without an event before a session waiting on each is stalled (0: never)."""
    return {MODEL: settings.stall_model, TOOL: settings.stall_tool,
            APPROVAL: settings.stall_approval}


def adopt(waits: Waits, step: Normalizer, data: Any, now: float) -> int:
    """Keep `waits` to the sessions of `data` (a session table's local store): forget the
    ones a rebalance moved away, and learn what each session this worker has a state of
    but has not translated waits on (recovered from the changelog: counted from `now`).
    Returns how many were learnt; each costs one read of its state, once."""
    live = set(data.keys())
    waits.keep_only(live)
    learnt = 0
    for key in live:
        if key in waits:
            continue
        stored = data.get(key)
        if stored is None:
            continue
        try:
            on, stalled = step.waiting(stored)
        except Exception:  # an unreadable state: the agent dead-letters its next record
            on, stalled = IDLE, False
        waits.put(key, on, now, stalled)
        learnt += 1
    return learnt


def troubled(sink: OutputProducer) -> bool:
    """Is the worker itself keeping events back (the broker unreachable, a delivery being
    sent again)? Then a session without events is no sign of a stall."""
    return sink.health.broker_ok is False or bool(sink.health.output_failing)


def add_stall_watch(ctx: ProcessingContext) -> None:
    """Publish a synthetic session.state.changed (health "stalled") for each session
    that waits past its threshold (see the module doc), and export how many sessions
    are in each state (`canonflow_sessions_by_state`)."""
    app, settings, name, tables, step = ctx.app, ctx.settings, ctx.name, ctx.tables, ctx.step
    sessions, sink, metrics = ctx.sessions, ctx.sink, ctx.metrics
    table, waits = tables.sessions, sessions.waits
    metrics.session_states[step.provider] = waits.counts
    limit = limits(settings)
    chunk = 500  # sessions: their events and states, delivered in a few ms
    held: list[float] = []  # when the worker's own trouble began, while it lasts

    async def scan() -> None:
        if app.should_stop:
            return
        now = time.monotonic()
        if troubled(sink):
            held[:] = held or [now]
            return
        if held:  # the sessions' waits go on from where the trouble began
            waits.shift(now - held.pop())
        adopt(waits, step, local(table), now)
        due = waits.overdue(now, limit)
        for start in range(0, len(due), chunk):
            if app.should_stop or not await until_stopped(app, stall(due[start:start + chunk])):
                return
            await asyncio.sleep(0)  # the agents, the web server, the other timers

    async def stall(keys: list[bytes]) -> None:
        """Say that the sessions of `keys` still overdue are stalled."""
        async with sessions.lock:
            checkpoint = Checkpoint(ctx, STALL)
            now, now_ms = time.monotonic(), int(time.time() * 1000)
            said: list[tuple[bytes, str, float]] = []
            at_partition: dict[int, Any] = {}  # a partition record per partition
            for key in keys:
                entry = waits.get(key)
                if entry is None:
                    continue
                on, since, stalled = entry
                if stalled or not 0 < limit.get(on, 0.0) <= now - since:
                    continue  # an event came since the scan began
                stored = local(table).get(key)
                if stored is None:
                    waits.drop(key)  # the session ended
                    continue
                try:
                    made = step.stall(stored, key, on=on, now_ms=now_ms,
                                      waited_ms=int((now - since) * 1000))
                except Exception:  # an unreadable state is left alone, and said so
                    log.exception("%s: cannot say that session %r is stalled", name, key)
                    made = None
                if made is None:
                    waits.put(key, on, now)  # looked at again after another threshold
                    continue
                partition, out = made
                at = at_partition.setdefault(partition, partition_record(partition))
                checkpoint.add_synthetic(out, key, partition, now_ms, at, out.state)
                said.append((key, on, since))
            if not said:
                return
            await checkpoint.commit()  # publish, then store (see the module doc)
            for key, on, since in said:
                waits.put(key, on, since, True)
        log.info("%s: %d stalled session(s)", name, len(said))

    app.timer(settings.stall_scan_interval, name=f"{name}.stall")(scan)
