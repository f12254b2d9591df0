"""The consumer library drops only what it has seen, through a real broker and worker.

Two ways a reader could lose real events without saying so:

- A session whose raw records move to another partition (the worker goes on and says
  so in a runtime.warning) is published on two partitions of agents.canonical. Its
  first events are on partition 3, the rest on partition 0, which comes first in a
  fetch: the reader merges the two by seq.
- A forged event with the session life's eventId prefix and the highest seq an
  eventId holds (10^12 - 1), written between the session's real events, on their
  partition or on one read before it.

Each test reads with the library (a consumer group that handles what it is given)
and with the real `canonflow tail --session` in a child process, and checks that
every real event comes exactly once and that the forged seq comes after a gap.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pipeline.cluster.admin import kafka_client_kwargs
from pipeline.cluster.consumer import Consumer
from pipeline.settings import Settings
from pipeline.tools.kafka_io import RawRecord, follow
from pipeline.worker.process import WorkerProcess
from tests.pipeline.conftest import read_topic
from tests.pipeline.faults import Work, expected_canonical, workload
from topics.catalog import CANONICAL_TOPIC, raw_topic
from topics.consumer import Gap

pytestmark = pytest.mark.broker

ROOT = Path(__file__).resolve().parents[2]
FORGED_SEQ = 10**12 - 1  # the highest seq an eventId's last 12 hex digits hold


def a_session(prefix: str) -> Work:
    """The workload's longest session, one native message per record."""
    return max(workload(200, prefix=prefix, batched_every=0), key=lambda w: len(w.records))


async def produce(settings: Settings, items: list[tuple[str, int, bytes, bytes, Any]]) -> None:
    """Send (topic, partition, key, value, headers) in order, each acknowledged."""
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(**kafka_client_kwargs(settings), acks="all")
    await producer.start()
    try:
        for topic, partition, key, value, headers in items:
            await producer.send_and_wait(topic, value, key=key, partition=partition,
                                         headers=headers)
    finally:
        await producer.stop()


def produce_raw(settings: Settings, work: Work, records: list[RawRecord], partition: int) -> None:
    asyncio.run(produce(settings, [(raw_topic(work.provider), partition,
                                    work.session_id.encode(), r.value, r.headers())
                                   for r in records]))


def published(settings: Settings, work: Work, want: int, worker: WorkerProcess) -> list[Any]:
    """The session's first `want` records on agents.canonical (the worker's output)."""
    got = read_topic(settings, CANONICAL_TOPIC, want, key=work.session_id.encode(),
                     worker=worker)
    assert len(got) == want, f"{len(got)} of {want} events published; see {worker.log_path}"
    return got


def everything(settings: Settings, key: bytes) -> list[Any]:
    """Every record of agents.canonical with `key`, read without the library."""
    got: list[Any] = []
    asyncio.run(follow(settings, [CANONICAL_TOPIC],
                       lambda r: (r.key == key and got.append(r)) or False, idle_timeout=2.0))
    return got


def through_the_library(settings: Settings, key: bytes) -> tuple[list[str], list[Gap]]:
    """The session's eventIds a consumer group handles, in order, and its gaps."""
    ids: list[str] = []
    gaps: list[Gap] = []

    async def run() -> None:
        async with Consumer(CANONICAL_TOPIC, group="audit", idle_timeout=3.0,
                            rebalance_timeout_ms=3000, **kafka_client_kwargs(settings)) as events:
            async for item in events:
                if isinstance(item, Gap):
                    if item.sessionId == key.decode():
                        gaps.append(item)
                    continue
                if item.sessionId == key.decode():  # type: ignore[union-attr]
                    ids.append(item.eventId)  # type: ignore[union-attr]
                events.handled(item)

    asyncio.run(run())
    return ids, gaps


def without_a_group(settings: Settings, key: bytes) -> tuple[list[str], Consumer]:
    """The session's eventIds a reader without a group (as `canonflow tail`) hands out,
    marking nothing handled, and the consumer it read with."""
    ids: list[str] = []
    consumer = Consumer(CANONICAL_TOPIC, idle_timeout=3.0, **kafka_client_kwargs(settings))

    async def run() -> None:
        async with consumer as events:
            async for item in events:
                if not isinstance(item, Gap) and item.sessionId == key.decode():  # type: ignore[union-attr]
                    ids.append(item.eventId)  # type: ignore[union-attr]

    asyncio.run(run())
    return ids, consumer


