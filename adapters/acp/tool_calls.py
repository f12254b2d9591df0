"""acp: tool_call and tool_call_update -> tool items.

* One tool call can be announced several times: claude-code-acp sends two
  `tool_call`s per id (the first with `rawInput: {}`), codex-acp sends
  `session/request_permission` *before* its `tool_call`, and gemini sends no
  `tool_call` at all before the permission request (whose `toolCall` then starts the
  item) and nothing after a rejection. Every later announcement is a merge
  (adapters.acp.tool_content).
* Tool names: the runtime's name when it gives one (`name`, or claude-code-acp's
  `_meta.claudeCode.toolName` `mcp__acp__Bash`; normalised: claude-agent-acp's `Agent`
  is Task), then gemini's tool-call id prefix (`run_shell_command__…`), then the tool
  `kind` (execute -> Bash, edit -> Edit or Write, read -> Read, search -> Grep, fetch
  -> WebFetch).
* A command's `cwd`: its input's own, else the client terminal's it runs in
  (terminal/create), else the session's (session/new, load, resume or fork); none while
  its input is a placeholder (claude's first `rawInput: {}`).
* Tool items keep only what their completion needs and are dropped when they
  complete; a late update of a call completed in the turn is dropped.
"""

from __future__ import annotations

import shlex
from typing import Any

import msgspec
from msgspec import UnsetType

from adapters.acp.chunks import close_stream
from adapters.acp.envelope import Ctx, as_str
from adapters.acp.state import State, Tool
from adapters.acp.tool_content import PATH_KEYS, Content, merge, save, terminal_ids
from adapters.core.contract import MalformedRecord
from adapters.core.emitter import UNSET, Emitter
from adapters.core.emitter import replace as _replace
from adapters.core.lifecycle import complete_item, start_item
from adapters.core.spool import whole_fields
from adapters.core.tools import item_type_for_tool, normalize_tool_name, tool_fields
from topics.canonical import (
    ItemPayload,
    ItemUpdated,
    ProviderRefs,
)

_KIND_TOOLS = {
    "execute": "Bash", "edit": "Edit", "read": "Read", "search": "Grep", "fetch": "WebFetch",
    "delete": "Delete", "move": "Move", "think": "Think", "switch_mode": "SwitchMode",
}
_FILE_KINDS = frozenset({"edit", "delete", "move"})


STATUS = {"pending": "inProgress", "in_progress": "inProgress", "completed": "completed",
          "failed": "failed"}


def tool_name(key: str, tool: Tool) -> str:
    if tool.name:
        return normalize_tool_name(tool.name)
    # gemini --acp ids are `<tool>__<tool>_<epoch ms>_<n>`: a known tool name is a good guess
    prefix = key.split("__", 1)[0] if "__" in key and not tool.own else ""
    if prefix and normalize_tool_name(prefix) != prefix:
        return normalize_tool_name(prefix)
    base = _KIND_TOOLS.get(tool.kind or "")
    if base == "Edit" and _writes_whole_file(tool):
        return "Write"
    return base or tool.title or "unknown"


def _writes_whole_file(tool: Tool) -> bool:
    raw = tool.rawInput
    if isinstance(raw, dict) and raw:
        return "content" in raw and "old_string" not in raw and "new_string" not in raw
    return bool(tool.diffs) and all(d.old is None for d in tool.diffs)


def tool_item_type(tool: Tool, name: str) -> str:
    item_type = item_type_for_tool(name)
    if item_type == "dynamic_tool_call" and tool.kind in _FILE_KINDS:
        return "file_change"
    return item_type


def _command(value: Any, args: Any = None) -> str | None:
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        # codex: ["/bin/bash", "-lc", "touch x"] -> the script itself
        if len(value) == 3 and value[1] in ("-c", "-lc") and value[0].rsplit("/", 1)[-1] in (
                "sh", "bash", "zsh"):
            return value[2]
        return shlex.join(value)
    if not isinstance(value, str):
        return None
    if isinstance(args, list) and args:
        return shlex.join([value, *(str(a) for a in args)])
    return value


