"""The worker's one commit path: everything it publishes and every table write it makes.

Theory of operation
===================

The invariant: STATE NEVER AHEAD OF WHAT WAS PUBLISHED. A session's stored state (its
table entry, and that entry's changelog record, from which every worker recovers it)
never counts an event that is not delivered to its output topic. Everything else
follows from it: a worker that dies anywhere reads again the records whose state it did
not store, and translates them again into the same events with the same eventIds
(consumers drop the copies), or finds them below the session's stored watermark
(nothing happens).

Four kinds of work publish or store, and each goes through a `Checkpoint`:

- `batch`: a normalize agent's batch of raw records (pipeline.worker.app);
- `idle`: the idle close of sessions without a record for a while (pipeline.worker.idle);
- `stall`: the stall alerts of sessions that wait too long (pipeline.worker.stall);
- `fleet`: the fleet stage's windows (`commit_fleet`): its own short sequence, below.

Idle closes and stall alerts are outputs no raw record carries; they go through the same
steps as a batch's, under the same lock (context.Sessions.lock), so the three never
interleave on one table. A checkpoint collects what its work produced (`add` for a raw
record's output, `add_synthetic` for an idle close's or a stall's), then `commit` runs
the steps, in this order:

1. spool: the item chunks the work spooled are written to the local items table.
2. produce: one delivery, in each record's own partition: the tombstones of chunks that
   the state before no longer names (pending, see below), the canonical events, chat
   records and dead letters, each session's summary (agents.sessions, once per
   checkpoint), the chunks' changelog records, and then the previous checkpoint's
   pending changelog (its states and fleet counts). The producer sends again until
   every record is delivered (pipeline.worker.output). The previous batch's raw records
   are then acknowledged: their states are delivered.
3. store: the new session states are written to the local sessions table, and the chunks
   no longer needed are deleted from the local items table. Their changelog records
   are pending: they ride in the next checkpoint's delivery (step 2 of the next one),
   the chunks' tombstones one delivery later still.
4. count: the delivered events are counted into the fleet stage (its table writes made
   locally here, their changelog records pending with the states) and the worker's
   metrics. A failure to count never stops a delivered checkpoint.
5. acknowledge: the checkpoint is done. A batch's raw records are held until its
   pending changelog is delivered (step 2 of the next checkpoint, or step 6).
6. flush: the pending changelog is delivered on its own when nothing else comes to
   carry it: at once for an idle close and a stall (they have no next batch), after
   FLUSH_AFTER_SECONDS for an agent with no next batch, and as the agent stops.

What a crash (kill -9) between two steps leaves, and why that is safe:

- before or during 2: nothing, or part of the output, is delivered; nothing is stored.
  The raw records are not acknowledged: they are read again and translated again into
  the same events (same eventIds; the copies are dropped). An idle close or a stall is
  made again by the next scan that finds the session due.
- between 2 and 3, 3 and 6: the output is delivered, the state is not (its changelog
  record is not). Raw records: read again, translated again from the state before
  them, the same events. An idle close: the restarted worker recovers the session, and
  its idle close makes the same closing events (the close time is the session's last
  record's time plus the idle timeout, not the clock). A stall: the restarted worker
  does not know the stall was said; it says it again with the same seq and eventId
  when the session is overdue again. The synthetic outputs keep one window open here,
  one delivery long (step 6 follows at once): a raw record of that session that comes
  after the restart and before the close or the stall is made again continues the
  session's life at the seq the synthetic event took, and a consumer that drops
  copies by eventId drops it. Closing it needs the output and the state in one
  transaction.
- during 6, or before the next checkpoint's 2: the local state is ahead of the
  changelog, never of the output. The raw records are not acknowledged: they are
  read again and found below the stored watermark (a RocksDB store kept the write) or
  translated again (recovered from the changelog): the same events again.
- after 6: the states are delivered and the raw records acknowledged; Faust commits
  their offsets on its next commit. Records whose offset was not committed yet are
  read again and found below the stored watermark.

In every case a consumer that drops copies by eventId sees each event once, in order.

A test may make the worker kill itself with SIGKILL at a named step
(`CANONFLOW_FAULT_STEP`, armed by `CANONFLOW_TEST_FAULTS=1`: see `fault`), so that
the crash tests kill it in every step of every kind.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import os
import signal
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, NamedTuple

import msgspec

from pipeline.ops.records import ProducerRecord, TableEntry
from pipeline.worker.context import ProcessingContext
from pipeline.worker.exceptions import Abandoned
from pipeline.worker.faust_internals import hold_ack, note_persisted, write_entries
from pipeline.worker.fleet import PUBLISH_CHUNK, Counted, FleetStage, TableWrite
from pipeline.worker.normalize import Output
from pipeline.worker.output import OutputProducer, until_stopped
from topics.catalog import CANONICAL_TOPIC, CHAT_TOPIC, DEADLETTER_TOPIC, SESSIONS_TOPIC
from topics.sessions import SummaryState, encode_summary, record

log = logging.getLogger("canonflow")

#: An agent that delivered nothing for this long flushes its pending changelog on its
#: own (step 6). Long enough for the next batch of a busy agent to take it (batches
#: follow one another within the batch window and a fetch), short enough that an idle
#: agent's records are acknowledged (their offsets committed) at once.
FLUSH_AFTER_SECONDS = 0.05

#: The kinds of work that publish (see the module doc).
BATCH, IDLE, STALL, FLEET = "batch", "idle", "stall", "fleet"
#: The steps a test may kill the worker at: `<kind>:<step>` (see `fault`).
STEPS = ("spool", "produce", "produced", "stored", "counted", "flush", "flushed")


# ---- the fault-injection hook (tests only) ----------------------------------------

_fault: list[Any] = []  # [step or None, countdown], read from the environment once


def fault(kind: str, step: str) -> None:
    """Kill this process with SIGKILL when `kind:step` is the armed step and has been
    reached CANONFLOW_FAULT_AFTER times (default 1). Armed only when CANONFLOW_TEST_FAULTS
    is 1: a worker in production never reads CANONFLOW_FAULT_STEP."""
    if not _fault:
        armed = os.environ.get("CANONFLOW_TEST_FAULTS") == "1"
        _fault.extend([os.environ.get("CANONFLOW_FAULT_STEP") if armed else None,
                       int(os.environ.get("CANONFLOW_FAULT_AFTER", "1") or 1)])
    if _fault[0] is None or _fault[0] != f"{kind}:{step}":
        return
    _fault[1] -= 1
    if _fault[1] <= 0:
        log.warning("canonflow: killed at %s:%s (CANONFLOW_FAULT_STEP)", kind, step)
        logging.shutdown()
        os.kill(os.getpid(), signal.SIGKILL)


# ---- what a checkpoint publishes --------------------------------------------------


def outputs(out: Output, key: bytes | None, partition: int, ts_ms: int | None
            ) -> Iterator[ProducerRecord]:
    """What `out` publishes, on the partition of the record it came from: its canonical
    events and chat records with their CloudEvents headers, and its dead letters."""
    for topic, values, headers in ((CANONICAL_TOPIC, out.records, out.record_headers),
                                   (CHAT_TOPIC, out.chat, out.chat_headers)):
        for value, h in zip(values, headers, strict=True):
            yield ProducerRecord(topic, value, key, partition, ts_ms, h)
    for value in out.deadletters:
        yield ProducerRecord(DEADLETTER_TOPIC, value, key, partition, ts_ms)


class LatestSummary(NamedTuple):
    """A session's summary as a checkpoint left it (Output.summary), on its partition."""

    partition: int
    summary: tuple[SummaryState, Any, bool]
    timestamp_ms: int | None


