"""What pipeline.worker.faust_consumer relies on in Faust, mode and aiokafka, checked
where it lives: each of its ways under Faust's public API names a private method or
attribute, and a behaviour of the code around it. When an upgrade renames one, changes
its signature or the code path that makes the workaround necessary, a test here fails
and says which, before a worker silently runs without it (or crashes in it). The
broker tests (test_fetch_wait, test_shutdown, test_broker_trouble, test_health_truth)
check that the patched paths are the ones a real worker takes. No broker here."""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import re
import time
from pathlib import Path

import aiokafka
import faust
import pytest
from aiokafka.consumer.consumer import AIOKafkaConsumer
from faust.tables.recovery import Recovery as FaustRecovery
from faust.transport.consumer import Consumer as FaustBaseConsumer
from faust.transport.drivers.aiokafka import AIOKafkaConsumerThread
from faust.transport.drivers.aiokafka import Consumer as FaustConsumer
from mode import Service
from mode.services import WaitResults

from pipeline.settings import Settings
from pipeline.tools.kafka_io import produce, records_from_file
from pipeline.worker.app import create_app
from pipeline.worker.faust_consumer import Recovery, TableManager
from pipeline.worker.process import WorkerProcess
from tests.pipeline.conftest import read_topic
from topics.catalog import CANONICAL_TOPIC

FIXTURES = Path(__file__).parent.parent / "fixtures" / "captured"


def _params(fn: object) -> list[str]:
    return list(inspect.signature(fn).parameters)  # type: ignore[arg-type]


def _source(fn: object) -> str:
    """`fn`'s source with its whitespace collapsed (a reformat is not a change)."""
    return " ".join(inspect.getsource(fn).split())  # type: ignore[arg-type]


def _app() -> faust.App:
    return create_app(Settings(broker="kafka://127.0.0.1:9", web_enabled=False))


def test_the_versions_the_measurements_were_taken_with():
    """Not a gate (the tests below are): the figures in faust_consumer's docstring were
    measured with these, so a different version is a reason to measure again."""
    assert faust.__version__.startswith("0.")
    assert aiokafka.__version__.startswith("0.")


# ---- 5: table recovery ----------------------------------------------------------------


def test_recovery_resumes_the_flow_only_after_its_seek_to_the_committed_offsets():
    """Recovery 1 stops the flow before Faust's on_recovery_completed, which resumes the
    raw partitions, awaits perform_seek, then resumes the flow itself."""
    assert _params(FaustRecovery.on_recovery_completed) == ["self", "generation_id"]
    src = _source(FaustRecovery.on_recovery_completed)
    resume_partitions = src.index("consumer.resume_partitions(")
    seek = src.index("consumer.perform_seek()")
    resume_flow = src.index("consumer.resume_flow()")
    assert resume_partitions < seek < resume_flow
    assert "def stop_flow(self)" in inspect.getsource(FaustBaseConsumer)


def test_the_seek_to_committed_leaves_a_partition_with_no_commit_where_it_is():
    """Recovery 1b: perform_seek sets the read offset from seek_to_committed's answer,
    which names no offset (None) for a partition the group never committed in."""
    assert _params(FaustBaseConsumer.perform_seek) == ["self"]
    src = _source(FaustBaseConsumer.perform_seek)
    assert "await self.seek_to_committed()" in src
    assert "read_offset.update(" in src
    assert _params(AIOKafkaConsumerThread.seek_to_beginning) == ["self", "partitions"]


def test_the_consistency_check_follows_the_active_offsets_it_reads():
    """Recovery 2: Faust builds the active offsets (`_build_offsets`), then raises
    ConsistencyError for an offset above its highwater; the override corrects the
    offsets between the two."""
    assert _params(FaustRecovery._build_offsets) == [
        "self", "consumer", "tps", "destination", "title"]
    src = _source(FaustRecovery._restart_recovery.fun)  # a mode ServiceTask
    build = src.index("T(self._build_offsets)( consumer, assigned_active_tps, active_offsets")
    check = src.index("raise ConsistencyError(")
    assert build < check
    for name in ("active_offsets", "active_highwaters", "standby_offsets", "standby_tps",
                 "actives_for_table", "standbys_for_table", "tables"):
        assert name in inspect.getsource(FaustRecovery), name


def test_the_app_recovers_with_canonflows_recovery():
    app = _app()
    assert isinstance(app.tables, TableManager)
    assert type(app.tables.recovery) is Recovery
    assert "_recovery" in vars(app.tables)


def test_the_stores_keep_the_private_parts_a_rebuild_empties():
    from faust.stores.memory import Store as MemoryStore

    assert "_key_partition" in inspect.getsource(MemoryStore)
    from faust.stores.rocksdb import Store as RocksStore

    assert _params(RocksStore._db_for_partition) == ["self", "partition"]
    assert "_key_index" in inspect.getsource(RocksStore)


# ---- 6, 7, 8, 10: the consumer ---------------------------------------------------------


def test_faust_fixes_the_fetch_wait_and_aiokafka_reads_it_when_it_starts():
    """6: Faust's driver passes fetch_max_wait_ms=1500 (no setting), and aiokafka's
    consumer hands `_fetch_max_wait_ms` to its fetcher when it starts."""
    assert "fetch_max_wait_ms=1500," in _source(AIOKafkaConsumerThread._create_worker_consumer)
    assert _params(AIOKafkaConsumerThread._create_worker_consumer) == ["self", "transport"]
    assert "fetch_max_wait_ms=self._fetch_max_wait_ms," in _source(AIOKafkaConsumer.start)


