"""Normalised decisions: the words a protocol shares across runtimes, mapped once.

Every `request.resolved` carries the runtime's own word in `decision` and the shared
one in `outcome` (topics.canonical.Decision); every `user-input.resolved` an `outcome`
(InputOutcome). Each translator maps its runtime's approval words next to the code
that reads them (Claude's `behavior`, Codex's ReviewDecision, OpenCode's reply, ACP's
option kind). What is here belongs to a protocol that several runtimes forward: MCP's
elicitation result `{action, content}` (Claude's control protocol, the Codex
app-server and ACP agents pass an MCP server's elicitation through unchanged).
"""

from __future__ import annotations

from typing import Any

from msgspec import UNSET, UnsetType

from topics.canonical import Decision, InputOutcome

#: MCP ElicitResult.action -> the answer's outcome.
_ELICITATION: dict[str, InputOutcome] = {"accept": "answered", "decline": "declined",
                                         "cancel": "cancelled"}
_ACTIONS: dict[str, Decision] = {"accept": "accept", "decline": "decline", "cancel": "cancel"}


def elicitation_outcome(result: Any) -> InputOutcome | UnsetType:
    """The InputOutcome of an MCP elicitation result: by its `action`; "answered" for a
    result without one (a client that only sends the content); UNSET for anything else
    (an error answer)."""
    if not isinstance(result, dict) or "error" in result:
        return UNSET
    action = result.get("action")
    if action is None:
        return "answered"
    return _ELICITATION.get(action, UNSET) if isinstance(action, str) else UNSET


def elicitation_decision(action: Any) -> Decision | UnsetType:
    """The Decision an elicitation's `action` stands for on its request.resolved: MCP's
    accept / decline / cancel are the shared words already."""
    return _ACTIONS.get(action, UNSET) if isinstance(action, str) else UNSET
