"""Broker trouble (issue 25, README "Reliability" guarantee 5): a broker that restarts
empty under a worker, and a broker that is not there yet when a worker starts.

Real things only: the embedded Tansu broker (memory storage: a restart loses every
topic, offset and group) stopped and started again on the same port, `canonflow run`
as a child process, stopped by its PID.
"""

from __future__ import annotations

import asyncio
import json
import signal
from pathlib import Path
from typing import Any

import pytest

from pipeline.cluster.broker import EmbeddedBroker, free_port
from pipeline.settings import Settings
from pipeline.tools.kafka_io import produce, records_from_file
from pipeline.worker.faust_internals import REBUILT
from pipeline.worker.process import WAITING, WorkerProcess, embedded_settings, ensure_topics
from tests.pipeline.test_metrics import (
    CAPTURE,
    health,
    read_keys,
    started,
    wait_for,
    worker_settings,
)
from topics.catalog import CANONICAL_TOPIC

pytestmark = pytest.mark.broker


def _session_types(records: list[Any], key: bytes) -> list[str]:
    """The event types of session `key`, each eventId once (a retried delivery may
    publish an event twice)."""
    events = {}
    for r in records:
        if r.key == key:
            event = json.loads(r.value)
            events.setdefault(event["eventId"], event["type"])
    return list(events.values())


def _translate(settings: Settings, keys: set[bytes], worker: WorkerProcess) -> list[Any]:
    """Produce the capture once per key and read every session's events until each
    turn is closed."""
    for key in sorted(keys):
        asyncio.run(produce(settings, "codex-exec", key.decode(),
                            records_from_file(str(CAPTURE), "capture")))

    def done(records: list[Any]) -> bool:  # every session's turn closed (copies may come)
        return {r.key for r in records if json.loads(r.value)["type"] == "turn.completed"} \
            == keys

    return read_keys(settings, CANONICAL_TOPIC, keys, done, timeout=180, worker=worker)


def _one_by_one(settings: Settings, worker: WorkerProcess) -> list[str]:
    """Six sessions, one after the other, so that their states are separate changelog
    records: with six sessions on four partitions, one partition holds two at least
    (a stored offset above 0, which Faust's check needs to notice: it skips 0).
    Returns the event types of one session."""
    got = [_translate(settings, {f"before-{i}".encode()}, worker) for i in range(6)]
    return _session_types(got[0], b"before-0")


def _log(path: Path) -> str:
    return path.read_text(errors="replace") if path.exists() else ""


# ---- the broker restarts empty under a running worker -----------------------------


def test_a_worker_whose_tables_the_broker_lost_rebuilds_them_and_keeps_running(tmp_path):
    """Faust raised ConsistencyError (a table's changelog offset above the changelog's
    new end) when the worker recovered its tables after the broker came back empty, and
    the worker died. With the memory store that offset is what the worker's last
    recovery read, so the worker here first recovers changelogs with a few records in
    a partition (it is restarted once), then the broker restarts empty."""
    port = free_port()
    broker = EmbeddedBroker(port=port, log_path=str(tmp_path / "tansu-1.log")).start()
    workers: list[WorkerProcess] = []
    try:
        settings = worker_settings(broker.url, tmp_path, app_id="canonflow-broker-lost",
                                   producer_request_timeout=3.0)
        first = started(settings, tmp_path, "first")
        workers.append(first)
        wait_for(lambda: health(settings.web_port)[0] == 200, "a healthy worker", worker=first)
        before = _one_by_one(settings, first)
        assert first.stop() == 0
        worker = started(settings, tmp_path, "worker")  # recovers what `before` stored
        workers.append(worker)
        wait_for(lambda: health(settings.web_port)[0] == 200, "the restarted worker healthy",
                 worker=worker)

        broker.stop()
        wait_for(lambda: health(settings.web_port)[0] == 503, "/health degraded", worker=worker)
        broker = EmbeddedBroker(port=port, log_path=str(tmp_path / "tansu-2.log")).start()
        ensure_topics(settings)  # the topic-init job of a deployment
        log = tmp_path / "worker.log"
        # the worker rejoins the group and recovers its tables (Faust died here)
        wait_for(lambda: REBUILT in _log(log), "the tables rebuilt", worker=worker)
        # a session of before comes again: its state is gone with the changelog, so it
        # is translated whole (a state kept from before would skip its records, at
        # offsets the new log has again)
        again = _translate(settings, {b"before-0"}, worker)
        assert _session_types(again, b"before-0") == before
        keys = {f"after-{i}".encode() for i in range(6)}  # spread over the partitions
        after = _translate(settings, keys, worker)
        for key in keys:  # each session whole, as before the broker restarted
            assert _session_types(after, key) == before
        wait_for(lambda: health(settings.web_port)[0] == 200, "/health ok again", worker=worker)
        assert worker.alive()
        text = _log(log)
        assert "ConsistencyError" not in text and "Traceback" not in text, text[-3000:]
        assert text.count(REBUILT) == 1, text[-3000:]
    finally:
        for w in workers:
            w.stop()
        broker.stop()


