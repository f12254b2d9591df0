"""The worker's Prometheus metrics: a small registry, the text exposition format, and
every metric canonflow exports (`WorkerMetrics`).

Why not prometheus-client: the agents count per batch into plain dicts (a few dict
increments per batch, one per output record for the by-type counts), and the scrape
renders those dicts; nothing here takes a lock or allocates per message. The text
format (version 0.0.4) is small enough to write by hand, and the tests parse it.
Measured against prometheus-client 0.26.0 with cached children (`labels()` called
once, outside the loop), timeit, one run on the 2-core CI machine (shared):
incrementing a labelled counter 460 ns here against 1,364 ns (its child takes a lock
per increment); rendering 2,000 counter series and 200 histogram series (14 buckets)
10.7 ms here against 154 ms (`generate_latest`). prometheus-client has no cap on a
metric's label sets either (see below).

The standard process metrics (`process_cpu_seconds_total`, `process_resident_memory_bytes`,
`process_virtual_memory_bytes`, `process_open_fds`, `process_max_fds`,
`process_start_time_seconds`, with prometheus-client's names and meaning) are read
from /proc at each scrape (`add_process_metrics`), so the memory a worker holds can be
watched against the bound the README promises; where there is no /proc they are absent.

Label values that come from the input (native types, tool names, models) are capped
per metric (`MAX_SERIES` label sets, gauges computed at scrape time included); past
the cap new values are counted under "other" (every label "other"; a gauge's values
summed, or their maximum), and `canonflow_metric_series_folded_total` counts each
fold, so a runtime that invents a new native type or model per message cannot grow
the worker's memory, the scrape or Prometheus' series count without bound.

A label set's text is rendered once and kept (per metric, bounded), so a scrape
costs little more than joining strings: measured here, 100,000 series in 0.07 to
0.12 s, the first scrape 0.3 to 0.6 s (`tests/pipeline/test_metrics.py` measures it).

Importing this module starts nothing and imports neither faust nor aiokafka.
"""

from __future__ import annotations

import bisect
import math
import os
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
    if "\\" not in value and "\n" not in value and '"' not in value:
        return value
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _num(value: float) -> str:
    if value.__class__ is int and -10**15 < value < 10**15:
        return str(value)
    f = float(value)
    if f.is_integer() and -1e15 < f < 1e15:
        return str(int(f))
    if f == math.inf:
        return "+Inf"
    if f == -math.inf:
        return "-Inf"
    if f != f:
        return "NaN"
    return repr(f)


def clean_label(value: Any) -> str:
    """A label value from untrusted input: a string, at most MAX_LABEL_CHARS long."""
    text = value if isinstance(value, str) else str(value)
    return text if len(text) <= MAX_LABEL_CHARS else text[:MAX_LABEL_CHARS]


class Metric:
    """Base of the three metric kinds: a name, help text and label names. `folds`
    counts the label sets counted under "other" (see the module doc)."""

    kind = "untyped"

    def __init__(self, name: str, help: str, labelnames: Sequence[str] = ()):
        self.name = name
        self.help = help
        self.labelnames = tuple(labelnames)
        self.folds = 0
        self._texts: dict[Labels, Any] = {}  # label set -> its rendered text (see _text)

    def _text(self, labels: Labels) -> Any:
        """The rendered text of a label set, kept: a scrape renders each one once."""
        text = self._texts.get(labels)
        if text is None:
            if len(self._texts) >= 2 * MAX_SERIES:  # label sets a computed gauge dropped
                self._texts.clear()
            text = self._texts[labels] = self._render_labels(labels)
        return text

    def _render_labels(self, labels: Labels) -> Any:
        return f"{self.name}{self._labels(labels)} "

    def _labels(self, labels: Labels, extra: str = "") -> str:
        parts = [f'{n}="{_escape(v)}"' for n, v in zip(self.labelnames, labels, strict=True)]
        if extra:
            parts.append(extra)
        return "{" + ",".join(parts) + "}" if parts else ""

    def _other(self) -> Labels:
        self.folds += 1
        return (OTHER,) * len(self.labelnames)

    def samples(self) -> Iterable[str]:  # pragma: no cover - overridden
        return ()

    def render(self) -> str:
        head = f"# HELP {self.name} {self.help.replace(chr(92), chr(92) * 2)}\n" \
               f"# TYPE {self.name} {self.kind}\n"
        lines = list(self.samples())
        return head + "\n".join(lines) + "\n" if lines else head


