"""The benchmark's own honesty: its workload, and that a wrong answer is an error.
(The timings themselves are never asserted: this machine is shared and noisy.)"""

from __future__ import annotations

import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from pipeline.tools.bench import measure_stall_scan
from pipeline.tools.bench_ceilings import (
    bench_adapters,
    bench_adapters_interpreted,
    run_passthrough,
)
from pipeline.tools.bench_cpu import guarantee_field
from pipeline.tools.bench_kafka import BenchError, Observed, verify
from pipeline.tools.bench_report import format_report
from pipeline.tools.bench_workload import build_workload, expected_events, n_messages, records_of
from topics.catalog import PROVIDERS

CAPTURED = Path(__file__).resolve().parents[1] / "fixtures" / "captured"


#: providers with no wire capture in the bench's workload: amp (none exists), the
#: transcript adapters, whose sessions are the runtimes' files (tests/fixtures/ondisk),
#: and the runtimes recorded in tests/fixtures/more-runtimes, whose mix the bench's
#: figures do not include yet
MORE_RUNTIMES = {"pi", "copilot", "droid", "kilo", "qwen"}
NOT_CAPTURED = {"amp"} | MORE_RUNTIMES | {p for p in PROVIDERS if p.endswith("-transcript")}


def test_workload_copies_real_conversations_into_distinct_sessions():
    sessions = build_workload(CAPTURED, 2000)
    assert n_messages(sessions) >= 2000
    assert len({s.session_id for s in sessions}) == len(sessions)
    assert {s.provider for s in sessions} == set(PROVIDERS) - NOT_CAPTURED
    batched = records_of(sessions[0], 50)
    assert sum(r.value.count(b"\n") + 1 for r in batched) == len(sessions[0].lines)


def test_adapter_core_rates_cover_every_provider_and_the_mix():
    rates = bench_adapters(build_workload(CAPTURED, 500))
    assert set(rates) == (set(PROVIDERS) - NOT_CAPTURED) | {"mix"}
    assert all(r > 0 for r in rates.values())


def test_a_missing_or_changed_event_is_a_wrong_answer():
    sessions = build_workload(CAPTURED, 100)[:2]
    expected = expected_events(sessions)
    records = [SimpleNamespace(key=sid.encode(), value=v) for sid, evs in expected.items()
               for v in evs]
    verify(records, expected, "log")
    with pytest.raises(BenchError):
        verify(records[:-1], expected, "log")
    changed = records[:-1] + [SimpleNamespace(key=records[-1].key, value=records[0].value)]
    with pytest.raises(BenchError):
        verify(changed, expected, "log")


def test_a_rate_is_timed_from_the_first_fetch_and_a_single_fetch_is_not_a_rate():
    # the first fetch's records were made before the clock started: they are not timed
    seen = Observed(records=[None] * 100, first=10.0, last=12.0, first_fetched=20)
    assert seen.rate(1000) == pytest.approx(1000 * 80 / 100 / 2.0)
    # everything in one fetch: no time to divide by (it read 2,044,000,000 msg/s once)
    with pytest.raises(BenchError, match="one fetch"):
        Observed(records=[None] * 100, first=10.0, last=10.0, first_fetched=100).rate(1000)


def test_report_names_the_ratios():
    result = {
        "workload": {"messages": 10, "sessions": 1, "batch": 50, "repeat": 1, "partitions": 4,
                     "messages_per_batched_record": 5.0, "batched_messages": 50},
        "adapter_build": "mypyc",
        "adapter_core_msgs_per_s": {"mix": 1.0},
        "adapter_core_interpreted_msgs_per_s": 0.8,
        "aiokafka_passthrough_msgs_per_s": 10.0, "faust_passthrough_msgs_per_s": 5.0,
        "canonflow_single_msgs_per_s": 4.5, "canonflow_batched_msgs_per_s": 4.0,
        "canonflow_two_workers_msgs_per_s": 4.0,
        "ratios": {"batched_vs_aiokafka": 0.4, "single_vs_faust": 0.9}, "memory": {},
        "ratios_per_run": {"batched_vs_aiokafka": [0.43, 0.29],
                           "single_vs_faust": [1.62, 1.49]},
    }
    text = format_report(result)
    assert "(4 batched)/(2) = 0.40" in text and "(4 single)/(3) = 0.90" in text
    assert "within each run: (4 batched)/(2) 0.43 0.29, (4 single)/(3) 1.62 1.49" in text
    assert "5.0 on average" in text
    assert "the workload 5 times over, as sessions of their own: 50 messages" in text
    assert "adapter core (offline, one core, mypyc)" in text
    assert "mix, the same source interpreted" in text


