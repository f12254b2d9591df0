"""Crash at any point (issue 8, guarantee 1).

kill -9 the worker at seeded random moments while a long multi-session,
multi-provider workload (every captured conversation, copied; some sessions one
native message per record, some batched) is being produced; restart it each time
with the same app id, so it resumes the consumer group and recovers its tables from
the changelogs. After dedupe by eventId, agents.canonical and agents.chat hold
exactly what the offline replay gives, session by session: nothing lost, nothing
duplicated or reordered, seq gapless from 1, and an id that comes twice comes with
the same content. Then two workers in one group, one killed: the other takes over
its partitions with their tables and the same guarantee.

Real things only: an embedded Tansu broker per scenario, `canonflow run` child
processes, SIGKILL. Every child is stopped by its PID in `finally`.

Each scenario runs once (a module-scoped fixture) and its tests check what it left
on the topics. On the embedded broker a worker restarted after kill -9 waits about
15-20 s before it gets partitions again (the group waits for the dead member's
session timeout, 10 s), so the crash scenario takes about 75 s.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
from pathlib import Path
from typing import Any

import pytest

from pipeline.settings import Settings
from pipeline.tools.kafka_io import RawRecord
from pipeline.tools.replay import parse_line
from pipeline.worker.normalize import BatchSpool, Normalizer
from tests.pipeline.faults import (
    BASE_T,
    CAPTURED,
    Deduped,
    Observer,
    Producer,
    Workers,
    assert_same,
    assigned,
    expected_canonical,
    expected_chat,
    interleave,
    long_output_session,
    own_broker,
    scenario,
    total,
    wait_for_log,
    workload,
)
from topics.catalog import CANONICAL_TOPIC, CHAT_TOPIC, DEADLETTER_TOPIC, raw_topic

broker = pytest.fixture(name="broker")(own_broker)

RECOVERING = "Restoring state from changelog topics"
RECOVERED = "Done reading from changelog topics"
READY = "Worker ready"



class Outcome:
    """What a fault scenario left on the output topics, with its oracle and a report."""

    def __init__(self, work: list[Any]):
        self.work = work
        self.canonical_expected = expected_canonical(work)
        self.chat_expected = expected_chat(self.canonical_expected)
        self.notes: list[str] = []
        self.canonical: list[Any] = []
        self.chat: list[Any] = []
        self.deadletters: list[Any] = []
        self.continued: set[str] = set()  # sessions a surviving worker took over mid-way

    @property
    def want(self) -> tuple[int, int]:
        return total(self.canonical_expected), total(self.chat_expected)

    def report(self, title: str) -> str:
        canonical, chat = Deduped(self.canonical, "eventId"), Deduped(self.chat, "event_id")
        return (f"\n{title}: {sum(w.messages for w in self.work)} native messages, "
                f"{len(self.work)} sessions; {'; '.join(self.notes)}; canonical "
                f"{len(self.canonical)} records = {self.want[0]} events + "
                f"{canonical.duplicates} redelivered duplicates; chat {len(self.chat)} records "
                f"= {self.want[1]} + {chat.duplicates} duplicates")


async def _finish(obs: Observer, producing: asyncio.Future[None], worker: Any,
                  outcome: Outcome) -> None:
    """Wait for the producer, then for every expected output id, then a little more for
    anything extra, and keep what the observer saw."""
    await producing
    want_canonical, want_chat = outcome.want
    await obs.wait_for(lambda: obs.unique(CANONICAL_TOPIC) >= want_canonical
                       and obs.unique(CHAT_TOPIC) >= want_chat,
                       timeout=120, alive=worker.alive, what="every expected output")
    await asyncio.sleep(1.5)  # extra records (beyond the expected) would show up here
    await obs.stop()
    outcome.canonical = obs.records[CANONICAL_TOPIC]
    outcome.chat = obs.records[CHAT_TOPIC]
    outcome.deadletters = obs.records[DEADLETTER_TOPIC]


# ---------------------------------------------------------------------------
# One worker, killed again and again
# ---------------------------------------------------------------------------


async def _kill_at_random_moments(settings: Settings, workers: Workers, outcome: Outcome,
                                  rng: random.Random) -> None:
    obs = await Observer(settings).start()
    producer = Producer(settings, interleave(outcome.work), chunk=20, pause=0.45)
    producing = asyncio.ensure_future(producer.run())
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    want_canonical = outcome.want[0]

    def note(what: str) -> None:
        outcome.notes.append(f"kill -9 at {loop.time() - t0:.0f}s {what} "
                             f"({producer.sent} records produced, "
                             f"{obs.unique(CANONICAL_TOPIC)} events out)")

    try:
        # 1. right after start, before it has joined the group
        w = workers.start(settings, "worker")
        await asyncio.sleep(rng.uniform(0.2, 1.5))
        w.kill()
        note("right after start")

        # 2. mid-stream, once a random share of the output is out
        w = workers.start(settings, "worker")
        share = rng.uniform(0.1, 0.3)
        await obs.wait_for(lambda: obs.unique(CANONICAL_TOPIC) >= share * want_canonical,
                           timeout=90, alive=w.alive, what=f"{share:.0%} of the output")
        await asyncio.sleep(rng.uniform(0.0, 0.3))
        w.kill()
        note("mid-stream")

        # 3. during table recovery: as soon as the worker says it is restoring
        w = workers.start(settings, "worker")
        assert await wait_for_log(str(w.log_path), RECOVERING, timeout=90, alive=w.alive), \
            f"no table recovery seen; see {w.log_path}"
        w.kill()
        recovered = RECOVERED in Path(str(w.log_path)).read_text()
        note("just after table recovery" if recovered else "during table recovery")

        # 4. at a random moment after the worker is ready again
        w = workers.start(settings, "worker")
        assert await wait_for_log(str(w.log_path), READY, timeout=90, alive=w.alive)
        await asyncio.sleep(rng.uniform(0.1, 2.0))
        w.kill()
        note("after ready, " + ("while producing" if not producer.done else "after producing"))

        # the last life runs to the end
        w = workers.start(settings, "worker")
        await _finish(obs, producing, w, outcome)
        outcome.notes.append(f"{len(workers.started)} worker lives, "
                             f"{loop.time() - t0:.0f}s in all")
    finally:
        if not producing.done():
            producing.cancel()
        await obs.stop()


@pytest.fixture(scope="module")
def crashed(tmp_path_factory: pytest.TempPathFactory) -> Outcome:
    # with one long command whose output is pending (spooled in the items table) while
    # the worker is killed
    outcome = Outcome(workload(3000, prefix="crash") + [long_output_session("crash")])
    with scenario(tmp_path_factory.mktemp("crash")) as (settings, workers):
        asyncio.run(_kill_at_random_moments(settings, workers, outcome, random.Random(8)))
    return outcome


def test_kill_9_at_random_moments_loses_and_duplicates_no_canonical_event(crashed, capsys):
    with capsys.disabled():
        print(crashed.report("crash"))
    assert len(crashed.notes) == 5
    assert_same(Deduped(crashed.canonical, "eventId"), crashed.canonical_expected,
                "agents.canonical")
    assert crashed.deadletters == []


def test_kill_9_keeps_a_long_pending_output_whole(crashed):
    """The long command's item.completed carries the output its deltas carried, though
    the worker was killed while it was pending: past the per-item cap (64 KiB) its head
    and tail, with the whole output's length and SHA-256."""
    got = Deduped(crashed.canonical, "eventId").sessions[
        long_output_session("crash").session_id]
    deltas = "".join(e["payload"]["delta"] for e in got if e["type"] == "content.delta"
                     and e["payload"]["streamKind"] == "command_output")
    done = [e["payload"] for e in got if e["type"] == "item.completed"
            and e["payload"]["itemType"] == "command_execution"]
    assert len(deltas) >= 300 * 1024 and len(done) == 1
    (item,) = done
    assert item["outputTruncated"] is True and item["outputLength"] == len(deltas)
    assert item["outputSha256"] == hashlib.sha256(deltas.encode()).hexdigest()
    head, tail = item["output"].split("\n", 1)[0], item["output"].rsplit("\n", 2)[-2]
    assert deltas.startswith(head + "\n") and deltas.endswith(tail + "\n")


