"""The fleet-metrics stage: canonical events -> windowed counts per provider and model
-> agents.metrics, and Prometheus gauges of the current windows.

It counts the events of agents.canonical as the normalize agents publish them (each
delivered batch, in the same process and partition), not by reading the topic back.

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

What the input must not do (issue 25, each reproduced on a real worker):
- Stop the agents. Counting a batch is synchronous, so the agents never wait for the
  stage; the publication goes in deliveries of at most PUBLISH_CHUNK records, sent
  again until the cluster takes them (pipeline.worker.output.OutputProducer) while nothing the
  agents need is held, and a worker that stops cancels it (`until_stopped`): whoever
  holds the windows next publishes them again.
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
import math
import time
from collections.abc import Awaitable, Callable, Iterable
from functools import lru_cache
from typing import Any, NamedTuple

import msgspec

from pipeline.ops.metrics import (
    OTHER,
    Counter,
    Gauge,
    Item,
    Labels,
    Registry,
    WorkerMetrics,
    clean_label,
    event_type,
)
from pipeline.settings import Settings
from pipeline.worker.faust_door import acting_for, add_table, local, send_changelog
from pipeline.worker.output import until_stopped
from topics.canonical import TOOL_ITEM_TYPES
from topics.catalog import METRICS_TOPIC
from topics.metrics import FLEET_SCHEMA_VERSION, FleetMetrics, WindowKind, encode_fleet_metrics
from topics.usage import TokenUsage

log = logging.getLogger("canonflow.fleet")

TUMBLING: WindowKind = "tumbling-1m"
HOPPING: WindowKind = "hopping-5m"
MINUTE_MS = 60_000
HOPPING_MS = 5 * MINUTE_MS
UNKNOWN_MODEL = "unknown"
#: Distinct tool names (and error classes) kept per pane; more count as "other".
MAX_KEYS = 200
#: Distinct models with panes in a worker's table; a new model past them counts as "other".
MAX_MODELS = 100
#: Where a window's counts stop (2**53 - 1: exact in every JSON consumer's float64).
MAX_COUNT = 2**53 - 1
#: A turn's tokens (in or out) or cost above these are no real turn's.
MAX_TURN_TOKENS = 10**10
MAX_TURN_COST_USD = 100_000.0
#: Open approvals remembered per session (the oldest are forgotten past it: their
#: decision is then counted, not timed).
MAX_PENDING = 1000
#: Records per delivery of the publication.
PUBLISH_CHUNK = 1000

_RELEVANT = frozenset({b"turn.started", b"turn.completed", b"turn.aborted", b"item.started",
                       b"request.opened", b"request.resolved", b"runtime.error",
                       b"model.rerouted", b"session.exited"})
_TOOL_ITEMS = frozenset(TOOL_ITEM_TYPES)
#: Outcomes (topics.canonical.Decision) of an approval that was not allowed: refused, or
#: ended with its turn (Codex's `cancel` is the user's "no, and stop").
_DENIED = frozenset({"decline", "cancel"})
_CLOCK = b"clock|"
_SUMMED = ("turnsStarted", "turnsCompleted", "turnsFailed", "turnsInterrupted",
           "approvalsRequested", "approvalsResolved", "approvalsDenied", "approvalDecisions",
           "approvalDecisionMsSum", "tokensIn", "tokensOut", "costUsd")


# ---- what the stage reads of a canonical event ---------------------------------


class _Cost(msgspec.Struct):
    source: str | None = None  # provider, computed or unpriced
    usd: Any = None  # a number, checked by `contributions` (JSON may hold any)


class _Payload(msgspec.Struct):
    model: str | None = None
    toModel: str | None = None
    state: str | None = None
    itemType: str | None = None
    toolName: str | None = None
    requestType: str | None = None
    outcome: str | None = None  # the normalised decision; never the runtime's own word
    tokens: TokenUsage | None = None  # the turn's own tokens, one rule for every runtime
    cost: _Cost | None = None  # the turn's cost and its provenance (topics.usage.Cost)
    errorClass: str | None = msgspec.field(default=None, name="class")


class _Event(msgspec.Struct):
    type: str
    provider: str
    requestId: str | None = None
    payload: _Payload = msgspec.field(default_factory=_Payload)


_decode_event = msgspec.json.Decoder(_Event).decode


class FleetSession(msgspec.Struct, array_like=True):
    """What the stage keeps per session: its model, and its open approvals
    (canonical request id -> event time ms of the opening)."""

    model: str = UNKNOWN_MODEL
    pending: dict[str, int] = {}


class _Stored(msgspec.Struct, array_like=True):
    """A window's table value: its counts and the last source offset they include."""

    offset: int
    metrics: FleetMetrics