def test_the_stall_scan_is_measured_by_sessions_and_by_their_length():
    st = measure_stall_scan(CAPTURED, sessions=2000, repeat=2)
    assert st["sessions"] == 2000 and st["tick_ms"] > 0 and st["tick_ms_tenth"] > 0
    # the long sessions' states are about as large: a state does not grow with its length
    assert st["state_bytes_long"] < 2 * st["state_bytes"]
    text = format_report({**_minimal_result(), "stall_scan": st})
    assert "stall scan (2,000 sessions waiting on a tool)" in text
    assert "tick ratio, each session 50x longer" in text


def _minimal_result() -> dict[str, Any]:
    return {"workload": {"messages": 1, "sessions": 1, "batch": 1, "repeat": 1,
                         "partitions": 1, "messages_per_batched_record": 1.0},
            "adapter_core_msgs_per_s": {}, "aiokafka_passthrough_msgs_per_s": 1.0,
            "faust_passthrough_msgs_per_s": 1.0, "canonflow_single_msgs_per_s": 1.0,
            "canonflow_batched_msgs_per_s": 1.0, "canonflow_two_workers_msgs_per_s": 1.0,
            "ratios": {"batched_vs_aiokafka": 1.0, "single_vs_faust": 1.0}, "memory": {}}


def test_the_interpreted_adapter_core_is_measured_from_a_copy_without_extensions():
    # what the bench puts beside the compiled build's figure: a child process that
    # imports the source (it raises BenchError if that copy ran compiled)
    rates = bench_adapters_interpreted(CAPTURED, 200, 2)
    assert len(rates) == 2 and all(r > 0 for r in rates)


@pytest.mark.broker
def test_both_ceilings_forward_every_record_through_the_broker(settings, tmp_path,
                                                              monkeypatch):
    # (2) and (3) each in a process of their own, observed from this one; a record
    # missing at the end is a BenchError, not a rate
    import tempfile

    scratch, cwd = tmp_path / "tmp", tmp_path / "cwd"
    scratch.mkdir()
    cwd.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    monkeypatch.chdir(cwd)
    sessions = build_workload(CAPTURED, 100)[:4]
    for kind in ("aiokafka", "faust"):
        try:
            assert run_passthrough(kind, settings, sessions, 1, timeout=120) > 0
        except BenchError as e:  # every record forwarded, in one fetch: nothing to time
            assert "outputs arrived in one fetch" in str(e)
    # the Faust app's table store went into the run's scratch directory, and that is gone
    # (repeated benches once left an `<app id>-data` directory behind each)
    assert list(cwd.iterdir()) == [] and list(scratch.iterdir()) == []


# -- issue 24: the offline replay section and the latency section ------------------------

def test_the_replay_workload_is_a_long_claude_session_replay_translates_whole():
    from pipeline.tools.bench_replay import claude_stream_json, replay_seconds

    data = claude_stream_json(3000)
    assert data.count(b"\n") >= 3000
    assert 250 < len(data) / data.count(b"\n") < 600  # the captured mix's message size
    assert data == claude_stream_json(3000)  # the same bytes every run
    path = Path(__import__("tempfile").mkstemp(suffix=".jsonl")[1])
    try:
        path.write_bytes(data)
        seconds, events = replay_seconds(str(path), redact=True)  # raises on a dead letter
    finally:
        path.unlink()
    assert seconds > 0 and events > 2000


