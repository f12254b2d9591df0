"""Agent identity in the conversation core (adapters.core.emitter.Emitter, "Agents"): the
root agent's id on session.started only, a subagent's id and its parent's on every event
emitted for it, the same hash as the tool item that started it, deltas held back keeping
the agent they were streamed by."""

from __future__ import annotations

from adapters.core.emitter import Emitter
from topics.canonical import (
    ContentDelta,
    ContentDeltaPayload,
    ItemCompleted,
    ItemPayload,
    SessionStarted,
    SessionStartedPayload,
)


def _out(session: str = "s1") -> Emitter:
    return Emitter("claude", session, 0, 0, False, "claude.sdk.message")


def test_root_agent_id_is_on_session_started_only_and_deterministic() -> None:
    out = _out()
    out.emit(SessionStarted, SessionStartedPayload())
    out.emit(ContentDelta, ContentDeltaPayload(streamKind="assistant_text", delta="hi"),
             item=out.id("itm", "m1"))
    started, delta = out.events
    assert started.agentId == _out().agent_id(None) == out.agent_id(None)
    assert started.agentId.startswith("agt_") and started.agentId != _out("s2").agent_id(None)
    assert delta.agentId is not started.agentId and not isinstance(delta.agentId, str)


def test_subagent_events_carry_their_agent_and_parent_sharing_the_spawners_hash() -> None:
    out = _out()
    outer, inner = out.id("itm", "toolu_outer"), out.id("itm", "toolu_inner")
    out.set_agent(outer)
    out.emit(ItemCompleted, ItemPayload(itemType="assistant_message", status="completed"),
             item=out.id("itm", "m2"))
    out.set_agent(inner, outer)
    out.emit(ItemCompleted, ItemPayload(itemType="assistant_message", status="completed"),
             item=out.id("itm", "m3"))
    out.set_agent(None)
    out.emit(ItemCompleted, ItemPayload(itemType="assistant_message", status="completed"),
             item=out.id("itm", "m4"))
    first, nested, root = out.events
    assert (first.agentId, first.parentAgentId) == ("agt_" + outer[4:], out.agent_id(None))
    assert (nested.agentId, nested.parentAgentId) == ("agt_" + inner[4:], first.agentId)
    assert not isinstance(root.agentId, str) and not isinstance(root.parentAgentId, str)


def test_a_held_delta_keeps_the_agent_it_was_streamed_by() -> None:
    out = _out()
    out.hold = lambda text: len(text) - 4 if text.endswith("ghp_") else len(text)
    spawner = out.id("itm", "toolu_1")
    item = out.id("itm", "m1")
    out.set_agent(spawner)
    out.emit(ContentDelta, ContentDeltaPayload(streamKind="assistant_text", delta="key ghp_"),
             item=item)
    out.set_agent(None)
    out.emit(ItemCompleted, ItemPayload(itemType="assistant_message", status="completed"),
             item=item)
    sent, released, completed = out.events
    assert (sent.payload.delta, released.payload.delta) == ("key ", "ghp_")  # type: ignore[attr-defined]
    assert released.agentId == sent.agentId == out.agent_id(spawner)
    assert not isinstance(completed.agentId, str)