def summary_record(summary: tuple[SummaryState, Any, bool], key: bytes, partition: int,
                   ts_ms: int | None) -> ProducerRecord:
    """The agents.sessions record of a session's summary (Output.summary)."""
    return ProducerRecord(SESSIONS_TOPIC, encode_summary(record(*summary)), key, partition,
                          ts_ms)


# ---- the pending changelog ----------------------------------------------------------


class PendingChangelog:
    """One agent's pending changelog: the changelog records of state stored locally but
    not delivered yet (step 3 and 4's), and the raw records whose acknowledgement waits
    for them. Every method is called under the agent's lock (context.Sessions.lock).

    A batch's states ride in the agent's next delivery (step 2 of the next checkpoint)
    instead of a delivery of their own; the tombstones of the chunks it dropped go one
    delivery later still, after the states that no longer name them. A changelog
    partition is written by one agent, one delivery at a time, in order."""

    def __init__(self, tables: Any, sink: OutputProducer, name: str,
                 release: Callable[[Iterable[Any]], None], counted: Sequence[Any] = ()):
        # tables: the agent's context.Tables (its sessions' and items' tables);
        # counted: the fleet stage's tables, whose records a batch's count adds
        self.tables, self.sink, self.name = tables, sink, name
        self.persisted = [tables.items, tables.sessions, *counted]
        self.release = release  # acknowledges held records (faust_internals.release_acks)
        self.states: list[ProducerRecord] = []  # the last checkpoint's, written locally
        self.held: list[Any] = []  # its raw records, acknowledged with its states
        self.dropped: list[ProducerRecord] = []  # its chunks' tombstones: after its states
        self.ready: list[ProducerRecord] = []  # tombstones whose states are delivered
        self.last = time.monotonic()  # when the agent last delivered
        self.kind = BATCH  # the kind of work whose changelog is pending (for `fault`)
        self._timer: asyncio.Task[None] | None = None

    def __bool__(self) -> bool:
        return bool(self.states or self.held or self.dropped or self.ready)

    def defer(self, states: list[ProducerRecord], dropped: list[ProducerRecord],
              held: list[Any], kind: str = BATCH) -> None:
        """A checkpoint whose output was just delivered (`publish`) leaves `states` and
        `dropped` pending, and holds `held` until they are delivered."""
        self.states, self.dropped, self.held, self.kind = states, dropped, held, kind

    def defer_counts(self, records: list[ProducerRecord]) -> None:
        """The fleet stage's changelog records of the checkpoint whose states are pending
        (its count, after `defer`): delivered with them."""
        self.states.extend(records)

    async def publish(self, records: list[ProducerRecord], puts: list[ProducerRecord],
                      *, once: bool = False) -> None:
        """Deliver `records` (a checkpoint's output, with `puts`, the chunks it wrote)
        with what is pending: the tombstones ready before them, the states after. Then
        the states' raw records are acknowledged, and the last tombstones are ready.
        With `once`, one attempt (OutputProducer.publish): raises Abandoned when it
        fails, and everything stays pending."""
        if puts and (self.ready or self.dropped):  # a chunk dropped, then written again
            again = {put.key for put in puts}
            self.ready = [r for r in self.ready if r.key not in again]
            self.dropped = [r for r in self.dropped if r.key not in again]
        records = [*self.ready, *records, *self.states]
        if records:
            ends = await self.sink.publish(records, self.name, exact_ends=self.sink.exact_ends,
                                           once=once)
            note_persisted(self.persisted, ends)
        self.release(self.held)
        self.ready, self.dropped, self.states, self.held = self.dropped, [], [], []
        self.last = time.monotonic()

    async def flush(self, *, once: bool = False) -> None:
        """Step 6: deliver everything pending (two deliveries when chunks were dropped;
        `once`: see `publish`)."""
        kind = self.kind
        fault(kind, "flush")
        while self:
            await self.publish([], [], once=once)
        fault(kind, "flushed")

    def schedule(self, lock: asyncio.Lock, given_up: Callable[[], Any]) -> None:
        """Make sure what is pending is delivered FLUSH_AFTER_SECONDS after the agent's
        last delivery, if no batch has delivered it by then. `given_up` is called when
        the worker stops while that delivery is being sent again."""
        if self and (self._timer is None or self._timer.done()):
            self._timer = asyncio.ensure_future(self._flush_when_idle(lock, given_up))

    async def _flush_when_idle(self, lock: asyncio.Lock, given_up: Callable[[], Any]) -> None:
        while self:
            wait = self.last + FLUSH_AFTER_SECONDS - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
                continue
            async with lock:
                # a batch that held the lock meanwhile delivered (and left its own
                # pending): that waits for the next batch, or for the agent to be idle
                if self.last + FLUSH_AFTER_SECONDS > time.monotonic():
                    continue
                try:
                    await self.flush()
                except Abandoned:
                    given_up()
                    return

    async def settle(self, lock: asyncio.Lock) -> None:
        """Deliver what is pending as the agent stops (one attempt: a delivery that
        fails leaves the records unacknowledged, read again after the restart)."""
        if self._timer is not None and not self._timer.done():
            self._timer.cancel()
        if not self:
            return
        try:
            async with lock:
                await self.flush()
        except Exception:  # Abandoned among them
            log.warning("%s: stopping with %d state(s) not stored; their records are read "
                        "again after the restart", self.name, len(self.states))