_encode = msgspec.msgpack.Encoder().encode
_decode_session = msgspec.msgpack.Decoder(FleetSession).decode
_decode_stored = msgspec.msgpack.Decoder(_Stored).decode
_decode_int = msgspec.msgpack.Decoder(int).decode


def _number(v: Any) -> float | None:
    """A JSON number as a float (too large for one: infinity); None for anything else."""
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None
    try:
        return float(v)
    except OverflowError:
        return math.inf


def contributions(e: Any, session: FleetSession, ts_ms: int) -> list[tuple[str, Any]]:
    """What one relevant event adds to its windows: (field, amount) pairs, with
    (field, (name, amount)) for the per-name maps. Updates `session.pending` (the
    caller stores the session when it changed)."""
    t, p = e.type, e.payload
    if t == "turn.started":
        return [("turnsStarted", 1)]
    if t == "turn.completed":
        state = p.state
        out: list[tuple[str, Any]] = [
            ("turnsCompleted" if state == "completed" else
             "turnsFailed" if state == "failed" else "turnsInterrupted", 1)]
        if p.tokens is not None:
            if p.tokens.input:
                out.append(("tokensIn", p.tokens.input))
            if p.tokens.output:
                out.append(("tokensOut", p.tokens.output))
        cost = _number(p.cost.usd) if p.cost is not None else None
        if cost:
            out.append(("costUsd", cost))
        return out
    if t == "turn.aborted":
        return [("turnsInterrupted", 1)]
    if t == "item.started":
        if p.itemType in _TOOL_ITEMS:
            return [("toolCalls", (clean_label(p.toolName or p.itemType), 1))]
        return []
    if t == "runtime.error":
        return [("errors", (clean_label(p.errorClass or "unknown"), 1))]
    if t in ("request.opened", "request.resolved"):
        if not (p.requestType or "").endswith("_approval"):
            return []
        rid = e.requestId or ""
        if t == "request.opened":
            if rid:
                pending = session.pending
                if len(pending) >= MAX_PENDING and rid not in pending:
                    pending = dict(list(pending.items())[1 - MAX_PENDING:])  # oldest out
                session.pending = {**pending, rid: ts_ms}
            return [("approvalsRequested", 1)]
        out = [("approvalsResolved", 1)]
        if p.outcome in _DENIED:
            out.append(("approvalsDenied", 1))
        opened = session.pending.get(rid) if rid else None
        if opened is not None:
            session.pending = {k: v for k, v in session.pending.items() if k != rid}
            waited = max(0, ts_ms - opened)
            out += [("approvalDecisions", 1), ("approvalDecisionMsSum", waited),
                    ("approvalDecisionMsMax", waited)]
        return out
    return []


def absurd(field: str, amount: Any) -> bool:
    """Is `amount` a token count or cost that no turn has (negative, too large, not finite)?"""
    if field in ("tokensIn", "tokensOut"):
        return not 0 <= amount <= MAX_TURN_TOKENS
    if field == "costUsd":
        return not (math.isfinite(amount) and 0 <= amount <= MAX_TURN_COST_USD)
    return False


def _sum(a: Any, b: Any) -> Any:
    """a + b, stopping at MAX_COUNT (a float stays a float)."""
    total = a + b
    return total if total <= MAX_COUNT else type(total)(MAX_COUNT)


