"""codex-transcript: every on-disk run (tests/fixtures/ondisk/{codex-app-server,codex-exec,
acp-codex}/<scenario>/) read from its rollout file gives the assistant texts, the tool
calls with their outputs, the errors and the turns of the live wire transcript of the
same run (`live.jsonl`, through that wire's own adapter), less exactly what a rollout
cannot show (CANNOT_SHOW, per runtime).

The rollout of each run is fed three ways (whole, record by record with the state
encoded between records, resumed at every cut: tests/adapters/harness.py)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from adapters import Line
from adapters.codex_transcript.items import v2_item
from tests.adapters.harness import (
    assert_envelope_invariants,
    assert_three_ways,
    events_of,
    read_capture,
    read_native,
    run_whole,
)

ONDISK = Path(__file__).resolve().parents[1] / "fixtures" / "ondisk"
#: the wire of each runtime, and the provider that reads it
WIRES = {"codex-app-server": "codex", "codex-exec": "codex-exec", "acp-codex": "acp"}
RUNS = sorted(p for r in WIRES for p in (ONDISK / r).glob("*") if (p / "live.jsonl").exists())
IDS = [f"{p.parent.name}/{p.name}" for p in RUNS]

Essence = dict[str, Any]


def rollout(run: Path) -> Path:
    (path,) = sorted(run.glob(".codex/sessions/*/*/*/rollout-*.jsonl"))
    return path


def thread_id(run: Path) -> str:
    meta = json.loads(rollout(run).read_bytes().splitlines()[0])
    return meta["payload"]["id"]


def disk_events(run: Path) -> list[dict[str, Any]]:
    return events_of(run_whole("codex-transcript", read_native(rollout(run)), thread_id(run)))


def live_events(run: Path) -> list[dict[str, Any]]:
    return events_of(run_whole(WIRES[run.parent.name], read_capture(run / "live.jsonl"),
                               thread_id(run)))


# ---- what a reader compares ---------------------------------------------------------


def essence(events: list[dict[str, Any]]) -> Essence:
    """Assistant texts (per item, in order), tool calls with their outputs, fatal errors,
    retried errors, approval requests, and the turns with how they ended. An ACP turn
    `cancelled` is Codex's `interrupted` (the same end, in ACP's word)."""
    texts: dict[str, str] = {}
    tools, errors, turns = [], [], []
    retries = requests = 0
    for e in events:
        t, p = e["type"], e.get("payload", {})
        if t == "content.delta" and p["streamKind"] == "assistant_text":
            texts[e["itemId"]] = texts.get(e["itemId"], "") + p["delta"]
        elif t == "item.completed" and "toolName" in p:
            tools.append((p["toolName"], p.get("command"), p["status"], p.get("output"),
                          p.get("isError")))
        elif t == "runtime.error":
            if p["willRetry"]:
                retries += 1
            elif p["message"] not in errors:  # codex exec says a fatal error twice
                errors.append(p["message"])
        elif t == "request.opened":
            requests += 1
        elif t == "turn.completed":
            state = "interrupted" if p["state"] == "cancelled" else p["state"]
            turns.append((state, p.get("errorMessage")))
    return {"texts": list(texts.values()), "tools": tools, "errors": errors,
            "retries": retries, "requests": requests, "turns": turns}


# ---- what a rollout cannot show, as what it takes from the live essence ---------------


def no_approvals(live: Essence, events: list[dict[str, Any]]) -> Essence:
    """Approval requests and the user's decisions are not written at all."""
    return {**live, "requests": 0}


def no_retries(live: Essence, events: list[dict[str, Any]]) -> Essence:
    """Errors that were retried (`error` with willRetry, "Reconnecting... 1/1")."""
    return {**live, "retries": 0}


def no_cut_text(live: Essence, events: list[dict[str, Any]]) -> Essence:
    """The partial text of the message an interrupt cut off: it is not persisted."""
    cut = set()
    last: dict[str, Any] = {}
    for e in events:
        if e["type"] == "item.started":
            last[e.get("turnId")] = e
        if e["type"] == "turn.completed" and e["payload"]["state"] in ("interrupted", "cancelled"):
            item = last.get(e.get("turnId"))
            if item is not None and item["payload"]["itemType"] == "assistant_message":
                cut.add(item["itemId"])
    texts: dict[str, str] = {}
    for e in events:
        if e["type"] == "content.delta" and e["payload"]["streamKind"] == "assistant_text":
            texts[e["itemId"]] = texts.get(e["itemId"], "") + e["payload"]["delta"]
    return {**live, "texts": [t for i, t in texts.items() if i not in cut]}


def aborted_call_failed(live: Essence, events: list[dict[str, Any]]) -> Essence:
    """A call refused with "abort" (ACP: reject, ending the turn) is only its output
    `aborted by user`, the same as a call cut off by an interrupt: failed, not declined."""
    tools = [(name, cmd, "failed", out, True) if status == "declined" else
             (name, cmd, status, out, err) for name, cmd, status, out, err in live["tools"]]
    return {**live, "tools": tools}


def no_turn_error(live: Essence, events: list[dict[str, Any]]) -> Essence:
    """Codex 0.137 writes no error for a failed turn: `task_complete` with no `error`
    (runs kept in the held-out set, FORMATS.md), so the turn reads as completed."""
    turns = [("completed", None) if state == "failed" else (state, error)
             for state, error in live["turns"]]
    return {**live, "turns": turns, "errors": []}


