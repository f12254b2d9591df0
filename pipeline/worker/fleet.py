"""The fleet-metrics stage: canonical events -> windowed counts per provider and model
-> agents.metrics, and Prometheus gauges of the current windows.

It counts the events of agents.canonical as the normalize agents publish them (each
delivered checkpoint, in the same process and partition), not by reading the topic
back.

Windows, in event time (the canonical record's timestamp, which the normalize agents
copy from the raw record): Faust's `TumblingWindow(60)` and `HoppingWindow(300, 60)`.
The stage keeps one-minute panes in a changelog-backed Faust table, `fleet.windows`:
a tumbling-1m window is one pane, a hopping-5m window the sum of its five panes, so a
batch writes each pane it touched once (not six windows), and the table holds each
count once. Faust's `table.tumbling()` wrapper is not used: it writes once per event
and per window, and takes the changelog partition from `current_event()`, which a
batch of events from many partitions does not have. Here a pane's key holds its
partition: partitions are counted apart (no repartitioning), each pane is written to
the changelog partition of the events it counts, and a rebalance moves whole
partitions. A window's fleet-wide value is the sum over partitions (topics.metrics).

A second table, `fleet.sessions`, remembers each session's model and its open
approvals, so a tool call or a turn's end counts under the model its turn started
with, and a decision's delay is known, across restarts and rebalances. Both tables
are written only when something changed.

Exactly once: every pane stores the offset of the last raw record whose events it
counted (a pane's key names the provider, so one raw topic partition), so a batch
delivered again after a crash adds nothing twice.

Stream time, closing, lateness: a partition's stream time is the newest event time
seen on it (persisted with each publication). A window closes when the stream time
passes its end by `settings.fleet_grace` seconds; its last record says
`closed: true`. An event whose minute (its tumbling window) has closed is late: it
is counted in `canonflow_fleet_late_events_total` and dropped from every window. A
pane leaves the table when the last hopping window holding it has closed. Windows
whose value changed are published every `settings.fleet_publish_interval` seconds,
from a timer, not per batch: one record per changed window per interval, however
busy the stream.

What the input must not do (each reproduced on a real worker):
- Stop the agents. Counting a batch is synchronous, so the agents never wait for the
  stage; the publication (pipeline.worker.checkpoint.commit_fleet) goes in deliveries
  of at most PUBLISH_CHUNK records, sent again until the cluster takes them while
  nothing the agents need is held, and a worker that stops cancels it: whoever holds
  the windows next publishes them again.
- Move a partition's clock to a far date. An event time more than `skew` ahead of the
  worker's clock (half the grace, at least a second, so that no honest event is late
  because of it), or none, is taken as the worker's clock and counted in
  `canonflow_fleet_clamped_times_total`. Old times are left alone: they move no clock,
  and a backfill has them.
- Grow the series, the table or the publication with model names: a worker keeps
  panes of at most MAX_MODELS models; a new model past them counts as "other"
  (`canonflow_fleet_models_folded_total`), as tool names past MAX_KEYS do.
- Lose a batch's counts for one event. Each event is counted on its own, and one that
  fails costs its own counts (`canonflow_fleet_uncounted_events_total`). A token count
  or cost no turn has (negative, above MAX_TURN_TOKENS or MAX_TURN_COST_USD, not
  finite) is left out, the event's other counts kept
  (`canonflow_fleet_absurd_values_total`); sums stop at MAX_COUNT.
"""

from __future__ import annotations

import contextvars
import logging
import time
from collections.abc import Iterable
from typing import Any, NamedTuple

import msgspec

from pipeline.ops.metrics import WorkerMetrics, event_type
from pipeline.ops.prometheus import OTHER, Registry, clean_label
from pipeline.ops.records import ProducerRecord, TableEntry
from pipeline.settings import Settings
from pipeline.worker.faust_internals import add_table, local, set_current_event
from pipeline.worker.fleet_counts import (
    CLOCK,
    HOPPING,
    HOPPING_MS,
    MAX_MODELS,
    MINUTE_MS,
    RELEVANT,
    TUMBLING,
    Batch,
    Counted,
    FleetSession,
    Group,
    SessionCount,
    Stored,
    absurd,
    add_contributions,
    contributions,
    decode_int,
    decode_session,
    decode_stored,
    encode,
    hopping_window,
    merge,
    pane_key,
    panes_of,
    parse_pane,
    read_event,
    record_key,
)
from pipeline.worker.fleet_gauges import FleetGauges
from topics.catalog import METRICS_TOPIC
from topics.metrics import FLEET_SCHEMA_VERSION, FleetMetrics, encode_fleet_metrics

