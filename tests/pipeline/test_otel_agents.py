"""Agents in the OpenTelemetry export (README "OpenTelemetry", "Agents"): every agent an
`invoke_agent` span with `gen_ai.agent.id`; a subagent's under the `execute_tool` span
of the tool item that started it, its own tool calls under it, its own turns' usage and
cost on it; deterministic ids; state dropped when the spawning tool ends. The streams
are canonical events as the conversation core stamps them (agentId, parentAgentId)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from adapters.core.emitter import Emitter
from pipeline.views.otel import SpanBuilder, build_spans, encode_request, item_span_id
from pipeline.views.otel.model import Span, agent_span_id, root_agent_id
from pipeline.views.otel.state import ENDED_KEPT
from tests.pipeline.test_otel import Receiver, attrs, export

SID = "sess-agents"
ROOT = Emitter("claude", SID, 0, 0, False, "claude.sdk.message").agent_id(None)


def _agent(item: str) -> str:
    return "agt_" + item.split("_", 1)[1]


class Stream:
    """Canonical events of one session, numbered and dated one second apart."""

    def __init__(self, provider: str = "claude"):
        self.provider, self.events = provider, []  # type: ignore[var-annotated]

    def add(self, etype: str, payload: dict[str, Any] | None = None, *,
            agent: str | None = None, parent: str | None = None, **ids: str) -> Stream:
        seq = len(self.events) + 1
        event: dict[str, Any] = {
            "type": etype, "sessionId": SID, "provider": self.provider, "seq": seq,
            "createdAt": f"2026-01-01T{seq // 3600:02d}:{seq // 60 % 60:02d}:{seq % 60:02d}.000Z",
            "payload": payload or {}, **ids}
        if agent is not None:
            event["agentId"] = agent
            event["parentAgentId"] = parent or ROOT
        self.events.append(event)
        return self

    def tool(self, item: str, name: str, *, agent: str | None = None,
             parent: str | None = None, input: Any = None, done: bool = True,
             **ids: str) -> Stream:
        kind = "collab_agent_tool_call" if name == "Task" else "dynamic_tool_call"
        started = {"itemType": kind, "toolName": name, "status": "in_progress"}
        if input is not None:
            started["input"] = input
        self.add("item.started", started, agent=agent, parent=parent, itemId=item, **ids)
        if done:
            self.add("item.completed", {**started, "status": "completed"}, agent=agent,
                     parent=parent, itemId=item, **ids)
        return self


TASK, GLOB, TASK2, BASH = "itm_aaaa1111", "itm_bbbb2222", "itm_cccc3333", "itm_dddd4444"
EXPLORE = {"description": "Find the config", "prompt": "Find config.toml",
           "subagent_type": "Explore"}


def claude_session() -> Stream:
    """A Task whose subagent (Explore) runs a Glob and a nested Task, whose subagent runs
    a Bash; all in the root's turn, as Claude's subagents are."""
    a1, a2 = _agent(TASK), _agent(TASK2)
    s = Stream().add("session.started", {}, agentId=ROOT)
    s.add("turn.started", {"model": "claude-opus-5-5"}, turnId="trn_1")
    s.tool(TASK, "Task", input=EXPLORE, done=False, turnId="trn_1")
    s.add("item.started", {"itemType": "assistant_message"}, agent=a1, turnId="trn_1",
          itemId="itm_msg1", parentItemId=TASK)
    s.tool(GLOB, "Glob", agent=a1, input={"pattern": "**/config.toml"}, turnId="trn_1",
           parentItemId=TASK)
    s.tool(TASK2, "Task", agent=a1, input={"description": "Check it"}, done=False,
           turnId="trn_1", parentItemId=TASK)
    s.tool(BASH, "Bash", agent=a2, parent=a1, input={"command": "cat config.toml"},
           turnId="trn_1", parentItemId=TASK2)
    s.add("item.completed", {"itemType": "collab_agent_tool_call", "toolName": "Task",
                             "status": "completed"}, agent=a1, turnId="trn_1", itemId=TASK2,
          parentItemId=TASK)
    s.add("item.completed", {"itemType": "collab_agent_tool_call", "toolName": "Task",
                             "status": "completed", "input": EXPLORE},
          turnId="trn_1", itemId=TASK)
    s.add("turn.completed", {"state": "completed", "tokens": {"input": 100, "output": 10}},
          turnId="trn_1")
    return s


def _by_id(spans: list[Span]) -> dict[str, Span]:
    """Spans by what they are of: a tool call's item id, an agent's id."""
    out = {}
    for span in spans:
        a = span.attrs()
        key = a["canonflow.item.id"] if "canonflow.item.id" in a else a["gen_ai.agent.id"]
        assert key not in out, key
        out[str(key)] = span
    return out


def test_a_subagent_is_an_invoke_agent_span_under_the_tool_call_that_started_it():
    spans = _by_id(build_spans(claude_session().events, close=False))
    assert sorted(s.name for s in spans.values()) == [
        "execute_tool Bash", "execute_tool Glob", "execute_tool Task", "execute_tool Task",
        "invoke_agent", "invoke_agent Explore", "invoke_agent claude"]
    root, task = spans[ROOT], spans[TASK]
    agent, glob = spans[_agent(TASK)], spans[GLOB]
    assert root.name == "invoke_agent claude" and agent.name == "invoke_agent Explore"
    assert root.attrs()["gen_ai.agent.id"] == ROOT and root.parent_span_id == b""
    assert task.parent_span_id == root.span_id
    a = agent.attrs()
    assert a["gen_ai.operation.name"] == "invoke_agent"
    assert a["gen_ai.agent.name"] == "Explore"
    assert a["gen_ai.agent.description"] == "Find the config"
    assert a["gen_ai.provider.name"] == "anthropic" and a["gen_ai.conversation.id"] == SID
    assert a["canonflow.agent.parent_id"] == ROOT and a["canonflow.agent.spawner_id"] == TASK
    assert "canonflow.incomplete" not in a and agent.kind == 1  # INTERNAL: in-process
    assert agent.parent_span_id == task.span_id == item_span_id(SID, TASK)
    assert agent.span_id == agent_span_id(SID, _agent(TASK))
    assert glob.parent_span_id == agent.span_id
    assert glob.attrs()["gen_ai.agent.id"] == _agent(TASK)
    assert task.attrs()["gen_ai.agent.id"] == ROOT
    assert {s.trace_id for s in spans.values()} == {root.trace_id}
    # the subagent lives inside the call that started it
    assert task.start_ns <= agent.start_ns <= agent.end_ns <= task.end_ns


def test_a_nested_subagent_hangs_under_its_parents_tool_call():
    spans = _by_id(build_spans(claude_session().events, close=False))
    outer, inner = spans[_agent(TASK)], spans[_agent(TASK2)]
    task2, bash = spans[TASK2], spans[BASH]
    assert task2.parent_span_id == outer.span_id
    assert inner.parent_span_id == task2.span_id
    assert inner.attrs()["canonflow.agent.parent_id"] == _agent(TASK)
    assert "gen_ai.agent.name" not in inner.attrs()  # the nested Task named no agent type
    assert inner.attrs()["gen_ai.agent.description"] == "Check it"
    assert bash.parent_span_id == inner.span_id
    assert bash.attrs()["gen_ai.agent.id"] == _agent(TASK2)


def codex_session() -> Stream:
    """A spawn call that returns at once; the subagent then runs two turns of its own
    (with usage and cost), the second failing."""
    spawn, agent = "itm_eeee5555", _agent("itm_eeee5555")
    s = Stream("codex").add("session.started", {}, agentId=root_agent_id(SID))
    s.add("turn.started", {"model": "gpt-5.5"}, turnId="trn_root")
    s.tool(spawn, "spawn_agent", input={"prompt": "Review", "model": "gpt-5.5-mini"},
           turnId="trn_root")
    for n, (state, cost) in enumerate((("completed", 0.25), ("failed", 0.5))):
        turn = f"trn_sub{n}"
        s.add("turn.started", {"model": "gpt-5.5-mini"}, agent=agent, turnId=turn)
        s.tool(f"itm_ffff{n}", "Bash", agent=agent, turnId=turn)
        done: dict[str, Any] = {
            "state": state, "tokens": {"input": 100, "cachedInput": 40, "output": 10},
            "cost": {"source": "computed", "usd": cost}}
        if state == "failed":
            s.add("runtime.error", {"class": "provider_error", "message": "boom"},
                  agent=agent, turnId=turn)
            done["errorMessage"] = "stream disconnected"
        s.add("turn.completed", done, agent=agent, turnId=turn)
    s.add("turn.completed", {"state": "completed", "tokens": {"input": 7, "output": 3}},
          turnId="trn_root")
    return s


def test_a_subagents_own_turns_put_their_usage_and_cost_on_its_spans():
    builder = SpanBuilder()
    spans: list[Span] = []
    for e in codex_session().events:
        spans += builder.feed(e)
    root = next(s for s in spans if s.name == "invoke_agent codex")
    spawn = next(s for s in spans if s.name == "execute_tool spawn_agent")
    # the spawn returned before the agent's first turn: one invoke_agent span per turn
    # of it, each under the spawn call, with the same agent id
    first, second = [s for s in spans if s.name == "invoke_agent"]
    agent = _agent("itm_eeee5555")
    for span in (first, second):
        a = span.attrs()
        assert (a["gen_ai.agent.id"], a["canonflow.agent.turns"]) == (agent, 1)
        assert span.parent_span_id == spawn.span_id and span.trace_id == root.trace_id
        assert a["gen_ai.request.model"] == "gpt-5.5-mini"
        assert (a["gen_ai.usage.input_tokens"], a["gen_ai.usage.output_tokens"]) == (100, 10)
        assert a["gen_ai.usage.cache_read.input_tokens"] == 40
        assert a["canonflow.agent.cost_sources"] == ("computed",)
        assert "canonflow.incomplete" not in a
    assert first.span_id == agent_span_id(SID, agent) != second.span_id
    assert second.attrs()["canonflow.turn.id"] == "trn_sub1"
    assert (first.attrs()["canonflow.agent.cost_usd"],
            second.attrs()["canonflow.agent.cost_usd"]) == (0.25, 0.5)
    assert first.status_code == 0
    assert (second.status_code, second.status_message) == (2, "stream disconnected")
    assert second.attrs()["error.type"] == "provider_error"
    assert [e.name for e in second.events] == ["runtime.error"]
    assert root.attrs()["gen_ai.usage.input_tokens"] == 7  # the root's own turn only
    bashes = [s for s in spans if s.name == "execute_tool Bash"]
    assert [s.parent_span_id for s in bashes] == [first.span_id, second.span_id]
    assert {s.trace_id for s in spans} == {root.trace_id}
    assert len(spans) == 6  # no root turn span for the subagent's turns
    session = builder.sessions[SID]
    assert (session.turns, session.tools, session.agents) == ({}, {}, {})


def test_a_subagent_turn_that_starts_while_its_spawner_runs_is_folded_into_its_span():
    s = codex_session()
    spawn_done = next(i for i, e in enumerate(s.events)
                      if e["type"] == "item.completed" and e["itemId"] == "itm_eeee5555")
    s.events.append(s.events.pop(spawn_done))  # the spawn call ends after both turns
    s.events[-1], s.events[-2] = s.events[-2], s.events[-1]  # and before the root turn
    spans = build_spans(s.events, close=False)
    [agent] = [x for x in spans if x.name == "invoke_agent"]
    a = agent.attrs()
    assert (a["gen_ai.usage.input_tokens"], a["gen_ai.usage.output_tokens"]) == (200, 20)
    assert (a["canonflow.agent.cost_usd"], a["canonflow.agent.turns"]) == (0.75, 2)
    assert agent.status_code == 2 and "canonflow.incomplete" not in a


def test_the_root_agent_id_is_the_conversation_cores_without_session_started():
    events = [e for e in claude_session().events if e["type"] != "session.started"]
    root = next(s for s in build_spans(events) if s.name == "invoke_agent claude")
    assert root.attrs()["gen_ai.agent.id"] == ROOT == root_agent_id(SID)


def test_the_spans_are_deterministic():
    events = claude_session().events + codex_session().events[1:]
    first, second = build_spans(events), build_spans(events)
    assert first == second
    assert encode_request(first) == encode_request(second)
    assert len({(s.trace_id, s.span_id) for s in first}) == len(first)


def test_an_agents_state_is_dropped_when_its_spawning_tool_ends():
    builder = SpanBuilder()
    s = Stream().add("turn.started", {}, turnId="trn_1")
    sizes = []
    for n in range(1000):
        task = f"itm_{n:08x}"
        s.tool(task, "Task", input=EXPLORE, done=False, turnId="trn_1")
        s.tool(f"itm_g{n:07x}", "Glob", agent=_agent(task), turnId="trn_1")
        s.add("item.completed", {"itemType": "collab_agent_tool_call", "toolName": "Task",
                                 "status": "completed"}, turnId="trn_1", itemId=task)
    for e in s.events:
        builder.feed(e)
        session = builder.sessions[SID]
        sizes.append(len(session.agents) + len(session.tools) + len(session.ended))
    # open at most: the Task call, its agent and the Glob call; ended ids are capped
    assert max(sizes) == ENDED_KEPT + 3 and len(builder.sessions[SID].agents) == 0


def test_a_late_event_of_an_ended_agent_lands_under_its_span_without_a_second_one():
    s = claude_session()
    s.events = [e for e in s.events if e["type"] != "turn.completed"]
    s.tool("itm_late0000", "Read", agent=_agent(TASK), turnId="trn_1")
    spans = build_spans(s.events)
    assert sum(x.name == "invoke_agent Explore" for x in spans) == 1
    late = next(x for x in spans if x.name == "execute_tool Read")
    assert late.parent_span_id == agent_span_id(SID, _agent(TASK))
    assert late.trace_id == spans[-1].trace_id


def test_a_turn_that_ends_with_a_subagent_running_closes_it_unfinished():
    s = claude_session()
    cut = next(i for i, e in enumerate(s.events) if e.get("itemId") == BASH)
    s.events = s.events[:cut + 1]  # Bash started, never completed
    s.add("turn.completed", {"state": "interrupted"}, turnId="trn_1")
    spans = _by_id(build_spans(s.events, close=False))
    for key in (BASH, _agent(TASK2), TASK2, _agent(TASK), TASK):
        assert spans[key].attrs()["canonflow.incomplete"] is True, key
    assert "canonflow.incomplete" not in spans[ROOT].attrs()
    assert list(spans)[-1] == ROOT


def test_agent_spans_reach_a_real_otlp_receiver(tmp_path: Path):
    events = tmp_path / "agents.jsonl"
    events.write_text("".join(json.dumps(e) + "\n" for e in claude_session().events))
    with Receiver() as r:
        done = export("--from-file", str(events), "--endpoint", r.url)
        assert done.returncode == 0, done.stderr
    spans = {s.name: s for s in r.spans()}
    agent, task = spans["invoke_agent Explore"], spans["execute_tool Task"]
    assert agent.parent_span_id == task.span_id and agent.trace_id == task.trace_id
    assert agent.kind == agent.SPAN_KIND_INTERNAL
    a = attrs(agent)
    assert (a["gen_ai.agent.id"], a["gen_ai.agent.name"]) == (_agent(TASK), "Explore")
    assert spans["execute_tool Glob"].parent_span_id == agent.span_id
    assert attrs(spans["invoke_agent claude"])["gen_ai.agent.id"] == ROOT


def test_a_subagents_approval_is_an_event_on_its_span():
    s = claude_session()
    at = next(i for i, e in enumerate(s.events) if e.get("itemId") == GLOB)
    s.events[at:at] = [
        Stream().add("request.opened", {"requestType": "permission"}, agent=_agent(TASK),
                     turnId="trn_1", requestId="req_1").events[0],
        Stream().add("request.resolved", {"requestType": "permission", "outcome": "accept"},
                     agent=_agent(TASK), turnId="trn_1", requestId="req_1").events[0]]
    for n, e in enumerate(s.events, 1):  # renumbered and dated in order
        e["seq"], e["createdAt"] = n, f"2026-01-01T00:00:{n:02d}.000Z"
    spans = _by_id(build_spans(s.events))
    agent = spans[_agent(TASK)]
    assert [e.name for e in agent.events] == ["request.opened", "request.resolved"]
    assert dict(agent.events[1].attributes)["canonflow.request.wait_ms"] == 1000
    assert spans[ROOT].events == ()


def test_a_stream_without_agent_ids_nests_a_subagents_calls_under_its_task_call():
    """Events of a runtime whose adapter does not say the agent yet: as before, a call
    whose parentItemId is an open Task call of its turn is that call's child."""
    s = claude_session()
    for e in s.events:
        e.pop("agentId", None)
        e.pop("parentAgentId", None)
    spans = _by_id(build_spans(s.events))
    assert not any(x.name.startswith("invoke_agent ") and x.name != "invoke_agent claude"
                   for x in spans.values())
    assert spans[GLOB].parent_span_id == spans[TASK].span_id
    assert spans[BASH].parent_span_id == spans[TASK2].span_id
    assert spans[TASK2].parent_span_id == spans[TASK].span_id