def test_kill_9_at_random_moments_loses_and_duplicates_no_chat_record(crashed):
    assert_same(Deduped(crashed.chat, "event_id"), crashed.chat_expected, "agents.chat")


# ---------------------------------------------------------------------------
# Two workers in one group, one killed
# ---------------------------------------------------------------------------


async def _kill_one_of_two(settings: Settings, workers: Workers, outcome: Outcome,
                           rng: random.Random) -> None:
    obs = await Observer(settings).start()
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    raw = raw_topic("codex")
    producing: asyncio.Future[None] | None = None
    try:
        a = workers.start(settings.replace(data_dir=settings.data_dir + "-a"), "a")
        b = workers.start(settings.replace(data_dir=settings.data_dir + "-b"), "b")

        def split() -> bool:  # both own raw partitions, between them all of them
            pa, pb = assigned(a.log_path, raw), assigned(b.log_path, raw)
            return bool(pa and pb and not pa & pb and pa | pb == set(range(settings.partitions)))

        await obs.wait_for(split, timeout=90, alive=lambda: a.alive() and b.alive(),
                           what="both workers to own partitions")
        owned_by_b = assigned(b.log_path, raw) or set()
        producer = Producer(settings, interleave(outcome.work), chunk=40, pause=0.3)
        producing = asyncio.ensure_future(producer.run())
        share = rng.uniform(0.3, 0.5)
        await obs.wait_for(lambda: obs.unique(CANONICAL_TOPIC) >= share * outcome.want[0],
                           timeout=90, alive=lambda: a.alive() and b.alive(),
                           what=f"{share:.0%} of the output")
        b.kill()
        outcome.notes.append(f"kill -9 of worker b (partitions {sorted(owned_by_b)}) at "
                             f"{loop.time() - t0:.0f}s, {obs.unique(CANONICAL_TOPIC)} events out")
        await asyncio.sleep(1.0)  # b is dead: what the observer holds now is all b published
        by_b: dict[str, set[str]] = {}
        for r in obs.records[CANONICAL_TOPIC]:
            if r.partition in owned_by_b:
                by_b.setdefault(r.key.decode(), set()).add(json.loads(r.value)["eventId"])
        await _finish(obs, producing, a, outcome)
        assert assigned(a.log_path, raw) == set(range(settings.partitions)), \
            "worker a never took over b's partitions"
        final = Deduped(outcome.canonical, "eventId").sessions
        outcome.continued = {sid for sid, ids in by_b.items() if len(final[sid]) > len(ids)}
        outcome.notes.append(f"{len(outcome.continued)} sessions begun by b continued by a")
        outcome.notes.append(f"{loop.time() - t0:.0f}s in all")
        status = a.stop()
        outcome.notes.append(f"worker a exited with {status} on SIGTERM")
    finally:
        if producing is not None and not producing.done():
            producing.cancel()
        await obs.stop()