def tool_input(tool: Tool, name: str, content: Content) -> tuple[dict[str, Any], Any]:
    """The normalised input, and the raw input when the normalised one leaves parts out."""
    raw = tool.rawInput
    given: dict[str, Any] = dict(raw) if isinstance(raw, dict) else (
        {} if raw is None else {"input": raw})
    if name == "Bash":
        command = _command(given.get("command"), given.get("args"))
        if command is None and raw is None and tool.title:  # gemini: no rawInput, the title is it
            command = tool.title.strip("`")
        inp: dict[str, Any] = {"command": command or ""}
        cwd = (as_str(given.get("cwd")) or as_str(given.get("dir_path"))
               or as_str(given.get("directory"))
               or (tool.cwd if command else None))  # none for a placeholder input
        if cwd:
            inp["cwd"] = cwd
        for k in ("description", "timeout"):
            if k in given:
                inp[k] = given[k]
        # keep the runtime's own record too when the normalised input leaves parts of it out
        kept = {"command", "cwd", "dir_path", "directory", "description", "timeout"}
        lossy = bool(set(given) - kept) or not isinstance(given.get("command"), str)
        return inp, (raw if raw and lossy else UNSET)
    if "file_path" not in given:
        path = next((given[k] for k in PATH_KEYS if isinstance(given.get(k), str)), None)
        if path is None and tool.paths and item_type_for_tool(name) in ("file_change",
                                                                        "dynamic_tool_call"):
            path = tool.paths[0]
        if path is not None:
            given["file_path"] = path
            if not raw and tool.diffs and name in ("Edit", "Write"):  # the first diff's texts
                old = content.get("diff_old") if name == "Edit" else None
                if old is not None:
                    given["old_string"] = old.text
                new = content.get("diff_new")
                given["new_string" if name == "Edit" else "content"] = (
                    new.text if new is not None else None)
    return given, UNSET


_decode_json = msgspec.json.Decoder().decode


def _tool_output(tool: Tool, status: str, content: Content) -> dict[str, Any]:
    """The output fields: text content, else the terminal's output, else rawOutput's."""
    for stream in ("text", "terminal", "raw_text"):
        whole = content.get(stream)
        if whole is not None:
            return whole_fields(whole)
    if status != "completed":  # the diffs were proposed, not made
        return {"output": ""}
    return {"output": "\n".join(f"{d.path}: {'new file, ' if d.old is None else ''}"
                                f"{d.old or 0} -> {d.new} lines" for d in tool.diffs)}


def tool_payload(key: str, tool: Tool, status: str, done: bool, content: Content,
                 detail: str | None = None, output: dict[str, Any] | None = None
                  ) -> ItemPayload:
    """`output`: the output fields when the caller has them (else _tool_output)."""
    name = tool_name(key, tool)
    inp, raw_input = tool_input(tool, name, content)
    data: dict[str, Any] = {}
    if tool.kind:
        data["kind"] = tool.kind
    if raw_input is not UNSET:
        data["rawInput"] = raw_input
    fields: dict[str, Any] = {}
    if done:
        fields.update(output if output is not None else _tool_output(tool, status, content))
        fields["isError"] = status == "failed"
        if name == "Bash" or tool.exitCode is not None:
            fields["exitCode"] = tool.exitCode if tool.exitCode is not None else tool.rawExit
        if output is None and not content.has("text"):
            raw = content.get("raw_output")
            if raw is not None and not raw.truncated:  # past the cap, no longer JSON
                data["rawOutput"] = _decode_json(raw.text)
    if not detail:
        description = content.get("description")
        detail = description.text if description is not None else None
    item_type = tool_item_type(tool, name)
    fields.update(_normalised(tool, name, item_type, inp, content))
    return ItemPayload(itemType=item_type, status=status,  # type: ignore[arg-type]
                       title=tool.title or UNSET, detail=detail or UNSET,
                       toolName=name, input=inp,
                       data=data or UNSET, **fields)


