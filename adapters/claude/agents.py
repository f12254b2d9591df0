"""claude: whose message it is, the root agent's or a subagent's (docs "Agents").

Claude Code's Task (Agent) tool starts a subagent; every message of that subagent
(`assistant`, `user`, `stream_event`, `tool_progress`) carries `parent_tool_use_id`,
the tool_use id of the Task call that started it, and a subagent may start its own
(its Task tool_use block is in a message carrying its own parent_tool_use_id). A
message about one tool call (`control_request` can_use_tool or hook_callback naming a
`tool_use_id`, their `control_response` and `control_cancel_request`, and
`system/task_*` or `system/permission_denied`) belongs to the agent that made that
call: the call's own `parent`.

So the subagent started by Task call T is `agt_<h>` where `itm_<h>` is T's item, and
its parent agent is the one T's message came from: Tool.parent of T, remembered in
State.agents when T's subagent speaks first (nested subagents only; a first-level
one's parent is the root) and kept until the turn ends, so the items a turn closes
late still name their agent. A Task call this stream never showed (a resumed session)
gives its subagent the root as parent; a permission request for a call not shown yet
is the root's.
"""

from __future__ import annotations

from typing import Any

from adapters.claude.state import State
from adapters.core.emitter import Emitter
from adapters.core.emitter import replace as _replace


def enter(state: State, obj: dict[str, Any], out: Emitter) -> State:
    """Say whose native message `obj` is (Emitter.set_agent) before translating it."""
    spawner = obj.get("parent_tool_use_id")
    if isinstance(spawner, str) and spawner:
        task = state.tools.get(spawner)
        if task is not None and task.parent is not None and spawner not in state.agents:
            state = _replace(state, agents={**state.agents, spawner: task.parent})
        enter_subagent(state, out, spawner)
        return state
    kind = obj.get("type")
    if kind == "stream_event" or kind == "assistant" or kind == "user" or kind == "result":
        # the hot path: the root's deltas, answers and results, whose agent the record's
        # driver already set (it starts each message as the root's)
        return state
    tool = state.tools.get(_tool_of(state, kind, obj) or "")
    enter_subagent(state, out, tool.parent if tool is not None else None)
    return state


def enter_subagent(state: State, out: Emitter, spawner: str | None) -> None:
    """The events from now on are the subagent's started by Task call `spawner` (None:
    the root agent's)."""
    if spawner is None:
        out.set_agent(None)
        return
    grand = state.agents.get(spawner)
    out.set_agent(out.id("itm", spawner), out.id("itm", grand) if grand else None)


def _tool_of(state: State, kind: Any, obj: dict[str, Any]) -> str | None:
    """The tool_use id a message without parent_tool_use_id is about, if any."""
    if kind == "system":
        tid = obj.get("tool_use_id")
    elif kind == "control_request":
        request = obj.get("request")
        if not isinstance(request, dict):
            return None
        return request_tool(request)
    elif kind == "control_response" or kind == "control_cancel_request":
        response = obj.get("response") if kind == "control_response" else obj
        rid = response.get("request_id") if isinstance(response, dict) else None
        pending = state.pending.get(str(rid)) if isinstance(rid, str | int) else None
        tid = pending.tool if pending is not None else None
    else:
        return None
    return tid if isinstance(tid, str) else None


def request_tool(request: dict[str, Any]) -> str | None:
    """The tool call a control_request is about: its `tool_use_id`, or a hook input's."""
    tid = request.get("tool_use_id")
    if not isinstance(tid, str):
        hook_input = request.get("input")
        tid = hook_input.get("tool_use_id") if isinstance(hook_input, dict) else None
    return tid if isinstance(tid, str) and tid else None
