"""OpenCode: tool parts (pending -> running -> completed | error) as tool items, their
live output as command_output, their normalised fields (adapters.core.tools).
"""

from __future__ import annotations

from typing import Any

from msgspec import UnsetType

from adapters.core.contract import MalformedRecord
from adapters.core.diff import diff_fields, hunks_diff, text_diff
from adapters.core.emitter import UNSET, Emitter
from adapters.core.emitter import replace as _replace
from adapters.core.lifecycle import complete_item, delta, start_item
from adapters.core.tools import item_type_for_tool, normalize_tool_name, tool_fields
from adapters.opencode.agents import _link
from adapters.opencode.common import (
    _at,
    _dict,
    _drop_part,
    _open_turn,
    _prefs,
    _set_part,
    _str,
    _thread,
    _turn,
)
from adapters.opencode.state import Part, State
from topics.canonical import (
    ItemPayload,
    ItemUpdated,
)


def _tool_input(tool: str, raw: Any, cwd: str) -> Any:
    """The tool's input; a command always has `command`, and `cwd` when known."""
    if not isinstance(raw, dict):
        return raw
    if tool != "Bash":
        return raw
    inp: dict[str, Any] = {"command": raw.get("command", "")}
    inp.update((k, v) for k, v in raw.items() if k not in ("command", "workdir"))
    where = raw.get("workdir") if isinstance(raw.get("workdir"), str) else cwd
    if where:
        inp["cwd"] = where
    return inp


def _tool_payload(state: State, part: Part, tstate: dict[str, Any], status: str, cap: int,
                  **fields: Any) -> ItemPayload:
    """`cap`: the per-item cap (a diff's). The normalised fields (adapters.core.tools) go
    with the input; a completed file change's diff is the one its metadata gives."""
    name = normalize_tool_name(part.tool)
    sess = state.sessions.get(part.sid)
    raw_input = tstate.get("input")
    if raw_input is not None:
        fields.setdefault("input", _tool_input(name, raw_input, sess.cwd if sess else ""))
    if not isinstance(fields.get("input", UNSET), UnsetType):
        diff = _metadata_diff(tstate, cap) if status == "completed" else None
        norm = tool_fields(name, fields["input"], cap, diff=diff is None)
        if diff is not None:
            norm["paths"] = list(dict.fromkeys([*norm.get("paths", ()), *diff.pop("paths")]))
            norm.update(diff)
        fields.update(norm)
    title = tstate.get("title")
    if isinstance(title, str) and title:
        fields.setdefault("title", title)
    return ItemPayload(itemType=item_type_for_tool(name),  # type: ignore[arg-type]
                       status=status, toolName=name, **fields)  # type: ignore[arg-type]


def _metadata_diff(tstate: dict[str, Any], cap: int) -> dict[str, Any] | None:
    """`paths` and the diff fields of a completed file change from its metadata: edit's
    `filediff` (the file before and after; its `diff` is trimmed for display), a
    write's content when it says the file did not exist, apply_patch's `files` (each
    with its own patch). None when the metadata tells none of these (a shape it does
    not expect included: these fields are optional, never a reason to fail the line)."""
    meta = _dict(tstate, "metadata")
    results = meta.get("results")  # multiedit: one edit's metadata per edit
    filediffs = [meta.get("filediff"), *(r.get("filediff") for r in (
        results if isinstance(results, list) else []) if isinstance(r, dict))]
    parts: list[tuple[str, str]] = []
    paths: list[str] = []
    for f in filediffs:
        if isinstance(f, dict) and _str(f, "file") and isinstance(f.get("after"), str):
            paths.append(f["file"])
            parts.append((text_diff(f["file"], _str(f, "before"), f["after"]), "file"))
    content = _dict(tstate, "input").get("content")
    if meta.get("exists") is False and _str(meta, "filepath") and isinstance(content, str):
        paths.append(meta["filepath"])
        parts.append((text_diff(meta["filepath"], None, content), "file"))
    files = meta.get("files")
    for f in files if isinstance(files, list) else []:
        patch = f.get("patch", f.get("diff")) if isinstance(f, dict) else None
        if isinstance(patch, str) and _str(f, "filePath"):
            move = _str(f, "movePath") or None
            paths.extend(p for p in (f["filePath"], move) if p)
            parts.append((hunks_diff(f["filePath"], patch, old_missing=f.get("type") == "add",
                                     new_missing=f.get("type") == "delete", new_path=move),
                          "file"))
    if not paths:
        return None
    return {"paths": paths, **diff_fields(parts, cap)}


