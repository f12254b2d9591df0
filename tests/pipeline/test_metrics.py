"""The worker's /metrics and /health over real HTTP on 127.0.0.1, on a real worker and a
broker of the test's own (other tests' records would count too on the shared one);
broker outages with a worker that keeps running; the output producer's retries."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pipeline.cluster.broker import EmbeddedBroker, free_port
from pipeline.ops.prometheus import (
    CONTENT_TYPE,
    PROCESS_METRICS,
    Gauge,
    Histogram,
    Registry,
    add_process_metrics,
)
from pipeline.ops.prometheus import Counter as MetricCounter
from pipeline.ops.records import ProducerRecord
from pipeline.settings import Settings
from pipeline.tools.kafka_io import follow, produce, records_from_file
from pipeline.worker.fleet_gauges import metric_names
from pipeline.worker.output import OutputProducer
from pipeline.worker.process import WorkerProcess, embedded_settings, ensure_topics
from topics.catalog import CANONICAL_TOPIC, DEADLETTER_TOPIC, raw_topic

CAPTURED = Path(__file__).resolve().parents[1] / "fixtures" / "captured"
CAPTURE = CAPTURED / "codex-exec" / "codex-exec__tool_shell.capture.jsonl"

pytestmark = pytest.mark.broker

# ---- helpers (test_fleet uses them too) ------------------------------------------

_SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$')
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"(,|$)')


class Exposition:
    """A parsed Prometheus text exposition (format 0.0.4), strictly: every sample
    belongs to a metric declared by # HELP and # TYPE, labels are well formed."""

    def __init__(self, text: str):
        self.help: dict[str, str] = {}
        self.types: dict[str, str] = {}
        self.samples: list[tuple[str, dict[str, str], float]] = []
        for line in text.splitlines():
            if line.startswith("# HELP "):
                name, _, doc = line[7:].partition(" ")
                assert name not in self.help, f"{name} declared twice"
                self.help[name] = doc
            elif line.startswith("# TYPE "):
                name, kind = line[7:].split(" ")
                assert kind in ("counter", "gauge", "histogram", "summary", "untyped")
                self.types[name] = kind
            elif line.startswith("#") or not line:
                continue
            else:
                m = _SAMPLE.match(line)
                assert m, f"not a sample line: {line!r}"
                name, _, body, value = m.groups()
                labels: dict[str, str] = {}
                if body:
                    pos = 0
                    while pos < len(body):
                        lm = _LABEL.match(body, pos)
                        assert lm, f"bad labels in {line!r}"
                        labels[lm.group(1)] = (lm.group(2).replace('\\"', '"')
                                               .replace("\\n", "\n").replace("\\\\", "\\"))
                        pos = lm.end()
                family = self.family(name)
                assert family in self.types, f"sample {name} of an undeclared metric"
                self.samples.append((name, labels, float(value)))

    def family(self, sample: str) -> str:
        for suffix in ("_bucket", "_sum", "_count"):
            base = sample.removesuffix(suffix)
            if base != sample and self.types.get(base) == "histogram":
                return base
        return sample

    def value(self, name: str, **labels: str) -> float | None:
        """The one sample `name` whose labels include `labels` (None: no such sample)."""
        found = [v for n, ls, v in self.samples
                 if n == name and all(ls.get(k) == want for k, want in labels.items())]
        assert len(found) <= 1, f"{name}{labels} matches {len(found)} samples"
        return found[0] if found else None

    def series(self, name: str) -> list[tuple[dict[str, str], float]]:
        return [(ls, v) for n, ls, v in self.samples if n == name]


