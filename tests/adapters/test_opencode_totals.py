"""opencode: the thread's running token total. Each turn's turn.completed carries the turn's
tokens; a thread.token-usage.updated just before it carries the thread's total so far, per
OpenCode session (a canonical thread), and a resumed session keeps counting."""

from __future__ import annotations

from typing import Any

from tests.adapters.harness import assert_three_ways, capture_lines, events_of
from tests.adapters.test_opencode_agents import _ev, _message, _part, _prompt, _session, _status


def _step(sid: str, mid: str, pid: str, inp: int, out: int, read: int = 0):
    return _part(sid, mid, pid, "step-finish", reason="stop", cost=0.5,
                 tokens={"input": inp, "output": out, "reasoning": 1,
                         "cache": {"read": read, "write": 0}})


def _turn(sid: str, n: int, steps: list[tuple[str, dict[str, Any]]]):
    return [*_prompt(sid, f"msg_{sid}_u{n}", f"prompt {n}"),
            _message(sid, f"msg_{sid}_a{n}", "assistant"), *steps, _status(sid, "idle")]


def _totals(events: list[dict[str, Any]]) -> list[tuple[str, dict[str, int]]]:
    """(threadId, tokens) of each update that carries the thread's total."""
    return [(e["threadId"], e["payload"]["tokens"]) for e in events
            if e["type"] == "thread.token-usage.updated" and "tokens" in e["payload"]]


def test_two_turns_totals_add_up_and_a_repeated_step_counts_once():
    first = _step("ses_1", "msg_ses_1_a1", "prt_s1", 100, 10, read=50)
    lines = capture_lines([
        _ev("server.connected"), _session("ses_1"),
        # the first turn's step-finish sent twice (OpenCode re-sends finished parts)
        *_turn("ses_1", 1, [first, first]),
        *_turn("ses_1", 2, [_step("ses_1", "msg_ses_1_a2", "prt_s2", 200, 20),
                            _step("ses_1", "msg_ses_1_a2", "prt_s3", 300, 30)]),
    ])
    events = events_of(assert_three_ways("opencode", lines))
    turns = [e["payload"]["tokens"] for e in events if e["type"] == "turn.completed"]
    assert turns == [
        {"input": 150, "cachedInput": 50, "cacheWrite": 0, "output": 11, "reasoningOutput": 1,
         "total": 161},
        {"input": 500, "cachedInput": 0, "cacheWrite": 0, "output": 52, "reasoningOutput": 2,
         "total": 552},
    ]
    totals = [t for _, t in _totals(events)]
    assert totals == [turns[0], {"input": 650, "cachedInput": 50, "cacheWrite": 0,
                                 "output": 63, "reasoningOutput": 3, "total": 713}]
    # each total goes out right before its turn.completed, with the turn's native usage
    for i, e in enumerate(events):
        if e["type"] == "thread.token-usage.updated" and "tokens" in e["payload"]:
            done = events[i + 1]
            assert done["type"] == "turn.completed" and done["turnId"] == e["turnId"]
            assert e["payload"]["usage"]["turn"]["cost"] == done["payload"]["totalCostUsd"]


def test_each_opencode_session_has_its_own_total_and_a_turn_without_usage_adds_none():
    lines = capture_lines([
        _ev("server.connected"), _session("ses_a"), _session("ses_b"),
        *_turn("ses_a", 1, [_step("ses_a", "msg_ses_a_a1", "prt_a1", 10, 1)]),
        *_turn("ses_b", 1, [_step("ses_b", "msg_ses_b_a1", "prt_b1", 20, 2)]),
        *_turn("ses_a", 2, []),  # no step-finish: no usage, no total
        *_turn("ses_a", 3, [_step("ses_a", "msg_ses_a_a3", "prt_a3", 30, 3)]),
    ])
    events = events_of(assert_three_ways("opencode", lines))
    threads = {e["payload"]["providerThreadId"]: e["threadId"] for e in events
               if e["type"] == "thread.started"}
    got = [(t, tokens["total"]) for t, tokens in _totals(events)]
    # total = input + output + reasoning (OpenCode leaves reasoning out of output)
    assert got == [(threads["ses_a"], 12), (threads["ses_b"], 23), (threads["ses_a"], 12 + 34)]
    completed = [e["payload"].get("tokens") for e in events if e["type"] == "turn.completed"]
    assert [c["total"] if c else None for c in completed] == [12, 23, None, 34]
