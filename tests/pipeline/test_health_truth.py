"""/health tells the truth about the source partitions (pipeline.ops.progress), and the
worker repairs what it can (pipeline.worker.watch).

The rules as units (lag, stuck, missing topics: a clock of the test's own), then real
things: the embedded broker restarted empty on the same port under a running worker,
a group whose committed offsets are above its partitions' ends, and `canonflow run`
as a child process, stopped by its PID.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from pipeline.cluster.admin import check_topics, kafka_client_kwargs
from pipeline.cluster.broker import EmbeddedBroker, free_port
from pipeline.ops.progress import PartitionView, Progress, missing_topics, reasons
from pipeline.settings import Settings, from_env
from pipeline.tools.kafka_io import produce, records_from_file
from pipeline.worker.process import WorkerProcess
from pipeline.worker.watch import EXIT_UNREPAIRED, UNREPAIRED
from tests.pipeline.test_metrics import (
    CAPTURE,
    health,
    read_keys,
    started,
    wait_for,
    worker_settings,
)
from topics.catalog import CANONICAL_TOPIC, raw_topic

# ---- the rules, as units ------------------------------------------------------------


def _view(end: int | None, position: int | None, committed: int | None = None,
          start: int | None = None, partition: int = 0) -> PartitionView:
    return PartitionView(topic="agents.raw.codex", partition=partition, end=end,
                         position=position, committed=committed, start=start)


@pytest.mark.parametrize(("view", "lag", "ahead"), [
    (_view(10, 10, 10), 0, False),                      # caught up
    (_view(10, 4, 4), 6, False),                        # six wait
    (_view(10, 8, None), 2, False),                     # nothing committed yet: the position
    (_view(10, 6, 14), 4, False),                       # a commit from a log that is gone
    (_view(7, 14, 14), 7, True),                        # position above the end: all of it
    (_view(7, 14, None, start=3), 4, True),             # ... from the log's start
    (_view(0, 14, None), 0, True),                      # an empty new log: nothing waits
    (_view(None, 14, 14), None, False),                 # the end is not known yet
])
def test_lag_counts_the_records_that_wait_and_never_hides_a_log_made_again(view, lag, ahead):
    assert view.lag == lag
    assert view.ahead is ahead


def test_records_that_wait_with_no_offset_moving_are_stuck_after_the_bound():
    progress = Progress(stuck_after=60)
    waiting = _view(10, 4, 4)
    assert progress.stuck([waiting], now=0) == []
    assert progress.stuck([waiting], now=60) == []            # not longer than the bound
    assert progress.stuck([waiting], now=61) == [waiting]
    found = reasons(missing=[], short=[], ahead=[], stuck=[waiting], progress=progress,
                    now=61)
    assert found == ["stuck: records wait and none was processed for more than 60 s: "
                     "agents.raw.codex[0] 6 waiting, at 4 for 61 s"]
    moved = _view(12, 5, 5)                                   # one processed: a new wait
    assert progress.stuck([moved], now=62) == []
    assert progress.stuck([moved], now=122) == []
    assert progress.stuck([moved], now=123) == [moved]


def test_a_partition_with_nothing_waiting_or_that_processes_is_never_stuck():
    progress = Progress(stuck_after=5)
    for t in range(0, 100, 2):  # idle, caught up
        assert progress.stuck([_view(10, 10, 10)], now=t) == []
    progress = Progress(stuck_after=5)
    for t in range(0, 100, 2):  # behind but moving, one record a look
        assert progress.stuck([_view(1000, t, t)], now=t) == []


def test_a_transactions_last_control_record_is_not_a_wait():
    """The committed offset stays below the end when the log ends with a transaction's
    control record (never handed to a consumer): that lag is no record waiting. A record
    handed to the agents and not committed, or not fetched yet, is one."""
    progress = Progress(stuck_after=5)
    marker = PartitionView(topic="t", partition=0, end=10, position=10, committed=9, read=8)
    assert marker.lag == 1 and not marker.waiting
    assert progress.stuck([marker], now=0) == progress.stuck([marker], now=60) == []
    handed = PartitionView(topic="t", partition=0, end=10, position=10, committed=9, read=9)
    unfetched = PartitionView(topic="t", partition=0, end=10, position=9, committed=9, read=8)
    for view in (handed, unfetched):
        progress = Progress(stuck_after=5)
        assert view.waiting and progress.stuck([view], now=0) == []
        assert progress.stuck([view], now=6) == [view]


def test_a_wait_while_nothing_could_be_processed_starts_over():
    progress = Progress(stuck_after=5)
    waiting = _view(10, 4, 4)
    progress.stuck([waiting], now=0)
    progress.forget()  # the broker was away, a rebalance
    assert progress.stuck([waiting], now=6) == []
    assert progress.stuck([waiting], now=12) == [waiting]


def test_missing_topics_and_partitions_are_named():
    missing, short = missing_topics(["a", "b", "c"], {"a": 4, "c": 2}, 4)
    assert (missing, short) == (["b"], ["c has 2 of 4 partitions"])
    found = reasons(missing=[f"t{i}" for i in range(8)], short=short, ahead=[_view(7, 14)],
                    stuck=[], progress=Progress(5), now=0)
    assert found == [
        "topics missing on the broker: t0, t1, t2, t3, t4 and 3 more",
        "partitions missing on the broker: c has 2 of 4 partitions",
        "read position above the log end (the topic was made again): "
        "agents.raw.codex[0] at 14 > end 7"]


def test_the_stuck_bound_is_a_setting_with_a_default():
    assert from_env({}).stuck_after == 60.0
    assert from_env({"CANONFLOW_STUCK_AFTER": "5"}).stuck_after == 5.0
    with pytest.raises(ValueError, match="CANONFLOW_STUCK_AFTER"):
        from_env({"CANONFLOW_STUCK_AFTER": "0"})


# ---- real things ----------------------------------------------------------------------



def _types(records: list[Any], key: bytes) -> list[str]:
    """The event types of session `key`, each eventId once."""
    events: dict[str, str] = {}
    for r in records:
        if r.key == key:
            event = json.loads(r.value)
            events.setdefault(event["eventId"], event["type"])
    return list(events.values())


def _translate(settings: Settings, keys: set[bytes], worker: WorkerProcess) -> list[Any]:
    """Produce the capture once per key; the canonical events of every key's session,
    read until each turn is closed."""
    for key in sorted(keys):
        asyncio.run(produce(settings, "codex-exec", key.decode(),
                            records_from_file(str(CAPTURE), "capture")))

    def done(records: list[Any]) -> bool:
        return {r.key for r in records if json.loads(r.value)["type"] == "turn.completed"} \
            == keys

    return read_keys(settings, CANONICAL_TOPIC, keys, done, timeout=120, worker=worker)


def _sources(port: int) -> dict[str, Any]:
    status, body = health(port)
    return body.get("sources", {}) if status else {}


def _log(path: Path) -> str:
    return path.read_text(errors="replace") if path.exists() else ""


@pytest.mark.broker
def test_a_broker_back_without_the_workers_topics_is_unhealthy_until_the_worker_makes_them(
        tmp_path):
    """The embedded broker restarts empty under a running worker and nobody creates the
    topics (no topic-init job): /health said ok and the consumer lag 0 while the worker
    processed nothing. Now /health names the missing topics, the worker creates them
    as `canonflow run` does (the catalog's partitions and configuration), translates
    what comes next, and /health is ok again."""
    port = free_port()
    broker = EmbeddedBroker(port=port, log_path=str(tmp_path / "tansu-1.log")).start()
    worker = None
    try:
        settings = worker_settings(broker.url, tmp_path, app_id="canonflow-topics-lost",
                                   producer_request_timeout=3.0)
        worker = started(settings, tmp_path)
        wait_for(lambda: health(settings.web_port)[0] == 200, "a healthy worker", worker=worker)
        before = _translate(settings, {f"before-{i}".encode() for i in range(6)}, worker)
        assert _sources(settings.web_port)["repairs"] == 0

        broker.stop()
        wait_for(lambda: health(settings.web_port)[0] == 503, "/health degraded", worker=worker)
        broker = EmbeddedBroker(port=port, log_path=str(tmp_path / "tansu-2.log")).start()
        sources = wait_for(lambda: (s := _sources(settings.web_port)).get("repairs") and s,
                           "the topics made again", worker=worker)
        # the problem, or none when the repair cleared it before this read (the log below
        # says what was missing and that the worker made it)
        assert (sources["lastProblem"] or "topics missing on the broker: ").startswith(
            "topics missing on the broker: "), sources
        # the topics made again, or, when both came before this read, the read positions
        # reset that follows in their new logs (the log below says both)
        assert sources["lastRepair"].startswith(("created ", "read positions reset")), sources
        assert asyncio.run(check_topics(settings)) == []  # the catalog's, every one

        keys = {f"after-{i}".encode() for i in range(6)}  # spread over the partitions
        after = _translate(settings, keys, worker)
        for key in keys:  # each session whole, as before the restart
            assert _types(after, key) == _types(before, b"before-0")
        wait_for(lambda: health(settings.web_port)[0] == 200, "/health ok again", worker=worker)
        assert worker.alive()
        text = _log(tmp_path / "worker.log")
        assert "canonflow: the broker lost topics: created" in text, text[-3000:]
        assert "Traceback" not in text, text[-3000:]
    finally:
        if worker is not None:
            worker.stop()
        broker.stop()


async def _commit(settings: Settings, offsets: dict[tuple[str, int], int]) -> None:
    """Commit `offsets` for the worker's consumer group, as a consumer of it would."""
    from aiokafka import AIOKafkaConsumer, TopicPartition

    consumer = AIOKafkaConsumer(**kafka_client_kwargs(settings), group_id=settings.app_id,
                                enable_auto_commit=False)
    await consumer.start()
    try:
        tps = {TopicPartition(t, p): o for (t, p), o in offsets.items()}
        consumer.assign(list(tps))
        await consumer.commit(tps)
    finally:
        await consumer.stop()


@pytest.mark.broker
@pytest.mark.tansu
@pytest.mark.new_topics  # the group commits offset 1000, above the new logs' ends
def test_a_read_position_above_the_log_end_is_reset_to_the_start_and_read(broker, tmp_path):
    """A group's committed offsets above its partitions' ends (the topic was made again
    under them: the broker lost its storage, a topic deleted and created): the worker
    read nothing, forever, with /health ok and lag 0. Now /health says so, the worker
    reads each such partition from its start, and /health is ok again.

    Tansu answers a fetch above the log end with no records: the fetch position stays
    there. Apache Kafka answers it with OFFSET_OUT_OF_RANGE, and the consumer starts
    again at the log's start itself (auto_offset_reset), but Faust's books keep the
    committed offset as the read offset, and Faust drops every fetched record below it:
    there the read offset is the position the watch resets."""
    settings = worker_settings(broker.url, tmp_path, engine=broker.engine,
                               app_id="canonflow-above-end")
    keys = {f"early-{i}".encode() for i in range(6)}
    for key in sorted(keys):  # records waiting before the worker starts
        asyncio.run(produce(settings, "codex-exec", key.decode(),
                            records_from_file(str(CAPTURE), "capture")))
    asyncio.run(_commit(settings, {(raw_topic("codex-exec"), p): 1000
                                   for p in range(settings.partitions)}))
    worker = started(settings, tmp_path)
    try:
        sources = wait_for(lambda: (s := _sources(settings.web_port)).get("repairs") and s,
                           "the read positions reset", worker=worker)
        assert sources["lastProblem"].startswith(
            "read position above the log end (the topic was made again): "
            "agents.raw.codex-exec["), sources
        assert " at 1000 > end " in sources["lastProblem"], sources
        got = read_keys(settings, CANONICAL_TOPIC, keys, lambda recs: {
            r.key for r in recs if json.loads(r.value)["type"] == "turn.completed"} == keys,
            timeout=120, worker=worker)
        for key in keys:
            assert "turn.completed" in _types(got, key)
        wait_for(lambda: health(settings.web_port)[0] == 200, "/health ok", worker=worker)
        wait_for(lambda: not [p for p in _sources(settings.web_port).get("waiting", [None])
                              if p is None or p["topic"] == raw_topic("codex-exec")],
                 "every record committed (lag 0)", worker=worker)
        text = _log(tmp_path / "worker.log")
        assert ("canonflow: read positions reset to the start of their new log: "
                "agents.raw.codex-exec[" in text), text[-3000:]
        assert "Traceback" not in text, text[-3000:]
    finally:
        worker.stop()


async def _create_topic(settings: Settings, name: str, partitions: int) -> None:
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    admin = AIOKafkaAdminClient(**kafka_client_kwargs(settings))
    await admin.start()
    try:
        await admin.create_topics([NewTopic(name, partitions, 1)])
    finally:
        await admin.close()


@pytest.mark.broker
def test_a_worker_that_cannot_repair_its_topics_exits_1_with_one_line(tmp_path):
    """The broker comes back with a raw topic made again with fewer partitions than the
    deployment's: the worker cannot repair that. /health says so, and once the bound has
    passed the worker exits with status 1 and one line, for its orchestrator to restart it
    (and the operator to read)."""
    port = free_port()
    broker = EmbeddedBroker(port=port, log_path=str(tmp_path / "tansu-1.log")).start()
    worker = None
    try:
        settings = worker_settings(broker.url, tmp_path, app_id="canonflow-short",
                                   producer_request_timeout=3.0, stuck_after=3.0)
        worker = started(settings, tmp_path)
        wait_for(lambda: health(settings.web_port)[0] == 200, "a healthy worker", worker=worker)
        broker.stop()
        wait_for(lambda: health(settings.web_port)[0] == 503, "/health degraded", worker=worker)
        broker = EmbeddedBroker(port=port, log_path=str(tmp_path / "tansu-2.log")).start()
        # someone else makes the raw topic first, with a single partition
        asyncio.run(_create_topic(settings, raw_topic("codex-exec"), 1))
        assert worker.proc is not None
        status = worker.proc.wait(timeout=120)
        assert status == EXIT_UNREPAIRED
        lines = [x for x in _log(tmp_path / "worker.log").splitlines()
                 if x.startswith(UNREPAIRED)]
        assert len(lines) == 1, lines
        assert "partitions missing on the broker: agents.raw.codex-exec has 1 of 4 " \
               "partitions" in lines[0], lines
        assert "after /health first said it" in lines[0], lines
    finally:
        if worker is not None:
            worker.stop()
        broker.stop()

