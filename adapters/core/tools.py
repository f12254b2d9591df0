"""Tool names and item types, normalised across runtimes.

Every runtime names its tools differently (`bash`, `Bash`, `run_shell_command`,
`shell`, `mcp__acp__Bash`, ...). Consumers see one vocabulary: the names Claude
Code uses (Bash, Read, Edit, Write, Grep, Glob, WebFetch, WebSearch, Task,
TodoWrite, ...), and `mcp__<server>__<tool>` for MCP tools. The canonical item
type follows from the normalised name. The normalised fields of a tool item (command
and cwd, changed paths and a unified diff, url and query, MCP server and tool) are read
here from the input under any runtime's names (`tool_fields`).
"""

from __future__ import annotations

import re
import shlex
from typing import Any, Final

from msgspec import UNSET

from adapters.core.diff import diff_fields, hunks_diff, text_diff
from topics.canonical import ItemPayload

_ALIASES: dict[str, str] = {
    # shell
    "bash": "Bash", "shell": "Bash", "run_shell_command": "Bash", "exec": "Bash",
    "exec_command": "Bash", "local_shell": "Bash", "terminal": "Bash", "command": "Bash",
    "shell_command": "Bash",
    # files
    "read": "Read", "read_file": "Read", "view": "Read", "read_many_files": "Read",
    "fs/read_text_file": "Read",
    "write": "Write", "write_file": "Write", "create": "Write", "fs/write_text_file": "Write",
    "edit": "Edit", "replace": "Edit", "str_replace": "Edit", "apply_patch": "Edit",
    "patch": "Edit", "multiedit": "MultiEdit", "multi_edit": "MultiEdit",
    "notebookedit": "NotebookEdit", "notebook_edit": "NotebookEdit",
    # search
    "grep": "Grep", "search_file_content": "Grep", "search": "Grep", "rg": "Grep",
    "glob": "Glob", "find": "Glob", "list": "LS", "ls": "LS", "list_directory": "LS",
    "web_fetch": "WebFetch", "webfetch": "WebFetch", "fetch": "WebFetch",
    "web_search": "WebSearch", "websearch": "WebSearch", "google_web_search": "WebSearch",
    # agents and plans
    "task": "Task", "agent": "Task", "subagent": "Task",
    "todowrite": "TodoWrite", "todo_write": "TodoWrite", "write_todos": "TodoWrite",
    "todoread": "TodoRead", "todo_read": "TodoRead",
    "exitplanmode": "ExitPlanMode", "askuserquestion": "AskUserQuestion",
    "question": "AskUserQuestion", "save_memory": "SaveMemory",
    # Amp (`amp --stream-json`)
    "edit_file": "Edit", "create_file": "Write", "read_web_page": "WebFetch",
    # Gemini CLI (tool-names.ts)
    "grep_search": "Grep", "invoke_agent": "Task", "ask_user": "AskUserQuestion",
    "exit_plan_mode": "ExitPlanMode",
    # Factory droid (its init's `tools`)
    "execute": "Bash", "fetchurl": "WebFetch", "applypatch": "Edit", "askuser": "AskUserQuestion",
}

_FILE_CHANGE = frozenset({"Edit", "Write", "MultiEdit", "NotebookEdit"})


def normalize_tool_name(name: str) -> str:
    """The canonical tool name for a runtime's tool name.

    `mcp__server__tool` stays as it is, except the ACP bridge's own
    `mcp__acp__<Tool>` which is the runtime's built-in tool; unknown names are kept.
    """
    if name.startswith("mcp__"):
        parts = name.split("__", 2)
        if len(parts) == 3 and parts[1] == "acp":
            return normalize_tool_name(parts[2])
        return name
    return _ALIASES.get(name.lower(), name)


def mcp_tool_name(server: str, tool: str) -> str:
    return f"mcp__{server}__{tool}"


def item_type_for_tool(name: str) -> str:
    """The canonical item type of a (normalised) tool name."""
    if name == "Bash":
        return "command_execution"
    if name in _FILE_CHANGE:
        return "file_change"
    if name.startswith("mcp__"):
        return "mcp_tool_call"
    if name == "WebSearch":
        return "web_search"
    if name == "Task":
        return "collab_agent_tool_call"
    return "dynamic_tool_call"


# ---- normalised fields: what consumers look at, whatever the runtime -----------------
#
# ItemPayload's `command`, `cwd`, `paths`, `diff` (adapters.core.diff), `url`, `query`,
# `mcpServer`, `mcpTool`, read from a tool's input under any runtime's names. The input
# itself stays as the runtime sent it (`input`, `data`).

