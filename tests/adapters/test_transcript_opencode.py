"""opencode-transcript: every on-disk run (tests/fixtures/ondisk/opencode-{serve,run}/<scenario>/)
read from its database gives the assistant texts, the tool calls with their outputs,
the errors and the turns of the live wire transcript of the same run, less exactly what
the database cannot show (CANNOT_SHOW, per runtime).

The database is read as the readers read it: the rows of the tables
`adapters.opencode_transcript.TABLES` names, from `<db>.rows.jsonl`, per session in
their order. `opencode serve`'s wire (`GET /event`) is read by its own adapter
(`opencode`); `opencode run --format json` has none, so its lines are read here
(`run_essence`). Every run is fed three ways (tests/adapters/harness.py)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from adapters import Line
from adapters.opencode_transcript import TABLES
from tests.adapters.harness import (
    assert_envelope_invariants,
    assert_three_ways,
    events_of,
    read_capture,
    run_whole,
)

ONDISK = Path(__file__).resolve().parents[1] / "fixtures" / "ondisk"
RUNTIMES = ("opencode-serve", "opencode-run")
RUNS = sorted(p for r in RUNTIMES for p in (ONDISK / r).glob("*") if (p / "live.jsonl").exists())
IDS = [f"{p.parent.name}/{p.name}" for p in RUNS]
DB = Path(".local/share/opencode/opencode.db.rows.jsonl")

Essence = dict[str, Any]


def rows(run: Path) -> dict[str, list[Line]]:
    """The records of each session, as the reader sends them (TABLES: which tables, how
    a row names its session, in what order)."""
    dumped = [json.loads(ln) for ln in (run / DB).read_text().splitlines()]
    out: dict[str, list[Line]] = {}
    for table, session, order in TABLES:
        # the fixtures' expressions are plain columns
        got = sorted((r["row"] for r in dumped if r["table"] == table),
                     key=lambda row: (row[session], row[order]))
        for row in got:
            out.setdefault(row[session], []).append(
                Line(json.dumps({"table": table, "row": row}).encode()))
    return out


def session_rows(run: Path) -> tuple[str, list[Line]]:
    ((sid, lines),) = rows(run).items()  # one session per run
    return sid, lines


def disk_events(run: Path) -> list[dict[str, Any]]:
    sid, lines = session_rows(run)
    return events_of(run_whole("opencode-transcript", lines, sid))


def essence(events: list[dict[str, Any]]) -> Essence:
    """Assistant texts (per item), tool calls with outputs, fatal errors, retried errors,
    approval requests, and the turns with how they ended."""
    texts: dict[str, str] = {}
    tools, errors, turns = [], [], []
    retries = requests = 0
    for e in events:
        t, p = e["type"], e.get("payload", {})
        if t == "content.delta" and p["streamKind"] == "assistant_text":
            texts[e["itemId"]] = texts.get(e["itemId"], "") + p["delta"]
        elif t == "item.completed" and "toolName" in p:
            tools.append((p["toolName"], p.get("command"), p["status"], p.get("output")))
        elif t == "runtime.error":
            if p["willRetry"]:
                retries += 1
            else:
                errors.append(p["message"])
        elif t == "request.opened":
            requests += 1
        elif t == "turn.completed":
            turns.append((p["state"], p.get("errorMessage")))
    return {"texts": list(texts.values()), "tools": tools, "errors": errors,
            "retries": retries, "requests": requests, "turns": turns}


def run_essence(run: Path) -> Essence:
    """The essence of `opencode run --format json` lines (step_start, text, tool_use,
    step_finish, error): the run ends its one turn completed unless an error line says
    otherwise."""
    texts, tools, errors = [], [], []
    for line in (run / "live.jsonl").read_text().splitlines():
        msg = json.loads(line)["msg"]
        part = msg.get("part", {})
        if msg["type"] == "text":
            texts.append(part["text"])
        elif msg["type"] == "tool_use":
            state = part["state"]
            name = {"bash": "Bash"}.get(part["tool"], part["tool"])
            tools.append((name, state["input"].get("command"), state["status"],
                          state.get("output", state.get("error"))))
        elif msg["type"] == "error":
            errors.append(msg["error"].get("data", {}).get("message", ""))
    turn = ("failed", errors[-1]) if errors else ("completed", None)
    return {"texts": texts, "tools": tools, "errors": errors, "retries": 0, "requests": 0,
            "turns": [turn]}


def live_essence(run: Path) -> tuple[Essence, list[dict[str, Any]]]:
    if run.parent.name == "opencode-run":
        return run_essence(run), []
    events = events_of(run_whole("opencode", read_capture(run / "live.jsonl"),
                                 session_rows(run)[0]))
    return essence(events), events


# ---- what the database cannot show, as what it takes from the live essence -------------


def no_approvals(live: Essence, events: list[dict[str, Any]]) -> Essence:
    """permission.asked / permission.replied are not kept (the `permission` table stays
    empty): only the refused tool part's error remains."""
    return {**live, "requests": 0}


