"""opencode: subagents. OpenCode's task tool runs a subagent as a child session (tool/task.ts:
session.created with `info.parentID`, the running task part's `state.metadata.sessionId`);
every event of a child session carries the subagent's agentId and its parent's, nested
children included. The conversations are written from the protocol (no capture has a
task tool call)."""

from __future__ import annotations

import itertools
from typing import Any

from adapters import Line, MemorySpool, get, new_session, translate_record
from tests.adapters.harness import (
    assert_envelope_invariants,
    assert_three_ways,
    capture_lines,
    events_of,
    run_whole,
)
from topics.canonical import encode_event

_IDS = itertools.count(1)
ROOT, CHILD, GRANDCHILD = "ses_root", "ses_child", "ses_grandchild"


def _ev(kind: str, **props: Any) -> tuple[str, dict[str, Any]]:
    return ("agent", {"id": f"evt_{next(_IDS):04d}", "type": kind, "properties": props})


def _session(sid: str, parent: str | None = None, kind: str = "session.created"):
    info: dict[str, Any] = {"id": sid, "title": f"title of {sid}", "version": "1.18.33",
                            "time": {"created": 1}}
    if parent:
        info["parentID"] = parent
    return _ev(kind, sessionID=sid, info=info)


def _message(sid: str, mid: str, role: str, completed: bool = False):
    time = {"created": 1, **({"completed": 2} if completed else {})}
    return _ev("message.updated", sessionID=sid,
               info={"id": mid, "sessionID": sid, "role": role, "time": time})


def _part(sid: str, mid: str, pid: str, ptype: str, **fields: Any):
    return _ev("message.part.updated", sessionID=sid,
               part={"id": pid, "messageID": mid, "sessionID": sid, "type": ptype, **fields})


def _task(sid: str, mid: str, pid: str, status: str, child: str | None = None):
    state: dict[str, Any] = {"status": status,
                             "input": {"description": "look around", "prompt": "look",
                                       "subagent_type": "general"}}
    if child:
        state["metadata"] = {"sessionId": child, "model": {"modelID": "m", "providerID": "p"}}
    if status == "completed":
        state["output"] = f"task_id: {child}\n\n<task_result>\nfound it\n</task_result>"
        state["title"] = "look around"
    return _part(sid, mid, pid, "tool", tool="task", callID=f"call_{pid}", state=state)


def _status(sid: str, kind: str):
    return _ev("session.status", sessionID=sid, status={"type": kind})


def _reply(sid: str, mid: str, pid: str, text: str) -> list[tuple[str, dict[str, Any]]]:
    """An assistant reply: a streamed text part, its step's usage, its message completed."""
    return [
        _message(sid, mid, "assistant"),
        _part(sid, mid, pid, "text", text="", time={"start": 1}),
        _ev("message.part.delta", sessionID=sid, messageID=mid, partID=pid, field="text",
            delta=text),
        _part(sid, mid, pid, "text", text=text, time={"start": 1, "end": 2}),
        _part(sid, mid, f"{pid}_step", "step-finish", reason="stop", cost=0,
              tokens={"input": 10, "output": 5, "reasoning": 0,
                      "cache": {"read": 0, "write": 0}}),
        _message(sid, mid, "assistant", completed=True),
    ]


def _prompt(sid: str, mid: str, text: str) -> list[tuple[str, dict[str, Any]]]:
    return [_message(sid, mid, "user"), _part(sid, mid, f"{mid}_text", "text", text=text),
            _status(sid, "busy")]


def _nested() -> list[tuple[str, dict[str, Any]]]:
    """The root runs a task (child session), whose agent runs a task of its own."""
    return [
        _ev("server.connected"),
        _session(ROOT),
        *_prompt(ROOT, "msg_u1", "explore"),
        _message(ROOT, "msg_a1", "assistant"),
        _task(ROOT, "msg_a1", "prt_t1", "pending"),
        _task(ROOT, "msg_a1", "prt_t1", "running"),
        # the child session is created before the task part names it
        _session(CHILD, parent=ROOT),
        _task(ROOT, "msg_a1", "prt_t1", "running", child=CHILD),
        *_prompt(CHILD, "msg_c1", "look"),
        _message(CHILD, "msg_c2", "assistant"),
        _task(CHILD, "msg_c2", "prt_t2", "running"),
        _session(GRANDCHILD, parent=CHILD),
        _task(CHILD, "msg_c2", "prt_t2", "running", child=GRANDCHILD),
        *_prompt(GRANDCHILD, "msg_g1", "look deeper"),
        *_reply(GRANDCHILD, "msg_g2", "prt_g", "deep"),
        _status(GRANDCHILD, "idle"),
        _task(CHILD, "msg_c2", "prt_t2", "completed", child=GRANDCHILD),
        *_reply(CHILD, "msg_c3", "prt_c", "found it"),
        _status(CHILD, "idle"),
        _task(ROOT, "msg_a1", "prt_t1", "completed", child=CHILD),
        *_reply(ROOT, "msg_a2", "prt_r", "done"),
        _status(ROOT, "idle"),
    ]


def _threads(events: list[dict[str, Any]]) -> dict[str, str]:
    """native session id -> canonical thread id."""
    return {e["payload"]["providerThreadId"]: e["threadId"] for e in events
            if e["type"] == "thread.started"}


def _tool_item(events: list[dict[str, Any]], call: str) -> str:
    return next(e["itemId"] for e in events if e["type"] == "item.started"
                and e["providerRefs"]["providerItemId"] == call)


def _agent_of(item: str) -> str:
    return "agt_" + item.split("_", 1)[1]