_PATH_KEYS: Final = ("file_path", "filePath", "path", "absolute_path", "notebook_path",
                     "filepath")
_OLD_KEYS: Final = ("old_string", "oldString", "old_str", "oldText")  # oldText: pi
_NEW_KEYS: Final = ("new_string", "newString", "new_str", "newText")
_CWD_KEYS: Final = ("cwd", "workdir", "dir_path", "directory")
_SHELLS: Final = frozenset({"sh", "bash", "zsh", "dash"})
#: the files an apply_patch text names (Codex's patch format, OpenCode's apply_patch)
_PATCH_FILE: Final = re.compile(r"^\*\*\* (?:Add|Update|Delete) File: (.+)$|^\*\*\* Move to: (.+)$",
                                re.MULTILINE)


def command_text(command: Any, args: Any = None) -> str | None:
    """A command as one string: an argv list joined with shell quoting (with `args`
    when the program comes alone), and a shell's `-c`/`-lc` wrapper taken off, so the
    command reads as the model wrote it (`/bin/bash -lc "ls"` is `ls`)."""
    if isinstance(command, list) and command and all(isinstance(v, str) for v in command):
        argv: list[str] = command
    elif isinstance(command, str):
        if isinstance(args, list) and args:
            return shlex.join([command, *[str(a) for a in args]])
        if not _wrapped(command):
            return command
        quick = _wrapped_word(command)
        if quick is not None:
            return quick
        try:
            argv = shlex.split(command)
        except ValueError:  # unbalanced quotes: not a wrapper after all
            return command
    else:
        return None
    if len(argv) == 3 and argv[1] in ("-c", "-lc") and argv[0].rsplit("/", 1)[-1] in _SHELLS:
        return argv[2]
    return shlex.join(argv) if isinstance(command, list) else command


def _wrapped(command: str) -> bool:
    head = command.split(" ", 2)
    return len(head) == 3 and head[1] in ("-c", "-lc") and head[0].rsplit("/", 1)[-1] in _SHELLS


# what can make a shell word more than its characters (shlex, POSIX mode, no comments:
# its whitespace, quotes and escape; \s is wider, and a wider class only asks shlex)
_SPECIAL: Final = re.compile(r"[\s'\"\\]")


def _wrapped_word(command: str) -> str | None:
    """The command a `_wrapped` shell runs, as shlex.split would read it, where that is
    plain: the shell's path holds nothing special, and the rest is one bare word, one
    single-quoted word or one double-quoted word without a quote inside; else None (ask
    shlex). shlex reads a character at a time in Python: it was a third of the codex
    adapter's time on a command's item (callgrind: 165k instructions a command)."""
    shell, _, rest = command.split(" ", 2)
    if not rest or _SPECIAL.search(shell):
        return None
    first, last, inner = rest[0], rest[-1], rest[1:-1]
    if len(rest) >= 2 and first == last == "'" and "'" not in inner:
        return inner
    if len(rest) >= 2 and first == last == '"' and '"' not in inner:
        # within double quotes a backslash escapes only a backslash (or the quote, not
        # here); an odd run of them at the end would escape the closing quote
        if (len(inner) - len(inner.rstrip("\\"))) % 2 == 0:
            return inner.replace("\\\\", "\\")
        return None
    if not _SPECIAL.search(rest):
        return rest
    return None


def mcp_fields(name: str) -> dict[str, Any]:
    """`mcpServer` and `mcpTool` of a normalised `mcp__<server>__<tool>` name."""
    parts = name.split("__", 2) if name.startswith("mcp__") else []
    if len(parts) != 3 or not parts[1] or not parts[2]:
        return {}
    return {"mcpServer": parts[1], "mcpTool": parts[2]}


def tool_fields(name: str, inp: Any, cap: int, diff: bool = True) -> dict[str, Any]:
    """The normalised fields of a tool item from its normalised name and its input as
    the runtime sent it (Claude's, Gemini's, OpenCode's, Amp's or ACP's names); a diff
    is cut past `cap` bytes (the per-item cap), and not computed without `diff` (the
    caller has a better one). Runtimes whose file changes come otherwise (Codex's
    changes, ACP's diff blocks, OpenCode's metadata) add theirs."""
    fields = mcp_fields(name)
    if not isinstance(inp, dict):
        return fields
    if name == "Bash":
        command = command_text(inp.get("command", inp.get("cmd")), inp.get("args"))
        if command:  # "" is an input not known yet (a placeholder), not a command
            fields["command"] = command
        cwd = _first(inp, _CWD_KEYS)
        if cwd:
            fields["cwd"] = cwd
    elif name in _FILE_CHANGE:
        fields.update(file_change_fields(name, inp, cap, diff))
    elif name == "WebFetch" or name == "WebSearch":
        for key in ("url", "query"):
            if isinstance(inp.get(key), str) and inp[key]:
                fields[key] = inp[key]
    return fields


