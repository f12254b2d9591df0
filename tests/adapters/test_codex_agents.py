"""codex: collab agents (adapters.codex.agents). A conversation written from the app-server
v2 schema (`collabAgentToolCall`, `Thread.parentThreadId`, `subAgentActivity`): the root
thread spawns an agent, which spawns a nested one; every event of a subagent's thread
carries its agentId (`agt_<h>` of the spawning item's `itm_<h>`) and its parent's."""

from __future__ import annotations

from typing import Any

from adapters import get, new_session, translate_record
from adapters.core import canonical_id
from tests.adapters.harness import (
    assert_envelope_invariants,
    assert_three_ways,
    capture_lines,
    events_of,
)

ROOT, CHILD, GRANDCHILD, THIRD = "thr-root", "thr-child", "thr-grandchild", "thr-third"


def _cid(prefix: str, *parts: str) -> str:
    return canonical_id(prefix, "s1", *parts)


def _agent(turn: str, spawn: str) -> str:
    """The agent started by the collab item `spawn` of `turn`: its item id's hash."""
    return "agt_" + _cid("itm", turn, spawn).split("_", 1)[1]


ROOT_AGENT = _cid("agt", "")


def _n(method: str, **params: Any) -> tuple[str, dict[str, Any]]:
    return ("agent", {"method": method, "params": params})


def _thread(tid: str, parent: str | None = None) -> dict[str, Any]:
    thread: dict[str, Any] = {"id": tid, "preview": "", "turns": [], "parentThreadId": parent}
    if parent is not None:
        thread["source"] = {"subAgent": {"thread_spawn": {"parent_thread_id": parent,
                                                          "depth": 1}}}
    return thread


def _collab(cid: str, tool: str, sender: str, receivers: list[str], status: str
            ) -> dict[str, Any]:
    return {"type": "collabAgentToolCall", "id": cid, "tool": tool, "status": status,
            "senderThreadId": sender, "receiverThreadIds": receivers, "prompt": "look at x",
            "agentsStates": {r: {"status": "running"} for r in receivers}}


def _message(thread: str, turn: str, mid: str, text: str) -> list[tuple[str, dict[str, Any]]]:
    return [
        _n("item/agentMessage/delta", threadId=thread, turnId=turn, itemId=mid, delta=text),
        _n("item/completed", threadId=thread, turnId=turn,
           item={"type": "agentMessage", "id": mid, "text": text}),
    ]


def _turn(method: str, thread: str, turn: str) -> tuple[str, dict[str, Any]]:
    return _n(method, threadId=thread, turn={"id": turn, "items": [], "status": "completed"})


def _conversation() -> list[tuple[str, dict[str, Any]]]:
    return [
        _n("thread/started", thread=_thread(ROOT)),
        _turn("turn/started", ROOT, "u1"),
        _n("item/started", threadId=ROOT, turnId="u1",
           item=_collab("spawn-1", "spawnAgent", ROOT, [], "inProgress")),
        # the child's thread is announced before its spawning call completes
        _n("thread/started", thread=_thread(CHILD, ROOT)),
        _turn("turn/started", CHILD, "c1"),
        *_message(CHILD, "c1", "msg-c1", "on it"),
        _n("item/completed", threadId=ROOT, turnId="u1",
           item=_collab("spawn-1", "spawnAgent", ROOT, [CHILD], "completed")),
        # the child spawns a nested agent; only the call's completion names its thread
        _n("item/started", threadId=CHILD, turnId="c1",
           item=_collab("spawn-2", "spawnAgent", CHILD, [], "inProgress")),
        _n("item/completed", threadId=CHILD, turnId="c1",
           item=_collab("spawn-2", "spawnAgent", CHILD, [GRANDCHILD], "completed")),
        # announced after its call completed, naming no parent: known by then all the same
        _n("thread/started", thread=_thread(GRANDCHILD)),
        _turn("turn/started", GRANDCHILD, "g1"),
        *_message(GRANDCHILD, "g1", "msg-g1", "found it"),
        _n("thread/tokenUsage/updated", threadId=GRANDCHILD, turnId="g1", tokenUsage={
            "total": {"inputTokens": 5, "outputTokens": 2}, "last": {"inputTokens": 5,
                                                                     "outputTokens": 2}}),
        _turn("turn/completed", GRANDCHILD, "g1"),
        # the child asks for an approval: the request and the user's answer are its own
        ("agent", {"id": 7, "method": "item/commandExecution/requestApproval", "params": {
            "threadId": CHILD, "turnId": "c1", "itemId": "cmd-1", "command": "ls"}}),
        ("client", {"id": 7, "result": {"decision": "accept"}}),
        *_message(CHILD, "c1", "msg-c2", "done"),
        _turn("turn/completed", CHILD, "c1"),
        # the root waits on the child (a collab call that starts no agent), then answers
        _n("item/started", threadId=ROOT, turnId="u1",
           item=_collab("wait-1", "wait", ROOT, [CHILD], "inProgress")),
        _n("item/completed", threadId=ROOT, turnId="u1",
           item=_collab("wait-1", "wait", ROOT, [CHILD], "completed")),
        # a third agent announced by the sub-agent activity item of the spawning thread
        _n("item/started", threadId=ROOT, turnId="u1",
           item=_collab("spawn-3", "spawnAgent", ROOT, [], "inProgress")),
        _n("item/completed", threadId=ROOT, turnId="u1", item={
            "type": "subAgentActivity", "id": "act-1", "kind": "started",
            "agentThreadId": THIRD, "agentPath": "/root/helper"}),
        _turn("turn/started", THIRD, "t1"),
        *_message(THIRD, "t1", "msg-t1", "helping"),
        _turn("turn/completed", THIRD, "t1"),
        _n("item/completed", threadId=ROOT, turnId="u1",
           item=_collab("spawn-3", "spawnAgent", ROOT, [THIRD], "completed")),
        *_message(ROOT, "u1", "msg-r1", "all done"),
        _turn("turn/completed", ROOT, "u1"),
    ]


