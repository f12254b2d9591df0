"""The Prometheus side of the worker's metrics: a small registry, the text exposition
format, label sets capped per metric, and the standard process metrics. What the
worker counts is pipeline.ops.metrics.

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
watched against the bound the docs promise; where there is no /proc they are absent.

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
from collections.abc import Callable, Iterable, Sequence
from typing import Any

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