def no_retries(live: Essence, events: list[dict[str, Any]]) -> Essence:
    """`session.status` retry is not kept: the retries are only in the server log."""
    return {**live, "retries": 0}


CANNOT_SHOW: dict[str, list[Callable[[Essence, list[dict[str, Any]]], Essence]]] = {
    "opencode-serve": [no_approvals, no_retries],
    "opencode-run": [],
}


@pytest.mark.parametrize("run", RUNS, ids=IDS)
def test_the_database_shows_the_live_conversation_less_what_it_cannot_keep(run: Path):
    expected, events = live_essence(run)
    for loss in CANNOT_SHOW[run.parent.name]:
        expected = loss(expected, events)
    assert essence(disk_events(run)) == expected


def test_every_loss_listed_is_seen_in_a_run_kept_here():
    for runtime, losses in CANNOT_SHOW.items():
        for loss in losses:
            changed = [r for r in RUNS if r.parent.name == runtime
                       and loss(*(got := live_essence(r))) != got[0]]
            assert changed, f"{runtime}: {loss.__name__} changes no run"


# ---- the same ids, the same lifecycle ------------------------------------------------


@pytest.mark.parametrize("run", [r for r in RUNS if r.parent.name == "opencode-serve"],
                         ids=[i for i in IDS if i.startswith("opencode-serve/")])
def test_the_database_gives_the_buses_own_turn_and_item_ids(run: Path):
    _, live = live_essence(run)

    def ids(events: list[dict[str, Any]]) -> tuple[list[str], list[str]]:
        return ([e["turnId"] for e in events if e["type"] == "turn.started"],
                [e["itemId"] for e in events if e["type"] == "item.completed"])
    assert ids(disk_events(run)) == ids(live)


@pytest.mark.parametrize("run", RUNS, ids=IDS)
def test_every_text_item_has_one_whole_delta(run: Path):
    events = disk_events(run)
    assert_envelope_invariants(events)
    for done in (e for e in events if e["type"] == "item.completed"
                 and e["payload"]["itemType"] in ("assistant_message", "reasoning")):
        deltas = [e for e in events if e["type"] == "content.delta"
                  and e.get("itemId") == done["itemId"]]
        assert [d["payload"]["delta"] for d in deltas] == [done["payload"]["text"]]


def test_the_database_keeps_the_reasoning_and_prompt_the_run_wire_never_prints():
    run = ONDISK / "opencode-run" / "tool_shell"
    kinds = {e["payload"]["itemType"] for e in disk_events(run) if e["type"] == "item.completed"}
    assert {"user_message", "assistant_message", "command_execution"} <= kinds


@pytest.mark.parametrize("run", RUNS, ids=IDS)
def test_the_database_fed_three_ways_gives_the_same_events(run: Path):
    sid, lines = session_rows(run)
    assert_three_ways("opencode-transcript", lines, sid)


def test_rows_of_tables_it_does_not_read_are_warnings_not_errors():
    row = Line(json.dumps({"table": "part", "row": {"id": "prt_1", "data": "{}"}}).encode())
    (event,) = events_of(run_whole("opencode-transcript", [row], "ses_1"))
    assert event["type"] == "runtime.warning"
