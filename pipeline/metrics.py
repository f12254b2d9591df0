"""The worker's Prometheus metrics: a small registry, the text exposition format, and
every metric canonflow exports (`WorkerMetrics`).

Why not prometheus-client: the agents count per batch into plain dicts (a few dict
increments per batch, one per output record for the by-type counts), and the scrape
renders those dicts; nothing here takes a lock or allocates per message. The text
format (version 0.0.4) is small enough to write by hand, and the tests parse it.

Label values that come from the input (native types, tool names, models) are capped
per metric (`MAX_SERIES`); past the cap new values are counted under "other", so a
runtime that invents a new native type per message cannot grow the worker's memory
or Prometheus' series count without bound.

Importing this module starts nothing and imports neither faust nor aiokafka.
"""

from __future__ import annotations

import bisect
import math
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import msgspec

from topics.catalog import CANONICAL_TOPIC, DEADLETTER_TOPIC

#: The content type Prometheus expects for the text format.
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
#: At most this many label sets per metric; more go to OTHER.
MAX_SERIES = 2000
OTHER = "other"
#: Longest label value kept (longer ones are cut).
MAX_LABEL_CHARS = 120

Labels = tuple[str, ...]

LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
                   2.5, 5.0, 10.0)
LAG_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0,
               900.0, 3600.0, 86400.0)
SIZE_BUCKETS = (1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500)
DECISION_BUCKETS = (1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 900.0, 3600.0)


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _num(value: float) -> str:
    if value == math.inf:
        return "+Inf"
    if value == -math.inf:
        return "-Inf"
    if value != value:
        return "NaN"
    if float(value).is_integer() and abs(value) < 1e15:
        return str(int(value))
    return repr(float(value))


def clean_label(value: Any) -> str:
    """A label value from untrusted input: a string, at most MAX_LABEL_CHARS long."""
    text = value if isinstance(value, str) else str(value)
    return text if len(text) <= MAX_LABEL_CHARS else text[:MAX_LABEL_CHARS]


class Metric:
    """Base of the three metric kinds: a name, help text and label names."""

    kind = "untyped"

    def __init__(self, name: str, help: str, labelnames: Sequence[str] = ()):
        self.name = name
        self.help = help
        self.labelnames = tuple(labelnames)

    def _labels(self, labels: Labels, extra: str = "") -> str:
        parts = [f'{n}="{_escape(v)}"' for n, v in zip(self.labelnames, labels, strict=True)]
        if extra:
            parts.append(extra)
        return "{" + ",".join(parts) + "}" if parts else ""

    def samples(self) -> Iterable[str]:  # pragma: no cover - overridden
        return ()

    def render(self) -> str:
        head = f"# HELP {self.name} {self.help.replace(chr(92), chr(92) * 2)}\n" \
               f"# TYPE {self.name} {self.kind}\n"
        return head + "".join(f"{s}\n" for s in self.samples())


class Counter(Metric):
    """A monotonic count per label set. `inc` is one dict get and one set."""

    kind = "counter"

    def __init__(self, name: str, help: str, labelnames: Sequence[str] = ()):
        super().__init__(name, help, labelnames)
        self.values: dict[Labels, float] = {}

    def inc(self, labels: Labels = (), n: float = 1) -> None:
        values = self.values
        if labels not in values and len(values) >= MAX_SERIES:
            labels = (OTHER,) * len(self.labelnames)
        values[labels] = values.get(labels, 0) + n

    def get(self, labels: Labels = ()) -> float:
        return self.values.get(labels, 0)

    def samples(self) -> Iterable[str]:
        if not self.labelnames and not self.values:
            yield f"{self.name} 0"  # a counter without labels exists from the start
        for labels, value in sorted(self.values.items()):
            yield f"{self.name}{self._labels(labels)} {_num(value)}"


class Gauge(Metric):
    """A value per label set, set directly or computed at scrape time by `collect`
    (a callable returning {labels: value}, which replaces the stored values)."""

    kind = "gauge"

    def __init__(self, name: str, help: str, labelnames: Sequence[str] = (),
                 collect: Callable[[], dict[Labels, float]] | None = None):
        super().__init__(name, help, labelnames)
        self.values: dict[Labels, float] = {}
        self.collect = collect

    def set(self, labels: Labels, value: float) -> None:
        self.values[labels] = value

    def get(self, labels: Labels = ()) -> float | None:
        return self.values.get(labels)

    def samples(self) -> Iterable[str]:
        if self.collect is not None:
            self.values = dict(self.collect())
        for labels, value in sorted(self.values.items()):
            yield f"{self.name}{self._labels(labels)} {_num(value)}"


