"""SIGTERM while an agent sends its batch again (issue 25, the leftover of finding 1).

A batch whose output the cluster does not take is sent again, with a backoff growing
to RETRY_MAX_SECONDS, until it is delivered (pipeline.worker.output.OutputProducer).
A worker told to stop meanwhile stops sending it and exits in order: the batch is not
acknowledged, so the restarted worker reads it again and publishes what it made, with
the same eventIds. Real things only: an embedded broker, `canonflow run` child
processes whose canonical sends fail (tests/pipeline/failing_sends), SIGTERM.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path

import pytest

from pipeline.settings import Settings
from pipeline.worker.output import RETRY_MAX_SECONDS
from tests.pipeline.failing_sends.sitecustomize import FAILED_MARK, LOADED_MARK
from tests.pipeline.faults import (
    Deduped,
    Observer,
    Workers,
    assert_same,
    expected_canonical,
    expected_chat,
    interleave,
    produce_records,
    total,
    wait_for_log,
    workload,
)
from topics.catalog import CANONICAL_TOPIC, CHAT_TOPIC, DEADLETTER_TOPIC

# serial: it times the worker's exit (PROMPT_SECONDS), which other processes' load stretches
pytestmark = [pytest.mark.broker, pytest.mark.serial]

READY = "Worker ready"
#: What OutputProducer.publish logs before it sleeps its longest backoff: SIGTERM
#: comes right after it, so a worker that slept it out would take about that long.
LONGEST_BACKOFF = f"sending again in {RETRY_MAX_SECONDS:.1f}s"
#: What "promptly" means: the worker's whole orderly shutdown, 1 to 3 s measured here,
#: below the backoff. Before the fix, Faust's shutdown waited for the batch being sent
#: again, for good: the worker was killed (SIGKILL) after STOP_BOUND.
PROMPT_SECONDS = 8.0
#: SIGTERM, then SIGKILL after this many seconds (a worker that needs it is hung: -9).
STOP_BOUND = 60.0


def _failing_env(control: Path) -> dict[str, str]:
    return {"PYTHONPATH": os.pathsep.join([str(Path(__file__).parent / "failing_sends")]
                                          + [p for p in [os.environ.get("PYTHONPATH")] if p]),
            "TEST_FAILING_SENDS": str(control)}


def test_sigterm_during_a_batch_retry_exits_promptly_and_the_restart_publishes_it_once(
        settings: Settings, tmp_path: Path, capsys):
    work = workload(200, prefix="retry")
    canonical = expected_canonical(work)
    chat = expected_chat(canonical)
    live = settings.replace(log_level="info")
    control = tmp_path / "failing.json"
    control.write_text(json.dumps({"topics": [CANONICAL_TOPIC]}))
    workers = Workers(tmp_path)
    seen: dict[str, float | int | None] = {}

    async def scenario(obs: Observer) -> None:
        loop = asyncio.get_running_loop()
        w = workers.start(live, "failing", env=_failing_env(control))
        log = str(w.log_path)
        assert await wait_for_log(log, LOADED_MARK, timeout=30, alive=w.alive)
        assert await wait_for_log(log, READY, timeout=60, alive=w.alive)
        await produce_records(live, interleave(work))
        # in the retry loop, at the start of its longest backoff
        deadline = loop.time() + 90
        while LONGEST_BACKOFF not in open(log, errors="replace").read():
            assert loop.time() < deadline and w.alive(), f"no long backoff; see {log}"
            await asyncio.sleep(0.1)
        assert FAILED_MARK in open(log, errors="replace").read()
        t0 = time.monotonic()
        seen["status"] = await loop.run_in_executor(None, w.stop, STOP_BOUND)
        seen["exit seconds"] = time.monotonic() - t0
        seen["canonical before restart"] = len(obs.records[CANONICAL_TOPIC])

        w = workers.start(live, "restarted")
        await obs.wait_for(lambda: obs.unique(CANONICAL_TOPIC) >= total(canonical)
                           and obs.unique(CHAT_TOPIC) >= total(chat),
                           timeout=120, alive=w.alive, what="every expected output")
        await asyncio.sleep(1.5)  # extra records (beyond the expected) would show up here
        seen["second status"] = await loop.run_in_executor(None, w.stop, STOP_BOUND)

    async def run() -> Observer:
        obs = await Observer(live).start()
        try:
            await scenario(obs)
            return obs
        finally:
            await obs.stop()

    try:
        obs = asyncio.run(run())
    finally:
        workers.stop_all()
    with capsys.disabled():
        print(f"\nSIGTERM in a batch's retry loop: exit {seen['status']} after "
              f"{seen['exit seconds']:.1f} s; {seen['canonical before restart']} canonical "
              f"records out before the restart")
    assert seen["status"] == 0, f"see {workers.started[0].log_path}"
    assert seen["exit seconds"] is not None and seen["exit seconds"] < PROMPT_SECONDS, \
        f"SIGTERM took {seen['exit seconds']:.1f} s; see {workers.started[0].log_path}"
    assert seen["canonical before restart"] == 0, "a failing canonical send was delivered"
    assert seen["second status"] == 0
    got_canonical = Deduped(obs.records[CANONICAL_TOPIC], "eventId")
    assert_same(got_canonical, canonical, "agents.canonical")
    assert_same(Deduped(obs.records[CHAT_TOPIC], "event_id"), chat, "agents.chat")
    assert obs.records[DEADLETTER_TOPIC] == []
    for w in workers.started:
        text = open(str(w.log_path), errors="replace").read()
        assert "Traceback" not in text, f"an error during shutdown; see {w.log_path}"
