"""A session file nobody writes any more is over: `canonflow import` closes a session
whose files have been quiet for longer than the idle timeout as the worker's idle close
closes a session without records (adapters.close_session), with the same events and
ids whichever path ran.

The last turn completes when its last item is the agent's completed answer and nothing
is open (the runtime said all it had to say; only the file keeps no turn end: Gemini
CLI's chats, Claude Code 2.1.44's rows), and is interrupted otherwise."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from pipeline.settings import Settings
from pipeline.tools.importer import run_import
from pipeline.worker.process import WorkerProcess
from tests.transcripts.helpers import all_pairs, home_of
from tests.transcripts.test_ship import (
    ShipperProcess,
    by_event_id,
    read_until,
    shipped_to,
    wait_until,
)
from topics.catalog import CANONICAL_TOPIC

#: the runtimes whose files keep no end of their last turn
ENDLESS = ("gemini-stream-json", "acp-gemini", "acp-claude-code")
PAIRS = [p for p in all_pairs() if p.parent.name in ENDLESS]


def imported(home: Path) -> list[dict[str, Any]]:
    out, err = io.BytesIO(), io.BytesIO()
    run_import([str(home)], out, err, say=lambda s: None)
    return [json.loads(x) for x in out.getvalue().splitlines()]


def ends(events: list[dict[str, Any]]) -> dict[str, list[Any]]:
    """Per session: its turns' end states in order (None: never ended), and whether it
    exited."""
    out: dict[str, list[Any]] = {}
    for sid in dict.fromkeys(e["sessionId"] for e in events):
        mine = [e for e in events if e["sessionId"] == sid]
        done = {e["turnId"]: e["payload"]["state"] for e in mine if e["type"] == "turn.completed"}
        out[sid] = [done.get(e["turnId"]) for e in mine if e["type"] == "turn.started"]
        out[sid].append(any(e["type"] == "session.exited" for e in mine))
    return out


def last_item_is_an_answer(events: list[dict[str, Any]]) -> bool:
    items = [e for e in events if e["type"] in ("item.started", "item.completed")]
    return bool(items) and items[-1]["type"] == "item.completed" and (
        items[-1]["payload"]["itemType"] == "assistant_message"
        and items[-1]["payload"]["status"] == "completed")


@pytest.mark.parametrize("pair", PAIRS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_a_quiet_file_ends_its_last_turn_and_its_session(pair: Path, tmp_path: Path,
                                                        monkeypatch):
    home = home_of(pair, tmp_path)
    monkeypatch.setenv("CANONFLOW_IDLE_TIMEOUT", "3600")
    kept = imported(home)  # files younger than an hour: nothing closed
    monkeypatch.setenv("CANONFLOW_IDLE_TIMEOUT", "0.001")
    closed = imported(home)
    for sid, states in ends(closed).items():
        assert None not in states[:-1] and states[-1] is True, (sid, states)
        mine = [e for e in kept if e["sessionId"] == sid]
        theirs = [e for e in closed if e["sessionId"] == sid]
        assert theirs[:len(mine)] == mine  # the same events, then the close
        extra = theirs[len(mine):]
        assert extra and all(e["synthetic"] for e in extra)
        if None in ends(mine)[sid][:-1]:  # the turn the file left open ends by the rule
            rule = "completed" if last_item_is_an_answer(mine) else "interrupted"
            assert states[-2] == rule, (sid, states)


@pytest.mark.parametrize("runtime", ENDLESS)
def test_each_listed_runtime_leaves_a_turn_open_in_its_files(runtime: str, tmp_path: Path,
                                                             monkeypatch):
    """What the close is for: each runtime listed has a file whose last turn the file
    never ends (else it has no reason to be listed)."""
    monkeypatch.setenv("CANONFLOW_IDLE_TIMEOUT", "3600")
    opened = [p for p in PAIRS if p.parent.name == runtime and any(
        None in states[:-1] for states in ends(imported(home_of(p, tmp_path))).values())]
    assert opened, f"every {runtime} file ends its turns"


def test_a_file_still_written_is_not_closed(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("CANONFLOW_IDLE_TIMEOUT", "3600")
    home = home_of(PAIRS[0], tmp_path)
    assert not any(e["type"] == "session.exited" for e in imported(home))


def test_the_import_and_the_workers_idle_close_give_the_same_closing_events(
        settings: Settings, tmp_path: Path, monkeypatch):
    """A finished Gemini session shipped to a worker that closes sessions idle for two
    seconds, and the same files imported with that idle timeout: every event equal,
    eventId and createdAt included, the close too."""
    pair = next(p for p in PAIRS if p.parent.name == "gemini-stream-json")
    home = home_of(pair, tmp_path)
    quick = settings.replace(idle_timeout=2.0, idle_scan_interval=0.5)
    worker = WorkerProcess(quick, log_path=str(tmp_path / "worker.log")).start()
    try:
        cp, log = tmp_path / "ship.json", tmp_path / "ship.log"
        ship = ShipperProcess(quick, home, cp, log).start()
        try:
            files = sorted(home.rglob("session-*.jsonl"))
            wait_until("shipped", lambda: all(shipped_to(cp, f) for f in files), log=log)
        finally:
            assert ship.stop() == 0, log.read_text()
        monkeypatch.setenv("CANONFLOW_IDLE_TIMEOUT", "2")
        want = {e["eventId"]: e for e in imported(home)}
        assert any(e["type"] == "session.exited" for e in want.values())
        got = by_event_id(read_until(quick, CANONICAL_TOPIC,
                                     lambda recs: want.keys() <= by_event_id(recs).keys(),
                                     worker))
    finally:
        worker.stop()
    assert got == want