class Histogram(Metric):
    """Cumulative buckets per label set. `observe(labels, value, n)` counts `n`
    observations of `value` (n > 1: one value standing for a batch of records)."""

    kind = "histogram"

    def __init__(self, name: str, help: str, labelnames: Sequence[str] = (),
                 buckets: Sequence[float] = LATENCY_BUCKETS):
        super().__init__(name, help, labelnames)
        self.buckets = tuple(sorted(buckets))
        self.values: dict[Labels, list[float]] = {}  # per-bucket counts (+Inf last), sum

    def observe(self, labels: Labels, value: float, n: int = 1) -> None:
        row = self.values.get(labels)
        if row is None:
            if len(self.values) >= MAX_SERIES:
                labels = (OTHER,) * len(self.labelnames)
                row = self.values.get(labels)
            if row is None:
                row = self.values[labels] = [0.0] * (len(self.buckets) + 2)
        row[bisect.bisect_left(self.buckets, value)] += n
        row[-1] += value * n

    def count(self, labels: Labels = ()) -> float:
        row = self.values.get(labels)
        return sum(row[:-1]) if row else 0

    def samples(self) -> Iterable[str]:
        for labels, row in sorted(self.values.items()):
            cumulative = 0.0
            for bound, n in zip((*self.buckets, math.inf), row[:-1], strict=True):
                cumulative += n
                yield f"{self.name}_bucket{self._labels(labels, f'le={chr(34)}{_num(bound)}{chr(34)}')} {_num(cumulative)}"
            yield f"{self.name}_sum{self._labels(labels)} {_num(row[-1])}"
            yield f"{self.name}_count{self._labels(labels)} {_num(cumulative)}"


class Registry:
    """The metrics of one worker, rendered in registration order."""

    def __init__(self) -> None:
        self.metrics: dict[str, Metric] = {}

    def add(self, metric: Any) -> Any:
        if metric.name in self.metrics:
            raise ValueError(f"metric {metric.name} registered twice")
        self.metrics[metric.name] = metric
        return metric

    def render(self) -> bytes:
        """The exposition text of every metric. A collector that fails leaves its
        metric without samples (and says so in a comment) rather than failing the scrape."""
        out: list[str] = []
        for metric in self.metrics.values():
            try:
                out.append(metric.render())
            except Exception as e:  # a broken collector must not hide the other metrics
                out.append(f"# {metric.name}: collector failed: {type(e).__name__}\n")
        return "".join(out).encode()


# ---------------------------------------------------------------------------
# What the agents count
# ---------------------------------------------------------------------------


class _Warning(msgspec.Struct):
    """Just the part of a runtime.warning event the unknown-type counter reads."""

    payload: _WarningPayload


class _WarningPayload(msgspec.Struct):
    detail: Any = None


class _DeadLetterClass(msgspec.Struct):
    provider: str = ""
    errorClass: str = ""


_decode_warning = msgspec.json.Decoder(_Warning).decode
_decode_deadletter = msgspec.json.Decoder(_DeadLetterClass).decode
_TYPE_START = len(b'{"type":"')


def event_type(encoded: bytes) -> bytes:
    """The wire type of an encoded canonical event, read from its first bytes
    (msgspec writes the tag field first: `{"type":"turn.started",...`)."""
    return encoded[_TYPE_START:encoded.find(b'"', _TYPE_START)]


#: One output record of a batch: (topic, value, key, partition, timestamp ms).
Item = tuple[str, bytes, "bytes | None", int, "int | None"]