def _normalised(tool: Tool, name: str, item_type: str, inp: dict[str, Any], content: Content
                ) -> dict[str, Any]:
    """The normalised tool fields (adapters.core.tools) from the normalised input; a
    file change's paths are every file the call names, its diff the one computed from
    its diff blocks when it has them (the `diff` stream). A diff block's oldText may be
    the whole file or only the replaced excerpt (claude-agent-acp, codex-acp send
    excerpts), and a null one means a new file or one claude-agent-acp's Write
    overwrites: `excerpt` and `empty` say so."""
    fields = tool_fields(name, inp, content.out.cap, diff=not tool.diffs)
    if item_type != "file_change":
        return fields
    if tool.paths:
        fields["paths"] = list(dict.fromkeys([*fields.get("paths", ()), *tool.paths]))
    whole = content.get("diff") if tool.diffs else None
    if whole is not None and whole.text:
        fields.update(whole_fields(whole, "diff"))
        fields["diffBase"] = "empty" if any(d.old is None for d in tool.diffs) else "excerpt"
    return fields


def tool_refs(c: Ctx, key: str, tool: Tool, rid: str | None = None) -> ProviderRefs | UnsetType:
    return c.refs(providerItemId=UNSET if tool.own else key, providerRequestId=rid or UNSET)


def start_tool(state: State, out: Emitter, key: str, tool: Tool, synthetic: bool,
               rid: str | None = None) -> State:
    """Open the item of a tool whose content is already in its streams (save)."""
    state = close_stream(state, out)  # a tool call ends the text run before it
    if tool.cwd is None and state.cwd is not None:  # where a command runs, unless it says
        tool = _replace(tool, cwd=state.cwd)
    c = Ctx(state, out, agent=tool.agent)
    content = Content(out, key)
    start_item(out, c.at(content.item, tool_refs(c, key, tool, rid)),
               tool_payload(key, tool, "inProgress", False, content), synthetic)
    return _replace(state, tools={**state.tools, key: tool})


def complete_tool(state: State, out: Emitter, key: str, tool: Tool, status: str,
                  synthetic: bool = False, detail: str | None = None,
                  rid: str | None = None, output: dict[str, Any] | None = None) -> State:
    c = Ctx(state, out, agent=tool.agent)
    content = Content(out, key)
    # read: its streams close (their chunks dropped)
    complete_item(out, c.at(content.item, tool_refs(c, key, tool, rid)),
                  tool_payload(key, tool, status, True, content, detail, output), synthetic)
    tools = {k: v for k, v in state.tools.items() if k != key}
    terminals = {t: k for t, k in state.terminals.items() if k != key}
    done = state.done if tool.own else [*state.done, key]
    return _replace(state, tools=tools, terminals=terminals, done=done)


def _announce(state: State, fields: dict[str, Any], out: Emitter, initial: bool) -> State:
    """A tool_call (`initial`) or a tool_call_update."""
    key = fields.get("toolCallId")
    if not isinstance(key, str):
        raise MalformedRecord("a tool call needs a string toolCallId")
    if key in state.done:
        return state  # a late update of a tool call already completed
    terminals = dict(state.terminals, **{t: key for t in terminal_ids(fields)})
    state = _replace(state, terminals=terminals)
    old = state.tools.get(key)
    done = fields.get("status") in ("completed", "failed")
    tool, streams = merge(old or Tool(), fields,
                          "text" if done else "description" if initial else "update")
    save(out, key, streams)
    if old is None:
        state = start_tool(state, out, key, tool, synthetic=not initial)
        tool = state.tools[key]
        if tool.status not in ("completed", "failed"):
            return state
    elif tool.status not in ("completed", "failed"):
        c = Ctx(state, out, agent=tool.agent)
        content = Content(out, key)
        out.emit(ItemUpdated,
                 tool_payload(key, tool, STATUS.get(tool.status, "inProgress"), False, content),
                 thread=c.thread, turn=c.turn, item=content.item, refs=tool_refs(c, key, tool))
        return _replace(state, tools={**state.tools, key: tool})
    return complete_tool(state, out, key, tool, tool.status)


def on_tool_call(state: State, upd: dict[str, Any], sid: str | None, out: Emitter) -> State:
    return _announce(state, upd, out, initial=True)


def on_tool_call_update(state: State, upd: dict[str, Any], sid: str | None, out: Emitter) -> State:
    return _announce(state, upd, out, initial=False)