@lru_cache(maxsize=1)
def _faust_windows() -> tuple[Any, Any]:
    from faust import HoppingWindow, TumblingWindow

    return TumblingWindow(MINUTE_MS / 1000), HoppingWindow(HOPPING_MS / 1000, MINUTE_MS / 1000)


@lru_cache(maxsize=4096)
def window_starts(minute_ms: int) -> tuple[tuple[str, int], ...]:
    """(kind, start ms) of every window holding the minute that starts at `minute_ms`,
    from Faust's window definitions: one tumbling-1m, five hopping-5m."""
    tumbling, hopping = _faust_windows()
    return tuple([(TUMBLING, int(round(start * 1000))) for start, _ in tumbling.ranges(minute_ms / 1000)]
                 + [(HOPPING, int(round(start * 1000))) for start, _ in hopping.ranges(minute_ms / 1000)])


def pane_key(provider: str, model: str, minute_ms: int, partition: int) -> bytes:
    return f"{provider}|{model}|{minute_ms}|{partition}".encode()


def record_key(kind: str, provider: str, model: str, start_ms: int, partition: int) -> bytes:
    """The agents.metrics key of one window (topics.metrics)."""
    return f"{kind}|{provider}|{model}|{start_ms}|{partition}".encode()


def _parse_pane(key: bytes) -> tuple[str, str, int, int]:
    """(provider, model, minute ms, partition) of a pane key; the model may hold '|'."""
    provider, rest = key.split(b"|", 1)
    model, minute, partition = rest.rsplit(b"|", 2)
    return provider.decode(), model.decode(), int(minute), int(partition)


def _merge(m: FleetMetrics, acc: dict[str, Any]) -> FleetMetrics:
    """A pane plus the counts a batch adds to it."""
    changes: dict[str, Any] = {}
    for field, amount in acc.items():
        if field in ("toolCalls", "errors"):
            merged = dict(getattr(m, field))
            for name, n in amount.items():
                if name not in merged and len(merged) >= MAX_KEYS:
                    name = OTHER
                merged[name] = _sum(merged.get(name, 0), n)
            changes[field] = merged
        elif field == "approvalDecisionMsMax":
            changes[field] = min(MAX_COUNT, max(m.approvalDecisionMsMax, amount))
        else:
            changes[field] = _sum(getattr(m, field), amount)
    return msgspec.structs.replace(m, **changes)


def _add(acc: dict[str, Any], contribs: list[tuple[str, Any]]) -> None:
    for field, amount in contribs:
        if field in ("toolCalls", "errors"):
            name, n = amount
            sub = acc.setdefault(field, {})
            sub[name] = _sum(sub.get(name, 0), n)
        elif field == "approvalDecisionMsMax":
            acc[field] = max(acc.get(field, 0), amount)
        else:
            acc[field] = _sum(acc.get(field, 0), amount)


def hopping_window(panes: Iterable[FleetMetrics], start_ms: int, closed: bool,
                   like: FleetMetrics) -> FleetMetrics:
    """The hopping-5m window starting at `start_ms`: the sum of its panes."""
    sums: dict[str, Any] = dict.fromkeys(_SUMMED, 0)
    tools: dict[str, int] = {}
    errors: dict[str, int] = {}
    longest = 0
    for pane in panes:
        for field in _SUMMED:
            sums[field] = _sum(sums[field], getattr(pane, field))
        for name, n in pane.toolCalls.items():
            tools[name] = _sum(tools.get(name, 0), n)
        for name, n in pane.errors.items():
            errors[name] = _sum(errors.get(name, 0), n)
        longest = max(longest, pane.approvalDecisionMsMax)
    sums["costUsd"] = float(sums["costUsd"])
    return msgspec.structs.replace(like, window=HOPPING, windowStartMs=start_ms,
                                   windowEndMs=start_ms + HOPPING_MS, closed=closed,
                                   toolCalls=tools, errors=errors,
                                   approvalDecisionMsMax=longest, **sums)


