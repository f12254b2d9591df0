"""Tool names and item types, normalised across runtimes.

Every runtime names its tools differently (`bash`, `Bash`, `run_shell_command`,
`shell`, `mcp__acp__Bash`, ...). Consumers see one vocabulary: the names Claude
Code uses (Bash, Read, Edit, Write, Grep, Glob, WebFetch, WebSearch, Task,
TodoWrite, ...), and `mcp__<server>__<tool>` for MCP tools. The canonical item
type follows from the normalised name.
"""

from __future__ import annotations

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
