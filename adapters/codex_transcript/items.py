"""What a Codex rollout line says, in the app-server's v2 shapes (ThreadItem and the
params of its notifications), so that adapters.codex translates it as it translates
the wire.

A rollout names its items three ways, by release:
* Codex 0.171 (`event_msg/item_completed`): the core's `TurnItem`, a Rust enum with
  snake_case fields (`{"type": "CommandExecution", "command": [argv], "cwd":
  "file:///...", "aggregated_output": ..., "duration": {"secs", "nanos"}}`). The
  app-server converts the same value into the v2 item it sends as `item/completed` and
  stores in `thread_history_1.sqlite` (`thread_items.item_json`): `v2_item` does that
  conversion, and tests/adapters/test_transcript_codex.py checks it against item_json.
* Codex 0.137 and the releases between (`event_msg/user_message`, `agent_message`,
  `agent_reasoning`, `patch_apply_end`, `mcp_tool_call_end`, `web_search_end`, ...): the
  legacy events the UI was driven by, without item ids (`legacy_item`).
* Both: the model-facing Responses items (`response_item/function_call`,
  `custom_tool_call`, `local_shell_call`, and their outputs): the only trace of a tool
  call that never ran (declined, aborted) and, before 0.171, of a command's output
  (`call_item`, `output_item`).

Pure functions of their arguments; a field of the wrong type is read as absent (the
v2 reader, adapters.codex, checks what it needs).
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import unquote

#: Tool names whose calls run a command (Codex's unified exec, the older shell tools).
EXEC_TOOLS = frozenset({"exec_command", "shell", "shell_command", "container.exec",
                        "local_shell"})
#: Characters that make a word need quoting, as Codex's shlex join quotes it.
_SPECIAL = frozenset("|&;<>()$`\\\"' \t\r\n*?[#~=%{}!")


def camel(name: str) -> str:
    """snake_case -> camelCase (`internal_server_error` -> `internalServerError`)."""
    head, *rest = name.split("_")
    return head + "".join(w[:1].upper() + w[1:] for w in rest)


def camel_keys(value: Any) -> Any:
    """A JSON value with every object key in camelCase (token usage, rate limits)."""
    if isinstance(value, dict):
        return {camel(k) if isinstance(k, str) else k: camel_keys(v) for k, v in value.items()}
    if isinstance(value, list):
        return [camel_keys(v) for v in value]
    return value


def _str(d: dict[str, Any], *keys: str) -> str | None:
    """The first of `keys` that holds a string (a field Codex spelled two ways)."""
    for k in keys:
        v = d.get(k)
        if isinstance(v, str):
            return v
    return None


def _int(d: dict[str, Any], *keys: str) -> int | None:
    for k in keys:
        v = d.get(k)
        if isinstance(v, int) and not isinstance(v, bool):
            return v
    return None


def shell_join(argv: list[str]) -> str:
    """An argv as one command line, quoted the way the app-server's v2 `command` is
    (a word with a special character in double quotes, `$ ` " \\` escaped), so that
    adapters.core.tools.command_text reads it back as the live item's."""
    words = []
    for word in argv:
        if word == "":
            words.append('""')
        elif any(c in _SPECIAL for c in word):
            escaped = "".join("\\" + c if c in '$`"\\' else c for c in word)
            words.append(f'"{escaped}"')
        else:
            words.append(word)
    return " ".join(words)


def _path(uri: Any) -> str | None:
    """A `file://` URI (Codex's PathUri) as a path; a plain path as it is."""
    if not isinstance(uri, str):
        return None
    return unquote(uri[len("file://"):]) if uri.startswith("file://") else uri


def _millis(duration: Any) -> int | None:
    """A Rust Duration (`{"secs", "nanos"}`) in whole milliseconds."""
    if not isinstance(duration, dict):
        return None
    secs, nanos = duration.get("secs"), duration.get("nanos")
    if not isinstance(secs, int) or not isinstance(nanos, int):
        return None
    return secs * 1000 + nanos // 1_000_000


def _command(value: Any) -> str | None:
    if isinstance(value, list) and all(isinstance(w, str) for w in value):
        return shell_join(value)
    return value if isinstance(value, str) else None


def _actions(parsed: Any) -> list[Any]:
    """ParsedCommand (`{"type": "list_files", "cmd"}`) -> v2 CommandAction
    (`{"type": "listFiles", "command"}`)."""
    out: list[Any] = []
    for p in parsed if isinstance(parsed, list) else []:
        if isinstance(p, dict):
            action = {("command" if k == "cmd" else camel(k)): v for k, v in p.items()}
            if isinstance(p.get("type"), str):
                action["type"] = camel(p["type"])
            out.append(action)
    return out


def changes(value: Any) -> list[dict[str, Any]]:
    """The core's `{path: FileChange}` map as v2 FileUpdateChanges, by path (a Rust
    HashMap has no order of its own)."""
    out: list[dict[str, Any]] = []
    if isinstance(value, list):  # already v2
        return [c for c in value if isinstance(c, dict)]
    if not isinstance(value, dict):
        return out
    for path in sorted(k for k in value if isinstance(k, str)):
        change = value[path]
        change = change if isinstance(change, dict) else {}
        kind = _str(change, "type") or "update"
        if kind == "update":
            diff = _str(change, "unified_diff", "unifiedDiff") or ""
            entry: dict[str, Any] = {"type": "update",
                                     "move_path": _str(change, "move_path", "movePath")}
        else:
            diff = _str(change, "content") or ""
            entry = {"type": kind}
        out.append({"path": path, "kind": entry, "diff": diff})
    return out


def _text_content(content: Any) -> str:
    parts = content if isinstance(content, list) else []
    return "".join(p["text"] for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str))