def _put(table: Any, key: bytes, partition: int, value: bytes | None) -> None:
    """Write (None: delete with a tombstone) one entry in the given changelog partition."""
    send_changelog(table, partition, key, value)


Group = tuple[str, str, int]  # provider, model, partition


class Counted(NamedTuple):
    """One canonical event as the stage counts it, published by a normalize agent."""

    key: bytes  # the session id
    value: bytes  # the event, as published
    partition: int
    #: The offset of the raw record it came from (monotonic per raw topic partition,
    #: and a pane's key names the provider, so its raw topic): a pane that stored a
    #: higher one counted this event before a crash. None for the idle scan's synthetic
    #: closings, which no raw record carries (counted, never taken for a redelivery).
    offset: int | None
    ts_ms: int  # event time: the raw record's timestamp, the canonical record's too
    source: Any  # the record (or stand-in) whose partition table reads and writes use


class _Batch:
    """What counting one batch accumulates before it writes the tables."""

    __slots__ = ("acc", "last", "n", "stored", "states")

    def __init__(self) -> None:
        self.acc: dict[bytes, dict[str, Any]] = {}  # pane -> the counts the batch adds
        self.last: dict[bytes, Counted] = {}  # pane -> the last event counted in it
        self.n: dict[bytes, int] = {}  # pane -> events counted in it
        self.stored: dict[bytes, _Stored | None] = {}  # pane -> its table value
        # session -> (partition, state (None: forget it), changed, a record to write it for)
        self.states: dict[bytes, tuple[int, FleetSession | None, bool, Any]] = {}