class Counter(Metric):
    """A monotonic count per label set. `inc` is one dict get and one set."""

    kind = "counter"

    def __init__(self, name: str, help: str, labelnames: Sequence[str] = ()):
        super().__init__(name, help, labelnames)
        self.values: dict[Labels, float] = {}

    def inc(self, labels: Labels = (), n: float = 1) -> None:
        values = self.values
        if labels not in values and len(values) >= MAX_SERIES:
            labels = self._other()
        values[labels] = values.get(labels, 0) + n

    def get(self, labels: Labels = ()) -> float:
        return self.values.get(labels, 0)

    def samples(self) -> Iterable[str]:
        if not self.labelnames and not self.values:
            return [f"{self.name} 0"]  # a counter without labels exists from the start
        text = self._text
        return [text(labels) + _num(value) for labels, value in sorted(self.values.items())]


class Gauge(Metric):
    """A value per label set, set directly or computed at scrape time by `collect`
    (a callable returning {labels: value}, which replaces the stored values). Past
    MAX_SERIES label sets (in label order), the others are folded into the "other"
    label set by `fold` (sum: their total; max: the largest)."""

    kind = "gauge"

    def __init__(self, name: str, help: str, labelnames: Sequence[str] = (),
                 collect: Callable[[], dict[Labels, float]] | None = None,
                 fold: Callable[[Iterable[float]], float] = sum):
        super().__init__(name, help, labelnames)
        self.values: dict[Labels, float] = {}
        self.collect = collect
        self.fold = fold

    def set(self, labels: Labels, value: float) -> None:
        values = self.values
        if labels not in values and len(values) >= MAX_SERIES:
            labels = self._other()
        values[labels] = value

    def get(self, labels: Labels = ()) -> float | None:
        return self.values.get(labels)

    def samples(self) -> Iterable[str]:
        if self.collect is not None:
            self.values = self._capped(self.collect())
        text = self._text
        return [text(labels) + _num(value) for labels, value in sorted(self.values.items())]

    def _capped(self, values: dict[Labels, float]) -> dict[Labels, float]:
        if len(values) <= MAX_SERIES:
            return dict(values)
        ordered = sorted(values.items())
        kept = dict(ordered[:MAX_SERIES])
        other = (OTHER,) * len(self.labelnames)
        rest = [v for _, v in ordered[MAX_SERIES:]]
        self.folds += len(rest)
        if other in kept:
            rest.append(kept.pop(other))
        kept[other] = self.fold(rest)
        return kept


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
                labels = self._other()
                row = self.values.get(labels)
            if row is None:
                row = self.values[labels] = [0.0] * (len(self.buckets) + 2)
        row[bisect.bisect_left(self.buckets, value)] += n
        row[-1] += value * n

    def count(self, labels: Labels = ()) -> float:
        row = self.values.get(labels)
        return sum(row[:-1]) if row else 0

    def _render_labels(self, labels: Labels) -> Any:
        """(the text of each bucket's line, of the sum's, of the count's), values left out."""
        bounds = (*self.buckets, math.inf)
        return (tuple(f"{self.name}_bucket{self._labels(labels, f'le={chr(34)}{_num(b)}{chr(34)}')} "
                      for b in bounds),
                f"{self.name}_sum{self._labels(labels)} ",
                f"{self.name}_count{self._labels(labels)} ")

    def samples(self) -> Iterable[str]:
        out: list[str] = []
        add = out.append
        for labels, row in sorted(self.values.items()):
            buckets, total, count = self._text(labels)
            cumulative = 0.0
            for text, n in zip(buckets, row, strict=False):  # row: the buckets, then the sum
                cumulative += n
                add(text + _num(cumulative))
            add(total + _num(row[-1]))
            add(count + _num(cumulative))
        return out