def test_the_replay_section_reports_the_ratio_and_redactions_share():
    from pipeline.tools.bench_replay import format_replay_report, run_replay_bench

    r = run_replay_bench(2000, 2, lambda s: None)
    assert len(r["per_run"]["replay_vs_bare_decode"]) == 2
    assert 0 < r["replay_vs_bare_decode"] < 1
    assert r["redaction"]["events"] > 1000 and r["redaction"]["deltas"] > 1000
    text = "\n".join(format_replay_report(r))
    assert "ratio replay/bare decode" in text and "redaction's share of replay" in text


def test_latency_percentiles_are_per_rate_from_the_send_times():
    from pipeline.tools.bench_latency import format_latency_report, summarize

    phases = [{"rate": 100, "sent": 3, "start": 10.0, "end": 12.0, "offered_per_s": 1.5},
              {"rate": 1000, "sent": 2, "start": 20.0, "end": 21.0, "offered_per_s": 2.0}]
    arrivals = [(10_000.0, 10_010.0), (11_000.0, 11_020.0), (12_000.0, 12_030.0),
                (20_000.0, 21_500.0), (21_000.0, 22_200.0)]
    rows = summarize(phases, arrivals)
    assert [(r["events"], r["p50_ms"], r["max_ms"]) for r in rows] == [(3, 20.0, 30.0),
                                                                         (2, 1500.0, 1500.0)]
    report = "\n".join(format_latency_report({"rates": rows, "p99_over_1s_at": 1000}))
    assert "p99 passes 1 s at 1,000 msg/s" in report


def test_a_rates_batches_are_those_acknowledged_until_the_next_rate():
    from pipeline.tools.bench_latency import batch_steps, format_latency_report, summarize

    phases = [{"rate": 100, "sent": 1, "start": 10.0, "end": 12.0, "offered_per_s": 1.0},
              {"rate": 1000, "sent": 1, "start": 20.0, "end": 21.0, "offered_per_s": 1.0}]

    def batch(at: float, records: int, publish: float) -> dict:
        return {"at": at, "agent": "normalize.codex", "records": records, "oldest_age": 0.1,
                "translate": 0.001, "publish": publish, "store": 0.002, "drop": 0.0,
                "count": 0.0}

    steps = batch_steps(phases, [batch(9.0, 50, 1.0), batch(11.0, 2, 0.007),
                                 batch(19.0, 4, 0.007), batch(25.0, 9, 0.097)])
    assert [s["count"] for s in steps] == [2, 1]  # the warm-up's batch belongs to none
    assert steps[0]["records_per_batch"] == 3.0 and steps[0]["oldest_age_p50_ms"] == 100.0
    assert steps[1]["publish_p50_ms"] == 97.0 and steps[1]["publish_share"] == 0.97
    rows = summarize(phases, [(10_000.0, 10_010.0), (20_000.0, 20_020.0)])
    for r, s in zip(rows, steps, strict=True):
        r["batches"] = s
    report = "\n".join(format_latency_report({"rates": rows, "p99_over_1s_at": None}))
    assert "where a batch's time went" in report and "97.0 (97%)" in report


def test_the_latency_floor_is_a_faust_passthrough_with_the_workers_consumer():
    """The floor under the worker's latency: one agent per raw topic, each record to
    agents.canonical as the smallest event the bench reads, the same fetch wait."""
    import asyncio

    import msgspec

    from pipeline.settings import Settings
    from pipeline.tools.bench_faust import create_stamp_app, stamp
    from pipeline.tools.bench_latency import _created_ms
    from pipeline.worker.process import embedded_settings

    # on Tansu, as the worker there
    settings = embedded_settings(Settings(web_enabled=False), "kafka://127.0.0.1:9")

    async def build() -> tuple[set[str], int]:
        app = create_stamp_app(settings)
        consumer = app.consumer._thread._create_worker_consumer(app.transport)
        return set(app.agents), consumer._fetch_max_wait_ms

    agents, wait_ms = asyncio.run(build())
    assert agents == {f"stamp.{p}" for p in settings.providers} and wait_ms == 50
    assert _created_ms(stamp([("origin", b"agent"), ("t", b"1796190908577")], 1.0)) == \
        1796190908577.0
    assert _created_ms(stamp({}, 1796190908.5)) == 1796190908500.0  # no `t`: its timestamp
    assert msgspec.json.decode(stamp(None, 0.0)) == {"createdAt": "1970-01-01T00:00:00.000Z"}