def test_every_event_of_a_child_session_is_its_subagents_nested_ones_included():
    events = events_of(assert_three_ways("opencode", capture_lines(_nested())))
    assert_envelope_invariants(events)
    root = events[0]["agentId"]
    assert events[0]["type"] == "session.started" and root.startswith("agt_")
    t1, t2 = _tool_item(events, "call_prt_t1"), _tool_item(events, "call_prt_t2")
    expected = {ROOT: (None, None), CHILD: (_agent_of(t1), root),
                GRANDCHILD: (_agent_of(t2), _agent_of(t1))}
    thread_of = _threads(events)
    seen = set()
    for e in events[1:]:
        sid = next(s for s, t in thread_of.items() if t == e["threadId"])
        assert (e.get("agentId"), e.get("parentAgentId")) == expected[sid], (sid, e)
        seen.add(sid)
    assert seen == {ROOT, CHILD, GRANDCHILD}
    # the task items themselves are their caller's: t1 the root's, t2 the child's
    started = {e["itemId"]: e for e in events if e["type"] == "item.started"}
    assert "agentId" not in started[t1]
    assert started[t2]["agentId"] == _agent_of(t1)


def test_the_state_forgets_a_subagent_when_its_task_part_completes():
    lines = capture_lines(_nested())
    t = get("opencode")
    session, spool = new_session(t), MemorySpool()
    sizes = []
    for n, line in enumerate(lines, 1):
        session, _events, failures = translate_record(t, session, "s1", [line], offset=n,
                                                      spool=spool)
        assert not failures
        sizes.append(len(session.state.agents))
    assert max(sizes) == 2  # the child and the grandchild, while both tasks run
    assert session.state.agents == {}


def test_a_record_of_many_sessions_messages_gives_each_its_own_agent():
    # the Emitter lives for one record: a root message after a child's is the root's again
    lines = capture_lines(_nested())
    t = get("opencode")
    _session_, events, failures = translate_record(t, new_session(t), "s1", lines, offset=1,
                                                   spool=MemorySpool())
    assert not failures
    whole = [(e["type"], e.get("agentId"), e.get("parentAgentId"))
             for e in events_of(run_whole("opencode", lines))]
    one = [(e["type"], e.get("agentId"), e.get("parentAgentId"))
           for e in events_of([encode_event(e) for e in events])]
    assert one == whole


def test_parallel_tasks_link_each_child_when_its_part_names_it():
    # two task parts run at once: a child's session.created cannot tell which started it,
    # so its first events are the root's; from its part's metadata on they are its own
    lines = capture_lines([
        _ev("server.connected"), _session(ROOT), *_prompt(ROOT, "msg_u1", "explore"),
        _message(ROOT, "msg_a1", "assistant"),
        _task(ROOT, "msg_a1", "prt_a", "running"), _task(ROOT, "msg_a1", "prt_b", "running"),
        _session("ses_a", parent=ROOT), _session("ses_b", parent=ROOT),
        _task(ROOT, "msg_a1", "prt_b", "running", child="ses_b"),
        _task(ROOT, "msg_a1", "prt_a", "running", child="ses_a"),
        *_prompt("ses_a", "msg_a_u", "one"), *_prompt("ses_b", "msg_b_u", "two"),
        _status("ses_b", "idle"), _status("ses_a", "idle"),
        _task(ROOT, "msg_a1", "prt_a", "completed", child="ses_a"),
        _task(ROOT, "msg_a1", "prt_b", "completed", child="ses_b"),
        _status(ROOT, "idle"),
    ])
    events = events_of(assert_three_ways("opencode", lines))
    thread_of = _threads(events)
    a, b = _tool_item(events, "call_prt_a"), _tool_item(events, "call_prt_b")
    for sid, item in (("ses_a", a), ("ses_b", b)):
        own = [e for e in events if e.get("threadId") == thread_of[sid]]
        created = [e for e in own if e["type"] in ("thread.started", "thread.metadata.updated")]
        assert all("agentId" not in e for e in created)
        rest = own[len(created):]
        assert rest and all(e["agentId"] == _agent_of(item) for e in rest)


def test_a_session_created_with_a_parent_but_no_running_task_is_the_roots():
    lines = capture_lines([_ev("server.connected"), _session(ROOT),
                           _session(CHILD, parent=ROOT), *_prompt(CHILD, "msg_c1", "hi"),
                           _status(CHILD, "idle")])
    events = events_of(run_whole("opencode", lines))
    assert all("agentId" not in e for e in events[1:])


def test_no_agent_fields_without_subagents():
    lines: list[Line] = capture_lines([_ev("server.connected"), _session(ROOT),
                                       *_prompt(ROOT, "msg_u1", "hi"),
                                       *_reply(ROOT, "msg_a1", "prt_r", "hello"),
                                       _status(ROOT, "idle")])
    events = events_of(run_whole("opencode", lines))
    assert [e for e in events if "agentId" in e] == events[:1]


def test_a_deleted_session_takes_its_subagents_with_it():
    t = get("opencode")
    start = [_ev("server.connected"), _session(ROOT), *_prompt(ROOT, "msg_u1", "explore"),
             _message(ROOT, "msg_a1", "assistant"),
             _task(ROOT, "msg_a1", "prt_t1", "running", child=CHILD)]
    for gone in (CHILD, ROOT):  # the child itself, or the session whose task runs it
        lines = capture_lines([*start, _session(gone, kind="session.deleted")])
        session, spool = new_session(t), MemorySpool()
        for n, line in enumerate(lines, 1):
            session, _events, failures = translate_record(t, session, "s1", [line], offset=n,
                                                          spool=spool)
            assert not failures
            if n == len(start):
                assert set(session.state.agents) == {CHILD}
        assert session.state.agents == {}