def v2_item(item: dict[str, Any]) -> dict[str, Any]:
    """A core TurnItem (`event_msg/item_completed`) as the v2 ThreadItem of the same
    item; an item type this release does not know keeps its fields, type in camelCase."""
    kind = _str(item, "type") or ""
    iid = item.get("id")
    if kind == "UserMessage":
        return {"type": "userMessage", "id": iid, "content": item.get("content") or []}
    if kind == "AgentMessage":
        return {"type": "agentMessage", "id": iid, "text": _text_content(item.get("content")),
                "phase": item.get("phase")}
    if kind == "Reasoning":
        return {"type": "reasoning", "id": iid, "summary": item.get("summary_text") or [],
                "content": item.get("raw_content") or []}
    if kind == "CommandExecution":
        output = _str(item, "aggregated_output", "aggregatedOutput")
        return {"type": "commandExecution", "id": iid,
                "command": _command(item.get("command")), "cwd": _path(item.get("cwd")),
                "processId": _str(item, "process_id", "processId"),
                "source": camel(_str(item, "source") or "agent"),
                "status": _str(item, "status") or "completed",
                "commandActions": _actions(item.get("parsed_cmd", item.get("parsedCmd"))),
                "aggregatedOutput": output or None,
                "exitCode": _int(item, "exit_code", "exitCode"),
                "durationMs": _millis(item.get("duration"))}
    if kind == "FileChange":
        return {"type": "fileChange", "id": iid, "changes": changes(item.get("changes")),
                "status": _str(item, "status") or "inProgress"}
    if kind == "McpToolCall":
        return {"type": "mcpToolCall", "id": iid, "server": item.get("server"),
                "tool": item.get("tool"), "arguments": item.get("arguments"),
                "status": _str(item, "status") or "completed", "result": item.get("result"),
                "error": item.get("error"), "durationMs": _millis(item.get("duration"))}
    if kind == "WebSearch":
        return {"type": "webSearch", "id": iid, "query": item.get("query"),
                "action": camel_keys(item.get("action"))}
    if kind == "Plan":
        return {"type": "plan", "id": iid, "text": item.get("text")}
    if kind == "HookPrompt":
        return {"type": "hookPrompt", "id": iid, "fragments": item.get("fragments") or []}
    if kind == "SubAgentActivity":
        return {"type": "subAgentActivity", "id": iid, "kind": item.get("kind"),
                "agentThreadId": item.get("agent_thread_id"),
                "agentPath": item.get("agent_path")}
    # DynamicToolCall, CollabAgentToolCall, ImageView, Sleep, ImageGeneration,
    # ContextCompaction: their v2 fields are the core's in camelCase
    fields = {camel(k): v for k, v in item.items() if k != "type"}
    if "duration" in fields and not isinstance(fields["duration"], int):
        fields["durationMs"] = _millis(fields.pop("duration"))
    if "path" in fields:
        fields["path"] = _path(fields["path"])
    return {"type": kind[:1].lower() + kind[1:], **fields}


