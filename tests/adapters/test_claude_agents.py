"""claude and amp: subagents (agentId/parentAgentId, README "Agents") and the thread's
running token total (thread.token-usage.updated `tokens`), on conversations written
here from the stream-json protocol (claude-agent-sdk `sdk.d.ts`: SDKMessage's
`parent_tool_use_id`, SDKControlPermissionRequest's `tool_use_id`)."""

from __future__ import annotations

from itertools import count
from typing import Any

from tests.adapters.harness import assert_three_ways, capture_lines, events_of, run_whole

S = "5e55a9e7-0000-4000-8000-000000000001"

#: native id (message id, tool_use id, request id, line uuid) -> the Task call whose
#: subagent it belongs to; absent: the root agent's
OWNER = {"u-sub-prompt": "toolu_t1", "msg_s1": "toolu_t1", "toolu_b1": "toolu_t1",
         "perm-1": "toolu_t1", "hook-1": "toolu_t1", "toolu_t2": "toolu_t1",
         "msg_s3": "toolu_t1", "u-b1-result": "toolu_t1",
         "msg_n1": "toolu_t2", "toolu_r1": "toolu_t2", "perm-2": "toolu_t2"}
#: a subagent's Task call -> the Task call of the agent that made it (None: the root)
SPAWNED_IN = {"toolu_t1": None, "toolu_t2": "toolu_t1"}


def _assistant(mid: str, block: dict[str, Any], parent: str | None) -> dict[str, Any]:
    return {"type": "assistant", "parent_tool_use_id": parent,
            "message": {"id": mid, "type": "message", "role": "assistant",
                        "model": "claude-sonnet-4-5", "content": [block]}}


def _user(content: list[dict[str, Any]], parent: str | None) -> dict[str, Any]:
    return {"type": "user", "parent_tool_use_id": parent,
            "message": {"role": "user", "content": content}}


def _result(tid: str, text: str, parent: str | None) -> dict[str, Any]:
    return _user([{"type": "tool_result", "tool_use_id": tid, "content": text,
                   "is_error": False}], parent)


def _task(tid: str, what: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": tid, "name": "Task",
            "input": {"description": what, "prompt": what, "subagent_type": "general-purpose"}}


def _stream(event: dict[str, Any], parent: str) -> dict[str, Any]:
    return {"type": "stream_event", "event": event, "parent_tool_use_id": parent}


def _control(rid: str, request: dict[str, Any]) -> dict[str, Any]:
    return {"type": "control_request", "request_id": rid, "request": request}


def _answer(rid: str, body: dict[str, Any]) -> dict[str, Any]:
    return {"type": "control_response",
            "response": {"subtype": "success", "request_id": rid, "response": body}}