class FleetStage:
    """The stage's logic over its two tables; the Faust wiring is `add_fleet`.

    Everything that reads or writes the stage's state is synchronous (`process`,
    `due`, `_settle`), so the agents' batches and the publication interleave only at
    the publication's awaits, which hold nothing the agents need (see `flush`)."""

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
                acting_for(event)
            raw = local(self.windows).get(_CLOCK + str(partition).encode())
            known = _decode_int(raw) if raw else 0
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

    async def count(self, events: list[Counted]) -> None:
        """Count one batch; a failure is logged, never raised: counting must not stop
        the stream it reads. Nothing here waits: the agents never wait for the stage."""
        t0 = time.perf_counter()
        try:
            self.process(events)
        except Exception:
            log.exception("fleet: a batch could not be counted")
        if self.metrics is not None:
            self.metrics.counted("fleet", len(events), time.perf_counter() - t0)

    def process(self, events: Iterable[Counted]) -> int:
        """Count a batch of canonical events into the pane table, each event on its own:
        one that fails costs its own counts (logged, and counted in
        `canonflow_fleet_uncounted_events_total`). Returns the number of late events
        dropped.

        Every table read and write names the record it is for (pipeline.worker.faust_door): the
        RocksDB store reads and writes the database of the current event's partition."""
        now_ms = int(time.time() * 1000)
        batch = _Batch()
        late = failed = 0
        for counted in events:
            try:
                late += self._count_one(counted, now_ms, batch)
            except Exception:
                if not failed:
                    log.exception("fleet: an event of %r could not be counted", counted.key)
                failed += 1
        failed += self._write(batch)
        if late:
            self.gauges.late.inc((), late)
        if failed:
            self.gauges.uncounted.inc((), failed)
        return late

    def _count_one(self, counted: Counted, now_ms: int, batch: _Batch) -> int:
        """Add one event to `batch`; 1 when it is late (counted nowhere), else 0."""
        key, value, p, offset, ts_ms, source = counted
        ts_ms = self.event_time(ts_ms, now_ms)
        self.last_event[p] = source
        clock = self.clock(p, source)
        if ts_ms > clock:
            clock = self.clocks[p] = ts_ms
        if not value or event_type(value) not in _RELEVANT:
            return 0
        try:
            e = _decode_event(value)
        except (msgspec.DecodeError, msgspec.ValidationError):
            self.gauges.uncounted.inc()  # not a canonical event (a redaction hook's?)
            return 0
        states = batch.states
        if key in states:
            _, session, changed, _ = states[key]
        else:
            acting_for(source)
            raw_session = local(self.sessions).get(key)
            session, changed = (_decode_session(raw_session) if raw_session else None), False
        # a copy: what this event changes is kept only if the event is counted whole
        session = FleetSession(session.model, session.pending) if session else FleetSession()
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
        states[key] = ((p, None, True, source) if e.type == "session.exited"
                       else (p, session, changed, source))
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
        _add(batch.acc.setdefault(pkey, {}), contribs)
        batch.n[pkey] = batch.n.get(pkey, 0) + 1
        if offset is not None or pkey not in batch.last:
            batch.last[pkey] = counted
        return 0

    def _pane(self, provider: str, model: str, minute: int, p: int, source: Any,
              batch: _Batch) -> bytes:
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

    def _read_pane(self, pkey: bytes, source: Any, batch: _Batch) -> _Stored | None:
        if pkey not in batch.stored:
            acting_for(source)
            raw = local(self.windows).get(pkey)
            batch.stored[pkey] = _decode_stored(raw) if raw else None
        return batch.stored[pkey]

    def _models(self) -> dict[str, int]:
        """Panes per model in the table (read from the table's keys the first time)."""
        if self.models is None:
            models: dict[str, int] = {}
            for (_, model, _), minutes in contextvars.Context().run(self._index).items():
                models[model] = models.get(model, 0) + len(minutes)
            self.models = models
        return self.models

    def _write(self, batch: _Batch) -> int:
        """Write the batch's panes and sessions; returns the events of the panes that
        could not be written."""
        windows, sessions, failed = self.windows, self.sessions, 0
        for pkey, fields in batch.acc.items():
            try:
                prior = batch.stored[pkey]
                provider, model, minute, p = _parse_pane(pkey)
                base = prior.metrics if prior is not None else FleetMetrics(
                    schemaVersion=FLEET_SCHEMA_VERSION, window=TUMBLING, windowStartMs=minute,
                    windowEndMs=minute + MINUTE_MS, provider=provider, model=model, partition=p)
                last = batch.last[pkey]
                acting_for(last.source)
                offset = last.offset if last.offset is not None else (
                    prior.offset if prior is not None else -1)
                _put(windows, pkey, p, _encode(_Stored(offset, _merge(base, fields))))
                self.dirty.add(pkey)
            except Exception:
                log.exception("fleet: pane %r could not be written", pkey)
                failed += batch.n.get(pkey, 0)
        for key, (p, session, changed, event) in batch.states.items():
            try:
                acting_for(event)
                if session is None:
                    if key in local(sessions):
                        _put(sessions, key, p, None)
                elif changed:
                    _put(sessions, key, p, _encode(session))
            except Exception:
                log.exception("fleet: session %r could not be stored", key)
        return failed

    # -- publishing ----------------------------------------------------------------

    def _index(self) -> dict[Group, dict[int, bytes]]:
        """Every pane's key in the table, by (provider, model, partition) and minute
        (from the keys alone: a pane is decoded only when it is needed)."""
        groups: dict[Group, dict[int, bytes]] = {}
        for key in list(local(self.windows).keys()):
            if key.startswith(_CLOCK):
                continue
            provider, model, minute, p = _parse_pane(key)
            groups.setdefault((provider, model, p), {})[minute] = key
        return groups

    def _decoded(self, keys: dict[int, bytes]) -> dict[int, FleetMetrics]:
        data, out = local(self.windows), {}
        for minute, key in keys.items():
            raw = data.get(key)
            if raw is not None:
                out[minute] = _decode_stored(raw).metrics
        return out

    def panes(self) -> dict[Group, dict[int, FleetMetrics]]:
        """Every pane in the table, by (provider, model, partition) and minute."""
        return {group: self._decoded(keys) for group, keys in self._index().items()}

    def due(self) -> tuple[list[Item], list[tuple[bytes, int]]]:
        """The agents.metrics records to publish now (the windows whose panes changed,
        and those that closed, with `closed: true`), and the panes to remove once they
        are delivered (no open window holds them any more). Decodes only the panes of
        the (provider, model, partition) groups that have something to publish."""
        items: list[Item] = []
        remove: list[tuple[bytes, int]] = []
        grace, final = self.grace_ms, self.final
        for (provider, model, p), keys in self._index().items():
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
            panes = self._decoded(keys)
            for minute, pane in panes.items():
                closed = minute + MINUTE_MS + grace <= clock
                rkey = record_key(TUMBLING, provider, model, minute, p)
                if minute in dirty or (closed and rkey not in final):
                    items.append((METRICS_TOPIC, encode_fleet_metrics(
                        msgspec.structs.replace(pane, closed=closed)), rkey, p, None))
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
                    items.append((METRICS_TOPIC, encode_fleet_metrics(value), rkey, p, None))
                    if closed:
                        final.add(rkey)
        return items, remove

    async def flush(self, publish: Callable[[list[Item]], Awaitable[None]]) -> int:
        """Publish what is due, PUBLISH_CHUNK records per delivery, and wait for each;
        then store the stream times and forget the panes no open window holds. Returns
        the number of records published.

        While a delivery is sent again (the cluster does not take it), the agents count
        on: nothing they need is held. When the app stops, the delivery is cancelled and
        the windows stay changed (a worker that holds them next publishes them again);
        after a recovery during the publication (a rebalance), nothing is removed."""
        if self.windows is None:
            return 0
        generation = self.generation
        # no current event: the RocksDB store then looks a key up in every partition
        items, remove = contextvars.Context().run(self.due)
        clocks = dict(self.clocks)
        sent, self.dirty = self.dirty, set()
        done = 0
        try:
            for start in range(0, len(items), PUBLISH_CHUNK):
                chunk = items[start:start + PUBLISH_CHUNK]
                if self.app is None:
                    await publish(chunk)
                elif not await until_stopped(self.app, publish(chunk)):
                    self.dirty |= sent
                    return done
                done += len(chunk)
        except BaseException:
            self.dirty |= sent
            raise
        if generation == self.generation:
            contextvars.Context().run(self._settle, remove, clocks)
        return done

    def _settle(self, remove: list[tuple[bytes, int]], clocks: dict[int, int]) -> None:
        """After a publication: remove the panes no open window holds, and store the
        stream times (as they were when it began) that moved (a write names a record of
        its partition)."""
        models = self._models()
        for key, p in remove:
            _put(self.windows, key, p, None)
            model = _parse_pane(key)[1]
            if models.get(model, 0) > 1:
                models[model] -= 1
            else:
                models.pop(model, None)
        if remove:  # forget the closed windows none of whose panes is left
            live = set(local(self.windows).keys())
            self.final = {r for r in self.final if any(k in live for k in _panes_of(r))}
        stored = {p: local(self.windows).get(_CLOCK + str(p).encode()) for p in clocks}
        for p, clock in clocks.items():
            raw, event = stored[p], self.last_event.get(p)
            if clock and event is not None and (raw is None or _decode_int(raw) < clock):
                acting_for(event)
                _put(self.windows, _CLOCK + str(p).encode(), p, _encode(clock))

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
                              if not k.startswith(_CLOCK))