def legacy_item(kind: str, p: dict[str, Any], iid: str) -> dict[str, Any] | None:
    """The v2 item of a legacy item event (releases before 0.171), `iid` its id (the
    call id, or one derived from the line for events that carry none); None for an
    event that is no item."""
    if kind == "user_message":
        content: list[Any] = [{"type": "text", "text": _str(p, "message") or "",
                               "text_elements": p.get("text_elements") or []}]
        images = p.get("images")
        content += [{"type": "image", "url": u} for u in (images if isinstance(images, list) else [])]
        return {"type": "userMessage", "id": iid, "content": content}
    if kind == "agent_message":
        return {"type": "agentMessage", "id": iid, "text": _str(p, "message") or "",
                "phase": p.get("phase")}
    if kind == "agent_reasoning":
        return {"type": "reasoning", "id": iid, "summary": [_str(p, "text") or ""], "content": []}
    if kind == "agent_reasoning_raw_content":
        return {"type": "reasoning", "id": iid, "summary": [], "content": [_str(p, "text") or ""]}
    if kind == "patch_apply_end":
        status = _str(p, "status") or ("completed" if p.get("success") is True else "failed")
        return {"type": "fileChange", "id": iid, "changes": changes(p.get("changes")),
                "status": status}
    if kind == "exec_command_end":
        return {**v2_item({**p, "type": "CommandExecution", "id": iid}),
                "status": _str(p, "status") or (
                    "completed" if _int(p, "exit_code") == 0 else "failed")}
    if kind == "mcp_tool_call_end":
        inv = p.get("invocation")
        inv = inv if isinstance(inv, dict) else {}
        result = p.get("result")
        ok = result.get("Ok") if isinstance(result, dict) else None
        err = result.get("Err") if isinstance(result, dict) else None
        return {"type": "mcpToolCall", "id": iid, "server": inv.get("server"),
                "tool": inv.get("tool"), "arguments": inv.get("arguments"),
                "status": "failed" if err is not None else "completed", "result": ok,
                "error": {"message": str(err)} if err is not None else None,
                "durationMs": _millis(p.get("duration"))}
    if kind == "web_search_end":
        return {"type": "webSearch", "id": iid, "query": p.get("query"),
                "action": camel_keys(p.get("action"))}
    if kind == "image_generation_end":
        return {"type": "imageGeneration", "id": iid, "status": p.get("status"),
                "revisedPrompt": p.get("revised_prompt"), "result": p.get("result"),
                "savedPath": p.get("saved_path")}
    if kind == "entered_review_mode":
        return {"type": "enteredReviewMode", "id": iid, "review": p.get("user_facing_hint")}
    if kind == "exited_review_mode":
        review = p.get("review_output")
        text = _str(review, "overall_explanation") if isinstance(review, dict) else None
        return {"type": "exitedReviewMode", "id": iid, "review": text or ""}
    return None


def _arguments(raw: Any) -> Any:
    """A function call's `arguments` (JSON text) decoded; the text when it is not JSON."""
    if not isinstance(raw, str):
        return raw
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def _patch_changes(patch: str) -> list[dict[str, Any]]:
    """The files an apply_patch input names (`*** Update File: a.py`), without diffs:
    the change's diff comes with its completion."""
    out: list[dict[str, Any]] = []
    for line in patch.splitlines():
        for head, kind in (("*** Add File: ", "add"), ("*** Delete File: ", "delete"),
                           ("*** Update File: ", "update")):
            if line.startswith(head):
                entry: dict[str, Any] = {"type": kind}
                if kind == "update":
                    entry["move_path"] = None
                out.append({"path": line[len(head):].strip(), "kind": entry, "diff": ""})
        if line.startswith("*** Move to: ") and out:
            out[-1]["kind"]["move_path"] = line[len("*** Move to: "):].strip()
    return out