def test_a_rocksdb_worker_started_after_the_broker_lost_its_changelogs_rebuilds_once(tmp_path):
    """With the RocksDB store the changelog offsets live on disk, so Faust's
    ConsistencyError came back on every start once the broker had lost the changelogs."""
    pytest.importorskip("rocksdict", reason="the rocksdb extra (rocksdict) is not installed")
    port = free_port()
    broker = EmbeddedBroker(port=port, log_path=str(tmp_path / "tansu-1.log")).start()
    worker = None
    try:
        settings = worker_settings(broker.url, tmp_path, app_id="canonflow-broker-lost-rocksdb",
                                   store="rocksdb://")
        worker = started(settings, tmp_path, "first")
        wait_for(lambda: health(settings.web_port)[0] == 200, "a healthy worker", worker=worker)
        before = _one_by_one(settings, worker)
        assert worker.stop() == 0

        broker.stop()
        broker = EmbeddedBroker(port=port, log_path=str(tmp_path / "tansu-2.log")).start()
        ensure_topics(settings)
        for life in ("second", "third"):  # the rebuild is said once, on the first start
            worker = started(settings, tmp_path, life)
            wait_for(lambda: health(settings.web_port)[0] == 200, f"the {life} worker healthy",
                     worker=worker)
            if life == "second":  # the first session of before again: translated whole
                # (a state kept from before would skip its records, at offsets the new
                # log has again)
                again = _translate(settings, {b"before-0"}, worker)
                assert _session_types(again, b"before-0") == before
            keys = {f"{life}-{i}".encode() for i in range(4)}
            got = _translate(settings, keys, worker)
            for key in keys:
                assert _session_types(got, key) == before
            assert worker.stop() == 0
            log = _log(tmp_path / f"{life}.log")
            assert "ConsistencyError" not in log and "Traceback" not in log, log[-3000:]
            assert log.count(REBUILT) == (1 if life == "second" else 0), log[-3000:]
    finally:
        if worker is not None:
            worker.stop()
        broker.stop()


# ---- no broker yet when the worker starts -----------------------------------------


def _waiting_lines(path: Path) -> list[str]:
    return [line for line in _log(path).splitlines() if line.startswith(WAITING)]


def _no_broker_yet(tmp_path: Path, name: str) -> tuple[Settings, int, WorkerProcess]:
    """`canonflow run --broker` on a port where nothing listens yet."""
    port = free_port()
    settings = Settings(app_id="canonflow-broker-late", partitions=4, web_enabled=True,
                        web_port=free_port(), data_dir=str(tmp_path / "data"),
                        health_probe_interval=0.5, health_probe_timeout=3.0)
    settings = embedded_settings(settings, f"kafka://127.0.0.1:{port}")
    return settings, port, started(settings, tmp_path, name)


def test_a_worker_started_before_its_broker_waits_for_it_then_translates(tmp_path):
    """`canonflow run --broker` with no broker there exited at once with a traceback."""
    settings, port, worker = _no_broker_yet(tmp_path, "worker")
    log = tmp_path / "worker.log"
    broker = None
    try:
        # three attempts have failed, each said in one line, and the worker waits on
        wait_for(lambda: len(_waiting_lines(log)) >= 3, "three attempts", worker=worker)
        broker = EmbeddedBroker(port=port, log_path=str(tmp_path / "tansu.log")).start()
        wait_for(lambda: health(settings.web_port)[0] == 200, "a healthy worker", worker=worker)
        got = _translate(settings, {b"late"}, worker)
        assert "turn.completed" in _session_types(got, b"late")
        assert worker.alive()
    finally:
        worker.stop()
        if broker is not None:
            broker.stop()
    lines = _waiting_lines(log)
    assert len(lines) >= 3
    for n, line in enumerate(lines, 1):  # attempt n, then a pause doubling from 1 s
        assert f"127.0.0.1:{port} (attempt {n}: KafkaConnectionError" in line, line
        assert line.endswith(f"next attempt in {min(2 ** (n - 1), 30)} s"), line
    text = _log(log)
    assert "Traceback" not in text and "Unable connect" not in text, text[-3000:]


@pytest.mark.parametrize(("signum", "status"), [(signal.SIGTERM, 0), (signal.SIGINT, 130)])
def test_a_worker_waiting_for_its_broker_stops_at_once_on_a_signal(tmp_path, signum, status):
    """Stopped between two attempts, it does not wait out its pause: no attempt comes
    after the signal (the next one was 4 s away)."""
    _, _, worker = _no_broker_yet(tmp_path, "worker")
    log = tmp_path / "worker.log"
    try:
        wait_for(lambda: any(line.endswith("next attempt in 4 s")
                             for line in _waiting_lines(log)), "the third attempt",
                 worker=worker, every=0.05)
        assert worker.proc is not None
        worker.proc.send_signal(signum)
        assert worker.proc.wait(timeout=60) == status
    finally:
        worker.stop()
    assert len(_waiting_lines(log)) == 3
    text = _log(log)
    assert "before the broker answered" in text and "Traceback" not in text, text
