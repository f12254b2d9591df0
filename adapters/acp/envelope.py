"""acp: where a message's events go (canonical thread, turn and agent), and the JSON-RPC
basics every handler reads: ids, objects, errors.

Agents: ACP has no notion of a subagent. claude-agent-acp (0.19 on) says in the
`_meta.claudeCode.parentToolUseId` of a session/update that the update is a subagent's:
the id of the tool call (Claude's Task / Agent tool) that started it. So a subagent's
id is the hash of that tool call's item (Emitter.agent_id), and its parent agent is the
one that ran that tool call (Tool.agent: the tool calls of a running subagent are
open, so the chain is resolved from the open tools only, and forgotten with them).
A tool call belongs to the agent its announcements name (its later updates, the
permission request and the client methods that serve it may name none: the PostToolUse
hook's update carries no parentToolUseId); a message item to the agent of its chunks;
any other session/update to the agent it names; anything else to the root agent.

Errors: -32600/-32601/-32602/-32700 are validation errors, -32000
(auth required) a permission error, -32603, gemini's 500 and any other code a provider
error.
"""

from __future__ import annotations

from typing import Any

from msgspec import UnsetType

from adapters.acp.state import State
from adapters.core.contract import MalformedRecord
from adapters.core.emitter import UNSET, Emitter
from adapters.core.lifecycle import At
from topics.canonical import (
    ProviderRefs,
    RuntimeErrorEvent,
    RuntimeErrorPayload,
)


class Ctx:
    """Canonical ids of the thread and turn a message belongs to; made, it says whose
    the events that follow are (`agent`: the native id of the tool call that started
    the subagent they are from; None: the root agent's)."""

    __slots__ = ("sid", "thread", "turn")

    def __init__(self, state: State, out: Emitter, sid: str | None = None,
                 agent: str | None = None):
        self.sid = sid if sid is not None else state.session
        self.thread: str | UnsetType = out.id("thr", self.sid) if self.sid else UNSET
        self.turn: str | UnsetType = out.id("trn", str(state.turns)) if state.turnOpen else UNSET
        speak_as(state, out, agent)

    def refs(self, **ids: str | UnsetType) -> ProviderRefs | UnsetType:
        if not self.sid and all(v is UNSET for v in ids.values()):
            return UNSET
        return ProviderRefs(providerSessionId=self.sid or UNSET, **ids)  # type: ignore[arg-type]

    def at(self, item: str | UnsetType = UNSET,
           refs: ProviderRefs | UnsetType = UNSET) -> At:
        """Where an event of the turn goes, for the conversation core."""
        return At(self.thread, self.turn, item, refs=refs)


def speak_as(state: State, out: Emitter, agent: str | None) -> None:
    """The events emitted from now on are the subagent's started by the tool call
    `agent` (None: the root agent's); its parent is the agent that ran that tool call,
    while the call is open (the root's once it is not known)."""
    if agent is None:
        out.set_agent(None)
        return
    spawner = state.tools.get(agent)
    parent = spawner.agent if spawner is not None else None
    out.set_agent(out.id("itm", agent), None if parent is None else out.id("itm", parent))


def native_agent(fields: dict[str, Any]) -> str | None:
    """The subagent a session update says it is from: claude-agent-acp's
    `_meta.claudeCode.parentToolUseId` (None: the root agent, or an agent that does not
    say)."""
    meta = fields.get("_meta")
    claude = meta.get("claudeCode") if isinstance(meta, dict) else None
    parent = claude.get("parentToolUseId") if isinstance(claude, dict) else None
    return parent if isinstance(parent, str) and parent else None


def id_key(rid: Any) -> str:
    """A dict key for a JSON-RPC id that keeps 1 and "1" apart."""
    if isinstance(rid, bool) or not isinstance(rid, (int, str)):
        if rid is None:
            return "null"
        raise MalformedRecord("a JSON-RPC id must be a string, an integer or null")
    return f"n{rid}" if isinstance(rid, int) else f"s{rid}"


def as_object(value: Any, what: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise MalformedRecord(f"{what} must be an object")
    return value


def as_str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


# ---- errors -------------------------------------------------------------------

_VALIDATION_CODES = frozenset({-32700, -32600, -32601, -32602})


def _error_class(code: Any) -> str:
    if isinstance(code, list | dict):
        raise MalformedRecord("a JSON-RPC error's code must be a number")
    if code in _VALIDATION_CODES:
        return "validation_error"
    if code == -32000:  # authentication required
        return "permission_error"
    return "provider_error"  # -32603, gemini's 500, and anything else


def error_message(error: dict[str, Any]) -> str:
    message = error.get("message")
    return message if isinstance(message, str) and message else f"error {error.get('code')}"


def runtime_error(state: State, out: Emitter, error: dict[str, Any], method: str | None,
                  sid: str | None = None) -> str:
    c = Ctx(state, out, sid)
    detail = {"code": error.get("code"), "method": method, **({"data": error["data"]}
                                                              if "data" in error else {})}
    message = error_message(error)
    out.emit(RuntimeErrorEvent,
             RuntimeErrorPayload(message=message, errorClass=_error_class(error.get("code")),  # type: ignore[arg-type]
                                 willRetry=False, detail=detail),
             thread=c.thread, turn=c.turn, refs=c.refs())
    return message


def update_fields(upd: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in upd.items() if k not in ("sessionUpdate", "_meta")}