CANNOT_SHOW: dict[str, list[Callable[[Essence, list[dict[str, Any]]], Essence]]] = {
    "codex-app-server": [no_approvals, no_retries, no_cut_text],
    "codex-exec": [no_retries],
    "acp-codex": [no_approvals, no_cut_text, aborted_call_failed, no_turn_error],
}


@pytest.mark.parametrize("run", RUNS, ids=IDS)
def test_the_rollout_shows_the_live_conversation_less_what_it_cannot_keep(run: Path):
    live_all = live_events(run)
    expected = essence(live_all)
    for loss in CANNOT_SHOW[run.parent.name]:
        expected = loss(expected, live_all)
    assert essence(disk_events(run)) == expected


def test_every_loss_listed_is_seen_in_a_run_kept_here():
    """Not more than the runs show: each listed loss changes the live essence of some
    run kept here, except no_turn_error (a held-out run, FORMATS.md)."""
    for runtime, losses in CANNOT_SHOW.items():
        runs = [r for r in RUNS if r.parent.name == runtime]
        for loss in losses:
            if loss is no_turn_error:
                continue
            changed = [r for r in runs
                       if loss(essence(ev := live_events(r)), ev) != essence(ev)]
            assert changed, f"{runtime}: {loss.__name__} changes no run"


# ---- the same ids, the same lifecycle ------------------------------------------------


@pytest.mark.parametrize("run", [r for r in RUNS if r.parent.name == "codex-app-server"],
                         ids=[i for i in IDS if i.startswith("codex-app-server/")])
def test_the_rollout_gives_the_app_servers_own_turn_and_item_ids(run: Path):
    """Same Codex ids, same session id: the same canonical ids as the live stream (the
    message an interrupt cut off, which the rollout does not keep, aside)."""
    def ids(events: list[dict[str, Any]]) -> tuple[list[str], list[str]]:
        return ([e["turnId"] for e in events if e["type"] == "turn.started"],
                [e["itemId"] for e in events if e["type"] == "item.completed"
                 and e["payload"]["itemType"] in ("assistant_message", "command_execution")
                 and e["payload"]["status"] != "failed"])
    assert ids(disk_events(run)) == ids(live_events(run))


@pytest.mark.parametrize("run", RUNS, ids=IDS)
def test_every_item_has_started_one_whole_delta_and_completed(run: Path):
    events = disk_events(run)
    assert_envelope_invariants(events)
    for item in {e["itemId"] for e in events if e["type"] == "item.completed"}:
        kinds = [e["type"] for e in events if e.get("itemId") == item]
        assert kinds[0] == "item.started" and kinds[-1] == "item.completed"
        assert kinds.count("content.delta") <= 1, kinds
        done = next(e for e in events if e["type"] == "item.completed" and e["itemId"] == item)
        if done["payload"]["itemType"] == "assistant_message":
            delta = next(e for e in events if e["type"] == "content.delta" and e["itemId"] == item)
            assert delta["payload"]["delta"] == done["payload"]["text"]


@pytest.mark.parametrize("run", RUNS, ids=IDS)
def test_the_rollout_fed_three_ways_gives_the_same_events(run: Path):
    assert_three_ways("codex-transcript", read_native(rollout(run)), thread_id(run))


def test_times_come_from_the_rollout():
    run = ONDISK / "codex-app-server" / "tool_shell"
    stamps = {json.loads(ln)["timestamp"] for ln in rollout(run).read_bytes().splitlines()}
    assert {e["createdAt"] for e in disk_events(run)} <= stamps


# ---- the v2 items, against the app-server's own projection -----------------------------


def _projected() -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(item_completed item of the rollout, thread_items.item_json) of the same item id."""
    pairs = []
    for run in RUNS:
        rows = run / ".codex" / "thread_history_1.sqlite.rows.jsonl"
        if not rows.exists():
            continue
        stored = {r["row"]["item_id"]: json.loads(r["row"]["item_json"])
                  for r in map(json.loads, rows.read_text().splitlines())
                  if r["table"] == "thread_items"}
        for line in rollout(run).read_text().splitlines():
            obj = json.loads(line)
            if obj["payload"].get("type") == "item_completed":
                pairs.append((obj["payload"]["item"], stored[obj["payload"]["item"]["id"]]))
    return pairs


def test_rollout_items_become_the_app_servers_v2_items():
    pairs = _projected()
    assert {v["type"] for _, v in pairs} >= {"userMessage", "agentMessage", "reasoning",
                                             "commandExecution"}
    for core, stored in pairs:
        mine = v2_item(core)
        assert {k: v for k, v in mine.items() if v is not None} == {
            k: stored.get(k) for k, v in mine.items() if v is not None}, core["type"]


def test_an_item_completed_again_adds_nothing():
    """A rollout is appended to, never rewritten; an item said twice (a copied line
    without ordinal) keeps what was published and says nothing more."""
    lines = read_native(rollout(ONDISK / "acp-codex" / "text"))
    agent = next(ln for ln in lines if b'"agent_message"' in ln.data)
    item = json.loads(agent.data)
    item["payload"] = {"type": "item_completed", "item": {
        "type": "AgentMessage", "id": "msg_1", "content": [{"type": "Text", "text": "Hi."}]}}
    again = Line(json.dumps(item).encode())
    at = lines.index(agent) + 1
    once = events_of(run_whole("codex-transcript", [*lines[:at], again, *lines[at:]]))
    twice = events_of(run_whole("codex-transcript", [*lines[:at], again, again, *lines[at:]]))
    assert [e["type"] for e in twice] == [e["type"] for e in once]
    assert essence(once)["texts"].count("Hi.") == 1
