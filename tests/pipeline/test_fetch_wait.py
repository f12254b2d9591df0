"""The worker's consumer (pipeline.worker.faust_internals.tune_consumer, issue 24): it waits
at most CANONFLOW_FETCH_MAX_WAIT for a fetch (Faust's driver fixes 1.5 s, and a broker
that waits a fetch out, the embedded Tansu, then held every record of a live session up
to that long), converts its assignment once per assignment (Faust's driver converts it
whole at every ask, and asks once per offset it commits: quadratic in the partitions),
and pauses the table changelogs in aiokafka when Faust pauses them in its own books
(else aiokafka goes on fetching them)."""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path

import pytest
from aiokafka import TopicPartition
from faust.types import TP

from pipeline.settings import Settings
from pipeline.tools.kafka_io import produce, records_from_file
from pipeline.worker.app import create_app
from pipeline.worker.faust_internals import AssignmentCache
from pipeline.worker.process import WorkerProcess
from tests.pipeline.conftest import read_topic
from topics.catalog import CANONICAL_TOPIC, raw_topic

FIXTURES = Path(__file__).parent.parent / "fixtures" / "captured"


def _fetch_wait_ms(settings: Settings) -> int:
    async def build() -> int:
        app = create_app(settings)
        thread = app.consumer._thread
        consumer = thread._create_worker_consumer(app.transport)
        return consumer._fetch_max_wait_ms  # what its fetcher is started with

    return asyncio.run(build())


def test_the_consumer_fetches_with_the_configured_wait():
    base = Settings(broker="kafka://127.0.0.1:9", web_enabled=False)
    assert _fetch_wait_ms(base) == 50
    assert _fetch_wait_ms(base.replace(fetch_max_wait=1.5)) == 1500


class _Assigned:
    """aiokafka's consumer as the driver's thread reads it: one frozenset per
    assignment; counts the asks."""

    def __init__(self, tps: frozenset[TopicPartition]):
        self.tps, self.asks = tps, 0

    def assignment(self) -> frozenset[TopicPartition]:
        self.asks += 1
        return self.tps


def test_the_assignment_is_converted_once_per_assignment_and_commits_filter_by_it():
    async def build() -> None:
        app = create_app(Settings(broker="kafka://127.0.0.1:9", web_enabled=False))
        thread = app.consumer._thread
        first = _Assigned(frozenset(TopicPartition(f"t{i}", p)
                                    for i in range(35) for p in range(12)))
        thread._ensure_consumer = lambda: first
        got = thread.assignment()
        assert got == {TP(f"t{i}", p) for i in range(35) for p in range(12)}
        assert all(type(tp) is TP for tp in got)
        assert thread.assignment() is got  # the same assignment: not converted again
        # the driver's commit filter asks once per offset: every ask is the same set
        offsets = {TP(f"t{i}", p): 7 for i in range(12) for p in range(12)}
        offsets[TP("gone", 0)] = 3
        kept = {tp: o for tp, o in offsets.items() if tp in thread.assignment()}
        assert len(kept) == 144 and TP("gone", 0) not in kept
        # a rebalance: aiokafka's new frozenset, converted anew
        second = _Assigned(frozenset({TopicPartition("t0", 0), TopicPartition("gone", 0)}))
        thread._ensure_consumer = lambda: second
        assert thread.assignment() == {TP("t0", 0), TP("gone", 0)}
        assert first.asks == 1 + 1 + 145 and second.asks == 1

    asyncio.run(build())


def test_the_cache_answers_for_the_assignment_it_was_given_and_cannot_be_changed():
    cache = AssignmentCache()
    a = frozenset({TopicPartition("x", 1)})
    b = frozenset({TopicPartition("x", 1)})  # equal, but another assignment object
    got = cache.of(a)
    assert got == {TP("x", 1)} and cache.of(a) is got
    assert cache.of(b) == got and cache.of(b) is not got
    assert cache.of(frozenset()) == frozenset()
    assert not hasattr(got, "add")  # shared between callers: frozen