def conversation(stdio: bool) -> list[tuple[str, dict[str, Any]]]:
    """A turn whose Task call starts a subagent that streams its answer, runs a command
    (asked for and hooked in SDK stdio mode) and starts a nested subagent; the nested
    one's Read is still open, its permission unanswered, when the turn ends. `stdio`
    False: the lines print mode (and Amp) writes, no stream events nor control lines."""
    t1 = "toolu_t1"
    bash = {"type": "tool_use", "id": "toolu_b1", "name": "Bash", "input": {"command": "ls"}}
    lines: list[tuple[str, dict[str, Any] | None]] = [
        ("agent", {"type": "system", "subtype": "init", "cwd": "/w", "model": "claude-sonnet-4-5"}),
        ("agent", _user([{"type": "text", "text": "Find the config"}], None)),
        ("agent", _assistant("msg_r1", _task(t1, "Find config"), None)),
        ("agent", {"type": "system", "subtype": "task_started", "task_id": "task1",
                   "tool_use_id": t1, "description": "Find config"} if stdio else None),
        ("agent", {**_user([{"type": "text", "text": "Find config"}], t1),
                   "uuid": "u-sub-prompt"}),
        ("agent", _stream({"type": "message_start", "message": {"id": "msg_s1"}}, t1)),
        ("agent", _stream({"type": "content_block_start", "index": 0,
                           "content_block": {"type": "text", "text": ""}}, t1)),
        ("agent", _stream({"type": "content_block_delta", "index": 0,
                           "delta": {"type": "text_delta", "text": "Looking."}}, t1)),
        ("agent", _assistant("msg_s1", {"type": "text", "text": "Looking."}, t1)),
        ("agent", _stream({"type": "content_block_stop", "index": 0}, t1)),
        ("agent", _stream({"type": "content_block_start", "index": 1, "content_block":
                           {**bash, "input": {}}}, t1)),
        ("agent", _stream({"type": "content_block_delta", "index": 1, "delta": {
            "type": "input_json_delta", "partial_json": '{"command": "ls"}'}}, t1)),
        ("agent", _assistant("msg_s1", bash, t1)),
        ("agent", _stream({"type": "content_block_stop", "index": 1}, t1)),
        ("agent", _stream({"type": "message_stop"}, t1)),
        ("agent", _control("perm-1", {"subtype": "can_use_tool", "tool_name": "Bash",
                                      "input": {"command": "ls"}, "tool_use_id": "toolu_b1",
                                      "agent_id": "a7f3"})),
        ("client", _answer("perm-1", {"behavior": "allow", "updatedInput": {"command": "ls"}})),
        ("agent", _control("hook-1", {"subtype": "hook_callback", "callback_id": "hook_0",
                                      "tool_use_id": "toolu_b1",
                                      "input": {"hook_event_name": "PreToolUse",
                                                "tool_use_id": "toolu_b1"}})),
        ("client", _answer("hook-1", {"continue": True})),
        ("agent", {"type": "tool_progress", "tool_use_id": "toolu_b1", "tool_name": "Bash",
                   "parent_tool_use_id": t1, "elapsed_time_seconds": 1}),
        ("agent", {**_result("toolu_b1", "conf", t1), "uuid": "u-b1-result"}),
        ("agent", _assistant("msg_s2", _task("toolu_t2", "Read it"), t1)),
        ("agent", _assistant("msg_n1", {"type": "text", "text": "Reading."}, "toolu_t2")),
        ("agent", _assistant("msg_n2", {"type": "tool_use", "id": "toolu_r1", "name": "Read",
                                        "input": {"file_path": "/w/conf/a.toml"}}, "toolu_t2")),
        ("agent", _control("perm-2", {"subtype": "can_use_tool", "tool_name": "Read",
                                      "input": {"file_path": "/w/conf/a.toml"},
                                      "tool_use_id": "toolu_r1"})),
        ("agent", _result("toolu_t2", "conf/a.toml", t1)),
        ("agent", _assistant("msg_s3", {"type": "text", "text": "It is conf/a.toml."}, t1)),
        ("agent", {"type": "system", "subtype": "task_notification", "task_id": "task1",
                   "tool_use_id": t1, "status": "completed"} if stdio else None),
        ("agent", _result(t1, "It is conf/a.toml.", None)),
        ("agent", _assistant("msg_r2", {"type": "text", "text": "Config: conf/a.toml."}, None)),
        ("agent", {"type": "result", "subtype": "success", "is_error": False,
                   "result": "Config: conf/a.toml.",
                   "usage": {"input_tokens": 100, "output_tokens": 20}}),
    ]
    if not stdio:
        lines = [(o, m) for o, m in lines if m is not None and m["type"] not in
                 ("stream_event", "control_request", "control_response", "tool_progress")]
    uuid = count()
    out = []
    for origin, m in lines:
        assert m is not None
        extra = {"session_id": S} if origin == "agent" else {}
        if origin == "agent" and "uuid" not in m:
            extra["uuid"] = f"u{next(uuid)}"
        out.append((origin, {**m, **extra}))
    return out


def _native(e: dict[str, Any]) -> str | None:
    """The native id that says whose an event is: its item's, its request's, its hook's."""
    refs = e.get("providerRefs") or {}
    return refs.get("providerItemId") or refs.get("providerRequestId") or \
        e["payload"].get("hookId")


def assert_agents(events: list[dict[str, Any]]) -> set[str]:
    """Every event carries the agent OWNER names, and its parent; returns the agents."""
    root = events[0]["agentId"]
    assert events[0]["type"] == "session.started" and root.startswith("agt_")
    item_of = {e["providerRefs"]["providerItemId"]: e["itemId"] for e in events
               if e["type"] == "item.started" and "providerRefs" in e}

    def agent(task: str | None) -> str:
        return root if task is None else "agt_" + item_of[task].split("_", 1)[1]

    seen = set()
    for e in events[1:]:
        task = OWNER.get(_native(e) or "")
        if task is None:
            assert "agentId" not in e and "parentAgentId" not in e, e
            continue
        assert (e["agentId"], e["parentAgentId"]) == (agent(task), agent(SPAWNED_IN[task])), e
        seen.add(task)
    return seen


