"""Finished spans from the builder's state: a root turn's and a subagent's invoke_agent
span, a tool call's execute_tool span, with their GenAI attributes (semantic
conventions 1.41.0: gen-ai-agent-spans.md, gen-ai-spans.md). Pure functions."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pipeline.views.otel.model import (
    EXTENSION_ITEM_TYPES,
    KIND_CLIENT,
    KIND_INTERNAL,
    STATUS_ERROR,
    STATUS_UNSET,
    AttrValue,
    Span,
    _content,
    _single_key,
    _str,
    provider_name,
    trace_id_for,
    turn_span_id,
    turn_tokens,
)
from pipeline.views.otel.state import _Agent, _Session, _Tool, _Turn
from topics.usage import TokenUsage

Attrs = list[tuple[str, AttrValue]]


def _usage(tokens: TokenUsage | None) -> Attrs:
    """gen_ai.usage.*: the typed tokens, whose `input` already includes cached input, as
    the OTel rule for gen_ai.usage.input_tokens asks."""
    if tokens is None:
        return []
    return [("gen_ai.usage.input_tokens", tokens.input),
            ("gen_ai.usage.output_tokens", tokens.output),
            ("gen_ai.usage.cache_read.input_tokens", tokens.cachedInput),
            ("gen_ai.usage.cache_creation.input_tokens", tokens.cacheWrite)]


def turn_cost(completed: Mapping[str, Any]) -> tuple[float | None, str | None]:
    """A turn.completed's cost in USD and its source (provider, computed, unpriced)."""
    cost = completed.get("cost")
    if not isinstance(cost, Mapping):
        return None, None
    usd = cost.get("usd")
    usd = float(usd) if isinstance(usd, (int, float)) and not isinstance(usd, bool) else None
    return usd, _str(cost.get("source"))


def turn_span(session: _Session, sid: str, turn: _Turn, end_ns: int,
              completed: Mapping[str, Any] | None) -> Span:
    """The root agent's invoke_agent span of one turn (the trace's root span)."""
    p = completed or {}
    state = _str(p.get("state"))
    model = turn.model
    vendor = provider_name(session.provider, model, session.model_provider)
    attrs: Attrs = [
        ("gen_ai.operation.name", "invoke_agent"),
        ("gen_ai.provider.name", vendor),
        ("gen_ai.agent.name", session.provider),
        ("gen_ai.agent.id", session.root_agent),
        ("gen_ai.conversation.id", sid),
    ]
    if model:
        attrs.append(("gen_ai.request.model", model))
    response_model = turn.rerouted or _single_key(p.get("modelUsage")) or model
    if response_model:
        attrs.append(("gen_ai.response.model", response_model))
    stop = _str(p.get("stopReason"))
    if stop:
        attrs.append(("gen_ai.response.finish_reasons", (stop,)))
    attrs += _usage(turn_tokens(p))
    status, message = STATUS_UNSET, ""
    if state == "failed":
        status = STATUS_ERROR
        message = _str(p.get("errorMessage")) or "turn failed"
        attrs.append(("error.type", turn.error_class or "_OTHER"))
    attrs.append(("canonflow.provider", session.provider))
    if turn.thread_id:
        attrs.append(("canonflow.thread.id", turn.thread_id))
    attrs.append(("canonflow.turn.id", turn.turn_id))
    attrs.append(("canonflow.turn.state", state or "incomplete"))
    usd, source = turn_cost(p)
    if usd is not None:
        attrs.append(("canonflow.turn.cost_usd", usd))
    if source is not None:
        attrs.append(("canonflow.turn.cost_source", source))
    if turn.abort_reason:
        attrs.append(("canonflow.turn.abort_reason", turn.abort_reason))
    if completed is None:
        attrs.append(("canonflow.incomplete", True))
    return Span(trace_id=trace_id_for(sid, turn.turn_id),
                span_id=turn_span_id(sid, turn.turn_id),
                name=f"invoke_agent {session.provider}", kind=KIND_CLIENT,
                start_ns=turn.start_ns, end_ns=max(end_ns, turn.start_ns),
                attributes=tuple(attrs), events=tuple(turn.events),
                status_code=status, status_message=message)