def through_tail(settings: Settings, session: str) -> tuple[list[str], list[str]]:
    """What the real `canonflow tail --session --json` prints: eventIds and gap lines."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CANONFLOW_")}
    proc = subprocess.run(
        [sys.executable, "-m", "pipeline.cli", "tail", "--broker", settings.broker,
         "--session", session, "--json", "--idle-timeout", "3"],
        cwd=ROOT, env=env, stdin=subprocess.DEVNULL, capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-3000:]
    lines = proc.stdout.decode().splitlines()
    ids = [json.loads(ln)["eventId"] for ln in lines if ln.startswith("{")]
    gaps = [ln for ln in lines if ln.startswith("(gap")]
    assert len(ids) + len(gaps) == len(lines), lines
    return ids, gaps


def test_a_session_published_on_two_partitions_is_read_whole(settings, worker):
    """Raw records on partition 3, then on partition 0: the worker publishes the
    first events on canonical partition 3 and the rest, after its runtime.warning
    about the move, on partition 0."""
    work = a_session("moved")
    half = len(work.records) // 2
    before = expected_canonical([Work(work.provider, work.session_id, work.records[:half])])
    whole = expected_canonical([work])[work.session_id]
    produce_raw(settings, work, work.records[:half], partition=3)
    published(settings, work, len(before[work.session_id]), worker)
    produce_raw(settings, work, work.records[half:], partition=0)
    published(settings, work, len(whole) + 1, worker)  # + the runtime.warning of the move

    key = work.session_id.encode()
    records = everything(settings, key)
    events = {json.loads(r.value)["eventId"]: json.loads(r.value) for r in records}
    assert sorted(e["seq"] for e in events.values()) == list(range(1, len(whole) + 2))
    assert {r.partition for r in records} == {3, 0}
    moved = [e for e in events.values() if e["type"] == "runtime.warning"]
    assert moved and moved[0]["payload"]["detail"]["toPartition"] == 0

    in_seq_order = [e["eventId"] for e in sorted(events.values(), key=lambda e: e["seq"])]
    ids, gaps = through_the_library(settings, key)
    assert len(ids) == len(set(ids)) and set(ids) == set(events), (
        f"the library handed out {len(set(ids))} of {len(events)} events")
    shown, gap_lines = through_tail(settings, work.session_id)
    assert len(shown) == len(set(shown)) and set(shown) == set(events), (
        f"tail printed {len(set(shown))} of {len(events)} events")
    # read in one fetch, the two partitions are merged by seq: no gap, in order
    assert (ids, gaps) == (in_seq_order, [])
    assert (shown, gap_lines) == (in_seq_order, [])
    # a reader that commits nothing keeps no offset per record it hands out
    ids, consumer = without_a_group(settings, key)
    assert ids == in_seq_order
    tracker = consumer.tracker
    assert tracker._where == {} and all(p.open == {} for p in tracker.partitions.values())


@pytest.mark.parametrize("forged_on", ["the same partition", "a partition read first"])
def test_a_forged_huge_seq_is_a_gap_and_hides_no_real_event(settings, worker, forged_on):
    """The session's raw records go to partition 2; between its two halves, a forged
    event with its life's eventId prefix and seq 10^12 - 1 is written to agents.canonical
    on partition 2 or on partition 1."""
    work = a_session("forged")
    half = len(work.records) // 2
    before = expected_canonical([Work(work.provider, work.session_id, work.records[:half])])
    whole = expected_canonical([work])[work.session_id]
    produce_raw(settings, work, work.records[:half], partition=2)
    last = json.loads(published(settings, work, len(before[work.session_id]), worker)[-1].value)
    forged = {**last, "seq": FORGED_SEQ, "type": "runtime.warning",
              "eventId": last["eventId"][:24] + f"{FORGED_SEQ:012x}",
              "payload": {"message": "forged"}}
    key = work.session_id.encode()
    asyncio.run(produce(settings, [(CANONICAL_TOPIC, 2 if forged_on == "the same partition"
                                    else 1, key, json.dumps(forged).encode(), [])]))
    produce_raw(settings, work, work.records[half:], partition=2)
    published(settings, work, len(whole) + 1, worker)

    real = {e["eventId"] for e in whole}
    ids, gaps = through_the_library(settings, key)
    assert len(ids) == len(set(ids)) and set(ids) == real | {forged["eventId"]}, (
        f"the library handed out {len(real & set(ids))} of {len(real)} real events")
    assert [g.before for g in gaps] == [FORGED_SEQ]
    shown, gap_lines = through_tail(settings, work.session_id)
    assert len(shown) == len(set(shown)) and set(shown) == real | {forged["eventId"]}, (
        f"tail printed {len(real & set(shown))} of {len(real)} real events")
    assert len(gap_lines) == 1 and gap_lines[0].endswith(
        f"to {FORGED_SEQ - 1} not seen before seq {FORGED_SEQ})")