# ---- the checkpoint -----------------------------------------------------------------


class PendingState(NamedTuple):
    """A session's new state as a checkpoint left it (None: delete), and the record (or
    partition record) whose partition the local store writes it to."""

    partition: int
    value: bytes | None
    record: Any


class Checkpoint:
    """One unit of work of a normalize agent (a batch, an idle close, a stall alert):
    what it produced (`add`, `add_synthetic`), then the steps that make it durable, in
    order (`commit`; see the module doc)."""

    def __init__(self, ctx: ProcessingContext, kind: str = BATCH):
        self.ctx, self.kind = ctx, kind
        self.name, self.provider = ctx.name, ctx.provider
        self.tables, self.sessions = ctx.tables, ctx.sessions
        self.sink, self.metrics, self.fleet = ctx.sink, ctx.metrics, ctx.fleet
        self.spool = ctx.tables.spool()
        self.items: list[ProducerRecord] = []
        self.states: dict[bytes, PendingState] = {}
        #: chunks an idle close dropped (a batch's are in its spool)
        self.dropped: list[TableEntry] = []
        #: session key -> what it waits on after the checkpoint's last event of it
        self.waiting: dict[bytes, str] = {}
        self.counted: list[Counted] = []
        self.summaries: dict[bytes, LatestSummary] = {}
        self.summary_items: list[ProducerRecord] = []
        self.closed: list[bytes] = []  # the sessions an idle close ended
        self.stamps: list[float] = []
        self.held: list[Any] = []  # the batch's records, acknowledged with its states
        self.records = self.lines = 0
        self.started = time.perf_counter()
        self.seconds = {"translate": 0.0, "publish": 0.0}
        self.acknowledged = False
        #: where each batch's step timings go (CANONFLOW_BATCH_TIMINGS; None: nowhere)
        self.timings = timings_file(ctx.settings.batch_timings) if kind == BATCH else None

    def __bool__(self) -> bool:
        return bool(self.records or self.items or self.states)

    def stored(self, key: bytes) -> bytes | None:
        """The session's state as this checkpoint left it so far (its table value at
        first): a session's state is read once and written once per batch."""
        if key in self.states:
            return self.states[key].value
        return self.tables.sessions.get(key)  # type: ignore[no-any-return]

    def add(self, out: Output, key: bytes | None, value: bytes | None, partition: int,
            offset: int, ts: float | None, record: Any) -> None:
        """What one raw record (`record`, at `offset` of `partition`) produced."""
        ts_ms = int(ts * 1000) if ts else None
        self.records += 1
        self.held.append(hold_ack(record))
        self.items.extend(outputs(out, key, partition, ts_ms))
        if self.fleet is not None and key is not None:
            self.counted.extend(Counted(key, v, partition, offset, ts_ms or 0, record)
                                for v in out.records)
        if key is not None and (out.state is not None or out.delete):
            self.states[key] = PendingState(partition, out.state, record)
        if key is not None and out.waiting is not None:
            self.waiting[key] = out.waiting
        if key is not None and out.summary is not None:
            self.summaries[key] = LatestSummary(partition, out.summary, ts_ms)
        if value:
            self.lines += value.count(b"\n") + (value[-1:] != b"\n")
        if ts:
            self.stamps.append(ts)

    def add_synthetic(self, out: Output | None, key: bytes, partition: int, ts_ms: int,
                      at: Any, state: bytes | None, *, summary_tombstone: bool = False
                      ) -> None:
        """What an idle close or a stall made for session `key` without a raw record:
        `out` (None: nothing to publish), its new state (`state`; None deletes it) written
        as if by `at` (a partition record), and, with `summary_tombstone`, the tombstone
        of its summary on agents.sessions after its last summary."""
        if out is not None:
            self.items.extend(outputs(out, key, partition, ts_ms))
            if out.summary is not None:
                self.items.append(summary_record(out.summary, key, partition, ts_ms))
            if self.fleet is not None:
                self.counted.extend(Counted(key, v, partition, None, ts_ms, at)
                                    for v in out.records)
        if summary_tombstone:
            self.items.append(ProducerRecord(SESSIONS_TOPIC, None, key, partition, ts_ms))
        self.states[key] = PendingState(partition, state, at if state is not None else None)

    async def commit(self) -> None:
        """Steps 1 to 5 (6 too for an idle close or a stall), in order. Raises only
        CancelledError and Abandoned (the worker stops before the output is delivered,
        or, for an idle close or a stall, its one attempt failed: nothing is stored,
        nothing acknowledged)."""
        kind, seconds = self.kind, self.seconds
        seconds["translate"] = time.perf_counter() - self.started
        t0 = time.perf_counter()
        # 1. spool: the chunks the work spooled, written locally
        fault(kind, "spool")
        chunks = write_entries(self.tables.items, self.spool.entries(drops=False))
        # 2. produce: the output, with the pending changelog around it; delivered
        fault(kind, "produce")
        self.summary_items = [summary_record(s.summary, key, s.partition, s.timestamp_ms)
                              for key, s in self.summaries.items()]
        # an idle close or a stall holds the agent's lock: one attempt, then it lets go
        # (Abandoned) and its next scan makes the same output again
        await self.sessions.pending.publish([*self.items, *self.summary_items, *chunks],
                                            chunks, once=kind != BATCH)
        fault(kind, "produced")
        t1 = time.perf_counter()
        seconds["publish"] = t1 - t0
        # 3. store: the new states, locally; their changelog records pending
        self._store()
        fault(kind, "stored")
        t2 = time.perf_counter()
        # 4. count: the fleet stage (its changelog records pending too), the metrics
        self._count()
        fault(kind, "counted")
        # 5. acknowledge: done (a batch's records go with its pending changelog)
        self.acknowledged = True
        # 6. flush: an idle close or a stall has no next batch to carry its changelog
        if kind != BATCH:
            await self.sessions.pending.flush(once=True)
        if self.timings is not None:
            seconds.update(store=t2 - t1, count=time.perf_counter() - t2)
            self._write_timings()

    def _store(self) -> None:
        states = write_entries(self.tables.sessions,
                               [TableEntry(key, s.partition, s.value, s.record)
                                for key, s in self.states.items()])
        dropped = write_entries(self.tables.items,
                                [*self.spool.entries(drops=True), *self.dropped])
        self.sessions.pending.defer(states, dropped, self.held, self.kind)
        now = time.monotonic()
        waits, last_seen = self.sessions.waits, self.sessions.last_seen
        for key, s in self.states.items():
            if self.kind != BATCH:
                continue  # the scan keeps its own books of the sessions it touched
            if s.value is None:
                last_seen.pop(key, None)
                waits.drop(key)
            else:
                last_seen[key] = now
                on = self.waiting.get(key)
                if on is not None:
                    waits.put(key, on, now)

    def _count(self) -> None:
        if self.counted and self.fleet is not None:
            self.sessions.pending.defer_counts(
                write_tables(self.fleet.count(self.counted)))
        try:
            published = [*self.items, *self.summary_items]
            if self.kind == BATCH:
                self.metrics.normalized(self.provider, self.name, self.records, self.lines,
                                        published, self.stamps, self.seconds["translate"],
                                        self.seconds["publish"])
            elif self.kind == IDLE:
                self.metrics.closed_idle(self.provider, self.closed, published)
            else:
                self.metrics.stalls(self.provider, published)
        except Exception:  # counting must not stop a delivered checkpoint
            log.exception("%s: a %s could not be counted", self.name, self.kind)

    def _write_timings(self) -> None:
        """One JSON line of this batch's steps (CANONFLOW_BATCH_TIMINGS): when it was
        acknowledged (epoch s), its records, how old its oldest record was when the batch
        began (the fetch wait and the batches ahead of it), and each step's seconds."""
        assert self.timings is not None
        now = time.time()
        began = now - (time.perf_counter() - self.started)
        self.timings.write(msgspec.json.encode({
            "at": now, "agent": self.name, "records": self.records,
            "items": len(self.items), "states": len(self.states),
            "oldest_age": began - min(self.stamps) if self.stamps else None,
            **self.seconds}) + b"\n")
        self.timings.flush()


