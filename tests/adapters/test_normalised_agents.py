"""A subagent that starts a nested one, expressed natively by every runtime that can
express it, gives the same agent tree (README "Agents"): the root's id on
session.started only; every subagent's events carry its `agentId` and `parentAgentId`;
a subagent's id shares its hash with the `collab_agent_tool_call` item that started it,
and that item is an event of the parent agent. The conversations are each runtime's own
(tests/adapters/test_<runtime>_agents.py, written after its protocol: Claude's and
Amp's `parent_tool_use_id`, Codex's collab agent threads, OpenCode's child sessions,
claude-agent-acp's `_meta.claudeCode.parentToolUseId`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.adapters import (
    test_acp_agents,
    test_claude_agents,
    test_codex_agents,
    test_opencode_agents,
)
from tests.adapters.harness import capture_lines, events_of, run_whole

CONVERSATIONS: dict[str, Callable[[], list[tuple[str, Any]]]] = {
    "claude": lambda: test_claude_agents.conversation(stdio=True),
    "amp": lambda: test_claude_agents.conversation(stdio=False),
    # Qwen Code's lines carry Claude's `parent_tool_use_id`
    "qwen": lambda: test_claude_agents.conversation(stdio=False),
    "codex": test_codex_agents._conversation,
    "opencode": test_opencode_agents._nested,
    "acp": test_acp_agents._conversation,
}
#: Runtimes whose stream carries no subagent's messages (README "Agents").
NO_SUBAGENTS = {"codex-exec", "gemini", "kilo", "droid", "copilot", "pi"}


def _tree(events: list[dict[str, Any]]) -> tuple[str, dict[str, str]]:
    """The root agent's id, and each subagent's parent, checking the envelope rules."""
    started = [e for e in events if e["type"] == "session.started"]
    assert len(started) == 1
    root = started[0]["agentId"]
    assert root.startswith("agt_")
    parents: dict[str, str] = {}
    for e in events:
        if e["type"] == "session.started":
            continue
        assert ("agentId" in e) == ("parentAgentId" in e), e
        if "agentId" in e:
            assert e["agentId"] != root, "the root's events carry no agentId"
            assert parents.setdefault(e["agentId"], e["parentAgentId"]) == e["parentAgentId"]
    return root, parents


@pytest.mark.parametrize("provider", sorted(CONVERSATIONS))
def test_a_nested_subagent_gives_the_same_tree_in_every_runtime(provider: str):
    events = events_of(run_whole(provider, capture_lines(CONVERSATIONS[provider]())))
    root, parents = _tree(events)
    started = {e["itemId"]: e for e in events if e["type"] == "item.started"}
    depth: dict[str, int] = {root: 0}
    for agent in sorted(parents, key=lambda a: parents[a] != root):
        spawner = started["itm_" + agent.removeprefix("agt_")]  # the same hash
        assert spawner["payload"]["itemType"] == "collab_agent_tool_call"
        # the call that started it is an event of its parent agent
        assert spawner.get("agentId", root) == parents[agent]
        depth[agent] = depth[parents[agent]] + 1
        # and the subagent did work of its own: at least one item is its
        assert any(e.get("agentId") == agent for e in started.values()), agent
    assert max(depth.values()) == 2, "a subagent that started a nested one"


def test_every_runtime_is_covered():
    from topics.runtimes import RUNTIMES

    live = {r.id for r in RUNTIMES if not r.id.endswith("-transcript")}
    assert live == set(CONVERSATIONS) | NO_SUBAGENTS
