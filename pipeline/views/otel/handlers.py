"""One handler per canonical event type that makes or changes a span, and the rules for
ending what is open: a tool call ends with its item.completed (or, unfinished, with its
turn, its agent or its session); a subagent ends when its spawning tool has ended and
its own turns with it; a root turn ends with its turn.completed and takes along every
tool call of it still open and every subagent of its trace with no turn of its own open.

Nesting (docs "OpenTelemetry"): a root turn's invoke_agent span is its trace's root;
a root tool call's execute_tool span is its child; a subagent's invoke_agent span is the
child of the execute_tool span of the tool item that started it (`agt_<h>` was started
by `itm_<h>`), in that trace; the subagent's own tool calls are its children."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pipeline.views.otel.finish import agent_span, tool_span, turn_cost, turn_span
from pipeline.views.otel.model import (
    MAX_CONTENT_CHARS,
    AttrValue,
    Span,
    SpanEvent,
    _single_key,
    _str,
    agent_of,
    agent_span_id,
    item_span_id,
    spawner_of,
    trace_id_for,
    turn_span_id,
    turn_tokens,
)
from pipeline.views.otel.state import _Agent, _Invocation, _Session, _Tool, _Turn
from topics.canonical import TOOL_ITEM_TYPES
from topics.usage import add


class _Ctx:
    """What a handler sees: the event's session, its root turn or its subagent (an
    event of a subagent whose span is already out has `agent_id` and no `agent`), the
    event, its payload and time, and the list finished spans go to."""

    __slots__ = ("s", "sid", "turn", "agent_id", "agent", "e", "p", "now", "out", "capture")

    def __init__(self, s: _Session, sid: str, turn: _Turn | None, agent_id: str | None,
                 agent: _Agent | None, e: Mapping[str, Any], p: Mapping[str, Any], now: int,
                 out: list[Span], capture: bool):
        self.s, self.sid, self.turn, self.agent_id, self.agent = s, sid, turn, agent_id, agent
        self.e, self.p, self.now, self.out, self.capture = e, p, now, out, capture

    @property
    def holder(self) -> _Invocation | None:
        """The invoke_agent span the event is about: its subagent's, else its turn's."""
        return self.agent if self.agent_id is not None else self.turn


# ---- ending what is open -----------------------------------------------------------


def end_tool(c: _Ctx, tool: _Tool, end_ns: int, completed: Mapping[str, Any] | None,
             event: Mapping[str, Any] | None) -> None:
    """Finish `tool`'s span (`completed` None: unfinished); the subagent it started
    ends with it unless it still has turns of its own (Codex's spawn returns at once)."""
    c.out.append(tool_span(c.s, c.sid, tool, end_ns, completed, event, c.capture))
    c.s.tools.pop(tool.item_id, None)
    c.s.remember(tool.item_id, tool.trace_id)
    agent = c.s.agents.get(agent_of(tool.item_id))
    if agent is not None:
        agent.spawner_done = completed is not None
        if completed is None or not agent.turns:
            end_agent(c, agent, end_ns)


def end_agent(c: _Ctx, agent: _Agent, end_ns: int) -> None:
    """Finish a subagent's span, and first its tool calls still open (unfinished)."""
    c.s.agents.pop(agent.agent_id, None)
    for tool in [t for t in c.s.tools.values() if t.agent_id == agent.agent_id]:
        if tool.item_id in c.s.tools:
            end_tool(c, tool, end_ns, None, None)
    c.out.append(agent_span(c.s, c.sid, agent, end_ns))
    c.s.remember(agent.agent_id, agent.trace_id)


def close_turn(c: _Ctx, turn: _Turn, end_ns: int, completed: Mapping[str, Any] | None
               ) -> None:
    """Finish a root turn's span, and first what is still open in its trace."""
    for tool in [t for t in c.s.tools.values() if t.turn_id == turn.turn_id]:
        if tool.item_id in c.s.tools:
            end_tool(c, tool, end_ns, None, None)
    trace = trace_id_for(c.sid, turn.turn_id)
    for agent in [a for a in c.s.agents.values() if a.trace_id == trace and not a.turns]:
        if agent.agent_id in c.s.agents:
            end_agent(c, agent, end_ns)
    c.out.append(turn_span(c.s, c.sid, turn, end_ns, completed))
    c.s.finish(turn.turn_id)


def close_session(c: _Ctx) -> None:
    """Finish every span still open in the session (unfinished)."""
    for turn in list(c.s.turns.values()):
        close_turn(c, turn, turn.last_ns, None)
    for agent in list(c.s.agents.values()):
        if agent.agent_id in c.s.agents:
            end_agent(c, agent, agent.last_ns)
    for tool in list(c.s.tools.values()):
        if tool.item_id in c.s.tools:
            end_tool(c, tool, tool.start_ns, None, None)


# ---- subagents -----------------------------------------------------------------------


def agent_for(s: _Session, sid: str, agent_id: str, event: Mapping[str, Any], now: int
              ) -> _Agent | None:
    """The open subagent `agent_id`, opened at its first event (None: its span is out
    already, a late event of it). Its trace and parent are its spawning tool's; its
    name, description and model come from that tool's input where it gave them (Claude's
    and OpenCode's Task: `subagent_type`, `description`; Codex's spawn: `model`)."""
    agent = s.agents.get(agent_id)
    if agent is not None:
        agent.last_ns = max(agent.last_ns, now)
        return agent
    if agent_id in s.ended:
        return _again(s, sid, agent_id, event, now)
    spawner, parent_agent = spawner_of(agent_id), _str(event.get("parentAgentId"))
    tool = s.tools.get(spawner)
    if tool is not None:
        trace = tool.trace_id
    elif spawner in s.ended:
        trace = s.ended[spawner]
    elif parent_agent is not None and parent_agent in s.agents:
        trace = s.agents[parent_agent].trace_id
    else:  # its spawner was never seen (an export that started after it)
        trace = trace_id_for(sid, _str(event.get("turnId")))
    agent = s.agents[agent_id] = _Agent(agent_id, parent_agent, spawner, trace,
                                        agent_span_id(sid, agent_id),
                                        item_span_id(sid, spawner), now)
    agent.spawner_done = tool is None and spawner in s.ended
    given = tool.started.get("input") if tool is not None else None
    if isinstance(given, Mapping):
        agent.name = _str(given.get("subagent_type"))
        agent.description = _str(given.get("description"))
        agent.model = _str(given.get("model"))
    return agent


def _again(s: _Session, sid: str, agent_id: str, event: Mapping[str, Any], now: int
           ) -> _Agent | None:
    """A subagent whose span is out already starts a turn of its own (Codex's agent
    given more input after its spawn returned): an invoke_agent span for that turn, its
    own span id, the same agent id and parent. Any other late event: None."""
    turn_id = _str(event.get("turnId"))
    if event.get("type") != "turn.started" or turn_id is None:
        return None
    spawner = spawner_of(agent_id)
    agent = s.agents[agent_id] = _Agent(agent_id, _str(event.get("parentAgentId")), spawner,
                                        s.ended[agent_id], agent_span_id(sid, agent_id, turn_id),
                                        item_span_id(sid, spawner), now)
    agent.spawner_done, agent.turn_id = True, turn_id
    return agent


def _fold_turn(agent: _Agent, p: Mapping[str, Any]) -> None:
    """A subagent's own turn.completed, added to its span: tokens and cost summed, the
    last stop reason, the first failure."""
    tokens = turn_tokens(p)
    if tokens is not None:
        agent.tokens = tokens if agent.tokens is None else add(agent.tokens, tokens)
    usd, source = turn_cost(p)
    if usd is not None:
        agent.cost_usd = usd + (agent.cost_usd or 0.0)
    if source is not None:
        agent.cost_sources.add(source)
    agent.finish = _str(p.get("stopReason")) or agent.finish
    agent.rerouted = agent.rerouted or _single_key(p.get("modelUsage"))
    if _str(p.get("state")) == "failed" and agent.failure is None:
        agent.failure = _str(p.get("errorMessage")) or "turn failed"
    agent.turns_done += 1


# ---- handlers, one per canonical event type that matters -------------------------


def _on_session_configured(c: _Ctx) -> None:
    config = c.p.get("config")
    if isinstance(config, Mapping):  # keep two strings, not the (large) config
        c.s.model_provider = _str(config.get("modelProvider")) or c.s.model_provider
        c.s.model = _str(config.get("model")) or c.s.model


def _on_turn_started(c: _Ctx) -> None:
    holder, turn_id = c.holder, _str(c.e.get("turnId"))
    if holder is None:
        return
    if c.agent is not None and turn_id:
        c.agent.turns.add(turn_id)
    holder.start_ns = min(holder.start_ns, c.now)
    holder.model = _str(c.p.get("model")) or holder.model


def _on_turn_completed(c: _Ctx) -> None:
    if c.turn is not None:
        close_turn(c, c.turn, c.now, c.p)
        return
    agent, turn_id = c.agent, _str(c.e.get("turnId"))
    if agent is None:
        return
    for tool in [t for t in c.s.tools.values()
                 if t.agent_id == agent.agent_id and t.turn_id == turn_id]:
        end_tool(c, tool, c.now, None, None)
    _fold_turn(agent, c.p)
    agent.turns.discard(turn_id or "")
    if agent.spawner_done and not agent.turns:
        end_agent(c, agent, c.now)


def _on_turn_aborted(c: _Ctx) -> None:
    if c.holder is not None:
        c.holder.abort_reason = _str(c.p.get("reason")) or "aborted"


def _on_model_rerouted(c: _Ctx) -> None:
    if c.holder is not None:
        c.holder.rerouted = _str(c.p.get("toModel")) or c.holder.rerouted


def _on_item_started(c: _Ctx) -> None:
    item_id = _str(c.e.get("itemId"))
    if item_id is None or c.p.get("itemType") not in TOOL_ITEM_TYPES or item_id in c.s.tools:
        return
    c.s.tools[item_id] = _new_tool(c, item_id, dict(c.p))


def _on_item_completed(c: _Ctx) -> None:
    item_id = _str(c.e.get("itemId"))
    if item_id is None or c.p.get("itemType") not in TOOL_ITEM_TYPES:
        return
    tool = c.s.tools.pop(item_id, None) or _new_tool(c, item_id, {})
    end_tool(c, tool, c.now, c.p, c.e)


def _new_tool(c: _Ctx, item_id: str, started: dict[str, Any]) -> _Tool:
    """A tool call's span, under its agent's span (a subagent's call) or its turn's;
    under the call named by its parentItemId when that is open in the same agent and
    turn (a runtime that says no agent: a subagent's call under its Task call)."""
    turn_id = _str(c.e.get("turnId"))
    parent_tool = c.s.tools.get(_str(c.e.get("parentItemId")) or "")
    if parent_tool is not None and parent_tool.agent_id == c.agent_id and (
            c.agent_id is not None or parent_tool.turn_id == turn_id):
        trace, parent = parent_tool.trace_id, parent_tool.span_id
    elif c.agent is not None:
        trace, parent = c.agent.trace_id, c.agent.span_id
    elif c.agent_id is not None:  # a late call of a subagent whose span is out
        trace = c.s.ended.get(c.agent_id) or trace_id_for(c.sid, turn_id)
        parent = agent_span_id(c.sid, c.agent_id)
    else:
        trace = trace_id_for(c.sid, turn_id)
        parent = turn_span_id(c.sid, turn_id) if turn_id else b""
    return _Tool(item_id, turn_id, c.agent_id, trace, item_span_id(c.sid, item_id), parent,
                 c.now, started)


def _on_request(c: _Ctx) -> None:
    """request.opened / request.resolved: an event on the tool span the request gates
    (when it names an open tool item), else on its agent's or turn's span."""
    item_id = _str(c.e.get("itemId"))
    tool = c.s.tools.get(item_id) if item_id else None
    holder = c.holder
    if tool is None and holder is None:
        return
    request_id, opened = _str(c.e.get("requestId")), c.e.get("type") == "request.opened"
    attrs: list[tuple[str, AttrValue]] = [
        ("canonflow.request.type", _str(c.p.get("requestType")) or "unknown")]
    if _str(c.p.get("decision")):
        attrs.append(("canonflow.request.decision", c.p["decision"]))  # the runtime's word
    if _str(c.p.get("outcome")):
        attrs.append(("canonflow.request.outcome", c.p["outcome"]))  # the shared one
    if _str(c.p.get("toolName")):
        attrs.append(("gen_ai.tool.name", c.p["toolName"]))
    if request_id:
        attrs.append(("canonflow.request.id", request_id))
        if holder is not None and opened:
            holder.requests[request_id] = c.now
        elif holder is not None and request_id in holder.requests:
            waited = c.now - holder.requests.pop(request_id)
            attrs.append(("canonflow.request.wait_ms", waited // 1_000_000))
    target = tool.events if tool is not None else holder.events  # type: ignore[union-attr]
    target.append(SpanEvent(name=str(c.e["type"]), time_ns=c.now, attributes=tuple(attrs)))


def _on_runtime_error(c: _Ctx) -> None:
    holder = c.holder
    if holder is None:
        return
    error_class = _str(c.p.get("class")) or "_OTHER"
    if c.p.get("willRetry") is not True:
        holder.error_class = error_class  # the error a failed turn ends with
    attrs: list[tuple[str, AttrValue]] = [("error.type", error_class)]
    if _str(c.p.get("message")):
        attrs.append(("exception.message", c.p["message"][:MAX_CONTENT_CHARS]))
    if isinstance(c.p.get("willRetry"), bool):
        attrs.append(("canonflow.error.will_retry", c.p["willRetry"]))
    holder.events.append(SpanEvent(name="runtime.error", time_ns=c.now,
                                   attributes=tuple(attrs)))


HANDLERS = {
    "session.configured": _on_session_configured,
    "turn.started": _on_turn_started,
    "turn.completed": _on_turn_completed,
    "turn.aborted": _on_turn_aborted,
    "model.rerouted": _on_model_rerouted,
    "item.started": _on_item_started,
    "item.completed": _on_item_completed,
    "request.opened": _on_request,
    "request.resolved": _on_request,
    "runtime.error": _on_runtime_error,
}