class Registry:
    """The metrics of one worker, rendered in registration order."""

    def __init__(self) -> None:
        self.metrics: dict[str, Metric] = {}
        self.scrapes = 0  # renders begun: collectors that share one computation key on it

    def add(self, metric: Any) -> Any:
        if metric.name in self.metrics:
            raise ValueError(f"metric {metric.name} registered twice")
        self.metrics[metric.name] = metric
        return metric

    def render(self) -> bytes:
        """The exposition text of every metric. A collector that fails leaves its
        metric without samples (and says so in a comment) rather than failing the scrape.
        The metrics that report on the others (`render_last`) come last, so that they
        include what this scrape's collectors folded."""
        self.scrapes += 1
        out: list[str] = []
        metrics = list(self.metrics.values())
        for metric in ([m for m in metrics if not getattr(m, "render_last", False)]
                       + [m for m in metrics if getattr(m, "render_last", False)]):
            try:
                out.append(metric.render())
            except Exception as e:  # a broken collector must not hide the other metrics
                out.append(f"# {metric.name}: collector failed: {type(e).__name__}\n")
        return "".join(out).encode()


class FoldCounter(Metric):
    """`canonflow_metric_series_folded_total`: the folds of every metric of a registry
    (Metric.folds), by metric."""

    kind = "counter"
    render_last = True

    def __init__(self, registry: Registry):
        super().__init__(
            "canonflow_metric_series_folded_total",
            f"Label sets a metric met past its cap of {MAX_SERIES} and counted under "
            f"\"{OTHER}\" instead: each increment or observation of a counter or histogram, "
            "each label set of a gauge at each scrape.", ["metric"])
        self.registry = registry

    def samples(self) -> Iterable[str]:
        return [f'{self.name}{{metric="{m.name}"}} {m.folds}'
                for m in self.registry.metrics.values() if m.folds]


# ---------------------------------------------------------------------------
# The standard process metrics, from /proc
# ---------------------------------------------------------------------------


def _boot_time() -> float:
    with open("/proc/stat", "rb") as f:
        for line in f:
            if line.startswith(b"btime "):
                return float(line.split()[1])
    raise OSError("no btime in /proc/stat")


