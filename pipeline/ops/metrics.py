"""Every metric canonflow's worker exports (`WorkerMetrics`) and the per-batch
accounting the agents call; the registry and the text format they are rendered in are
pipeline.ops.prometheus.

Importing this module starts nothing and imports neither faust nor aiokafka.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

import msgspec

from pipeline.ops.prometheus import (
    LAG_BUCKETS,
    SIZE_BUCKETS,
    Counter,
    FoldCounter,
    Gauge,
    Histogram,
    Registry,
    add_process_metrics,
    clean_label,
)
from pipeline.ops.records import ProducerRecord
from topics.catalog import CANONICAL_TOPIC, DEADLETTER_TOPIC

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


class WorkerMetrics:
    """Every metric the worker exports, and the per-batch accounting the agents call.

    The gauges that describe Faust's state (consumer lag, assignment, tables,
    recovery) are filled at scrape time by `pipeline.ops.web.bind_app_metrics`.
    """

    def __init__(self) -> None:
        r = self.registry = Registry()
        self._add_counters(r)
        self._add_timings(r)
        self._add_gauges(r)
        self.series_folded = r.add(FoldCounter(r))
        add_process_metrics(r)
        self.up_since.set((), time.time())
        #: session keys with an open turn, per provider (see `normalized`)
        self.turns_open: dict[str, set[bytes]] = {}
        self.last_batch_at: dict[str, float] = {}
        #: per provider, sessions by state (the stall watch's counts, kept as they change)
        self.session_states: dict[str, dict[str, int]] = {}

    def _add_counters(self, r: Registry) -> None:
        """What went through: records, messages, events, dead letters, deliveries."""
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

    def _add_timings(self, r: Registry) -> None:
        """How long a batch took, and how late its output was."""
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

    def _add_gauges(self, r: Registry) -> None:
        """The worker's state now: sessions, tables, partitions, recovery, the broker."""
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

    # -- per batch -------------------------------------------------------------

    def normalized(self, provider: str, agent: str, records: int, lines: int,
                   items: list[ProducerRecord], timestamps: list[float], translate: float,
                   publish: float) -> None:
        """Account one delivered batch of a normalize agent."""
        p = (provider,)
        self.raw_records.inc(p, records)
        self.native_messages.inc(p, lines)
        types: dict[bytes, int] = {}
        open_turns = self.turns_open.setdefault(provider, set())
        for item in items:
            topic, value, key = item.topic, item.value, item.key
            if topic == CANONICAL_TOPIC:
                t = event_type(value)  # type: ignore[arg-type]
                types[t] = types.get(t, 0) + 1
                if t == b"turn.started":
                    open_turns.add(key)  # type: ignore[arg-type]
                elif t == b"turn.completed" or t == b"turn.aborted" or t == b"session.exited":
                    open_turns.discard(key)  # type: ignore[arg-type]
                elif t == b"runtime.warning":
                    self._unknown(provider, value)  # type: ignore[arg-type]
            elif topic == DEADLETTER_TOPIC:
                self._deadletter(provider, value)  # type: ignore[arg-type]
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

    def closed_idle(self, provider: str, keys: Iterable[bytes], items: list[ProducerRecord]) -> None:
        """Account the idle scan's closing of `keys`."""
        open_turns = self.turns_open.get(provider, set())
        n = 0
        for key in keys:
            open_turns.discard(key)
            n += 1
        self.idle_closed.inc((provider,), n)
        for item in items:
            if item.topic == CANONICAL_TOPIC and item.value is not None:
                self.canonical_events.inc((provider,
                                           event_type(item.value).decode("ascii", "replace")))
        self.count_outputs(items)

    def stalls(self, provider: str, items: list[ProducerRecord]) -> None:
        """Account the stall scan's output (session.state.changed events, chat records)."""
        for item in items:
            if item.topic == CANONICAL_TOPIC and item.value is not None:
                self.canonical_events.inc((provider,
                                           event_type(item.value).decode("ascii", "replace")))
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

    def _delivered(self, agent: str, records: int, items: list[ProducerRecord],
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

    def count_outputs(self, items: list[ProducerRecord]) -> None:
        counts: dict[str, int] = {}
        for item in items:
            counts[item.topic] = counts.get(item.topic, 0) + 1
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