def _panes_of(rkey: bytes) -> list[bytes]:
    """The pane keys a published window covers."""
    kind, rest = rkey.split(b"|", 1)
    provider, model_start_p = rest.split(b"|", 1)
    model, start, p = model_start_p.rsplit(b"|", 2)
    n = 5 if kind == HOPPING.encode() else 1
    return [b"|".join((provider, model, str(int(start) + k * MINUTE_MS).encode(), p))
            for k in range(n)]


class FleetGauges:
    """The current windows as Prometheus gauges, computed from the pane table at
    scrape time: for each partition this worker holds, the tumbling-1m window holding
    the partition's stream time, and the hopping-5m window that holds it and started
    earliest (the last five minutes), summed per provider and model. Across workers,
    sum them. Only the panes of those windows are decoded, once per scrape; the
    models are the table's (at most MAX_MODELS and "other")."""

    def __init__(self, registry: Registry, stage: FleetStage | None):
        self.stage = stage
        self.registry = registry
        self._cache: tuple[int, dict[str, dict[Labels, float]]] = (-1, {})
        w = ("window", "provider", "model")
        specs = [
            ("turns", "Turns in the current window, by state (started, completed, failed, "
                      "interrupted).", (*w, "state")),
            ("tool_calls", "Tool calls started in the current window, by normalised tool name.",
             (*w, "tool")),
            ("approvals", "Approval requests in the current window: requested, resolved, "
                          "denied.", (*w, "outcome")),
            ("approval_decision_seconds_sum", "Seconds from approval request to decision, "
                                              "summed over the current window's decisions.", w),
            ("approval_decision_seconds_max", "Longest approval decision in the current "
                                              "window, seconds.", w),
            ("approval_decisions", "Approval decisions with a known request time in the "
                                   "current window.", w),
            ("tokens", "Tokens reported by turn.completed in the current window "
                       "(direction in, out).", (*w, "direction")),
            ("cost_usd", "Cost of the turns completed in the current window, USD: the "
                         "runtime's own, else computed from their tokens and model "
                         "(turn.completed `cost`; unpriced turns add nothing).", w),
            ("errors", "runtime.error events in the current window, by class.",
             (*w, "error_class")),
        ]
        self.gauges: dict[str, Gauge] = {}
        for short, help, labels in specs:
            self.gauges[short] = registry.add(Gauge(
                f"canonflow_fleet_{short}", help, labels, collect=self._collector(short),
                fold=max if short.endswith("_max") else sum))
        self.open_panes = registry.add(Gauge(
            "canonflow_fleet_open_panes",
            "One-minute panes held in this worker's fleet table (each in up to six open "
            "windows).", collect=self._collector("_open")))
        self.late = registry.add(Counter(
            "canonflow_fleet_late_events_total",
            "Canonical events that arrived after their minute had closed (not counted)."))
        self.clamped = registry.add(Counter(
            "canonflow_fleet_clamped_times_total",
            "Canonical events counted at the worker's clock instead of their own time: "
            "a time further ahead than half the grace (future), or none (missing).",
            ["direction"]))
        self.folded = registry.add(Counter(
            "canonflow_fleet_models_folded_total",
            f"Canonical events counted under model \"{OTHER}\": the worker's fleet table "
            f"already held panes of {MAX_MODELS} other models.", ["provider"]))
        self.absurd = registry.add(Counter(
            "canonflow_fleet_absurd_values_total",
            f"Token counts or costs of a turn.completed that no turn has (negative, above "
            f"{MAX_TURN_TOKENS:.0e} tokens or {MAX_TURN_COST_USD:,.0f} USD, not finite): "
            "left out of the windows, the event's other counts kept.", ["field"]))
        self.unpriced = registry.add(Counter(
            "canonflow_unpriced_turns_total",
            "Turns whose cost is unpriced: the runtime reported none and no price is known "
            "for the model (counted here, never as a cost of 0).", ["provider", "model"]))
        self.uncounted = registry.add(Counter(
            "canonflow_fleet_uncounted_events_total",
            "Canonical events the fleet stage failed to count (an error on that event "
            "alone: the batch's other events are counted)."))

    def _collector(self, short: str) -> Callable[[], dict[Labels, float]]:
        return lambda: self._values().get(short, {})

    def _values(self) -> dict[str, dict[Labels, float]]:
        """The gauges' values, computed once per scrape (each gauge reads them)."""
        scrape, values = self._cache
        if scrape == self.registry.scrapes:
            return values
        values = contextvars.Context().run(self._compute)  # no current event: all partitions
        self._cache = (self.registry.scrapes, values)
        return values

    def _compute(self) -> dict[str, dict[Labels, float]]:
        out: dict[str, dict[Labels, float]] = {}
        stage = self.stage
        if stage is None or stage.windows is None:
            return out

        def add(short: str, labels: Labels, value: float) -> None:
            d = out.setdefault(short, {})
            d[labels] = d.get(labels, 0) + value

        index = stage._index()
        # the models of panes another worker wrote (before a rebalance) come on top of
        # this worker's: the gauges keep the MAX_MODELS with the most panes, and "other"
        panes_of: dict[str, int] = {}
        for (_, model, _), keys in index.items():
            if model != OTHER:
                panes_of[model] = panes_of.get(model, 0) + len(keys)
        kept = set(sorted(panes_of, key=lambda m: (-panes_of[m], m))[:MAX_MODELS])
        n_panes = 0
        for (provider, model, p), keys in index.items():
            n_panes += len(keys)
            model = model if model in kept else OTHER
            clock = stage.clock(p)
            minute = clock - clock % MINUTE_MS
            panes = stage._decoded({m: k for m, k in keys.items()
                                    if minute - 4 * MINUTE_MS <= m <= minute})
            current = {TUMBLING: [panes[minute]] if minute in panes else [],
                       HOPPING: [panes[m] for m in sorted(panes)]}
            for kind, members in current.items():
                if not members:
                    continue
                m = hopping_window(members, 0, False, members[0])
                base = (kind, provider, model)
                for state, n in (("started", m.turnsStarted), ("completed", m.turnsCompleted),
                                 ("failed", m.turnsFailed), ("interrupted", m.turnsInterrupted)):
                    add("turns", (*base, state), n)
                for tool, n in m.toolCalls.items():
                    add("tool_calls", (*base, tool), n)
                for outcome, n in (("requested", m.approvalsRequested),
                                   ("resolved", m.approvalsResolved),
                                   ("denied", m.approvalsDenied)):
                    add("approvals", (*base, outcome), n)
                add("approval_decision_seconds_sum", base, m.approvalDecisionMsSum / 1000)
                longest = out.setdefault("approval_decision_seconds_max", {})
                longest[base] = max(longest.get(base, 0.0), m.approvalDecisionMsMax / 1000)
                add("approval_decisions", base, m.approvalDecisions)
                add("tokens", (*base, "in"), m.tokensIn)
                add("tokens", (*base, "out"), m.tokensOut)
                add("cost_usd", base, m.costUsd)
                for cls, n in m.errors.items():
                    add("errors", (*base, cls), n)
        out["_open"] = {(): float(n_panes)}
        return out