def process_stats(pid: str = "self") -> dict[str, float]:
    """The process_* values of a process, read from /proc/<pid>: CPU seconds (user +
    system), resident and virtual memory bytes, open and maximum file descriptors,
    start time (Unix seconds). Raises OSError where there is no /proc."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        stat = f.read()
    # the command name (field 2) may hold spaces and parentheses: split after its end
    fields = stat[stat.rfind(b")") + 2:].split()
    ticks = os.sysconf("SC_CLK_TCK")
    # fields[0] is field 3 (state): utime 14, stime 15, starttime 22, vsize 23, rss 24
    values = {
        "cpu": (int(fields[11]) + int(fields[12])) / ticks,
        "start": _boot_time() + int(fields[19]) / ticks,
        "virtual": float(fields[20]),
        "resident": float(int(fields[21]) * os.sysconf("SC_PAGE_SIZE")),
        "open_fds": float(len(os.listdir(f"/proc/{pid}/fd"))),
    }
    with open(f"/proc/{pid}/limits", "rb") as f:
        for line in f:
            if line.startswith(b"Max open files"):
                soft = line.split()[3]
                values["max_fds"] = float(soft) if soft.isdigit() else math.inf
    return values


class ProcessMetric(Metric):
    """One process_* metric, read from /proc at scrape time. The metrics of one
    registry share one read per scrape (keyed on `Registry.scrapes`)."""

    def __init__(self, name: str, help: str, kind: str, key: str, source: _ProcessSource):
        super().__init__(name, help)
        self.kind, self.key, self.source = kind, key, source

    def samples(self) -> Iterable[str]:
        value = self.source.read().get(self.key)
        return [] if value is None else [f"{self.name} {_num(value)}"]


class _ProcessSource:
    def __init__(self, registry: Registry):
        self.registry = registry
        self.scrape = -1
        self.values: dict[str, float] = {}

    def read(self) -> dict[str, float]:
        if self.scrape != self.registry.scrapes:
            self.scrape = self.registry.scrapes
            try:
                self.values = process_stats()
            except (OSError, ValueError, IndexError):
                self.values = {}  # no /proc here: the metrics are left without samples
        return self.values


#: (name, help, kind, key of process_stats) of each standard process metric.
PROCESS_METRICS = (
    ("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.",
     "counter", "cpu"),
    ("process_virtual_memory_bytes", "Virtual memory size in bytes.", "gauge", "virtual"),
    ("process_resident_memory_bytes", "Resident memory size in bytes.", "gauge", "resident"),
    ("process_start_time_seconds", "Start time of the process since unix epoch in seconds.",
     "gauge", "start"),
    ("process_open_fds", "Number of open file descriptors.", "gauge", "open_fds"),
    ("process_max_fds", "Maximum number of open file descriptors.", "gauge", "max_fds"),
)


def add_process_metrics(registry: Registry) -> None:
    """Register the standard process_* metrics of this process on `registry`."""
    source = _ProcessSource(registry)
    for name, help, kind, key in PROCESS_METRICS:
        registry.add(ProcessMetric(name, help, kind, key, source))


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


#: One output record of a batch: (topic, value, key, partition, timestamp ms), and its
#: headers after them on the canonical and chat topics (pipeline.worker.output.Record).
Item = tuple[Any, ...]


class WorkerMetrics:
    """Every metric the worker exports, and the per-batch accounting the agents call.

    The gauges that describe Faust's state (consumer lag, assignment, tables,
    recovery) are filled at scrape time by `pipeline.ops.web.bind_app_metrics`.
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
            "runtime.warning events for native messages no adapter knows, by native type "
            "and the runtime release that sent them (\"\" when its stream did not say).",
            ["provider", "version", "native_type"]))
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
        self.sessions_by_state = r.add(Gauge(
            "canonflow_sessions_by_state",
            "Sessions of this worker's tables by what they wait on since their last event: "
            "idle (their user), model, tool, approval, or stalled_<model|tool|approval> "
            "when that wait passed its threshold (CANONFLOW_STALL_*).", ["provider", "state"],
            collect=lambda: {(p, s): float(n) for p, states in self.session_states.items()
                             for s, n in states.items()}))
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
        self.series_folded = r.add(FoldCounter(r))
        add_process_metrics(r)
        self.up_since.set((), time.time())
        #: session keys with an open turn, per provider (see `normalized`)
        self.turns_open: dict[str, set[bytes]] = {}
        self.last_batch_at: dict[str, float] = {}
        #: per provider, sessions by state (the stall watch's counts, kept as they change)
        self.session_states: dict[str, dict[str, int]] = {}

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
        for topic, value, key, *_ in items:
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
        for topic, value, *_ in items:
            if topic == CANONICAL_TOPIC:
                self.canonical_events.inc((provider,
                                           event_type(value).decode("ascii", "replace")))
        self.count_outputs(items)

    def stalls(self, provider: str, items: list[Item]) -> None:
        """Account the stall scan's output (session.state.changed events, chat records)."""
        for topic, value, *_ in items:
            if topic == CANONICAL_TOPIC:
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
            version = detail.get("runtimeVersion")
            self.unknown_types.inc((provider, clean_label(version if isinstance(version, str)
                                                          else ""),
                                    clean_label(native)))

    def _deadletter(self, provider: str, value: bytes) -> None:
        try:
            d = _decode_deadletter(value)
        except msgspec.DecodeError:
            return
        self.deadletters.inc((d.provider or provider, clean_label(d.errorClass)))