def agent_span(session: _Session, sid: str, agent: _Agent, end_ns: int) -> Span:
    """A subagent's invoke_agent span: INTERNAL (it runs inside its runtime's process,
    started by a tool call), named by its agent name where its spawning tool gave one;
    usage and cost are the sums over its own turns."""
    model = agent.model or session.model
    attrs: Attrs = [
        ("gen_ai.operation.name", "invoke_agent"),
        ("gen_ai.provider.name", provider_name(session.provider, model,
                                               session.model_provider)),
        ("gen_ai.agent.id", agent.agent_id),
    ]
    if agent.name:
        attrs.append(("gen_ai.agent.name", agent.name))
    if agent.description:
        attrs.append(("gen_ai.agent.description", agent.description))
    attrs.append(("gen_ai.conversation.id", sid))
    if agent.model:
        attrs.append(("gen_ai.request.model", agent.model))
    if agent.rerouted or agent.model:
        attrs.append(("gen_ai.response.model", agent.rerouted or agent.model or ""))
    if agent.finish:
        attrs.append(("gen_ai.response.finish_reasons", (agent.finish,)))
    attrs += _usage(agent.tokens)
    status, message = STATUS_UNSET, ""
    if agent.failure is not None:
        status, message = STATUS_ERROR, agent.failure
        attrs.append(("error.type", agent.error_class or "_OTHER"))
    attrs += [("canonflow.provider", session.provider),
              ("canonflow.agent.parent_id", agent.parent_agent_id or session.root_agent),
              ("canonflow.agent.spawner_id", agent.spawner),
              ("canonflow.agent.turns", agent.turns_done)]
    if agent.turn_id:
        attrs.append(("canonflow.turn.id", agent.turn_id))
    if agent.cost_usd is not None:
        attrs.append(("canonflow.agent.cost_usd", agent.cost_usd))
    if agent.cost_sources:
        attrs.append(("canonflow.agent.cost_sources", tuple(sorted(agent.cost_sources))))
    if agent.abort_reason:
        attrs.append(("canonflow.agent.abort_reason", agent.abort_reason))
    if not agent.spawner_done or agent.turns:
        attrs.append(("canonflow.incomplete", True))
    return Span(trace_id=agent.trace_id, span_id=agent.span_id,
                parent_span_id=agent.parent_id,
                name=f"invoke_agent {agent.name}" if agent.name else "invoke_agent",
                kind=KIND_INTERNAL, start_ns=agent.start_ns,
                end_ns=max(end_ns, agent.last_ns, agent.start_ns), attributes=tuple(attrs),
                events=tuple(agent.events), status_code=status, status_message=message)


def tool_span(session: _Session, sid: str, tool: _Tool, end_ns: int,
              completed: Mapping[str, Any] | None, event: Mapping[str, Any] | None,
              capture_content: bool) -> Span:
    """A tool call's execute_tool span (`completed` None: closed without its
    item.completed, `canonflow.incomplete`)."""
    p: Mapping[str, Any] = {**tool.started, **(completed or {})}
    item_type = _str(p.get("itemType")) or "unknown"
    name = _str(p.get("toolName")) or item_type
    refs = (event or {}).get("providerRefs")
    call_id = _str(refs.get("providerItemId")) if isinstance(refs, Mapping) else None
    attrs: Attrs = [
        ("gen_ai.operation.name", "execute_tool"),
        ("gen_ai.tool.name", name),
        ("gen_ai.tool.call.id", call_id or tool.item_id),
        ("gen_ai.tool.type", "extension" if item_type in EXTENSION_ITEM_TYPES else "function"),
        ("gen_ai.conversation.id", sid),
    ]
    attrs.append(("gen_ai.agent.id", tool.agent_id or session.root_agent))  # who called it
    if capture_content:
        if "input" in p:
            attrs.append(("gen_ai.tool.call.arguments", _content(p["input"])))
        if "output" in p:
            attrs.append(("gen_ai.tool.call.result", _content(p["output"])))
    exit_code = p.get("exitCode")
    if isinstance(exit_code, int) and not isinstance(exit_code, bool):
        attrs.append(("process.exit.code", exit_code))
    status_str = _str(p.get("status"))
    status, message = STATUS_UNSET, ""
    if status_str == "declined":
        status, message = STATUS_ERROR, "declined"
        attrs.append(("error.type", "declined"))
    elif p.get("isError") is True or status_str == "failed":
        status, message = STATUS_ERROR, "tool error"
        attrs.append(("error.type", "tool_error"))
    attrs += [("canonflow.provider", session.provider),
              ("canonflow.item.id", tool.item_id), ("canonflow.item.type", item_type)]
    if status_str:
        attrs.append(("canonflow.item.status", status_str))
    if tool.turn_id:
        attrs.append(("canonflow.turn.id", tool.turn_id))
    if completed is None:
        attrs.append(("canonflow.incomplete", True))
    return Span(trace_id=tool.trace_id, span_id=tool.span_id, parent_span_id=tool.parent_id,
                name=f"execute_tool {name}", kind=KIND_INTERNAL, start_ns=tool.start_ns,
                end_ns=max(end_ns, tool.start_ns), attributes=tuple(attrs),
                events=tuple(tool.events), status_code=status, status_message=message)