def http_get(port: int, path: str) -> tuple[int, dict[str, str], bytes]:
    """(status, headers, body) of GET http://127.0.0.1:port/path; status 0 when nothing
    answers."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()
    except OSError:
        return 0, {}, b""


def scrape(port: int) -> Exposition:
    status, headers, body = http_get(port, "/metrics")
    assert status == 200, body[:500]
    assert headers["Content-Type"] == CONTENT_TYPE
    return Exposition(body.decode())


def health(port: int) -> tuple[int, dict[str, Any]]:
    status, _, body = http_get(port, "/health")
    return status, (json.loads(body) if status else {})


def wait_for(check: Any, what: str, timeout: float = 90.0, worker: WorkerProcess | None = None,
             every: float = 0.3) -> Any:
    """Poll `check()` until it returns something truthy; fail after `timeout` (a deadline
    for a hung test, not a timed assertion) or when `worker` died."""
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        if worker is not None and not worker.alive():
            raise AssertionError(f"the worker died while waiting for {what}; see {worker.log_path}")
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(every)


@pytest.fixture
def own_broker(tmp_path: Path) -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(log_path=str(tmp_path / "tansu.log")) as b:
        yield b


def worker_settings(broker_url: str, tmp_path: Path, engine: str = "tansu",
                    **changes: Any) -> Settings:
    s = Settings(app_id="canonflow-metrics-test", partitions=4, web_enabled=True,
                 web_port=free_port(), data_dir=str(tmp_path / "data"),
                 health_probe_interval=0.5, health_probe_timeout=3.0,
                 fleet_publish_interval=1.0)
    s = embedded_settings(s, broker_url, engine=engine).replace(**changes)
    ensure_topics(s)
    return s


def started(settings: Settings, tmp_path: Path, name: str = "worker") -> WorkerProcess:
    return WorkerProcess(settings, log_path=str(tmp_path / f"{name}.log")).start()


def send(settings: Settings, topic: str, records: list[tuple[bytes | None, bytes]]) -> None:
    """Raw (key, value) records, keyless ones included (kafka_io.produce always keys)."""
    from aiokafka import AIOKafkaProducer

    from pipeline.cluster.admin import kafka_client_kwargs

    async def go() -> None:
        producer = AIOKafkaProducer(**kafka_client_kwargs(settings), acks="all")
        await producer.start()
        try:
            for key, value in records:
                await (await producer.send(topic, value, key=key))
        finally:
            await producer.stop()

    asyncio.run(go())


def read_n(settings: Settings, topic: str, n: int, timeout: float = 60.0) -> list[Any]:
    """The first `n` records of `topic` (fewer after `timeout`)."""
    got: list[Any] = []
    asyncio.run(follow(settings, [topic], lambda r: (got.append(r), len(got) >= n)[1],
                       deadline=time.monotonic() + timeout))
    return got


def read_keys(settings: Settings, topic: str, keys: set[bytes], done: Any,
              timeout: float = 90.0, worker: WorkerProcess | None = None) -> list[Any]:
    """Records of `topic` with one of `keys`, until done(records) says so."""
    got: list[Any] = []

    def take(rec: Any) -> bool:
        if rec.key in keys:
            got.append(rec)
        return bool(done(got))

    give_up = (lambda: not worker.alive()) if worker is not None else None
    asyncio.run(follow(settings, [topic], take, deadline=time.monotonic() + timeout,
                       give_up=give_up))
    return got


def closed_turns(n: int) -> Any:
    """done() for read_keys: n turn.completed events seen."""
    return lambda recs: sum(json.loads(r.value)["type"] == "turn.completed" for r in recs) >= n


def assert_promtool_accepts(exposition: bytes) -> None:
    """`promtool check metrics` finds nothing to say of `exposition` (skipped where
    Debian's prometheus package is not installed)."""
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is missing: `apt-get install -y --no-install-recommends "
                    "prometheus` (.ci/run does)")
    checked = subprocess.run([promtool, "check", "metrics"], input=exposition,
                             capture_output=True)
    assert checked.returncode == 0, (checked.stdout + checked.stderr).decode()
    assert not (checked.stdout + checked.stderr).strip(), (checked.stdout + checked.stderr).decode()


# ---- the exposition format --------------------------------------------------------


def _ps(pid: int) -> tuple[int, int]:
    """(resident KiB, seconds since start) of a process, as procps' ps reports them."""
    import subprocess

    rss, elapsed = subprocess.run(["ps", "-o", "rss=,etimes=", "-p", str(pid)],
                                  capture_output=True, text=True, check=True).stdout.split()
    return int(rss), int(elapsed)


def test_the_standard_process_metrics_follow_this_process():
    import resource

    registry = Registry()
    add_process_metrics(registry)
    before = Exposition(registry.render().decode())
    assert {n: before.types[n] for n, *_ in PROCESS_METRICS} == {
        n: kind for n, _, kind, _ in PROCESS_METRICS}
    ballast = bytearray(64 * 2**20)  # 64 MiB, touched page by page
    for i in range(0, len(ballast), 4096):
        ballast[i] = 1
    files = [open(__file__, "rb") for _ in range(10)]
    spin = time.process_time() + 0.3
    while time.process_time() < spin:
        pass
    try:
        after = Exposition(registry.render().decode())
        cpu = time.process_time()
        rss_kib, elapsed = _ps(os.getpid())
    finally:
        for f in files:
            f.close()
    grown = after.value("process_resident_memory_bytes") - before.value(
        "process_resident_memory_bytes")
    assert 56 * 2**20 <= grown <= 80 * 2**20
    assert abs(after.value("process_resident_memory_bytes") - rss_kib * 1024) < 8 * 2**20
    assert after.value("process_virtual_memory_bytes") >= after.value(
        "process_resident_memory_bytes")
    assert after.value("process_open_fds") == before.value("process_open_fds") + 10
    assert after.value("process_max_fds") == resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    assert cpu - 0.05 <= after.value("process_cpu_seconds_total") <= cpu
    assert after.value("process_cpu_seconds_total") - before.value(
        "process_cpu_seconds_total") >= 0.25
    assert abs(after.value("process_start_time_seconds") - (time.time() - elapsed)) < 3
    del ballast


def test_the_exposition_escapes_labels_and_accumulates_histogram_buckets():
    registry = Registry()
    c = registry.add(MetricCounter("t_total", "a help with \\ backslash", ["a", "b"]))
    h = registry.add(Histogram("t_seconds", "latency", ["agent"], buckets=(0.1, 1.0)))
    c.inc(('say "hi"\n', "back\\slash"), 3)
    c.inc(("x", "y"))
    h.observe(("n",), 0.05)
    h.observe(("n",), 0.5, n=2)
    h.observe(("n",), 7.0)
    exp = Exposition(registry.render().decode())
    assert exp.types == {"t_total": "counter", "t_seconds": "histogram"}
    assert exp.value("t_total", a='say "hi"\n', b="back\\slash") == 3
    assert exp.value("t_total", a="x") == 1
    buckets = {ls["le"]: v for ls, v in exp.series("t_seconds_bucket")}
    assert buckets == {"0.1": 1, "1": 3, "+Inf": 4}
    assert exp.value("t_seconds_count", agent="n") == 4
    assert exp.value("t_seconds_sum", agent="n") == pytest.approx(0.05 + 1.0 + 7.0)


def test_label_sets_are_capped_so_input_cannot_grow_the_series_without_bound():
    from pipeline.ops import prometheus

    c = MetricCounter("cap_total", "capped", ["native_type"])
    for i in range(prometheus.MAX_SERIES + 50):
        c.inc((f"type-{i}",))
    assert len(c.values) == prometheus.MAX_SERIES + 1
    assert c.get((prometheus.OTHER,)) == 50


def test_gauges_computed_at_scrape_time_are_capped_too_and_every_fold_is_counted():
    """Issue 25: the fleet gauges by model had no cap (20,000 models -> 85,963 series).
    A computed gauge keeps MAX_SERIES label sets (in label order) and folds the others
    into "other": their sum, or for a maximum their largest value."""
    from pipeline.ops import metrics, prometheus

    n = prometheus.MAX_SERIES + 50
    worker = metrics.WorkerMetrics()
    values = {(f"m-{i:05d}",): float(i) for i in range(n)}
    total = worker.registry.add(Gauge("cap_sum", "summed", ["model"], collect=lambda: values))
    worker.registry.add(Gauge("cap_max", "largest", ["model"], collect=lambda: values, fold=max))
    exp = Exposition(worker.registry.render().decode())
    assert len(exp.series("cap_sum")) == len(exp.series("cap_max")) == prometheus.MAX_SERIES + 1
    folded = [float(i) for i in range(prometheus.MAX_SERIES, n)]
    assert exp.value("cap_sum", model=prometheus.OTHER) == sum(folded)
    assert exp.value("cap_max", model=prometheus.OTHER) == max(folded)
    assert exp.value("cap_sum", model="m-00000") == 0
    assert exp.value("canonflow_metric_series_folded_total", metric="cap_sum") == 50
    assert exp.value("canonflow_metric_series_folded_total", metric="cap_max") == 50
    assert total.folds == 50
    worker.unknown_types.values = {(f"p-{i}", "", "t"): 1 for i in range(prometheus.MAX_SERIES)}
    worker.unknown_types.inc(("p-new", "", "t"))  # a counter's fold: one more
    exp = Exposition(worker.registry.render().decode())
    assert exp.value("canonflow_metric_series_folded_total",
                     metric="canonflow_unknown_native_types_total") == 1
    assert exp.value("canonflow_metric_series_folded_total", metric="cap_sum") == 100


@pytest.mark.parametrize("n", [10_000, 100_000])
def test_a_scrape_of_many_series_renders_each_label_set_once(n, monkeypatch):
    """/metrics with many series (issue 25): counters, computed gauges and histograms,
    n series in all, rendered twice (the second scrape reuses each label set's text),
    parsed strictly. Measured and printed, not asserted: see the README."""
    from pipeline.ops import prometheus

    monkeypatch.setattr(prometheus, "MAX_SERIES", n)
    registry = Registry()
    counter = registry.add(MetricCounter("many_total", "a counter", ["provider", "type"]))
    gauge = registry.add(Gauge("many", "a gauge", ["window", "provider", "model", "state"]))
    histogram = registry.add(Histogram("many_seconds", "a histogram", ["agent"]))
    third = n // 3
    for i in range(third):
        counter.inc(("codex", f"type-{i}"), i)
    values = {("tumbling-1m", "codex", f"model-{i}", "started"): float(i) for i in range(third)}
    gauge.collect = lambda: values
    buckets = len(histogram.buckets) + 3  # _bucket lines, +Inf, _sum, _count
    for i in range((n - 2 * third) // buckets):
        histogram.observe((f"agent-{i}",), i / 1000)
    times = []
    for _ in range(2):
        t0 = time.perf_counter()
        body = registry.render()
        times.append(time.perf_counter() - t0)
    exp = Exposition(body.decode())
    assert len(exp.series("many_total")) == len(exp.series("many")) == third
    assert exp.value("many", model=f"model-{third - 1}") == third - 1
    print(f"{len(exp.samples)} series, {len(body)} bytes: first render {times[0]:.3f} s, "
          f"again {times[1]:.3f} s")


# ---- a real worker ----------------------------------------------------------------


def test_a_worker_exports_counts_labels_and_health_of_what_it_translated(own_broker, tmp_path):
    settings = worker_settings(own_broker.url, tmp_path)
    worker = started(settings, tmp_path)
    try:
        wait_for(lambda: health(settings.web_port)[0] == 200, "a healthy worker", worker=worker)
        records = records_from_file(str(CAPTURE), "capture")
        asyncio.run(produce(settings, "codex-exec", "metrics-1", records))
        lines = sum(r.value.count(b"\n") + 1 for r in records)
        # garbage: a line that is not JSON, a record without a key, an unknown native type
        bad = raw_topic("codex-exec")
        send(settings, bad, [(b"metrics-1", b"{not json"), (None, b'{"type":"turn.started"}'),
                             (b"metrics-2", b'{"type":"thread.hologram","id":"h1"}')])
        total = len(records) + 3
        exp = wait_for(lambda: (e := scrape(settings.web_port)).value(
            "canonflow_raw_records_total", provider="codex-exec") == total and e,
            "every raw record counted", worker=worker)

        published = exp.value("canonflow_output_records_total", topic=CANONICAL_TOPIC)
        canonical = [json.loads(r.value) for r in read_n(settings, CANONICAL_TOPIC,
                                                         int(published or 0))]
        by_type = Counter(e["type"] for e in canonical if e["provider"] == "codex-exec")
        assert by_type["turn.completed"] == 1 and by_type["runtime.warning"] == 1
        exported = {ls["type"]: v for ls, v in exp.series("canonflow_canonical_events_total")
                    if ls["provider"] == "codex-exec"}
        assert exported == by_type
        assert exp.value("canonflow_native_messages_total", provider="codex-exec") == lines + 3
        # the standard process metrics are the worker process's own
        rss_kib, elapsed = _ps(worker.pid)
        assert abs(exp.value("process_resident_memory_bytes") - rss_kib * 1024) < 32 * 2**20
        assert abs(exp.value("process_start_time_seconds") - (time.time() - elapsed)) < 3
        assert exp.value("process_open_fds") > 3

        letters = [json.loads(r.value) for r in read_n(settings, DEADLETTER_TOPIC, 2)]
        by_class = Counter(d["errorClass"] for d in letters)
        assert set(by_class) == {"MissingKey", "MalformedRecord"}
        assert {ls["error_class"]: v for ls, v in exp.series("canonflow_deadletters_total")
                if ls["provider"] == "codex-exec"} == by_class
        assert exp.value("canonflow_unknown_native_types_total", provider="codex-exec",
                         version="", native_type="thread.hologram") == 1

        assert exp.value("canonflow_end_to_end_lag_seconds_count", provider="codex-exec") == total
        assert exp.value("canonflow_batch_records_sum", agent="normalize.codex-exec") == total
        assert exp.value("canonflow_translate_seconds_count", agent="normalize.codex-exec") >= 1
        assert exp.value("canonflow_publish_seconds_count", agent="normalize.codex-exec") >= 1
        assert exp.value("canonflow_output_records_total", topic=CANONICAL_TOPIC) == len(canonical)
        assert exp.value("canonflow_output_records_total", topic=DEADLETTER_TOPIC) == 2
        assert exp.value("canonflow_active_sessions", provider="codex-exec") == 2
        assert exp.value("canonflow_table_entries", table="sessions.codex-exec") == 2
        assert exp.value("canonflow_open_turns", provider="codex-exec") == 0
        assert exp.value("canonflow_assigned_partitions", topic=bad) == 4
        assert exp.value("canonflow_rebalances_total") >= 1
        assert exp.value("canonflow_last_recovery_timestamp_seconds") > 0
        assert exp.value("canonflow_recovering") == 0
        assert exp.value("canonflow_broker_up") == 1
        # every declared metric is one the registry defines (what the dashboard test reads)
        assert set(exp.help) == set(metric_names())
        # and every name follows Prometheus' naming rules (promtool's linter: no gauge
        # ending in a histogram's _sum, _count or _bucket, no counter without _total)
        assert_promtool_accepts(http_get(settings.web_port, "/metrics")[2])

        # the committed offsets catch up: no lag left on the raw topic
        def caught_up() -> Exposition | None:
            e = scrape(settings.web_port)
            lag = [v for ls, v in e.series("canonflow_consumer_lag") if ls["topic"] == bad]
            return e if len(lag) == 4 and not any(lag) else None

        wait_for(caught_up, "consumer lag 0 on every partition", worker=worker)

        status, body = health(settings.web_port)
        assert status == 200 and body["status"] == "ok" and body["reasons"] == []
        assert body["broker"]["reachable"] is True
        assert body["partitions"][bad] == [0, 1, 2, 3]
        assert body["recovery"]["finished"] is True
        assert "normalize.codex-exec" in body["lastBatchAt"]
    finally:
        worker.stop()


def test_health_is_degraded_while_the_broker_is_away_and_the_worker_goes_on_after(tmp_path):
    port = free_port()
    broker = EmbeddedBroker(port=port, log_path=str(tmp_path / "tansu-1.log")).start()
    worker = None
    try:
        settings = worker_settings(broker.url, tmp_path, producer_request_timeout=3.0)
        worker = started(settings, tmp_path)
        wait_for(lambda: health(settings.web_port)[0] == 200, "a healthy worker", worker=worker)
        asyncio.run(produce(settings, "codex-exec", "before",
                            records_from_file(str(CAPTURE), "capture")))
        before = read_keys(settings, CANONICAL_TOPIC, {b"before"}, closed_turns(1), worker=worker)
        assert closed_turns(1)(before)

        broker.stop()
        status, body = wait_for(
            lambda: (h := health(settings.web_port))[0] == 503 and h, "/health degraded",
            worker=worker)
        assert body["status"] == "degraded" and "broker unreachable" in body["reasons"]
        assert body["broker"]["reachable"] is False and body["broker"]["lastError"]
        assert scrape(settings.web_port).value("canonflow_broker_up") == 0
        assert worker.alive()

        # Tansu's memory storage starts empty: the topics, and fresh records, again.
        # First the session from before, as a producer retrying after the outage would
        # send it: the same records at the same offsets of the same partition, so a
        # worker that kept its read position from before the outage (it may have
        # committed it there) is not ahead of the new log. They change nothing either
        # way: they are at or below that session's watermark.
        broker = EmbeddedBroker(port=port, log_path=str(tmp_path / "tansu-2.log")).start()
        ensure_topics(settings)
        asyncio.run(produce(settings, "codex-exec", "before",
                            records_from_file(str(CAPTURE), "capture")))
        keys = {f"after-{i}".encode() for i in range(6)}  # spread over the partitions
        for key in sorted(keys):
            asyncio.run(produce(settings, "codex-exec", key.decode(),
                                records_from_file(str(CAPTURE), "capture")))
        after = read_keys(settings, CANONICAL_TOPIC, keys, closed_turns(len(keys)),
                          timeout=180, worker=worker)
        assert {r.key for r in after} == keys
        for key in keys:  # each session whole, as before the outage
            assert [json.loads(r.value)["type"] for r in after if r.key == key] == \
                [json.loads(r.value)["type"] for r in before]
        wait_for(lambda: health(settings.web_port)[0] == 200, "/health ok again", worker=worker)
        assert worker.alive()
    finally:
        if worker is not None:
            worker.stop()
        broker.stop()


def test_a_failed_delivery_is_sent_again_until_the_broker_takes_it(own_broker):
    """The broker hangs (SIGSTOP: connections stay open, nothing answers) while a batch
    is being published: every send times out, and publish keeps sending until the
    broker answers again (SIGCONT), without raising and without returning early."""
    settings = embedded_settings(Settings(partitions=4, producer_request_timeout=1.0),
                                 own_broker.url)
    ensure_topics(settings)
    items = [ProducerRecord(CANONICAL_TOPIC, f"event-{i}".encode(), b"retry", i % 4)
             for i in range(8)]

    async def scenario() -> None:
        sink = OutputProducer(settings)
        try:
            await sink.get()
            os.kill(own_broker.pid, signal.SIGSTOP)
            try:
                task = asyncio.ensure_future(sink.publish(items, "normalize.test"))
                deadline = time.monotonic() + 90
                while sink.metrics.send_retries.get(("normalize.test",)) < 2:
                    assert not task.done(), task
                    assert time.monotonic() < deadline, "no delivery failure seen"
                    await asyncio.sleep(0.2)
                assert not task.done()  # still trying: nothing dropped, nothing reported done
                assert sink.health.output_failing == {"normalize.test"}
                assert sink.health.output_error
                assert sink.metrics.send_failures.get((CANONICAL_TOPIC,)) >= len(items)
            finally:
                os.kill(own_broker.pid, signal.SIGCONT)
            await asyncio.wait_for(task, 120)
            assert sink.health.output_failing == set()
        finally:
            await sink.stop()

    asyncio.run(scenario())
    got = [r.value for r in read_n(settings, CANONICAL_TOPIC, len(items))]
    assert set(got) == {i.value for i in items}
    for p in range(4):  # per partition, in order (a copy of a delivered one may come first)
        mine = [v for v in got if v in {i.value for i in items if i.partition == p}]
        assert [v for n, v in enumerate(mine) if v not in mine[:n]] == \
            [i.value for i in items if i.partition == p]


def test_unknown_native_types_are_counted_by_the_release_that_sent_them():
    """Which runtime release introduced a message type no adapter knows: the warning's
    runtimeVersion (the session's stated release) is the counter's `version` label."""
    from pipeline.ops import metrics
    from pipeline.worker.normalize import Normalizer

    worker = metrics.WorkerMetrics()
    init = (b'{"type":"system","subtype":"init","session_id":"s","model":"m",'
            b'"claude_code_version":"9.9.9","cwd":"/w","tools":[]}')
    out = Normalizer("claude").process(None, b"s1", init + b'\n{"type":"hologram"}',
                                       partition=0, offset=0)
    state = out.state
    later = Normalizer("claude").process(state, b"s1", b'{"type":"hologram"}', partition=0,
                                         offset=1)
    for value in out.records + later.records:
        if b"runtime.warning" in value:
            worker._unknown("claude", value)
    assert worker.unknown_types.values == {("claude", "9.9.9", "hologram"): 2}
