"""acp: subagents (README "Agents"). ACP itself has no subagent; claude-agent-acp (0.19 on)
says in `_meta.claudeCode.parentToolUseId` of each session/update of a subagent which
tool call (Claude's Task / Agent tool) started it. The conversation below is written in
the shapes its source emits (src/acp-agent.ts `toAcpNotifications`, src/tools.ts): a
subagent that runs a command (with an approval, and the PostToolUse hook's update that
names no parent) and starts a nested subagent of its own."""

from __future__ import annotations

from typing import Any

from adapters.core.emitter import Emitter
from tests.adapters.harness import assert_three_ways, capture_lines, events_of
from tests.adapters.test_acp import NO_SCHEMA, _schema_errors

SID = "sess_1"
TASK, INNER = "toolu_task", "toolu_inner"  # the subagents' Agent tool calls
SUB_BASH, INNER_READ = "toolu_sub_bash", "toolu_inner_read"  # tool calls they run


def _rpc(**m: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", **m}


def _update(parent: str | None = None, **u: Any) -> tuple[str, Any]:
    """A session/update; `parent`: the subagent's (its `_meta.claudeCode.parentToolUseId`
    next to what else `_meta.claudeCode` says)."""
    if parent is not None:
        meta = u.setdefault("_meta", {})
        meta["claudeCode"] = {**meta.get("claudeCode", {}), "parentToolUseId": parent}
    return ("agent", _rpc(method="session/update", params={"sessionId": SID, "update": u}))


def _chunk(text: str, parent: str | None = None) -> tuple[str, Any]:
    return _update(parent, sessionUpdate="agent_message_chunk",
                   content={"type": "text", "text": text})


def _agent_call(tc: str, description: str, parent: str | None = None) -> tuple[str, Any]:
    prompt = f"{description}, then report."
    return _update(parent, sessionUpdate="tool_call", toolCallId=tc, status="pending",
                   _meta={"claudeCode": {"toolName": "Agent"}}, title=description, kind="think",
                   rawInput={"description": description, "prompt": prompt,
                             "subagent_type": "general-purpose"},
                   content=[{"type": "content", "content": {"type": "text", "text": prompt}}])


def _conversation() -> list[tuple[str, Any]]:
    return [
        ("client", _rpc(id=1, method="session/new", params={"cwd": "/w", "mcpServers": []})),
        ("agent", _rpc(id=1, result={"sessionId": SID})),
        ("client", _rpc(id=2, method="session/prompt", params={
            "sessionId": SID, "prompt": [{"type": "text", "text": "look around"}]})),
        _chunk("I will delegate."),
        _agent_call(TASK, "Survey the tree"),
        _chunk("Looking.", TASK),
        _update(TASK, sessionUpdate="tool_call", toolCallId=SUB_BASH, status="pending",
                _meta={"claudeCode": {"toolName": "Bash"}}, title="ls", kind="execute",
                rawInput={"command": "ls", "description": "List files"}),
        ("agent", _rpc(id=0, method="session/request_permission", params={
            "sessionId": SID, "toolCall": {"toolCallId": SUB_BASH, "title": "ls",
                                           "kind": "execute"},
            "options": [{"optionId": "allow", "name": "Allow", "kind": "allow_once"},
                        {"optionId": "reject", "name": "Reject", "kind": "reject_once"}]})),
        ("client", _rpc(id=0, result={"outcome": {"outcome": "selected", "optionId": "allow"}})),
        # the PostToolUse hook's update names no parent: the call is still the subagent's
        _update(sessionUpdate="tool_call_update", toolCallId=SUB_BASH, _meta={"claudeCode": {
            "toolName": "Bash", "toolResponse": {"stdout": "a.txt", "stderr": ""}}}),
        _update(TASK, sessionUpdate="tool_call_update", toolCallId=SUB_BASH, status="completed",
                _meta={"claudeCode": {"toolName": "Bash"}}, rawOutput="a.txt"),
        _agent_call(INNER, "Read the file", TASK),  # a nested subagent
        _chunk("Deep.", INNER),
        _update(INNER, sessionUpdate="tool_call", toolCallId=INNER_READ, status="pending",
                _meta={"claudeCode": {"toolName": "Read"}}, title="Read a.txt", kind="read",
                rawInput={"file_path": "/w/a.txt"}, locations=[{"path": "/w/a.txt"}]),
        _update(INNER, sessionUpdate="tool_call_update", toolCallId=INNER_READ,
                status="completed", rawOutput="hello"),
        _update(TASK, sessionUpdate="tool_call_update", toolCallId=INNER, status="completed",
                rawOutput=[{"type": "text", "text": "It says hello."}]),
        _chunk("Done.", TASK),
        _update(sessionUpdate="tool_call_update", toolCallId=TASK, status="completed",
                rawOutput=[{"type": "text", "text": "a.txt says hello."}]),
        _chunk("All done."),
        ("agent", _rpc(id=2, result={"stopReason": "end_turn"})),
    ]


def test_every_event_of_a_subagent_carries_its_agent_and_its_parent():
    events = events_of(assert_three_ways("acp", capture_lines(_conversation())))
    out = Emitter("acp", "s1", 0, 0, False, "acp.jsonrpc")  # the harness's session id
    root = out.agent_id(None)
    task, inner = out.id("itm", TASK), out.id("itm", INNER)
    sub = (out.agent_id(task), root)  # (agentId, parentAgentId)
    nested = (out.agent_id(inner), out.agent_id(task))
    # whose each item is: a tool call's, the agent that ran it; a message's, its speaker's
    texts = {e["payload"].get("text"): e["itemId"] for e in events
             if e["type"] == "item.completed" and e["payload"]["itemType"] == "assistant_message"}
    whose = {task: None, out.id("itm", SUB_BASH): sub, inner: sub,
             out.id("itm", INNER_READ): nested, texts["I will delegate."]: None,
             texts["Looking."]: sub, texts["Deep."]: nested, texts["Done."]: sub,
             texts["All done."]: None}
    seen = set()
    for e in events:
        got = (e.get("agentId"), e.get("parentAgentId"))
        if e["type"] == "session.started":
            assert got == (root, None)
            continue
        want = whose.get(e.get("itemId", ""))
        assert got == (want or (None, None)), (e["type"], e.get("itemId"), got)
        seen.add(want)
    assert seen == {None, sub, nested}
    # the subagent shares its hash with the tool item that started it
    assert sub[0] == "agt_" + task.split("_", 1)[1] and nested[0] == "agt_" + inner.split("_", 1)[1]
    # the approval of the subagent's command is the subagent's
    requests = [e for e in events if e["type"].startswith("request.")]
    assert [(e["type"], e["agentId"]) for e in requests] == [
        ("request.opened", sub[0]), ("request.resolved", sub[0])]
    # the turn and its usage are the root's
    assert all("agentId" not in e for e in events if e["type"].startswith("turn."))


def test_a_subagents_chunks_are_its_own_message_even_without_message_ids():
    lines = capture_lines([*_conversation()[:5], _chunk("Looking.", TASK), _chunk(" More.", TASK),
                           _chunk("Meanwhile."),
                           ("agent", _rpc(id=2, result={"stopReason": "end_turn"}))])
    events = events_of(assert_three_ways("acp", lines))
    done = [(e["payload"]["text"], e.get("agentId") is not None) for e in events
            if e["type"] == "item.completed" and e["payload"]["itemType"] == "assistant_message"]
    assert done == [("I will delegate.", False), ("Looking. More.", True), ("Meanwhile.", False)]


def test_a_parent_no_longer_open_is_the_root():
    """Only the open tool calls are kept (the state stays small): a late update of a
    subagent whose Agent call is over still carries that subagent's id, its parent the
    root's (while the call was open, the agent that ran it)."""
    lines = capture_lines([*_conversation()[:3], _agent_call(INNER, "Read the file", TASK),
                           _chunk("Deep.", INNER),
                           _update(TASK, sessionUpdate="tool_call_update", toolCallId=INNER,
                                   status="completed", rawOutput="hello"),
                           _chunk("Late.", INNER),
                           ("agent", _rpc(id=2, result={"stopReason": "end_turn"}))])
    events = events_of(assert_three_ways("acp", lines))
    out = Emitter("acp", "s1", 0, 0, False, "acp.jsonrpc")
    inner = out.agent_id(out.id("itm", INNER))
    deep, late = [(e["agentId"], e["parentAgentId"]) for e in events
                  if e["type"] == "content.delta"]
    assert deep == (inner, out.agent_id(out.id("itm", TASK)))
    assert late == (inner, out.agent_id(None))


@NO_SCHEMA
def test_the_conversation_is_valid_acp_v1():
    pending: dict[tuple[str, str], str] = {}
    for n, (origin, msg) in enumerate(_conversation(), 1):
        assert not _schema_errors(msg, pending, origin), f"message {n}"