def _expected(thread: str) -> tuple[str | None, str | None]:
    """(agentId, parentAgentId) of every event of `thread` but session.started."""
    return {
        ROOT: (None, None),
        CHILD: (_agent("u1", "spawn-1"), ROOT_AGENT),
        GRANDCHILD: (_agent("c1", "spawn-2"), _agent("u1", "spawn-1")),
        THIRD: (_agent("u1", "spawn-3"), ROOT_AGENT),
    }[thread]


def test_every_event_of_a_collab_agents_thread_carries_its_agent_and_parent():
    events = events_of(assert_three_ways("codex", capture_lines(_conversation())))
    assert_envelope_invariants(events)
    assert not [e for e in events if e["type"] == "runtime.warning"]
    threads = {_cid("thr", t): t for t in (ROOT, CHILD, GRANDCHILD, THIRD)}
    started, *rest = events
    assert started["type"] == "session.started" and started["agentId"] == ROOT_AGENT
    seen = set()
    for e in rest:
        thread = threads[e["threadId"]]
        seen.add(thread)
        assert (e.get("agentId"), e.get("parentAgentId")) == _expected(thread), (thread, e)
    assert seen == {ROOT, CHILD, GRANDCHILD, THIRD}
    # the request the child opened, and the user's answer to it, are the child's
    child = _expected(CHILD)[0]
    assert [e["agentId"] for e in events if e["type"].startswith("request.")] == [child, child]


def test_a_subagents_id_shares_the_hash_of_the_item_that_started_it():
    events = events_of(assert_three_ways("codex", capture_lines(_conversation())))
    spawns = {e["providerRefs"]["providerItemId"]: e["itemId"] for e in events
              if e["type"] == "item.started" and e["payload"].get("toolName") == "spawnAgent"}
    agents = {e["agentId"] for e in events if e.get("agentId") not in (None, ROOT_AGENT)}
    assert agents == {"agt_" + spawns[s].removeprefix("itm_")
                      for s in ("spawn-1", "spawn-2", "spawn-3")}


def test_with_two_spawns_open_a_thread_waits_for_its_spawning_call_to_complete():
    messages = [
        _n("thread/started", thread=_thread(ROOT)),
        _turn("turn/started", ROOT, "u1"),
        _n("item/started", threadId=ROOT, turnId="u1",
           item=_collab("spawn-a", "spawnAgent", ROOT, [], "inProgress")),
        _n("item/started", threadId=ROOT, turnId="u1",
           item=_collab("spawn-b", "spawnAgent", ROOT, [], "inProgress")),
        # which call started it the announcement does not say: the root's, until it is known
        _n("thread/started", thread=_thread(CHILD, ROOT)),
        _n("item/completed", threadId=ROOT, turnId="u1",
           item=_collab("spawn-b", "spawnAgent", ROOT, [CHILD], "completed")),
        _turn("turn/started", CHILD, "c1"),
    ]
    events = events_of(assert_three_ways("codex", capture_lines(messages)))
    announced = [e for e in events if e["type"] == "thread.started"
                 and e["threadId"] == _cid("thr", CHILD)]
    assert [e.get("agentId") for e in announced] == [None]
    (turn,) = [e for e in events if e["type"] == "turn.started"
               and e["threadId"] == _cid("thr", CHILD)]
    assert (turn["agentId"], turn["parentAgentId"]) == (_agent("u1", "spawn-b"), ROOT_AGENT)


def test_the_agents_kept_in_the_state_stay_bounded():
    translator = get("codex")
    session = new_session(translator)
    for n in range(80):
        messages = [_n("item/completed", threadId=ROOT, turnId="u1",
                       item=_collab(f"spawn-{n}", "spawnAgent", ROOT, [f"thr-{n}"], "completed"))]
        session, _events, failures = translate_record(
            translator, session, "s1", capture_lines(messages), offset=n)
        assert not failures
    assert len(session.state.agents) == 64
    assert "thr-79" in session.state.agents and "thr-0" not in session.state.agents
