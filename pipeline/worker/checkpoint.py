"""A normalize agent's batch on its way out: publish -> store -> acknowledge.

The one invariant that makes a crash harmless: STATE NEVER AHEAD OF WHAT WAS PUBLISHED
(pipeline.worker.normalize). A batch's new session states are stored only once the
events they stand for are delivered (their changelog records in the agent's next
delivery: pipeline.worker.owed), and the batch's records are acknowledged only once the
states are delivered. A worker that dies anywhere in between reads the batch
again after its restart: each record is either below its session's stored watermark
(nothing happens) or translated again into the same events with the same eventIds
(consumers drop the copies).

`Checkpoint` holds what one batch produced, and its `commit` runs the steps in that
order, one method each (the shape of quix-streams' checkpoint: collect, then produce,
flush, store, commit).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator
from typing import Any

import msgspec

from pipeline.ops.metrics import Item, WorkerMetrics
from pipeline.privacy.redact import Redactor
from pipeline.worker.faust_door import (
    ChangelogRecord,
    Entry,
    hold_ack,
    local,
    note_persisted,
    write_entries,
)
from pipeline.worker.fleet import Counted, FleetStage
from pipeline.worker.normalize import BatchSpool, Output
from pipeline.worker.output import OutputProducer, Record
from pipeline.worker.owed import Owed
from pipeline.worker.waits import Waits
from topics.catalog import CANONICAL_TOPIC, CHAT_TOPIC, DEADLETTER_TOPIC, SESSIONS_TOPIC
from topics.sessions import SummaryState, encode_summary, record

log = logging.getLogger("canonflow")


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
    """What an agent shares with its idle-session and stall scans: the lock that keeps
    them from interleaving on one table, what its delivered batches still owe (delivered
    by a scan before it reads the table: pipeline.worker.owed), when each local session
    last had a record, and what each waits on since its last event
    (pipeline.worker.waits)."""

    def __init__(self, owed: Owed) -> None:
        self.lock = asyncio.Lock()
        self.owed = owed
        self.last_seen: dict[bytes, float] = {}
        self.waits = Waits()


def outputs(out: Output, key: bytes | None, partition: int, ts_ms: int | None
            ) -> Iterator[Item]:
    """What `out` publishes, on the partition of the record it came from: its canonical
    events and chat records with their CloudEvents headers, and its dead letters."""
    for topic, values, headers in ((CANONICAL_TOPIC, out.records, out.record_headers),
                                   (CHAT_TOPIC, out.chat, out.chat_headers)):
        for value, h in zip(values, headers, strict=True):
            yield topic, value, key, partition, ts_ms, h
    for value in out.deadletters:
        yield DEADLETTER_TOPIC, value, key, partition, ts_ms


#: A session's summary as a batch left it: (partition, Output.summary, timestamp ms).
Latest = tuple[int, tuple[SummaryState, Any, bool], "int | None"]


def summary_item(summary: tuple[SummaryState, Any, bool], key: bytes, partition: int,
                 ts_ms: int | None) -> Item:
    """The agents.sessions record of a session's summary (Output.summary)."""
    return SESSIONS_TOPIC, encode_summary(record(*summary)), key, partition, ts_ms


def summaries(latest: dict[bytes, Latest]) -> list[Item]:
    """The agents.sessions records of a batch: each session's latest summary, once."""
    return [summary_item(summary, key, partition, ts_ms)
            for key, (partition, summary, ts_ms) in latest.items()]


async def store(sink: OutputProducer, table: Any, entries: list[Entry], agent: str) -> None:
    """Write `entries` to `table` and deliver their changelog records, and wait for them,
    as Faust does before it commits the offsets of the records they came from.

    The session tables' changelogs go through the output producer, in record batches,
    instead of Faust's producer (which on the embedded broker must send every record in
    a batch of its own): measured, that producer was an eighth of the worker's time."""
    records: list[Record] = list(write_entries(table, entries))
    if not records:
        return
    ends = await sink.publish(records, f"{agent}.changelog",
                              exact_ends=sink.exact_ends)
    note_persisted([table], ends)


