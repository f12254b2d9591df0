"""codex: collab agents (app-server v2 `collabAgentToolCall`), which subagent a message
is from.

A collab agent runs in a thread of its own, on the same connection: every notification,
request and answer names its thread (`threadId`, a legacy approval's `conversationId`).
The agent is started by a `collabAgentToolCall` item of tool `spawnAgent` (or
`resumeAgent`) in the sender's thread (`senderThreadId`); its thread is that item's
`receiverThreadIds` (empty on item/started: the item completes once the thread exists).
So the events of a receiver thread belong to the subagent started by that item
(Emitter.set_agent: spawner = the item's canonical id), whose parent is the agent of the
sender thread (the root's, or the spawner of the sender's own thread: agents nest).

The thread's first messages may precede the item's completion (the app-server attaches
to a new thread while the spawn call is still running), so it is also bound as soon as
it is announced: a `thread/started` whose thread names its `parentThreadId` (or
`source.subAgent.thread_spawn.parent_thread_id`), or a `subAgentActivity` item
(`agentThreadId`) in the parent's thread, binds it to the sender thread's one open
`spawnAgent` item not yet bound. With several open at once the receiver waits for its
item's completion; what its thread said before is the root agent's.

State.agents keeps the binding of the last _KEPT subagent threads: it outlives the
spawning item (which completes as the agent starts), since the agent's thread speaks
until it is closed, and a closed agent may be resumed.
"""

from __future__ import annotations

from typing import Any, Final

from adapters.codex.common import get_str
from adapters.codex.state import State, SubAgent
from adapters.core.emitter import Emitter
from adapters.core.emitter import replace as _replace

_KEPT: Final = 64  # subagent threads remembered (State.agents)
_STARTERS = frozenset({"spawnAgent", "resumeAgent"})  # collab tools that start an agent


def speak_for(state: State, out: Emitter, thread: str | None) -> None:
    """The events emitted from now on are the agent's whose thread is `thread` (a
    bound subagent thread), else the root agent's."""
    agents = state.agents
    agent = agents.get(thread) if agents and thread is not None else None
    if agent is None:
        out.set_agent(None)
    else:
        out.set_agent(agent.spawner, agent.parent)


def spawned(state: State, item: dict[str, Any], thread: str, spawner: str) -> State:
    """A collabAgentToolCall item (canonical id `spawner`) in `thread`: the threads a
    spawnAgent or resumeAgent call names as receivers are its agent's, unless already
    bound."""
    if get_str(item, "tool") not in _STARTERS:
        return state
    receivers = item.get("receiverThreadIds")
    if not isinstance(receivers, list):
        return state
    for receiver in receivers:
        if isinstance(receiver, str) and receiver not in state.agents and receiver != thread:
            state = _bind(state, receiver, spawner, thread)
    return state


def announced(state: State, out: Emitter, child: str, sender: str | None) -> State:
    """A subagent thread `child` announced before its spawning item completed, by its
    sender thread `sender`: bound to the sender's one open spawnAgent item that no thread
    is bound to yet."""
    if sender is None or child in state.agents or child == sender:
        return state
    bound = {a.spawner for a in state.agents.values()}
    free = [out.id("itm", item.turn, native_id) for native_id, item in state.items.items()
            if item.kind == "collabAgentToolCall" and item.tool == "spawnAgent"
            and item.thread == sender]
    free = [spawner for spawner in free if spawner not in bound]
    if len(free) != 1:  # none, or several: the item's completion will say
        return state
    return _bind(state, child, free[0], sender)


def parent_thread(thread: dict[str, Any]) -> str | None:
    """The thread that spawned a subagent thread (a v2 Thread's `parentThreadId`, else
    its `source.subAgent.thread_spawn.parent_thread_id`), None for another thread."""
    parent = get_str(thread, "parentThreadId")
    if parent is not None:
        return parent
    source = thread.get("source")
    sub = source.get("subAgent") if isinstance(source, dict) else None
    spawn = sub.get("thread_spawn") if isinstance(sub, dict) else None
    return get_str(spawn, "parent_thread_id") if isinstance(spawn, dict) else None


def _bind(state: State, child: str, spawner: str, sender: str) -> State:
    parent = state.agents.get(sender)
    agents = {**state.agents, child: SubAgent(spawner, parent.spawner if parent else None)}
    if len(agents) > _KEPT:
        del agents[next(iter(agents))]
    return _replace(state, agents=agents)
