"""A worker killed in every step of its commit path (pipeline.worker.checkpoint) loses
nothing and, after dedupe by eventId, publishes nothing twice.

The worker kills itself with SIGKILL at a named step (the checkpoint's test-only
fault hook: CANONFLOW_TEST_FAULTS=1, CANONFLOW_FAULT_STEP=<kind>:<step>,
CANONFLOW_FAULT_AFTER=<n>). One scenario per broker: a workload of every captured
conversation is produced while worker after worker dies at the next step of a batch's
commit, each life resuming the last one's consumer group and tables; the last life
runs to the end. agents.canonical and agents.chat, deduped, must then hold exactly what
the offline replay gives, session by session (tests.pipeline.faults.assert_same).

Real things only: the embedded broker of tests.pipeline.brokers (Tansu, or Apache Kafka
with CANONFLOW_TEST_BROKER=kafka), `canonflow run` child processes stopped by PID.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from pipeline.settings import Settings
from pipeline.worker.checkpoint import STEPS
from tests.pipeline.faults import (
    Deduped,
    Observer,
    Producer,
    Workers,
    assert_same,
    expected_canonical,
    expected_chat,
    interleave,
    long_output_session,
    scenario,
    total,
    workload,
)
from topics.catalog import CANONICAL_TOPIC, CHAT_TOPIC, DEADLETTER_TOPIC

#: Batches each life commits before it dies: enough that its group and tables are up,
#: and that it dies mid-stream.
AFTER = 12


def _fault(step: str) -> dict[str, str]:
    return {"CANONFLOW_TEST_FAULTS": "1", "CANONFLOW_FAULT_STEP": f"batch:{step}",
            "CANONFLOW_FAULT_AFTER": str(AFTER)}


class Killed:
    """What the scenario left: each life's step and whether it died there, and the
    output topics."""

    def __init__(self, work: list[Any]):
        self.work = work
        self.canonical_expected = expected_canonical(work)
        self.chat_expected = expected_chat(self.canonical_expected)
        self.lives: list[tuple[str, bool]] = []
        self.canonical: list[Any] = []
        self.chat: list[Any] = []
        self.deadletters: list[Any] = []


async def _kill_in_every_step(settings: Settings, workers: Workers, killed: Killed) -> None:
    obs = await Observer(settings).start()
    # slow while the lives die (each finds batches to commit), fast for the last one
    producer = Producer(settings, interleave(killed.work), chunk=5, pause=0.5)
    producing = asyncio.ensure_future(producer.run())
    try:
        for step in STEPS:
            w = workers.start(settings, f"worker-{step}", env=_fault(step))
            for _ in range(int(240 / 0.1)):
                if not w.alive():
                    break
                await asyncio.sleep(0.1)
            log = Path(str(w.log_path)).read_text()
            killed.lives.append((step, f"killed at batch:{step}" in log))
            w.kill()  # (a no-op when it died at its step)
        producer.pause = 0.05
        last = workers.start(settings, "worker-last")
        await producing
        want_canonical = total(killed.canonical_expected)
        want_chat = total(killed.chat_expected)
        await obs.wait_for(lambda: obs.unique(CANONICAL_TOPIC) >= want_canonical
                           and obs.unique(CHAT_TOPIC) >= want_chat,
                           timeout=180, alive=last.alive, what="every expected output")
        await asyncio.sleep(1.5)  # extra records (beyond the expected) would show up here
        last.stop()
    finally:
        if not producing.done():
            producing.cancel()
        await obs.stop()
    killed.canonical = obs.records[CANONICAL_TOPIC]
    killed.chat = obs.records[CHAT_TOPIC]
    killed.deadletters = obs.records[DEADLETTER_TOPIC]


@pytest.fixture(scope="module")
def killed(tmp_path_factory: pytest.TempPathFactory) -> Killed:
    outcome = Killed(workload(3000, prefix="steps") + [long_output_session("steps")])
    with scenario(tmp_path_factory.mktemp("steps"), app_id="steps") as (settings, workers):
        asyncio.run(_kill_in_every_step(settings, workers, outcome))
    return outcome


def test_the_worker_died_in_every_step_of_a_batchs_commit(killed):
    assert [step for step, _ in killed.lives] == list(STEPS)
    assert all(died for _, died in killed.lives), killed.lives


def test_killed_in_every_step_no_canonical_event_is_lost_or_duplicated(killed, capsys):
    canonical = Deduped(killed.canonical, "eventId")
    with capsys.disabled():
        print(f"\nkilled at {', '.join(s for s, _ in killed.lives)}: canonical "
              f"{len(killed.canonical)} records = {total(killed.canonical_expected)} events + "
              f"{canonical.duplicates} redelivered duplicates")
    assert_same(canonical, killed.canonical_expected, "agents.canonical")
    assert killed.deadletters == []


def test_killed_in_every_step_no_chat_record_is_lost_or_duplicated(killed):
    assert_same(Deduped(killed.chat, "event_id"), killed.chat_expected, "agents.chat")


# ---------------------------------------------------------------------------
# Killed in an idle close: between its output and its tombstones
# ---------------------------------------------------------------------------

#: The idle close's steps a life dies at: its closing events delivered, their tombstones
#: not stored (produced), or stored locally and not delivered (flush).
IDLE_STEPS = ("produced", "flush")


class Closed:
    def __init__(self, work: list[Any]):
        self.work = work
        self.lives: list[tuple[str, bool]] = []
        self.canonical: list[Any] = []
        self.left: dict[tuple[str, str], Any] = {}


async def _kill_in_idle_closes(settings: Settings, workers: Workers, closed: Closed) -> None:
    from tests.pipeline.faults import produce_records, stored_state

    obs = await Observer(settings).start()
    try:
        await produce_records(settings, list(interleave(closed.work)))
        for step in IDLE_STEPS:
            w = workers.start(settings, f"idle-{step}", env={
                "CANONFLOW_TEST_FAULTS": "1", "CANONFLOW_FAULT_STEP": f"idle:{step}"})
            for _ in range(int(240 / 0.1)):
                if not w.alive():
                    break
                await asyncio.sleep(0.1)
            closed.lives.append((step, f"killed at idle:{step}" in
                                 Path(str(w.log_path)).read_text()))
            w.kill()
        last = workers.start(settings, "idle-last")
        sessions = {r.key.decode() for r in obs.records[CANONICAL_TOPIC]}

        def all_exited() -> bool:
            exited = {r.key.decode() for r in obs.records[CANONICAL_TOPIC]
                      if r.value.startswith(b'{"type":"session.exited"')}
            return sessions <= exited

        await obs.wait_for(all_exited, timeout=180, alive=last.alive,
                           what="every session closed")
        await asyncio.sleep(3 * settings.idle_scan_interval + 1.0)  # its tombstones
        last.stop()
    finally:
        await obs.stop()
    closed.canonical = obs.records[CANONICAL_TOPIC]
    closed.left = {k: v for k, v in (await stored_state(settings)).items()
                   if k[0].startswith("sessions.")}


@pytest.fixture(scope="module")
def idle_killed(tmp_path_factory: pytest.TempPathFactory) -> Closed:
    # sessions whose last turn is still open when they go quiet: the close ends it
    outcome = Closed(workload(150, prefix="idle", batched_every=0))
    with scenario(tmp_path_factory.mktemp("idle"), app_id="idle") as (settings, workers):
        settings = settings.replace(idle_timeout=3.0, idle_scan_interval=0.5)
        asyncio.run(_kill_in_idle_closes(settings, workers, outcome))
    return outcome


def test_killed_between_an_idle_closes_output_and_its_tombstones_it_closes_again(
        idle_killed, capsys):
    got = Deduped(idle_killed.canonical, "eventId")
    with capsys.disabled():
        print(f"\nidle close killed at {idle_killed.lives}: {len(idle_killed.canonical)} "
              f"records, {got.duplicates} duplicates")
    assert all(died for _, died in idle_killed.lives), idle_killed.lives
    # each life closed the sessions again with the same events: copies, no conflict
    assert not got.conflicts and got.duplicates > 0
    for sid, events in got.sessions.items():
        types = [e["type"] for e in events]
        assert types[-1] == "session.exited" and types.count("session.exited") == 1, sid
        assert [e["seq"] for e in events] == list(range(1, len(events) + 1)), sid
    assert idle_killed.left == {}, "sessions whose tombstone was never stored"


# ---------------------------------------------------------------------------
# Killed between a stall alert's output and its state
# ---------------------------------------------------------------------------


async def _kill_after_a_stall(settings: Settings, workers: Workers, key: bytes
                              ) -> tuple[bool, list[Any]]:
    from pipeline.tools.kafka_io import produce, records_from_file
    from tests.pipeline.test_stall import APPROVAL_CAPTURE, records, until

    raw = records_from_file(str(APPROVAL_CAPTURE), "capture")
    asked = until(records(), "request.opened")
    obs = await Observer(settings).start()
    try:
        await produce(settings, "codex", key.decode(), raw[:asked + 1])
        w = workers.start(settings, "stall-produced", env={
            "CANONFLOW_TEST_FAULTS": "1", "CANONFLOW_FAULT_STEP": "stall:produced"})
        for _ in range(int(240 / 0.1)):
            if not w.alive():
                break
            await asyncio.sleep(0.1)
        died = "killed at stall:produced" in Path(str(w.log_path)).read_text()
        w.kill()
        last = workers.start(settings, "stall-last")

        def stalls() -> int:
            return sum(b'"health":"stalled"' in r.value for r in obs.records[CANONICAL_TOPIC])

        # the restarted worker does not know the stall was said: it says it again
        await obs.wait_for(lambda: stalls() >= 2, timeout=180, alive=last.alive,
                           what="the stall said again")
        await produce(settings, "codex", key.decode(), raw[asked + 1:])
        await obs.wait_for(lambda: any(b'"type":"turn.completed"' in r.value
                                       for r in obs.records[CANONICAL_TOPIC]),
                           timeout=180, alive=last.alive, what="the turn's end")
        last.stop()
    finally:
        await obs.stop()
    return died, obs.records[CANONICAL_TOPIC]


def test_killed_between_a_stall_alert_and_its_state_the_stall_is_said_again_in_its_place(
        tmp_path):
    """Published, then stored: a worker killed between the two has published the stall
    event and not stored it. The restarted worker says the stall again, with the same
    seq and eventId (its waited time differs: a consumer that drops copies keeps the
    first), and the session goes on after it with the recovery and the rest."""
    key = b"stall-killed"
    with scenario(tmp_path, app_id="stall") as (settings, workers):
        settings = settings.replace(providers=("codex",), stall_approval=1.5,
                                    stall_model=0.0, stall_tool=0.0, stall_scan_interval=0.3)
        died, canonical = asyncio.run(_kill_after_a_stall(settings, workers, key))
    assert died
    got = Deduped(canonical, "eventId")
    stalled = [json.loads(r.value) for r in canonical if b'"health":"stalled"' in r.value]
    assert len(stalled) == 2 and len({s["eventId"] for s in stalled}) == 1
    assert {s["seq"] for s in stalled} == {stalled[0]["seq"]}
    assert set(got.conflicts) <= {stalled[0]["eventId"]}
    events = got.sessions[key.decode()]
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    health = [e["payload"].get("health") for e in events if e["type"] == "session.state.changed"]
    assert health == ["stalled", "recovered"]
    assert events[-1]["type"] == "turn.completed"