class Checkpoint:
    """One batch of a normalize agent: what its records produced (`add`), then the
    steps that make it durable, in order (`commit`):

    1. `publish`: the canonical events, chat records and dead letters, on each record's
       own partition, each session's summary after them (agents.sessions, once per
       batch), with the item chunks the batch spooled (written locally, their
       changelog records in the same delivery, so a stored state never names a chunk
       that is not stored), and what the batch before owes (Owed.deliver: its states
       after this output, the tombstones of the chunks the one before it dropped
       first); waits until every one is delivered (sent again until it is:
       OutputProducer.publish). The batch before's records are then acknowledged.
    2. `store`: each session's new state, written locally; its changelog record (in the
       partition of the records it came from) is owed to the next delivery, and so are
       the tombstones of the chunks the batch no longer needs (locally gone now), one
       delivery later still: a state not stored yet never names a chunk already gone.
    3. `count`: the delivered events into the fleet stage and the worker's metrics;
       counting never stops a delivered batch from being acknowledged. The fleet
       tables' changelog records are owed to the next delivery with the states (before,
       Faust's producer sent each on its own: 3.5% of a batched worker's main thread).
    4. `acknowledge`: the batch is done. The agent then asks Faust for its next batch.
       Its records are acknowledged once its states are delivered (faust_door.hold_ack);
       a batch whose agent stops before this step is held back
       (faust_door.hold_unacknowledged) and read again after a restart.
    """

    def __init__(self, name: str, provider: str, tables: Tables, sessions: Sessions,
                 sink: OutputProducer, metrics: WorkerMetrics, fleet: FleetStage | None):
        self.name, self.provider = name, provider
        self.tables, self.sessions = tables, sessions
        self.sink, self.metrics, self.fleet = sink, metrics, fleet
        self.spool = tables.spool()
        self.items: list[Item] = []
        #: session key -> (partition, new state (None: delete), its last record)
        self.states: dict[bytes, tuple[int, bytes | None, Any]] = {}
        #: session key -> what it waits on after the batch's last event of it
        self.waiting: dict[bytes, str] = {}
        self.counted: list[Counted] = []
        #: session key -> (partition, its summary after the batch so far, timestamp ms)
        self.summaries: dict[bytes, Latest] = {}
        self.summary_items: list[Item] = []
        self.stamps: list[float] = []
        self.held: list[Any] = []  # the batch's records, acknowledged with its states
        self.records = self.lines = 0
        self.started = time.perf_counter()
        self.seconds = {"translate": 0.0, "publish": 0.0}
        self.acknowledged = False
        #: where each batch's step timings go (CANONFLOW_BATCH_TIMINGS; None: nowhere)
        self.timings = timings_file(sink.settings.batch_timings)

    def stored(self, key: bytes) -> bytes | None:
        """The session's state as this batch left it so far (its table value at first):
        a session's state is read once and written once per batch."""
        if key in self.states:
            return self.states[key][1]
        return self.tables.sessions.get(key)  # type: ignore[no-any-return]

    def add(self, out: Output, key: bytes | None, value: bytes | None, partition: int,
            offset: int, ts: float | None, record: Any) -> None:
        """What one record (`record`, at `offset` of `partition`) produced."""
        ts_ms = int(ts * 1000) if ts else None
        self.records += 1
        self.held.append(hold_ack(record))
        self.items.extend(outputs(out, key, partition, ts_ms))
        if self.fleet is not None and key is not None:
            self.counted.extend(Counted(key, v, partition, offset, ts_ms or 0, record)
                                for v in out.records)
        if key is not None and (out.state is not None or out.delete):
            self.states[key] = (partition, out.state, record)
        if key is not None and out.waiting is not None:
            self.waiting[key] = out.waiting
        if key is not None and out.summary is not None:
            self.summaries[key] = (partition, out.summary, ts_ms)
        if value:
            self.lines += value.count(b"\n") + (value[-1:] != b"\n")
        if ts:
            self.stamps.append(ts)

    async def commit(self) -> None:
        """Steps 1 to 4, in order. Raises only CancelledError and Abandoned (the worker
        stops before the batch is delivered: it is not acknowledged)."""
        seconds = self.seconds
        seconds["translate"] = time.perf_counter() - self.started
        t0 = time.perf_counter()
        await self.publish()
        t1 = time.perf_counter()
        seconds["publish"] = t1 - t0
        self.store()
        t2 = time.perf_counter()
        await self.count()
        self.acknowledge()
        if self.timings is not None:
            seconds.update(store=t2 - t1, count=time.perf_counter() - t2)
            self._write_timings()

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

    async def publish(self) -> None:
        chunks = write_entries(self.tables.items, self.spool.entries(drops=False))
        self.summary_items = summaries(self.summaries)
        records: list[Record] = [*self.items, *self.summary_items, *chunks]
        await self.sessions.owed.deliver(records, chunks)

    def store(self) -> None:
        states = write_entries(self.tables.sessions,
                               [(key, partition, state, last)
                                for key, (partition, state, last) in self.states.items()])
        dropped = write_entries(self.tables.items, self.spool.entries(drops=True))
        self.sessions.owed.owe(states, dropped, self.held)
        now = time.monotonic()
        waits = self.sessions.waits
        for key, (_, state, _) in self.states.items():
            if state is None:
                self.sessions.last_seen.pop(key, None)
                waits.drop(key)
            else:
                self.sessions.last_seen[key] = now
                on = self.waiting.get(key)
                if on is not None:
                    waits.put(key, on, now)

    async def count(self) -> None:
        if self.counted and self.fleet is not None:
            records: list[ChangelogRecord] = []
            await self.fleet.count(self.counted, records)
            self.sessions.owed.owe_counts(records)
        try:
            self.metrics.normalized(self.provider, self.name, self.records, self.lines,
                                    [*self.items, *self.summary_items], self.stamps,
                                    self.seconds["translate"],
                                    self.seconds["publish"])
        except Exception:  # counting must not stop a delivered batch from being acknowledged
            log.exception("%s: a batch could not be counted", self.name)

    def acknowledge(self) -> None:
        self.acknowledged = True


_timings: dict[str, Any] = {}


def timings_file(path: str) -> Any:
    """The file the batches' step timings are appended to (one per worker process and
    path, open while it runs), or None when `path` is empty."""
    if not path:
        return None
    if path not in _timings:
        _timings[path] = open(path, "ab")  # noqa: SIM115 - for the process's life
    return _timings[path]