def test_the_latency_report_sets_the_worker_beside_the_floor():
    from pipeline.tools.bench_latency import format_latency_report

    rows = [{"rate": 1000, "sent": 8000, "offered_per_s": 1000.0, "events": 5982,
             "p50_ms": 70.0, "p99_ms": 150.0, "max_ms": 180.0,
             "faust": {"offered_per_s": 1000.0, "events": 8000, "p50_ms": 60.0,
                       "p99_ms": 120.0, "max_ms": 200.0}}]
    report = "\n".join(format_latency_report({"rates": rows, "p99_over_1s_at": None}))
    assert "Faust passthrough that translates nothing" in report
    assert "1.25x" in report  # 150 / 120


def test_idle_cores_are_each_process_cpu_seconds_over_the_seconds_watched():
    import subprocess
    import sys

    from pipeline.tools.bench_latency import idle_cores

    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    calm = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        time.sleep(0.3)  # both started
        cores = idle_cores({"busy": busy.pid, "calm": calm.pid, "none": None}, 1.0)
    finally:
        for p in (busy, calm):
            p.kill()
            p.wait()
    gone = idle_cores({"gone": busy.pid}, 0.01)
    # a core, less what others take: under the parallel suite a spinning process gets a
    # fair share of two cores among a dozen runnable ones, far below a core
    assert cores["busy"] is not None and cores["busy"] > 0.02
    assert cores["calm"] is not None and cores["calm"] < 0.05
    assert cores["none"] is None
    assert gone == {"gone": None}


def test_the_latency_report_gives_the_idle_cost_beside_the_floors():
    from pipeline.tools.bench_latency import format_latency_report

    rows = [{"rate": 100, "sent": 1000, "offered_per_s": 100.0, "events": 748,
             "p50_ms": 30.0, "p99_ms": 60.0, "max_ms": 90.0}]
    idle = {"worker": {"app": 0.0123, "broker": 0.2}, "floor": {"app": 0.006, "broker": None}}
    report = "\n".join(format_latency_report({"rates": rows, "p99_over_1s_at": None,
                                              "idle": idle}))
    assert "idle, after the warm-up (5 s): the worker 0.012 core, its broker 0.200" in report
    assert "the Faust passthrough 0.006, its broker ?" in report
    assert "(worker / passthrough 2.05x)" in report
    alone = "\n".join(format_latency_report({"rates": rows, "p99_over_1s_at": None,
                                             "idle": {"worker": idle["worker"]}}))
    assert "passthrough" not in alone.split("idle,")[1]


# -- the worker's CPU per native message (canonflow bench --cpu) --------------------------

CPU_KEYS = ("worker_cpu_us_per_msg_batched", "worker_cpu_us_per_msg_single",
            "core_cpu_us_per_msg", "core_cpu_us_per_msg_single", "worker_vs_core_batched",
            "worker_vs_core_single")


def _bench_cli(*args: str, timeout: float = 900) -> Any:
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    env = {k: v for k, v in os.environ.items() if not k.startswith("CANONFLOW_")}
    env["PYTHONPATH"] = str(root)
    return subprocess.run([sys.executable, "-m", "pipeline.cli", "bench", *args], env=env,
                          cwd=root, capture_output=True, text=True, timeout=timeout)