@pytest.fixture(scope="module")
def taken_over(tmp_path_factory: pytest.TempPathFactory) -> Outcome:
    outcome = Outcome(workload(1500, prefix="takeover"))
    with scenario(tmp_path_factory.mktemp("takeover"), app_id="takeover") as (settings, workers):
        asyncio.run(_kill_one_of_two(settings, workers, outcome, random.Random(8)))
    return outcome


def test_a_killed_workers_partitions_are_taken_over_with_their_tables(taken_over, capsys):
    with capsys.disabled():
        print(taken_over.report("takeover"))
    assert taken_over.continued, "no session begun by the killed worker went on after it"
    assert_same(Deduped(taken_over.canonical, "eventId"), taken_over.canonical_expected,
                "agents.canonical")
    assert taken_over.deadletters == []


def test_a_killed_workers_chat_is_taken_over_too(taken_over):
    assert_same(Deduped(taken_over.chat, "event_id"), taken_over.chat_expected, "agents.chat")


# ---------------------------------------------------------------------------
# A batch translated again after a crash publishes the very same records
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("conversation", ["text", "long output"])
def test_records_translated_again_from_the_state_before_them_give_the_same_output(
        conversation: str):
    """A worker killed after publishing a batch and before storing its state translates
    the batch again, from the state stored before it: the canonical events and the chat
    records must come out byte for byte the same (same eventIds, same chat event_ids),
    so consumers drop them as duplicates. The chat projection's state is part of the
    session's table value, so it can never be ahead of, or behind, the translation.

    The items table follows the worker's order (pipeline.worker.app): a batch's spooled chunks
    are delivered with its output, the chunks it dropped only after its states; so the
    crashed run's chunks are kept and its drops are not."""
    if conversation == "text":
        path = CAPTURED / "codex" / "codex-app-server__text.capture.jsonl"
        lines = [parse_line(raw, "capture") for raw in path.read_bytes().splitlines()
                 if raw.strip()]
        records = [RawRecord(ln.data, ln.origin, BASE_T + 10 * n) for n, ln in enumerate(lines)]
    else:
        records = long_output_session("again", deltas=12, size=64).records
    normalizer = Normalizer("codex")
    items: dict[bytes, bytes] = {}  # the items table as stored

    def run(state: bytes | None, start: int, stored: bool
            ) -> tuple[bytes | None, list[bytes], list[bytes]]:
        events: list[bytes] = []
        chat: list[bytes] = []
        for n in range(start, len(records)):
            spool = BatchSpool(items.get)
            out = normalizer.process(state, b"again-1", records[n].value, partition=0,
                                     offset=n, headers=records[n].headers(), spool=spool)
            state, events, chat = out.state or state, events + out.records, chat + out.chat
            for e in spool.entries(drops=False):
                items[e.key] = e.value  # type: ignore[assignment]
            if stored:
                for e in spool.entries(drops=True):
                    items.pop(e.key, None)
        return state, events, chat

    _, all_events, all_chat = run(None, 0, stored=True)
    assert not items  # every chunk dropped once its item completed
    assert sum(json.loads(c)["type"] in ("text", "tool_result") for c in all_chat) >= 2
    expected = expected_chat({"again-1": [json.loads(e) for e in all_events]})["again-1"]
    assert [json.loads(c) for c in all_chat] == expected
    state: bytes | None = None
    for cut in range(len(records)):  # crashed after publishing records cut.. unstored
        _, again_events, again_chat = run(state, cut, stored=False)
        assert again_events == all_events[len(all_events) - len(again_events):], cut
        assert again_chat == all_chat[len(all_chat) - len(again_chat):], cut
        spool = BatchSpool(items.get)
        out = normalizer.process(state, b"again-1", records[cut].value, partition=0,
                                 offset=cut, headers=records[cut].headers(), spool=spool)
        for e in spool.entries(drops=False) + spool.entries(drops=True):
            if e.value is None:
                items.pop(e.key, None)
            else:
                items[e.key] = e.value
        state = out.state or state
