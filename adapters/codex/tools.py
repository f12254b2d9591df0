"""codex: the fields of a tool item (commandExecution, fileChange, mcpToolCall,
dynamicToolCall, collabAgentToolCall, webSearch, ...): its normalised tool name and input,
the normalised fields of its kind (adapters.core.tools), and its output when it completes."""

from __future__ import annotations

from typing import Any

from adapters.codex.common import get_str, or_unset
from adapters.core.emitter import UNSET, Emitter
from adapters.core.lifecycle import taken
from adapters.core.tools import (
    change_fields,
    command_text,
    mcp_tool_name,
    normalize_tool_name,
    tool_fields,
)


def _join_text(parts: Any, key: str) -> str:
    if not isinstance(parts, list):
        return ""
    return "".join(p[key] for p in parts if isinstance(p, dict) and isinstance(p.get(key), str))


def tool_output(kind: str, item: dict[str, Any], out: Emitter, cid: str) -> dict[str, Any]:
    """The `output` fields of a completed tool item (canonical id `cid`): from the item,
    or from its spooled output stream, taken (read and closed)."""
    if kind == "commandExecution":
        aggregated = item.get("aggregatedOutput")
        if isinstance(aggregated, str):
            return {"output": aggregated}
        return taken(out, cid, "command_output", "output")
    if kind == "fileChange":
        return taken(out, cid, "file_change_output", "output")
    return {"output": _item_output(kind, item)}


def _item_output(kind: str, item: dict[str, Any]) -> str:
    if kind == "mcpToolCall":
        error = item.get("error")
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return error["message"]
        result = item.get("result")
        return _join_text(result.get("content"), "text") if isinstance(result, dict) else ""
    if kind == "dynamicToolCall":
        return _join_text(item.get("contentItems"), "text")
    if kind == "functionCallOutput":
        body = item.get("output")
        return body if isinstance(body, str) else _join_text(body, "text")
    if kind == "collabAgentToolCall":
        states = item.get("agentsStates")
        return "\n".join(s["message"] for s in states.values()
                         if isinstance(s, dict) and isinstance(s.get("message"), str)
                         ) if isinstance(states, dict) else ""
    if kind == "imageGeneration":
        return get_str(item, "savedPath") or ""
    return ""


def item_tool_fields(kind: str, item: dict[str, Any], cap: int) -> dict[str, Any]:
    """Normalised tool name and input of a tool item (chat: tool_use), and the
    normalised fields (command, cwd, paths, diff, url, query, MCP names) of its kind;
    `cap`: the per-item cap (a diff's)."""
    fields = _tool_name_input(kind, item)
    name = fields.get("toolName")
    if kind == "commandExecution":
        command = command_text(item.get("command"))
        if command is not None:
            fields["command"] = command
        if isinstance(item.get("cwd"), str) and item["cwd"]:
            fields["cwd"] = item["cwd"]
    elif kind == "fileChange":
        fields.update(change_fields(item.get("changes"), cap))
    elif kind == "webSearch":
        action = item.get("action")
        action = action if isinstance(action, dict) else {}
        query = get_str(item, "query") or get_str(action, "query")
        if query:
            fields["query"] = query
        if get_str(action, "url"):
            fields["url"] = action["url"]
    elif isinstance(name, str):  # mcpToolCall, dynamicToolCall: by name and arguments
        fields.update(tool_fields(name, item.get("arguments"), cap))
        if kind == "mcpToolCall" and get_str(item, "server") and get_str(item, "tool"):
            fields.update(mcpServer=item["server"], mcpTool=item["tool"])  # as Codex split them
    return fields


def _tool_name_input(kind: str, item: dict[str, Any]) -> dict[str, Any]:
    if kind == "commandExecution":
        if not isinstance(item.get("command"), str):  # a partial item: the start had it
            return {"toolName": "Bash"}
        inp: dict[str, Any] = {"command": item["command"]}
        if isinstance(item.get("cwd"), str):
            inp["cwd"] = item["cwd"]
        return {"toolName": "Bash", "input": inp}
    if kind == "fileChange":
        changes = item.get("changes")
        changes = changes if isinstance(changes, list) else []
        title = ", ".join(
            f"{c['kind'].get('type') if isinstance(c.get('kind'), dict) else c.get('kind')} "
            f"{c.get('path')}" for c in changes if isinstance(c, dict))
        return {"toolName": "Edit", "input": {"changes": changes}, "title": title or UNSET}
    if kind == "mcpToolCall":
        return {"toolName": mcp_tool_name(str(item.get("server")), str(item.get("tool"))),
                "input": item.get("arguments")}
    if kind == "dynamicToolCall":
        return {"toolName": normalize_tool_name(str(item.get("tool"))),
                "input": item.get("arguments")}
    if kind == "functionCallOutput":
        return {"toolName": normalize_tool_name(str(item.get("name")))}
    if kind == "collabAgentToolCall":
        return {"toolName": normalize_tool_name(str(item.get("tool"))), "title": str(item.get("tool")),
                "input": {k: item.get(k) for k in ("prompt", "receiverThreadIds", "model")
                          if item.get(k) is not None}}
    if kind == "webSearch":
        return {"toolName": "WebSearch", "input": {"query": item.get("query", "")},
                "title": or_unset(get_str(item, "query"))}
    if kind == "imageView":
        return {"toolName": "view_image", "input": {"path": item.get("path")}}
    if kind == "imageGeneration":
        return {"toolName": "image_generation",
                "input": {"revisedPrompt": item.get("revisedPrompt")}}
    if kind == "sleep":
        return {"toolName": "sleep", "input": {"durationMs": item.get("durationMs")}}
    return {}