def call_item(p: dict[str, Any], cwd: str | None) -> dict[str, Any] | None:
    """The v2 item a model's tool call starts (`function_call`, `custom_tool_call`,
    `local_shell_call`), in progress; None for a call that is no item (update_plan)."""
    name = _str(p, "name") or ""
    cid = _str(p, "call_id", "id")
    if p.get("type") == "local_shell_call":
        action = p.get("action")
        action = action if isinstance(action, dict) else {}
        return {"type": "commandExecution", "id": cid, "command": _command(action.get("command")),
                "cwd": _str(action, "working_directory") or cwd, "status": "inProgress"}
    args = _arguments(p["input"] if p.get("type") == "custom_tool_call" else p.get("arguments"))
    if name in EXEC_TOOLS:
        a = args if isinstance(args, dict) else {}
        command = a.get("cmd", a.get("command"))
        return {"type": "commandExecution", "id": cid, "command": _command(command),
                "cwd": _str(a, "workdir") or cwd, "status": "inProgress"}
    if name == "apply_patch":
        patch = args if isinstance(args, str) else (
            _str(args, "input", "patch") if isinstance(args, dict) else None)
        return {"type": "fileChange", "id": cid, "changes": _patch_changes(patch or ""),
                "status": "inProgress"}
    if name == "update_plan":
        return None
    if name == "view_image":
        path = _str(args, "path") if isinstance(args, dict) else None
        return {"type": "imageView", "id": cid, "path": path}
    server, sep, tool = name.removeprefix("mcp__").partition("__")
    if sep and server and tool:
        return {"type": "mcpToolCall", "id": cid, "server": server, "tool": tool,
                "arguments": args, "status": "inProgress"}
    return {"type": "dynamicToolCall", "id": cid, "tool": name, "arguments": args,
            "status": "inProgress"}


def plan_params(p: dict[str, Any]) -> dict[str, Any]:
    """An update_plan call's arguments as `turn/plan/updated` params (less the ids)."""
    args = _arguments(p.get("arguments"))
    args = args if isinstance(args, dict) else {}
    steps = args.get("plan")
    plan = [{"step": s.get("step"), "status": camel(s["status"])
             if isinstance(s.get("status"), str) else s.get("status")}
            for s in (steps if isinstance(steps, list) else []) if isinstance(s, dict)]
    return {"explanation": args.get("explanation"), "plan": plan}


def output_text(value: Any) -> str:
    """A function call output's text: a string, or content items (`input_text`)."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):  # {"content": ..., "success": ...}
        return output_text(value.get("content"))
    return _text_content(value)


#: What Codex wrote as the output of a call that was refused or cut off, not run.
_DECLINED = ('Rejected("rejected by user")', "rejected by user")
_ABORTED = ("aborted by user",)


def output_item(started: dict[str, Any], text: str) -> dict[str, Any]:
    """The completed v2 item of a tool call that got its model-facing output but no
    item of its own: a call declined or aborted (no command ran), or a command of a
    release before 0.171, whose output is the text the model saw (unified exec's
    `Process exited with code N ... Output:\\n<output>`, the shell tool's JSON)."""
    kind = started.get("type")
    done = {**started, "status": "completed"}
    if any(m in text for m in _DECLINED):
        return {**done, "status": "declined"}
    if text.startswith(_ABORTED) or "\naborted by user" in text:
        return {**done, "status": "failed"}
    if kind == "commandExecution":
        output, code = _exec_output(text)
        if code is None and output is None:
            return {**done, "status": "failed", "aggregatedOutput": text or None}
        return {**done, "aggregatedOutput": output or None, "exitCode": code,
                "status": "completed" if code in (0, None) else "failed"}
    if kind == "dynamicToolCall":
        return {**done, "contentItems": [{"type": "inputText", "text": text}], "success": True}
    if kind == "mcpToolCall":
        return {**done, "result": {"content": [{"type": "text", "text": text}]}}
    return done


def _exec_output(text: str) -> tuple[str | None, int | None]:
    """(output, exit code) of a command's model-facing output text; (None, None) when
    the text is neither unified exec's nor the shell tool's format."""
    try:
        obj = json.loads(text)
    except ValueError:
        obj = None
    if isinstance(obj, dict) and isinstance(obj.get("output"), str):  # the shell tool
        meta = obj.get("metadata")
        code = meta.get("exit_code") if isinstance(meta, dict) else None
        return obj["output"], code if isinstance(code, int) else None
    head, sep, output = text.partition("Output:\n")
    if not sep:
        return None, None
    code = None
    for line in head.splitlines():
        for prefix in ("Process exited with code ", "Exit code: "):
            if line.startswith(prefix) and line[len(prefix):].strip().lstrip("-").isdigit():
                code = int(line[len(prefix):].strip())
    return output, code