def test_faust_converts_the_whole_assignment_at_every_ask_and_asks_once_per_offset():
    """7: the quadratic commit AssignmentCache removes."""
    assert "ensure_TPset(self._ensure_consumer().assignment())" in _source(
        AIOKafkaConsumerThread.assignment)
    assert re.search(r"for tp, offset in offsets\.items\(\) if tp in self\.assignment\(\)",
                     _source(AIOKafkaConsumerThread._commit))
    assert _params(AIOKafkaConsumerThread._ensure_consumer) == ["self"]


def test_faust_pauses_a_partition_only_in_its_own_books():
    """8: Faust's pause and resume never reach aiokafka's consumer (if they do one day,
    set_fetching is redundant)."""
    for fn in (FaustBaseConsumer.pause_partitions, FaustBaseConsumer.resume_partitions):
        assert _params(fn) == ["self", "tps"]
        src = _source(fn)
        assert "_paused_partitions" in src and "._thread" not in src and ".pause(" not in src
    assert "def _is_changelog_tp(self, tp: TP)" in inspect.getsource(FaustBaseConsumer)
    assert _params(AIOKafkaConsumer.pause) == ["self", "partitions"]
    assert _params(AIOKafkaConsumer.resume) == ["self", "partitions"]


def test_faust_hands_each_fetched_record_on_through_wait_first():
    """10: the consumer's fetch loop is the one caller that passes two coroutines, the
    record's callback and the flow's suspension, with no timeout."""
    src = _source(FaustBaseConsumer._drain_messages)
    assert "await self.wait_first( callback(message), self.suspend_flow.wait() )" in src
    assert _params(Service.wait_first) == ["self", "coros", "timeout"]
    assert _params(WaitResults) == ["done", "results", "stopped"]


def test_the_app_runs_canonflows_consumer_and_thread():
    """The patched classes are the ones the app builds (tune_consumer)."""
    async def build() -> tuple[type, type, int]:
        app = _app()
        consumer = app.consumer
        thread = consumer._thread
        aio = thread._create_worker_consumer(app.transport)
        return type(consumer), type(thread), aio._fetch_max_wait_ms

    consumer_type, thread_type, _ = asyncio.run(build())
    assert issubclass(consumer_type, FaustConsumer) and consumer_type is not FaustConsumer
    assert "wait_first" in vars(consumer_type)
    assert {"pause_partitions", "resume_partitions"} <= set(vars(consumer_type))
    assert issubclass(thread_type, AIOKafkaConsumerThread)
    assert {"assignment", "_create_worker_consumer"} <= set(vars(thread_type))


# ---- 11: a rewind empties Faust's books of the partition -------------------------------


def test_the_books_a_rewind_empties_are_the_consumers():
    """11: Faust drops a fetched record below its read offset, and an acknowledgement
    below its committed offset: the books rewind empties."""
    src = _source(FaustBaseConsumer._drain_messages)
    assert "if r_offset is None or offset >= r_offset:" in src
    assert "committed is None or bool(offset) and offset > committed" in _source(
        FaustBaseConsumer._should_commit)
    consumer = _app().consumer
    for name in ("_read_offset", "_committed_offset", "_acked", "_acked_index", "_gap"):
        assert hasattr(consumer, name), name


@pytest.mark.broker
def test_a_running_worker_hands_records_on_without_racing_them_and_commits_unconverted(
        settings, tmp_path):
    """Through a real worker on the broker (tests/pipeline/consumer_probe counts Faust's
    own paths): most fetched records reach the conductor without Faust's four-task race
    (10: only a callback that waits is raced), and the driver thread's commits never
    convert the assignment with Faust's own assignment() (7)."""
    probe = tmp_path / "probe.json"
    env = {"PYTHONPATH": os.pathsep.join([str(Path(__file__).parent / "consumer_probe")]
                                         + [p for p in [os.environ.get("PYTHONPATH")] if p]),
           "TEST_CONSUMER_PROBE": str(probe)}
    worker = WorkerProcess(settings, log_path=str(tmp_path / "worker.log"), env=env).start()
    capture = FIXTURES / "codex" / "codex-app-server__tool_shell.capture.jsonl"
    records = records_from_file(str(capture), "capture")
    try:
        for i in range(5):
            asyncio.run(produce(settings, "codex", f"probe-{i}", records))
        assert read_topic(settings, CANONICAL_TOPIC, 5, worker=worker, timeout=90.0)

        def counts() -> dict[str, int]:
            try:
                return json.loads(probe.read_text())  # type: ignore[no-any-return]
            except (OSError, ValueError):  # not written yet, or being replaced
                return {}

        deadline = time.monotonic() + 90.0  # a bound for a hung worker, not a timing
        while (counts().get("handoffs", 0) < 5 * len(records) or not counts().get("commits")
               ) and time.monotonic() < deadline and worker.alive():
            time.sleep(0.2)
        got = counts()
    finally:
        worker.stop()
    assert got.get("handoffs", 0) >= 5 * len(records), (got, worker.log_path)
    assert got["raced"] < got["handoffs"] / 2, got
    assert got["commits"] >= 1 and got["converted"] == 0, got