class WorkerMetrics:
    """Every metric the worker exports, and the per-batch accounting the agents call.

    The gauges that describe Faust's state (consumer lag, assignment, tables,
    recovery) are filled at scrape time by `pipeline.web.bind_app_metrics`.
    """

    def __init__(self) -> None:
        r = self.registry = Registry()
        self.raw_records = r.add(Counter(
            "canonflow_raw_records_total",
            "Raw records consumed from agents.raw.<provider> by the normalize agents.",
            ["provider"]))
        self.native_messages = r.add(Counter(
            "canonflow_native_messages_total",
            "Native messages (NDJSON lines) in the raw records consumed.", ["provider"]))
        self.canonical_events = r.add(Counter(
            "canonflow_canonical_events_total",
            "Canonical events published to agents.canonical, by event type "
            "(idle-session closings included).", ["provider", "type"]))
        self.deadletters = r.add(Counter(
            "canonflow_deadletters_total",
            "Dead letters published to agents.deadletter, by error class "
            "(InternalError.chat.*: the chat projection failed on an event, which was "
            "published all the same).", ["provider", "error_class"]))
        self.unknown_types = r.add(Counter(
            "canonflow_unknown_native_types_total",
            "runtime.warning events for native messages no adapter knows, by native type.",
            ["provider", "native_type"]))
        self.output_records = r.add(Counter(
            "canonflow_output_records_total",
            "Records delivered by the output producer, by topic.", ["topic"]))
        self.send_failures = r.add(Counter(
            "canonflow_output_send_failures_total",
            "Output records whose delivery failed (each one is sent again; none is dropped).",
            ["topic"]))
        self.send_retries = r.add(Counter(
            "canonflow_output_send_retries_total",
            "Times an agent re-sent a batch's undelivered output after a delivery error.",
            ["agent"]))
        self.refused = r.add(Counter(
            "canonflow_output_refused_total",
            "Output records the cluster refused for good (too large, not authorised, no such "
            "topic): dead-lettered instead of sent again, by topic and error.",
            ["topic", "error"]))
        self.idle_closed = r.add(Counter(
            "canonflow_idle_sessions_closed_total",
            "Sessions closed by the idle scan (synthetic closing events, state removed).",
            ["provider"]))
        self.batches = r.add(Histogram(
            "canonflow_batch_records", "Records per agent batch.", ["agent"],
            buckets=SIZE_BUCKETS))
        self.translate_seconds = r.add(Histogram(
            "canonflow_translate_seconds",
            "Seconds an agent spent translating one batch (state reads, translation, "
            "encoding), before publishing.", ["agent"]))
        self.publish_seconds = r.add(Histogram(
            "canonflow_publish_seconds",
            "Seconds an agent waited for a batch's output to be delivered (retries included).",
            ["agent"]))
        self.e2e_lag = r.add(Histogram(
            "canonflow_end_to_end_lag_seconds",
            "Event time (the raw record's timestamp) to the delivery of its output, per record.",
            ["provider"], buckets=LAG_BUCKETS))
        self.last_batch = r.add(Gauge(
            "canonflow_last_batch_timestamp_seconds",
            "Unix time an agent last finished a batch.", ["agent"]))
        self.active_sessions = r.add(Gauge(
            "canonflow_active_sessions",
            "Sessions with state in this worker's session tables.", ["provider"]))
        self.open_turns = r.add(Gauge(
            "canonflow_open_turns",
            "Sessions with a turn started and not yet completed, among those this worker "
            "translated since it took their partition over.", ["provider"]))
        self.table_entries = r.add(Gauge(
            "canonflow_table_entries", "Entries in this worker's local tables.", ["table"]))
        self.consumer_lag = r.add(Gauge(
            "canonflow_consumer_lag",
            "Records not yet processed per assigned partition (highwater minus committed "
            "offset, or minus the read position before the first commit).",
            ["topic", "partition"]))
        self.assigned = r.add(Gauge(
            "canonflow_assigned_partitions",
            "Partitions of each source topic assigned to this worker.", ["topic"]))
        self.rebalances = r.add(Counter(
            "canonflow_rebalances_total", "Consumer group rebalances this worker took part in."))
        self.recovery_seconds = r.add(Gauge(
            "canonflow_recovery_seconds",
            "Seconds from the last partition assignment to the end of table recovery."))
        self.recovery_at = r.add(Gauge(
            "canonflow_last_recovery_timestamp_seconds",
            "Unix time table recovery last finished (0: not yet)."))
        self.recovering = r.add(Gauge(
            "canonflow_recovering", "1 while the worker rebalances or recovers its tables."))
        self.broker_up = r.add(Gauge(
            "canonflow_broker_up",
            "1 when the last broker probe succeeded, 0 when it failed."))
        self.up_since = r.add(Gauge(
            "canonflow_start_timestamp_seconds", "Unix time the worker started."))
        self.up_since.set((), time.time())
        #: session keys with an open turn, per provider (see `normalized`)
        self.turns_open: dict[str, set[bytes]] = {}
        self.last_batch_at: dict[str, float] = {}

    # -- per batch -------------------------------------------------------------

    def normalized(self, provider: str, agent: str, records: int, lines: int,
                   items: list[Item], timestamps: list[float], translate: float,
                   publish: float) -> None:
        """Account one delivered batch of a normalize agent."""
        p = (provider,)
        self.raw_records.inc(p, records)
        self.native_messages.inc(p, lines)
        types: dict[bytes, int] = {}
        open_turns = self.turns_open.setdefault(provider, set())
        for topic, value, key, _, _ in items:
            if topic == CANONICAL_TOPIC:
                t = event_type(value)
                types[t] = types.get(t, 0) + 1
                if t == b"turn.started":
                    open_turns.add(key)  # type: ignore[arg-type]
                elif t == b"turn.completed" or t == b"turn.aborted" or t == b"session.exited":
                    open_turns.discard(key)  # type: ignore[arg-type]
                elif t == b"runtime.warning":
                    self._unknown(provider, value)
            elif topic == DEADLETTER_TOPIC:
                self._deadletter(provider, value)
        for t, n in types.items():
            self.canonical_events.inc((provider, t.decode("ascii", "replace")), n)
        self._delivered(agent, records, items, timestamps, translate, publish, provider)

    def counted(self, agent: str, records: int, seconds: float) -> None:
        """Account one batch of a stage that publishes nothing per batch (fleet)."""
        a = (agent,)
        self.batches.observe(a, records)
        self.translate_seconds.observe(a, seconds)
        now = time.time()
        self.last_batch_at[agent] = now
        self.last_batch.set(a, now)

    def closed_idle(self, provider: str, keys: Iterable[bytes], items: list[Item]) -> None:
        """Account the idle scan's closing of `keys`."""
        open_turns = self.turns_open.get(provider, set())
        n = 0
        for key in keys:
            open_turns.discard(key)
            n += 1
        self.idle_closed.inc((provider,), n)
        for _, value, _, _, _ in items:
            self.canonical_events.inc((provider, event_type(value).decode("ascii", "replace")))
        self.count_outputs(items)

    def forget_sessions(self, provider: str, live: Iterable[bytes]) -> None:
        """Keep open-turn tracking to the sessions still in the table (after a
        rebalance moved some away)."""
        turns = self.turns_open.get(provider)
        if turns:
            turns.intersection_update(live)

    def send_refused(self, topics: Iterable[str], error: str) -> None:
        for topic in topics:
            self.refused.inc((topic, error))

    def send_failed(self, agent: str, topics: Iterable[str]) -> None:
        for topic in topics:
            self.send_failures.inc((topic,))
        self.send_retries.inc((agent,))

    # -- helpers -----------------------------------------------------------------

    def _delivered(self, agent: str, records: int, items: list[Item],
                   timestamps: Iterable[float], translate: float, publish: float,
                   provider: str | None) -> None:
        a = (agent,)
        self.batches.observe(a, records)
        self.translate_seconds.observe(a, translate)
        self.publish_seconds.observe(a, publish)
        now = time.time()
        self.last_batch_at[agent] = now
        self.last_batch.set(a, now)
        if provider is not None:
            lag, p = self.e2e_lag.observe, (provider,)
            for ts in timestamps:
                lag(p, now - ts)
        self.count_outputs(items)

    def count_outputs(self, items: list[Item]) -> None:
        counts: dict[str, int] = {}
        for item in items:
            counts[item[0]] = counts.get(item[0], 0) + 1
        for topic, n in counts.items():
            self.output_records.inc((topic,), n)

    def _unknown(self, provider: str, value: bytes) -> None:
        try:
            detail = _decode_warning(value).payload.detail
        except msgspec.DecodeError:
            return
        native = detail.get("nativeType") if isinstance(detail, dict) else None
        if native is not None:
            self.unknown_types.inc((provider, clean_label(native)))

    def _deadletter(self, provider: str, value: bytes) -> None:
        try:
            d = _decode_deadletter(value)
        except msgspec.DecodeError:
            return
        self.deadletters.inc((d.provider or provider, clean_label(d.errorClass)))


def metric_names() -> list[str]:
    """The name of every metric a worker exports (with the fleet stage on)."""
    from pipeline.fleet import FleetGauges

    registry = WorkerMetrics().registry
    FleetGauges(registry, None)
    return list(registry.metrics)