@pytest.mark.broker
def test_bench_json_gives_the_workers_and_the_cores_cpu_per_message(broker):
    # a tiny workload through a real worker on the test broker: the keys are there and
    # positive (their values are never asserted: the machine is shared); every run's
    # events were checked against the offline replay, or the command failed
    import json

    from pipeline.tools.bench_report import format_cpu_report

    run = _bench_cli("--cpu", "--json", "--broker", broker.url, "--partitions", "4",
                     "--messages", "100", "--repeat", "1", "--batch", "10",
                     "--fixtures", str(CAPTURED))
    assert run.returncode == 0, run.stderr[-2000:]
    result = json.loads(run.stdout)
    assert result["guarantee"] == "at_least_once"
    assert set(result["modes"]) == {"at_least_once"}
    for keys in (result, result["modes"]["at_least_once"]):
        for key in CPU_KEYS:
            assert isinstance(keys[key], float) and keys[key] > 0, (key, keys[key])
        assert keys["broker"].split()[0] == broker.engine
    assert result["worker_vs_core_batched"] == pytest.approx(
        result["worker_cpu_us_per_msg_batched"] / result["core_cpu_us_per_msg"])
    assert result["cpu_workload"]["messages"] >= 100
    report = "\n".join(format_cpu_report(result))
    assert "at_least_once" in report and broker.engine in report


@pytest.mark.skipif(guarantee_field() is not None, reason="the worker has a guarantee")
def test_a_guarantee_the_worker_does_not_read_is_refused_not_measured_as_another():
    run = _bench_cli("--cpu", "--guarantee", "at_least_once,exactly_once", timeout=120)
    assert run.returncode == 2
    assert "exactly_once: this worker runs only at_least_once" in run.stderr
    assert "Traceback" not in run.stderr


def test_a_bench_on_a_broker_that_does_not_answer_is_one_line():
    from pipeline.cluster.broker import free_port

    run = _bench_cli("--cpu", "--broker", f"kafka://127.0.0.1:{free_port()}", timeout=120)
    assert run.returncode == 3, run.stderr[-2000:]
    assert "no broker answers at 127.0.0.1:" in run.stderr
    assert "Traceback" not in run.stderr and len(run.stderr.strip().splitlines()) == 1


@pytest.mark.broker
def test_the_cpu_sections_worker_starts_at_the_true_end_of_the_raw_topics(settings):
    # a worker of the CPU section reads only what the bench produces after it: its
    # group is committed at the raw topics' end, the log's end even where the broker
    # answers ListOffsets(latest) short of it (Tansu: its last batch's first offset + 1)
    import asyncio

    from aiokafka import AIOKafkaConsumer, TopicPartition

    from pipeline.cluster.admin import kafka_client_kwargs
    from pipeline.tools.bench_cpu import _start_at_end
    from pipeline.tools.bench_kafka import produce_all
    from pipeline.tools.kafka_io import RawRecord
    from topics.catalog import raw_topic

    topic = raw_topic("codex")
    tps = [TopicPartition(topic, i) for i in range(settings.partitions)]

    async def starts() -> int:  # the logs' starts: not 0 where earlier tests wrote
        consumer = AIOKafkaConsumer(**kafka_client_kwargs(settings), enable_auto_commit=False)
        await consumer.start()
        try:
            return sum((await consumer.beginning_offsets(tps)).values())
        finally:
            await consumer.stop()

    start = asyncio.run(starts())
    asyncio.run(produce_all(settings, [(topic, f"s{i}".encode(), RawRecord(b"{}", "agent", None))
                                       for i in range(40)]))
    asyncio.run(_start_at_end(settings))

    async def committed() -> int:
        consumer = AIOKafkaConsumer(**kafka_client_kwargs(settings), group_id=settings.app_id,
                                    enable_auto_commit=False)
        await consumer.start()
        try:
            return sum([await consumer.committed(tp) or 0 for tp in tps])
        finally:
            await consumer.stop()

    assert asyncio.run(committed()) - start == 40
