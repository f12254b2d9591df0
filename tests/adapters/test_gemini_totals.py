"""gemini: the thread's running token total. One run is one turn: its `result` stats are
the turn's tokens, and the thread.token-usage.updated of that result carries the thread's
total so far (`tokens`); a resumed session (the same `session_id`) keeps counting, a new
one starts its own."""

from __future__ import annotations

from typing import Any

from tests.adapters.harness import assert_three_ways, capture_lines, events_of


def _run(sid: str, inp: int, out: int, cached: int = 0) -> list[tuple[str, dict[str, Any]]]:
    ts = "2026-08-21T10:00:00.000Z"
    return [("agent", m) for m in (
        {"type": "init", "timestamp": ts, "session_id": sid, "model": "gemini-2.5-pro"},
        {"type": "message", "timestamp": ts, "role": "user", "content": "hi"},
        {"type": "message", "timestamp": ts, "role": "assistant", "content": "hello",
         "delta": True},
        {"type": "result", "timestamp": ts, "status": "success",
         "stats": {"total_tokens": inp + out, "input_tokens": inp, "output_tokens": out,
                   "cached": cached, "input": inp - cached, "duration_ms": 5,
                   "tool_calls": 0}},
    )]


def _updates(events: list[dict[str, Any]]) -> list[tuple[str, int, int]]:
    """(threadId, total of the thread, total of the turn) per result."""
    turns = [e["payload"]["tokens"]["total"] for e in events
             if e["type"] == "turn.completed" and "tokens" in e["payload"]]
    totals = [(e["threadId"], e["payload"]["tokens"]["total"]) for e in events
              if e["type"] == "thread.token-usage.updated"]
    return [(t, total, turn) for (t, total), turn in zip(totals, turns, strict=True)]


def test_resumed_runs_add_up_and_a_new_session_counts_from_zero():
    lines = capture_lines([*_run("s-a", 100, 10, cached=40), *_run("s-a", 200, 20),
                           *_run("s-b", 7, 3), *_run("s-b", 1, 1)])
    events = events_of(assert_three_ways("gemini", lines))
    threads = list(dict.fromkeys(e["threadId"] for e in events if "threadId" in e))
    assert _updates(events) == [(threads[0], 110, 110), (threads[0], 330, 220),
                                (threads[1], 10, 10), (threads[1], 12, 2)]
    first = next(e for e in events if e["type"] == "thread.token-usage.updated")
    assert first["payload"]["tokens"] == {"input": 100, "cachedInput": 40, "cacheWrite": 0,
                                          "output": 10, "reasoningOutput": 0, "total": 110}


def test_a_result_without_stats_adds_nothing():
    run = _run("s-a", 100, 10)
    bare = [*run[:3], ("agent", {"type": "result", "timestamp": "t", "status": "success"})]
    events = events_of(assert_three_ways("gemini", capture_lines([*run, *bare, *run])))
    assert [total for _, total, _ in _updates(events)] == [110, 220]