def _on_tool_part(state: State, out: Emitter, sid: str, mid: str, pid: str,
                  part: dict[str, Any]) -> State:
    tstate = part.get("state")
    if not isinstance(tstate, dict):
        raise MalformedRecord("opencode tool part without a 'state' object")
    status = tstate.get("status")
    current = state.parts.get(pid) or Part(sid=sid, msg=mid, kind="tool", role="assistant",
                                           busy=True)
    current = _replace(current, kind="tool", call=_str(part, "callID") or current.call,
                       tool=_str(part, "tool") or current.tool)
    state = _open_turn(state, out, sid)
    if status == "pending":  # the input is still streaming: nothing to show yet
        return _set_part(state, pid, current)
    if status == "running":
        if not current.started:
            state, current = _start_tool(state, out, pid, current, tstate, synthetic=False)
        else:
            # progress: the title may appear; the input is the one already started with
            out.emit(ItemUpdated, _tool_payload(state, current, tstate, "inProgress", out.cap,
                                                input=UNSET),
                     thread=_thread(out, sid), turn=_turn(state, out, sid),
                     item=out.id("itm", pid), refs=_prefs(pid, current))
        if current.tool == "task":  # the child session the subagent runs in (agents.py)
            child = _str(_dict(tstate, "metadata"), "sessionId")
            if child:
                state = _link(state, out, child, pid, sid)
        return _stream_output(state, out, pid, current, tstate)
    if status in ("completed", "error"):
        if not current.started:
            state, current = _start_tool(state, out, pid, current, tstate, synthetic=True)
        if status == "completed":
            return _close_tool(state, out, pid, current, tstate, "completed")
        return _close_tool(state, out, pid, current, tstate,
                           "declined" if current.declined or _refused(tstate) else "failed")
    out.unknown(f"tool state {status!r}", thread=_thread(out, sid), turn=_turn(state, out, sid))
    return _set_part(state, pid, current)


def _refused(tstate: dict[str, Any]) -> bool:
    # OpenCode's texts for a rejected permission / a dismissed question
    error = _str(tstate, "error")
    return error.startswith(("The user rejected permission", "The user dismissed"))


def _start_tool(state: State, out: Emitter, pid: str, part: Part, tstate: dict[str, Any],
                synthetic: bool) -> tuple[State, Part]:
    start_item(out, _at(state, out, pid, part),
               _tool_payload(state, part, tstate, "inProgress", out.cap), synthetic)
    part = _replace(part, started=True)
    return _set_part(state, pid, part), part


def _stream_output(state: State, out: Emitter, pid: str, part: Part,
                   tstate: dict[str, Any]) -> State:
    """Stream the new suffix of a running command's live output (`metadata.output`: the
    output so far, a snapshot, capped by newer OpenCode at 30,000 characters and "..."; a
    snapshot that does not begin with what was streamed adds nothing: never twice)."""
    output = _dict(tstate, "metadata").get("output")
    item = out.id("itm", pid)
    new = out.rest(item, "command_output", output) if isinstance(output, str) else ""
    if new:  # not spooled: the completed tool part carries its whole output
        delta(out, _at(state, out, pid, part), "command_output", new, spool=False)
    return _set_part(state, pid, part)


def _close_tool(state: State, out: Emitter, pid: str, part: Part, tstate: dict[str, Any],
                status: str, synthetic: bool = False, detail: str | UnsetType = UNSET) -> State:
    fields: dict[str, Any] = {"isError": status != "completed"}
    metadata = _dict(tstate, "metadata")
    if status == "completed":
        output = tstate.get("output")
        fields["output"] = output if isinstance(output, str) else ""
        if type(metadata.get("exit")) is int:  # not a bool
            fields["exitCode"] = metadata["exit"]
    elif "error" in tstate:
        fields["output"] = fields["detail"] = str(tstate["error"])
    if detail is not UNSET:
        fields["detail"] = detail
    # runtime detail (task child session id, file path, diagnostics...), output not repeated
    data = {k: v for k, v in metadata.items() if k != "output"}
    if isinstance(tstate.get("attachments"), list):
        data["attachments"] = tstate["attachments"]
    if data:
        fields["data"] = data
    complete_item(out, _at(state, out, pid, part),
                  _tool_payload(state, part, tstate, status, out.cap, **fields), synthetic)
    return _drop_part(state, pid)