def test_a_subagents_events_carry_its_agent_and_a_nested_ones_its_parent():
    events = events_of(assert_three_ways("claude", capture_lines(conversation(stdio=True))))
    assert assert_agents(events) == {"toolu_t1", "toolu_t2"}
    sub1 = [e for e in events if OWNER.get(_native(e) or "") == "toolu_t1"]
    sub2 = [e for e in events if OWNER.get(_native(e) or "") == "toolu_t2"]
    types1 = {e["type"] for e in sub1}
    # streamed deltas, the permission asked inside the subagent, its hook, its progress
    assert {"content.delta", "request.opened", "request.resolved", "hook.started",
            "hook.completed", "tool.progress", "item.started", "item.completed"} <= types1
    # the nested Read left open and its unanswered permission close at the turn's end,
    # still as the nested subagent's
    closed = [e["type"] for e in sub2 if e.get("synthetic")]
    assert "request.resolved" in closed and "item.completed" in closed
    # task.* events are the root's: it made the Task call they are about
    assert all("agentId" not in e for e in events if e["type"].startswith("task."))
    assert "agentId" not in events[-1] and events[-1]["type"] == "turn.completed"


def test_amp_subagents_are_marked_the_same():
    events = events_of(assert_three_ways("amp", capture_lines(conversation(stdio=False))))
    assert assert_agents(events) == {"toolu_t1", "toolu_t2"}


def test_a_subagent_whose_task_call_was_never_seen_has_the_root_as_parent():
    lines = [(o, m) for o, m in conversation(stdio=False)
             if not (m["type"] == "assistant" and m["message"]["id"] == "msg_r1")]
    events = events_of(run_whole("claude", capture_lines(lines)))
    sub = [e for e in events if _native(e) == "msg_s1"]
    root = events[0]["agentId"]
    assert sub and all(e["parentAgentId"] == root for e in sub)


# ---- the thread's running total ---------------------------------------------------


def _turn(n: int, usage: dict[str, Any], key: str = "usage") -> list[tuple[str, Any]]:
    return [("client", {"type": "user", "message": {"role": "user", "content": f"q{n}"},
                        "parent_tool_use_id": None, "session_id": S}),
            ("agent", {**_assistant(f"msg_{n}", {"type": "text", "text": f"a{n}"}, None),
                       "uuid": f"a{n}", "session_id": S}),
            ("agent", {"type": "result", "subtype": "success", "is_error": False,
                       key: usage, "uuid": f"r{n}", "session_id": S})]


def _totals(events: list[dict[str, Any]]) -> list[tuple[str, Any]]:
    return [(e["type"], e["payload"]["tokens"]) for e in events if "tokens" in e["payload"]]


def test_each_turn_adds_to_the_threads_total_said_before_its_turn_completed():
    first = {"input_tokens": 100, "cache_read_input_tokens": 400, "output_tokens": 30}
    second = {"input_tokens": 10, "output_tokens": 5,
              "output_tokens_details": {"thinking_tokens": 2}}
    lines = _turn(1, first) + _turn(2, second)
    for provider in ("claude", "amp"):
        events = events_of(assert_three_ways(provider, capture_lines(lines)))
        t1 = {"input": 500, "cachedInput": 400, "cacheWrite": 0, "output": 30,
              "reasoningOutput": 0, "total": 530}
        t2 = {"input": 10, "cachedInput": 0, "cacheWrite": 0, "output": 5,
              "reasoningOutput": 2, "total": 15}
        both = {k: t1[k] + t2[k] for k in t1}
        assert _totals(events) == [("thread.token-usage.updated", t1), ("turn.completed", t1),
                                   ("thread.token-usage.updated", both), ("turn.completed", t2)]
        updates = [e for e in events if e["type"] == "thread.token-usage.updated"]
        assert [u["payload"]["usage"] for u in updates] == [first, second]


def test_a_result_seen_twice_counts_once_and_per_model_counts_alone_are_said():
    since = {"claude-sonnet-4-5": {"inputTokens": 7, "outputTokens": 3, "costUSD": 0.01}}
    lines = _turn(1, {"input_tokens": 1, "output_tokens": 1})
    twice = lines + lines[-1:] + _turn(2, since, key="model_usage_since_last_result")
    events = events_of(assert_three_ways("claude", capture_lines(twice)))
    totals = [t["total"] for kind, t in _totals(events) if kind == "thread.token-usage.updated"]
    assert totals == [2, 12]
    assert [e["payload"]["usage"] for e in events
            if e["type"] == "thread.token-usage.updated"][-1] == since