def file_change_fields(name: str, inp: dict[str, Any], cap: int, diff: bool = True
                       ) -> dict[str, Any]:
    """`paths` and (with `diff`) `diff` of an Edit, MultiEdit, Write or NotebookEdit
    input: an edit's excerpts, a write's content against empty (its old content is not
    in the input), the files an apply_patch text names."""
    path = _first(inp, _PATH_KEYS)
    parts: list[tuple[str, str]] = []
    paths = [path] if path else []
    edits = inp.get("edits")
    if isinstance(edits, list):  # MultiEdit (OpenCode's edits name their own file)
        for e in edits:
            if isinstance(e, dict):
                p = _first(e, _PATH_KEYS) or path
                old, new = _first(e, _OLD_KEYS), _first(e, _NEW_KEYS)
                if p and old is not None and new is not None:
                    paths.append(p)
                    if diff:
                        parts.append((text_diff(p, old, new, excerpt=True), "excerpt"))
    elif path and diff and name != "NotebookEdit":
        old, new = _first(inp, _OLD_KEYS), _first(inp, _NEW_KEYS)
        content = inp.get("content", inp.get("file_text"))  # Copilot's `create`: file_text
        if old is not None and new is not None:
            parts.append((text_diff(path, old, new, excerpt=True), "excerpt"))
        elif isinstance(content, str):
            parts.append((text_diff(path, None, content), "empty"))
    patch = inp.get("patchText", inp.get("patch"))
    if isinstance(patch, str) and patch.startswith("*** Begin Patch"):
        paths.extend(a or b for a, b in _PATCH_FILE.findall(patch))
    fields = diff_fields(parts, cap)
    if paths:
        fields["paths"] = list(dict.fromkeys(paths))
    return fields


def _first(obj: dict[str, Any], keys: tuple[str, ...]) -> str | None:
    for k in keys:
        v = obj.get(k)
        if isinstance(v, str):
            return v
    return None


def change_fields(changes: Any, cap: int, diff: bool = True) -> dict[str, Any]:
    """`paths` and `diff` of Codex's file changes (FileUpdateChange: `path`, `kind` an
    object `{type, move_path}` or, in exec's items, the string; `diff` the content of an
    added or deleted file, the bare hunks of an update, which app-server ends with
    "Moved to: <path>" on a move). Exec's changes have no diff: paths only."""
    paths: list[str] = []
    parts: list[tuple[str, str]] = []
    for c in changes if isinstance(changes, list) else []:
        path = c.get("path") if isinstance(c, dict) else None
        if not isinstance(path, str):
            continue
        kind = c.get("kind")
        kind_type = kind.get("type") if isinstance(kind, dict) else kind
        move = kind.get("move_path") if isinstance(kind, dict) else None
        move = move if isinstance(move, str) and move else None
        paths.append(path)
        if move is not None:
            paths.append(move)
        body = c.get("diff")
        if not diff or not isinstance(body, str):
            continue
        if kind_type == "add":
            parts.append((text_diff(path, None, body), "file"))
        elif kind_type == "delete":
            parts.append((text_diff(path, body, None), "file"))
        elif kind_type == "update":
            trailer = f"\n\nMoved to: {move}"
            if move is not None and body.endswith(trailer):
                body = body[:-len(trailer)]
            if body or move is not None:  # a bare rename is its header alone
                parts.append((hunks_diff(path, body, new_path=move), "file"))
    fields = diff_fields(parts, cap)
    if paths:
        fields["paths"] = list(dict.fromkeys(paths))
    return fields


def tool_item(name: str, input: Any, status: str, cap: int, output: str | None = None,
              detail: str | None = None, data: Any = UNSET) -> ItemPayload:
    """The payload of a tool item named `name` (normalised) called with `input`: its
    item type, the normalised fields read from the input (`cap`: the per-item cap, a
    diff's), and, once it ran, its `output` (an error unless `status` is completed)."""
    fields: dict[str, Any] = tool_fields(name, input, cap)
    if output is not None:
        fields["output"] = output
        fields["isError"] = status != "completed"
    return ItemPayload(itemType=item_type_for_tool(name), status=status,  # type: ignore[arg-type]
                       toolName=name, input=input, detail=detail or UNSET, data=data, **fields)