log = logging.getLogger("canonflow.fleet")

#: Records per delivery of the publication.
PUBLISH_CHUNK = 1000

class TableWrite(NamedTuple):
    """An entry the stage writes to one of its tables (the checkpoint writes it:
    pipeline.worker.checkpoint.write_tables)."""

    table: Any
    entry: TableEntry


def _put(table: Any, key: bytes, partition: int, value: bytes | None, record: Any,
         out: list[TableWrite]) -> None:
    """Write (None: delete with a tombstone) one entry in the given changelog partition,
    as if by `record` (whose partition the local store writes it to): appended to `out`,
    for the checkpoint to write and deliver."""
    out.append(TableWrite(table, TableEntry(key, partition, value, record)))


class FleetStage:
    """The stage's logic over its two tables; the Faust wiring is `add_fleet`.

    Everything that reads the stage's state or says what to write is synchronous
    (`process`, `due`, `settle`), so the agents' batches and the publication interleave
    only at the publication's awaits, which hold nothing the agents need. The stage
    never writes its tables itself: it hands its writes (`TableWrite`) to the
    checkpoint (pipeline.worker.checkpoint), which writes them in its order."""

    def __init__(self, settings: Settings, registry: Registry,
                 metrics: WorkerMetrics | None = None):
        self.settings = settings
        self.metrics = metrics
        self.grace_ms = int(settings.fleet_grace * 1000)
        #: how far ahead of the worker's clock an event time may be (see the module doc)
        self.skew_ms = max(1000, self.grace_ms // 2)
        self.app: Any = None  # the Faust app, whose stopping cancels a publication
        self.generation = 0  # counts recoveries: a publication across one settles nothing
        self.dirty: set[bytes] = set()  # panes changed since the last publication
        self.clocks: dict[int, int] = {}  # stream time per partition, in memory
        self.final: set[bytes] = set()  # windows whose closed record was published
        self.last_event: dict[int, Any] = {}  # per partition, for writes from the timer
        self.models: dict[str, int] | None = None  # model -> its panes (None: not read yet)
        self.windows: Any = None
        self.sessions: Any = None
        self.gauges = FleetGauges(registry, self)

    def clock(self, partition: int, event: Any = None) -> int:
        """The partition's stream time (ms): the newest event time counted on it.
        `event`, a record of that partition, is the current event of the table read. A
        stored time further ahead of the worker's clock than `skew` (from a version
        that did not clamp event times) is taken as the worker's clock."""
        known = self.clocks.get(partition)
        if known is None:
            if event is not None:
                set_current_event(event)
            raw = local(self.windows).get(CLOCK + str(partition).encode())
            known = decode_int(raw) if raw else 0
            now = int(time.time() * 1000)
            if known > now + self.skew_ms:
                log.warning("fleet: partition %d's stored stream time %d is ahead of this "
                            "worker's clock; it restarts from %d", partition, known, now)
                known = now
            self.clocks[partition] = known
        return known

    def event_time(self, ts_ms: int, now_ms: int) -> int:
        """The time an event counts at: its own, unless it is missing or further ahead
        of the worker's clock than `skew` (then the worker's clock, and counted)."""
        if ts_ms <= 0:
            self.gauges.clamped.inc(("missing",))
            return now_ms
        if ts_ms > now_ms + self.skew_ms:
            self.gauges.clamped.inc(("future",))
            return now_ms
        return ts_ms

    # -- per batch --------------------------------------------------------------

    def count(self, events: list[Counted]) -> list[TableWrite]:
        """Count one batch; returns the table writes it makes (the checkpoint writes
        them). A failure is logged, never raised: counting must not stop the stream it
        reads. Nothing here waits: the agents never wait for the stage."""
        t0 = time.perf_counter()
        out: list[TableWrite] = []
        try:
            self.process(events, out)
        except Exception:
            log.exception("fleet: a batch could not be counted")
        if self.metrics is not None:
            self.metrics.counted("fleet", len(events), time.perf_counter() - t0)
        return out

    def process(self, events: Iterable[Counted], out: list[TableWrite]) -> int:
        """Count a batch of canonical events into the pane table, each event on its own:
        one that fails costs its own counts (logged, and counted in
        `canonflow_fleet_uncounted_events_total`). Returns the number of late events
        dropped.

        Every table read and write names the record it is for (pipeline.worker.faust_internals): the
        RocksDB store reads and writes the database of the current event's partition."""
        now_ms = int(time.time() * 1000)
        batch = Batch()
        late = failed = 0
        for counted in events:
            try:
                late += self._count_one(counted, now_ms, batch)
            except Exception:
                if not failed:
                    log.exception("fleet: an event of %r could not be counted", counted.key)
                failed += 1
        failed += self._write(batch, out)
        if late:
            self.gauges.late.inc((), late)
        if failed:
            self.gauges.uncounted.inc((), failed)
        return late

    def _count_one(self, counted: Counted, now_ms: int, batch: Batch) -> int:
        """Add one event to `batch`; 1 when it is late (counted nowhere), else 0."""
        key, value, p, offset, ts_ms, source = counted
        ts_ms = self.event_time(ts_ms, now_ms)
        self.last_event[p] = source
        clock = self.clock(p, source)
        if ts_ms > clock:
            clock = self.clocks[p] = ts_ms
        if not value or event_type(value) not in RELEVANT:
            return 0
        try:
            e = read_event(value)
        except (msgspec.DecodeError, msgspec.ValidationError):
            self.gauges.uncounted.inc()  # not a canonical event (a redaction hook's?)
            return 0
        session, changed = self._session(key, source, batch)
        before = (session.model, session.pending)
        if e.type == "turn.started" and e.payload.model:
            session.model = clean_label(e.payload.model)
        elif e.type == "model.rerouted" and e.payload.toModel:
            session.model = clean_label(e.payload.toModel)
        contribs = contributions(e, session, ts_ms)
        for field, amount in contribs:
            if absurd(field, amount):
                self.gauges.absurd.inc((field,))
        contribs = [(f, a) for f, a in contribs if not absurd(f, a)]
        changed = changed or (session.model, session.pending) != before
        batch.states[key] = (SessionCount(p, None, True, source) if e.type == "session.exited"
                             else SessionCount(p, session, changed, source))
        if not contribs:
            return 0
        minute = ts_ms - ts_ms % MINUTE_MS
        if minute + MINUTE_MS + self.grace_ms <= clock:
            return 1  # its minute is closed: counted nowhere
        pkey = self._pane(clean_label(e.provider), session.model, minute, p, source, batch)
        prior = batch.stored[pkey]
        if prior is not None and offset is not None and offset <= prior.offset:
            return 0  # counted before a crash: this is a redelivery
        if e.type == "turn.completed" and e.payload.cost is not None and \
                e.payload.cost.source == "unpriced":
            model = session.model if session.model in self._models() else OTHER
            self.gauges.unpriced.inc((clean_label(e.provider), model))
        add_contributions(batch.acc.setdefault(pkey, {}), contribs)
        batch.n[pkey] = batch.n.get(pkey, 0) + 1
        if offset is not None or pkey not in batch.last:
            batch.last[pkey] = counted
        return 0

    def _session(self, key: bytes, source: Any, batch: Batch) -> tuple[FleetSession, bool]:
        """A copy of the session's state (the batch's, else the table's), and whether the
        batch changed it already: what an event changes in the copy is kept only if the
        event is counted whole."""
        if key in batch.states:
            kept = batch.states[key]
            session, changed = kept.session, kept.changed
        else:
            set_current_event(source)
            raw = local(self.sessions).get(key)
            session, changed = (decode_session(raw) if raw else None), False
        return (FleetSession(session.model, session.pending) if session else FleetSession(),
                changed)

    def _pane(self, provider: str, model: str, minute: int, p: int, source: Any,
              batch: Batch) -> bytes:
        """The key of the pane an event of `model` counts in: its model's, or "other"'s
        when the model has no pane yet and MAX_MODELS models have."""
        pkey = pane_key(provider, model, minute, p)
        if self._read_pane(pkey, source, batch) is not None or pkey in batch.acc:
            return pkey
        models = self._models()
        if model not in models and model != OTHER and len(models) >= MAX_MODELS:
            self.gauges.folded.inc((provider,))
            model, pkey = OTHER, pane_key(provider, OTHER, minute, p)
            if self._read_pane(pkey, source, batch) is not None or pkey in batch.acc:
                return pkey
        models[model] = models.get(model, 0) + 1  # a new pane
        return pkey

    def _read_pane(self, pkey: bytes, source: Any, batch: Batch) -> Stored | None:
        if pkey not in batch.stored:
            set_current_event(source)
            raw = local(self.windows).get(pkey)
            batch.stored[pkey] = decode_stored(raw) if raw else None
        return batch.stored[pkey]

    def _models(self) -> dict[str, int]:
        """Panes per model in the table (read from the table's keys the first time)."""
        if self.models is None:
            models: dict[str, int] = {}
            for (_, model, _), minutes in contextvars.Context().run(self.index).items():
                models[model] = models.get(model, 0) + len(minutes)
            self.models = models
        return self.models

    def _write(self, batch: Batch, out: list[TableWrite]) -> int:
        """The batch's panes and sessions, as table writes in `out` (see `_put`);
        returns the events of the panes that could not be written."""
        windows, sessions, failed = self.windows, self.sessions, 0
        for pkey, fields in batch.acc.items():
            try:
                prior = batch.stored[pkey]
                provider, model, minute, p = parse_pane(pkey)
                base = prior.metrics if prior is not None else FleetMetrics(
                    schemaVersion=FLEET_SCHEMA_VERSION, window=TUMBLING, windowStartMs=minute,
                    windowEndMs=minute + MINUTE_MS, provider=provider, model=model, partition=p)
                last = batch.last[pkey]
                offset = last.offset if last.offset is not None else (
                    prior.offset if prior is not None else -1)
                _put(windows, pkey, p, encode(Stored(offset, merge(base, fields))),
                     last.source, out)
                self.dirty.add(pkey)
            except Exception:
                log.exception("fleet: pane %r could not be written", pkey)
                failed += batch.n.get(pkey, 0)
        for key, kept in batch.states.items():
            try:
                set_current_event(kept.record)  # the store reads the record's partition
                if kept.session is None:
                    if key in local(sessions):
                        _put(sessions, key, kept.partition, None, None, out)
                elif kept.changed:
                    _put(sessions, key, kept.partition, encode(kept.session), kept.record, out)
            except Exception:
                log.exception("fleet: session %r could not be stored", key)
        return failed

    # -- publishing ----------------------------------------------------------------

    def index(self) -> dict[Group, dict[int, bytes]]:
        """Every pane's key in the table, by (provider, model, partition) and minute
        (from the keys alone: a pane is decoded only when it is needed)."""
        groups: dict[Group, dict[int, bytes]] = {}
        for key in list(local(self.windows).keys()):
            if key.startswith(CLOCK):
                continue
            provider, model, minute, p = parse_pane(key)
            groups.setdefault((provider, model, p), {})[minute] = key
        return groups

    def decoded(self, keys: dict[int, bytes]) -> dict[int, FleetMetrics]:
        data, out = local(self.windows), {}
        for minute, key in keys.items():
            raw = data.get(key)
            if raw is not None:
                out[minute] = decode_stored(raw).metrics
        return out

    def panes(self) -> dict[Group, dict[int, FleetMetrics]]:
        """Every pane in the table, by (provider, model, partition) and minute."""
        return {group: self.decoded(keys) for group, keys in self.index().items()}

    def due(self) -> tuple[list[ProducerRecord], list[tuple[bytes, int]]]:
        """The agents.metrics records to publish now (the windows whose panes changed,
        and those that closed, with `closed: true`), and the panes to remove once they
        are delivered (no open window holds them any more). Decodes only the panes of
        the (provider, model, partition) groups that have something to publish."""
        items: list[ProducerRecord] = []
        remove: list[tuple[bytes, int]] = []
        grace, final = self.grace_ms, self.final
        for (provider, model, p), keys in self.index().items():
            clock = self.clock(p)
            dirty = {m for m, k in keys.items() if k in self.dirty}
            starts = {m - k * MINUTE_MS for m in keys for k in range(5)}
            for minute, key in keys.items():
                if minute + HOPPING_MS + grace <= clock:
                    remove.append((key, p))
            if not dirty and not any(
                    minute + MINUTE_MS + grace <= clock
                    and record_key(TUMBLING, provider, model, minute, p) not in final
                    for minute in keys) and not any(
                    start + HOPPING_MS + grace <= clock
                    and record_key(HOPPING, provider, model, start, p) not in final
                    for start in starts):
                continue  # nothing changed, nothing closed: not decoded
            panes = self.decoded(keys)
            for minute, pane in panes.items():
                closed = minute + MINUTE_MS + grace <= clock
                rkey = record_key(TUMBLING, provider, model, minute, p)
                if minute in dirty or (closed and rkey not in final):
                    items.append(ProducerRecord(METRICS_TOPIC, encode_fleet_metrics(
                        msgspec.structs.replace(pane, closed=closed)), rkey, p))
                    if closed:
                        final.add(rkey)
            for start in sorted(starts):
                members = [m for m in range(start, start + HOPPING_MS, MINUTE_MS) if m in panes]
                if not members:
                    continue
                closed = start + HOPPING_MS + grace <= clock
                rkey = record_key(HOPPING, provider, model, start, p)
                if dirty.intersection(members) or (closed and rkey not in final):
                    value = hopping_window((panes[m] for m in members), start, closed,
                                           panes[members[0]])
                    items.append(ProducerRecord(METRICS_TOPIC, encode_fleet_metrics(value), rkey, p))
                    if closed:
                        final.add(rkey)
        return items, remove

    def settle(self, remove: list[tuple[bytes, int]], clocks: dict[int, int]
               ) -> list[TableWrite]:
        """After a publication (pipeline.worker.checkpoint.commit_fleet): the table writes
        that remove the panes no open window holds, and store the stream times (as they
        were when it began) that moved (a write names a record of its partition)."""
        out: list[TableWrite] = []
        models = self._models()
        for key, p in remove:
            _put(self.windows, key, p, None, None, out)
            model = parse_pane(key)[1]
            if models.get(model, 0) > 1:
                models[model] -= 1
            else:
                models.pop(model, None)
        if remove:  # forget the closed windows none of whose panes is left
            gone = {key for key, _ in remove}
            live = set(local(self.windows).keys()) - gone
            self.final = {r for r in self.final if any(k in live for k in panes_of(r))}
        stored = {p: local(self.windows).get(CLOCK + str(p).encode()) for p in clocks}
        for p, clock in clocks.items():
            raw, event = stored[p], self.last_event.get(p)
            if clock and event is not None and (raw is None or decode_int(raw) < clock):
                _put(self.windows, CLOCK + str(p).encode(), p, encode(clock), event, out)
        return out

    async def on_recover(self) -> None:
        """After a rebalance: read the stream times and models again from the table, and
        republish every window this worker now holds (the worker that had them may not
        have published their last update)."""
        self.generation += 1
        self.clocks.clear()
        self.final.clear()
        self.last_event.clear()
        self.models = None
        if self.windows is not None:
            self.dirty.update(k for k in list(local(self.windows).keys())
                              if not k.startswith(CLOCK))



def add_fleet(app: Any, settings: Settings, metrics: WorkerMetrics) -> FleetStage:
    """Wire the stage into a Faust app: its two tables and its topic. The normalize
    agents' checkpoints count the canonical events of each batch once they are
    delivered: Faust's cost is per record and per agent, and a stage of its own reading
    agents.canonical back cost the worker more than the counting itself (`canonflow
    bench`). The app publishes its windows from a timer
    (pipeline.worker.checkpoint.commit_fleet)."""
    stage = FleetStage(settings, metrics.registry, metrics)
    stage.app = app
    app.topic(METRICS_TOPIC, key_serializer="raw", value_serializer="raw",
              partitions=settings.partitions)
    stage.windows = add_table(app, settings, "fleet.windows")
    stage.sessions = add_table(app, settings, "fleet.sessions")
    stage.windows.on_recover(stage.on_recover)
    return stage
