"""acp: client-side methods the agent calls (`fs/read_text_file`, `fs/write_text_file`,
`terminal/*`).

They belong to the tool call that needs them when one is open (same file path; the
latest shell tool without a terminal): they update that item. Otherwise they become
tool items of their own (Read, Write, Bash) that their responses complete; those have
no tool-call id, only `providerRequestId`.
"""

from __future__ import annotations

from typing import Any

from adapters.acp.envelope import Ctx, as_object, as_str, error_message
from adapters.acp.state import Pending, State, Tool
from adapters.acp.tool_calls import (
    STATUS,
    complete_tool,
    start_tool,
    tool_name,
    tool_payload,
    tool_refs,
)
from adapters.acp.tool_content import Content, save
from adapters.core.emitter import Emitter
from adapters.core.emitter import replace as _replace
from adapters.core.spool import whole_fields
from topics.canonical import (
    ItemUpdated,
)


def _tool_for_path(state: State, path: str | None) -> str | None:
    for key, tool in reversed(state.tools.items()):
        if not tool.own and path is not None and path in tool.paths:
            return key
    return None


def _tool_for_terminal(state: State) -> str | None:
    bound = set(state.terminals.values())
    for key, tool in reversed(state.tools.items()):
        if not tool.own and key not in bound and (
                tool.kind == "execute" or tool_name(key, tool) == "Bash"):
            return key
    return None


def _client_op(state: State, obj: dict[str, Any], key: str, out: Emitter, related: str | None,
               own_tool: Tool, detail: dict[str, Any], arg: str | None = None) -> State:
    """Attach a client-side method call to its tool item, or open an item for it."""
    method, rid = obj["method"], str(obj["id"])
    if related is not None:
        tool = state.tools[related]
        c = Ctx(state, out, agent=tool.agent)
        payload = tool_payload(related, tool, STATUS.get(tool.status, "inProgress"), False,
                               Content(out, related))
        out.emit(ItemUpdated, _replace(payload, data={**(payload.data or {}), "clientRequest": detail}),  # type: ignore[dict-item]
                 thread=c.thread, turn=c.turn, item=out.id("itm", related),
                 refs=tool_refs(c, related, tool, rid))
        pending = Pending(method=method, tool=related, arg=arg)
    else:
        own = f"{method}#{rid}"
        state = start_tool(state, out, own, _replace(own_tool, own=True, status="in_progress"),
                           synthetic=True, rid=rid)
        pending = Pending(method=method, tool=own, own=True, arg=arg)
    return _replace(state, agent={**state.agent, key: pending})


def on_fs_read(state: State, obj: dict[str, Any], params: dict[str, Any], key: str,
               out: Emitter) -> State:
    path = as_str(params.get("path"))
    raw: dict[str, Any] = {"file_path": path, **{k: params[k] for k in ("line", "limit")
                                                 if k in params}}
    return _client_op(state, obj, key, out, _tool_for_path(state, path),
                      Tool(name="Read", title=path, rawInput=raw, paths=[path] if path else []),
                      {"method": obj["method"], "path": path})


def on_fs_write(state: State, obj: dict[str, Any], params: dict[str, Any], key: str,
                out: Emitter) -> State:
    path = as_str(params.get("path"))
    raw = {"file_path": path, "content": params.get("content")}
    return _client_op(state, obj, key, out, _tool_for_path(state, path),
                      Tool(name="Write", title=path, rawInput=raw, paths=[path] if path else []),
                      {"method": obj["method"], "path": path})


def on_terminal_create(state: State, obj: dict[str, Any], params: dict[str, Any], key: str,
                       out: Emitter) -> State:
    raw: dict[str, Any] = {k: params[k] for k in ("command", "args", "cwd") if k in params}
    related = _tool_for_terminal(state)
    cwd = as_str(params.get("cwd"))
    if related is not None and cwd:  # the command runs there
        state = _replace(state, tools={**state.tools, related: _replace(state.tools[related],
                                                                         cwd=cwd)})
    return _client_op(state, obj, key, out, related,
                      Tool(name="Bash", kind="execute", rawInput=raw),
                      {"method": obj["method"], **raw})


def on_terminal_call(state: State, obj: dict[str, Any], params: dict[str, Any], key: str,
                     out: Emitter) -> State:
    """terminal/output, wait_for_exit, release, kill: answered about a known terminal."""
    terminal = as_str(params.get("terminalId"))
    pending = Pending(method=obj["method"], arg=terminal,
                      tool=state.terminals.get(terminal or ""))
    return _replace(state, agent={**state.agent, key: pending})


def on_client_method_answered(state: State, obj: dict[str, Any], pending: Pending,
                              out: Emitter) -> State:
    """The client's answer to an fs/* or terminal/* request (or to an extension method)."""
    tool_key = pending.tool
    tool = state.tools.get(tool_key or "")
    if tool_key is None or tool is None:
        return state  # extension or unknown method, or a terminal whose tool call is over
    rid = str(obj["id"])
    if "error" in obj:
        message = error_message(as_object(obj["error"], "error"))
        if pending.own:
            save(out, tool_key, {"text": message})
            return complete_tool(state, out, tool_key, tool, "failed", rid=rid)
        payload = tool_payload(tool_key, tool, STATUS.get(tool.status, "inProgress"), False,
                               Content(out, tool_key))
        c = Ctx(state, out, agent=tool.agent)
        out.emit(ItemUpdated, _replace(payload, data={
            **(payload.data or {}), "clientError": {"method": pending.method, "message": message}}),  # type: ignore[dict-item]
            thread=c.thread, turn=c.turn, item=out.id("itm", tool_key),
            refs=tool_refs(c, tool_key, tool, rid))
        return state
    result = obj["result"] if isinstance(obj["result"], dict) else {}
    method = pending.method
    if method == "terminal/create" and isinstance(result.get("terminalId"), str):
        return _replace(state, terminals={**state.terminals, result["terminalId"]: tool_key})
    if method == "terminal/output":
        status = result.get("exitStatus")
        code = status.get("exitCode") if isinstance(status, dict) else None
        save(out, tool_key, {"terminal": as_str(result.get("output")) or ""})  # all so far
        tool = _replace(tool, exitCode=code if isinstance(code, int) else tool.exitCode)
    elif method == "terminal/wait_for_exit":
        code = result.get("exitCode")
        tool = _replace(tool, exitCode=code if isinstance(code, int) else tool.exitCode)
    state = _replace(state, tools={**state.tools, tool_key: tool})
    if not tool.own:
        return state  # the tool call's own updates report its progress and its end
    if method == "fs/read_text_file":
        save(out, tool_key, {"text": as_str(result.get("content"))})
        return complete_tool(state, out, tool_key, tool, "completed", rid=rid)
    if method == "fs/write_text_file":
        save(out, tool_key, {"text": ""})
        return complete_tool(state, out, tool_key, tool, "completed", rid=rid)
    if method in ("terminal/release", "terminal/kill"):
        failed = tool.exitCode not in (0, None) or method == "terminal/kill"
        terminal = Content(out, tool_key).get("terminal")  # the output, "" when none was read
        return complete_tool(state, out, tool_key, tool, "failed" if failed else "completed",
                             rid=rid, output=whole_fields(terminal) if terminal else {"output": ""})
    return state
