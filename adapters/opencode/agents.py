"""OpenCode: subagents (docs "Agents").

OpenCode's `task` tool runs a subagent as a child session (tool/task.ts): it creates a
session whose `parentID` is the caller's session (session.created `info.parentID`),
names it in its running tool part (`state.metadata.sessionId`, with the title, before
the child's prompt is sent), and completes once the child's prompt loop has ended (the
child went idle). The bus carries the child's events beside its parent's, each with the
child's `sessionID` (a canonical thread of its own). Every message of a child session
belongs to the subagent started by that task part: its events carry `agt_<h>` for the
part's item `itm_<h>`, and the agent of the session that ran the task as parent, so a
child's child nests.

The state keeps one entry per running task part that named its child (State.agents),
dropped when the part completes (closed with its turn, or its session deleted). The
child's session.created comes just before its task part names it: it is linked at once
when its parent session has exactly one running task part without a child; with several
(tasks run in parallel) the child's first events are the root's until its part names it.
"""

from __future__ import annotations

from collections.abc import Container
from typing import Any

from adapters.core.emitter import Emitter
from adapters.core.emitter import replace as _replace
from adapters.opencode.state import Agent, State


def _message_session(kind: str, props: dict[str, Any]) -> str:
    """The native session a message is about: `sessionID` beside the payload or in its
    part or message, a session event's own id; "" when it names none."""
    sid = props.get("sessionID")
    if isinstance(sid, str):
        return sid
    for key in ("part", "info"):
        inner = props.get(key)
        if isinstance(inner, dict) and isinstance(inner.get("sessionID"), str):
            return inner["sessionID"]  # type: ignore[no-any-return]
    info = props.get("info")
    if kind.startswith("session.") and isinstance(info, dict) and isinstance(info.get("id"), str):
        return info["id"]  # type: ignore[no-any-return]
    return ""


def _enter(state: State, kind: str, props: dict[str, Any], out: Emitter) -> None:
    """Say whose message this is (Emitter.set_agent): the subagent its session is, or
    the root agent."""
    agent = state.agents.get(_message_session(kind, props))
    if agent is None:
        out.set_agent(None)
    else:
        out.set_agent(agent.spawner, agent.parent or None)


def _link(state: State, out: Emitter, child: str, pid: str, sid: str) -> State:
    """The task tool part `pid` of session `sid` runs the child session `child` (a part
    runs one child: an earlier guess for the part is dropped)."""
    if child == sid:
        return state
    caller = state.agents.get(sid)
    agent = Agent(part=pid, spawner=out.id("itm", pid),
                  parent=caller.spawner if caller is not None else "")
    if state.agents.get(child) == agent:
        return state
    agents = {c: a for c, a in state.agents.items() if a.part != pid}
    agents[child] = agent
    return _replace(state, agents=agents)


def _link_child(state: State, out: Emitter, child: str, parent: Any) -> State:
    """A session created as `parent`'s child, before its task part names it: linked to
    the parent's one running task part without a child, and its own events go to that
    subagent from now on. None such, or several: left to the part that names it."""
    if not isinstance(parent, str) or not parent or child in state.agents:
        return state
    linked = {a.part for a in state.agents.values()}
    running = [pid for pid, p in state.parts.items()
               if p.sid == parent and p.tool == "task" and p.started and pid not in linked]
    if len(running) != 1:
        return state
    state = _link(state, out, child, running[0], parent)
    agent = state.agents.get(child)
    if agent is not None:
        out.set_agent(agent.spawner, agent.parent or None)
    return state


def _unlink(state: State, parts: Container[str] = (), sid: str = "") -> State:
    """Forget the children of the task parts `parts` (completed, or gone with their
    session) and the child session `sid` (deleted)."""
    agents = {c: a for c, a in state.agents.items() if c != sid and a.part not in parts}
    return _replace(state, agents=agents) if len(agents) != len(state.agents) else state