class _Paused:
    """aiokafka's consumer as set_fetching drives it: what it pauses and resumes."""

    def __init__(self, assigned: set[TopicPartition]):
        self.assigned, self.calls = assigned, []

    def assignment(self) -> set[TopicPartition]:
        return self.assigned

    def pause(self, *tps: TopicPartition) -> None:
        self.calls.append(("pause", sorted(tps)))

    def resume(self, *tps: TopicPartition) -> None:
        self.calls.append(("resume", sorted(tps)))


def test_changelog_partitions_are_paused_and_resumed_in_aiokafka_as_faust_does():
    """Faust's pause is only in its own books: without this, aiokafka went on fetching
    every table changelog partition after recovery (and kept what it fetched)."""
    async def build() -> list:
        app = create_app(Settings(broker="kafka://127.0.0.1:9", web_enabled=False))
        consumer = app.consumer
        changelog = sorted(app.tables.changelog_topics)[0]
        assigned = {TopicPartition(changelog, 0), TopicPartition(changelog, 1),
                    TopicPartition("agents.raw.claude", 0)}
        fake = _Paused(assigned)
        consumer._thread._consumer = fake
        consumer._thread.thread_loop = asyncio.get_running_loop()
        raw, log0, log1 = TP("agents.raw.claude", 0), TP(changelog, 0), TP(changelog, 1)
        consumer.pause_partitions([raw, log0, log1, TP(changelog, 5)])  # 5: not assigned
        assert raw in consumer._paused_partitions  # Faust's own books, as before
        await asyncio.sleep(0)  # the consumer's thread runs it (here: this loop)
        consumer.resume_partitions(iter([log1, raw]))
        await asyncio.sleep(0)
        consumer.resume_partitions([raw])  # no changelog partition: nothing to do
        await asyncio.sleep(0)
        assert raw not in consumer._paused_partitions and log0 in consumer._paused_partitions
        return fake.calls

    calls = asyncio.run(build())
    assert [(what, [(tp.topic.rsplit("-", 1)[-1], tp.partition) for tp in tps])
            for what, tps in calls] == [("pause", [("changelog", 0), ("changelog", 1)]),
                                        ("resume", [("changelog", 1)])]


@pytest.mark.broker
def test_a_running_worker_fetches_its_raw_partitions_and_no_changelog(settings, tmp_path):
    """On the real broker: once a worker has recovered its tables and translated a
    conversation, its fetch requests name the raw topics' partitions and no table
    changelog partition (before: every changelog partition it held no records of, and
    it fetched back the states it had just written)."""
    fetches = tmp_path / "fetches.jsonl"
    env = {"PYTHONPATH": os.pathsep.join([str(Path(__file__).parent / "fetch_log")]
                                         + [p for p in [os.environ.get("PYTHONPATH")] if p]),
           "TEST_FETCH_LOG": str(fetches)}
    worker = WorkerProcess(settings, log_path=str(tmp_path / "worker.log"), env=env).start()
    try:
        capture = FIXTURES / "codex" / "codex-app-server__tool_shell.capture.jsonl"
        asyncio.run(produce(settings, "codex", "fetch-log-session",
                            records_from_file(str(capture), "capture")))
        assert read_topic(settings, CANONICAL_TOPIC, 5, worker=worker, timeout=90.0)
        since = time.time()
        deadline = time.monotonic() + 60.0  # a bound for a hung worker, not a timing
        while len(_fetched(fetches, since)) < 5 and time.monotonic() < deadline \
                and worker.alive():
            time.sleep(0.2)
    finally:
        worker.stop()
    later = _fetched(fetches, since)
    assert len(later) >= 5, f"the worker sent {len(later)} fetches; see {worker.log_path}"
    raw = {t for f in later for t in f if t.startswith("agents.raw.")}
    changelogs = sorted({t for f in later for t in f if t.endswith("-changelog")})
    assert raw == {raw_topic(p) for p in settings.providers}
    assert not changelogs, f"fetched changelog partitions while running: {changelogs}"
    assert all(n == settings.partitions for f in later for t, n in f.items()
               if t.startswith("agents.raw."))


def _fetched(path: Path, since: float) -> list[dict[str, int]]:
    """The topics (and their partition counts) of each fetch request sent after `since`."""
    if not path.exists():
        return []
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [f["topics"] for f in lines if f["t"] > since]