def add_fleet(app: Any, settings: Settings, metrics: WorkerMetrics,
              publish: Callable[[list[Item]], Awaitable[None]]) -> FleetStage:
    """Wire the stage into a Faust app: its two tables and the timer that publishes to
    agents.metrics. The normalize agents run `stage.count(events)` on the canonical
    events of each batch once they are delivered: Faust's cost is per record and per
    agent, and a stage of its own reading agents.canonical back cost the worker more
    than the counting itself (`canonflow bench`)."""
    stage = FleetStage(settings, metrics.registry, metrics)
    stage.app = app
    app.topic(METRICS_TOPIC, key_serializer="raw", value_serializer="raw",
              partitions=settings.partitions)
    stage.windows = add_table(app, settings, "fleet.windows")
    stage.sessions = add_table(app, settings, "fleet.sessions")
    stage.windows.on_recover(stage.on_recover)

    async def publish_windows() -> None:
        async def deliver(items: list[Item]) -> None:
            t0 = time.perf_counter()
            await publish(items)
            metrics.publish_seconds.observe(("fleet",), time.perf_counter() - t0)
            metrics.count_outputs(items)

        if not app.should_stop:
            await stage.flush(deliver)

    app.timer(settings.fleet_publish_interval, name="fleet.publish")(publish_windows)
    return stage


def metric_names() -> list[str]:
    """The name of every metric a worker exports (with the fleet stage on). Here, not in
    pipeline.ops.metrics, which knows no stage: the fleet's gauges are the stage's."""
    registry = WorkerMetrics().registry
    FleetGauges(registry, None)
    return list(registry.metrics)