def write_tables(writes: Iterable[TableWrite]) -> list[ProducerRecord]:
    """Write each entry to its table's local store; returns their changelog records, in
    order, for the caller's delivery."""
    out: list[ProducerRecord] = []
    for write in writes:
        out.extend(write_entries(write.table, [write.entry]))
    return out


# ---- the fleet stage's windows ------------------------------------------------------


async def commit_fleet(stage: FleetStage, sink: OutputProducer, app: Any) -> int:
    """Publish the fleet stage's due windows to agents.metrics, then store what that
    publication changes in its tables; returns the records published.

    1. due: the windows whose panes changed or closed (the stage's `due`);
    2. produce: PUBLISH_CHUNK records per delivery, each waited for;
    3. store: the panes no open window holds are deleted and the stream times written,
       locally, and their changelog records delivered.

    A crash before 3 publishes the windows again (the worker that recovers them marks
    every window changed); a crash during 3 deletes a pane whose windows are published
    already, or not yet: the next worker publishes it again (the same window, the same
    key). While a delivery is sent again (the cluster does not take it), the agents go
    on: nothing they need is held. When the app stops, the delivery is cancelled and
    the windows stay changed; after a recovery during the publication (a rebalance),
    nothing is deleted."""
    if stage.windows is None:
        return 0
    generation = stage.generation
    # 1. due (no current event: the RocksDB store then looks a key up in every partition)
    fault(FLEET, "spool")
    items, remove = contextvars.Context().run(stage.due)
    clocks = dict(stage.clocks)
    sent, stage.dirty = stage.dirty, set()
    done = 0
    try:
        # 2. produce
        fault(FLEET, "produce")
        for start in range(0, len(items), PUBLISH_CHUNK):
            chunk = items[start:start + PUBLISH_CHUNK]
            t0 = time.perf_counter()
            if not await until_stopped(app, sink.publish(chunk, FLEET)):
                stage.dirty |= sent
                return done
            sink.metrics.publish_seconds.observe((FLEET,), time.perf_counter() - t0)
            sink.metrics.count_outputs(chunk)
            done += len(chunk)
        fault(FLEET, "produced")
    except BaseException:
        stage.dirty |= sent
        raise
    if generation != stage.generation:
        return done
    # 3. store
    records = write_tables(contextvars.Context().run(stage.settle, remove, clocks))
    if records:
        tables = [stage.windows]
        ends = await sink.publish(records, f"{FLEET}.changelog", exact_ends=sink.exact_ends)
        note_persisted(tables, ends)
    fault(FLEET, "stored")
    return done


_timings: dict[str, Any] = {}


def timings_file(path: str) -> Any:
    """The file the batches' step timings are appended to (one per worker process and
    path, open while it runs), or None when `path` is empty."""
    if not path:
        return None
    if path not in _timings:
        _timings[path] = open(path, "ab")  # noqa: SIM115 - for the process's life
    return _timings[path]
