"""acp: the thread's running token total (README "Token usage"): each session/prompt
result's `usage` is the turn's (`tokens` on turn.completed), and the thread.token-usage.updated
of the same result carries the thread's total so far. Fed whole, record by record and
resumed at every cut (the total lives in the stored state)."""

from __future__ import annotations

from typing import Any

from tests.adapters.harness import assert_three_ways, capture_lines, events_of

SID = "sess_1"


def _rpc(**m: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", **m}


def _turn(rid: int, result: dict[str, Any], sid: str = SID) -> list[tuple[str, Any]]:
    return [("client", _rpc(id=rid, method="session/prompt", params={
                "sessionId": sid, "prompt": [{"type": "text", "text": f"turn {rid}"}]})),
            ("agent", _rpc(method="session/update", params={"sessionId": sid, "update": {
                "sessionUpdate": "agent_message_chunk",
                "content": {"type": "text", "text": f"answer {rid}"}}})),
            ("agent", _rpc(id=rid, result={"stopReason": "end_turn", **result}))]


def _new(rid: int, sid: str = SID) -> list[tuple[str, Any]]:
    return [("client", _rpc(id=rid, method="session/new", params={"cwd": "/w", "mcpServers": []})),
            ("agent", _rpc(id=rid, result={"sessionId": sid}))]


def _usage(inp: int, out: int, read: int = 0, write: int = 0, thought: int = 0) -> dict[str, Any]:
    return {"usage": {"inputTokens": inp, "outputTokens": out, "cachedReadTokens": read,
                      "cachedWriteTokens": write, "thoughtTokens": thought,
                      "totalTokens": inp + out + read + write + thought}}


def _tokens(inp: int, out: int, cached: int = 0, write: int = 0, reasoning: int = 0
            ) -> dict[str, int]:
    return {"input": inp, "cachedInput": cached, "cacheWrite": write, "output": out,
            "reasoningOutput": reasoning, "total": inp + out}


def _of(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e["payload"] for e in events if e["type"] == kind]


def test_two_turns_add_up_to_the_threads_total():
    lines = capture_lines([*_new(1), *_turn(2, _usage(350, 180, 600, 50, 120)),
                           *_turn(3, _usage(100, 20))])
    events = events_of(assert_three_ways("acp", lines))
    first, second = _tokens(1000, 300, 600, 50, 120), _tokens(100, 20)
    assert [p["tokens"] for p in _of(events, "turn.completed")] == [first, second]
    updates = _of(events, "thread.token-usage.updated")
    assert [p["tokens"] for p in updates] == [first, _tokens(1100, 320, 600, 50, 120)]
    assert updates[1]["usage"] == _usage(100, 20)["usage"]  # the native object, untouched
    # each total goes out right before its turn's end
    kinds = [e["type"] for e in events]
    assert [kinds[i + 1] for i, k in enumerate(kinds) if k == "thread.token-usage.updated"] == [
        "turn.completed", "turn.completed"]


def test_the_same_result_twice_is_counted_once():
    turn = _turn(2, _usage(10, 5))
    lines = capture_lines([*_new(1), *turn, turn[-1], *_turn(3, _usage(1, 1))])
    events = events_of(assert_three_ways("acp", lines))
    assert [p["tokens"]["total"] for p in _of(events, "thread.token-usage.updated")] == [15, 17]
    assert [p["tokens"]["total"] for p in _of(events, "turn.completed")] == [15, 2]


def test_gemini_quota_counts_and_a_usage_update_do_not_mix():
    quota = {"_meta": {"quota": {"token_count": {"input_tokens": 1000, "output_tokens": 300},
                                 "model_usage": []}}}
    usage_update = ("agent", _rpc(method="session/update", params={"sessionId": SID, "update": {
        "sessionUpdate": "usage_update", "used": 5000, "size": 200000}}))
    lines = capture_lines([*_new(1), *_turn(2, quota), usage_update, *_turn(3, quota)])
    events = events_of(assert_three_ways("acp", lines))
    updates = _of(events, "thread.token-usage.updated")
    assert [p.get("tokens", {}).get("total") for p in updates] == [1300, None, 2600]
    assert updates[1]["usage"] == {"used": 5000, "size": 200000}


def test_each_session_of_a_connection_keeps_its_own_total():
    lines = capture_lines([*_new(1), *_turn(2, _usage(10, 1)), *_new(3, "sess_2"),
                           *_turn(4, _usage(20, 2), "sess_2"), *_turn(5, _usage(30, 3))])
    events = events_of(assert_three_ways("acp", lines))
    totals = [(e["threadId"], e["payload"]["tokens"]["total"]) for e in events
              if e["type"] == "thread.token-usage.updated"]
    first, second = totals[0][0], totals[1][0]
    assert first != second
    assert totals == [(first, 11), (second, 22), (first, 44)]


def test_a_result_without_counts_has_no_total():
    lines = capture_lines([*_new(1), *_turn(2, {}), *_turn(3, {"usage": None})])
    events = events_of(assert_three_ways("acp", lines))
    assert not _of(events, "thread.token-usage.updated")
    assert all("tokens" not in p for p in _of(events, "turn.completed"))
