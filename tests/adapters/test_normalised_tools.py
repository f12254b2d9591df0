"""One command and one file change, expressed natively by every runtime that can express
them, give the same normalised fields (ItemPayload `command`, `cwd`, `paths`, `diff`;
README "Normalised tool fields").

The command and the file creation come from the captured conversations (real runtimes,
scripted model); the edit of an existing file, which no capture holds, is written here in
each runtime's own messages, minimal, after its protocol (Claude's and Amp's stream-json
with Claude's `tool_use_result`, Codex's app-server FileUpdateChange and exec's
file_change, Gemini's stream-json `replace`, OpenCode's tool part with its `filediff`
metadata, an ACP `diff` content block)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.adapters.harness import (
    assert_three_ways,
    capture_lines,
    events_of,
    read_capture,
    run_whole,
)
from topics.runtimes import RUNTIMES

CAPTURED = Path(__file__).resolve().parents[1] / "fixtures" / "captured"
MORE_RUNTIMES = CAPTURED.parent / "more-runtimes"
NORMALISED = ("command", "cwd", "paths", "diff", "diffTruncated", "diffLength", "url", "query",
              "mcpServer", "mcpTool")
CWD = "/sandbox/workspace"
PATH = f"{CWD}/fixture.txt"
PRINTF = "printf 'fixture-ok\\n'"
TOUCH = "touch fixture-approval.txt"
CREATED = {"paths": [PATH], "diff": f"--- /dev/null\n+++ {PATH}\n@@ -0,0 +1 @@\n+hello fixture\n"}
EDITED = {"paths": [PATH],
          "diff": f"--- {PATH}\n+++ {PATH}\n@@ -1 +1 @@\n-hello fixture\n+hello world\n"}


def _tool_items(events: list[dict[str, Any]], item_type: str) -> list[dict[str, Any]]:
    """The payloads of the item.started and item.completed of the one tool item of
    `item_type` (the first started, then its completion)."""
    items = [e for e in events if e["type"] in ("item.started", "item.completed")
             and e["payload"]["itemType"] == item_type]
    assert len({e["itemId"] for e in items}) == 1, "one item of that type"
    assert [e["type"] for e in items] == ["item.started", "item.completed"]
    return [e["payload"] for e in items]


def _normalised(payload: dict[str, Any]) -> dict[str, Any]:
    return {k: payload[k] for k in NORMALISED if k in payload}


# ---- the command (captures) ------------------------------------------------------------

# (provider, capture, the command, the cwd where the runtime states it)
COMMANDS = [
    ("claude", "claude-code-stream-json__tool_shell", PRINTF, CWD),
    ("claude", "claude-code-stream-json-partial__tool_shell", PRINTF, CWD),
    ("claude", "claude-code-sdk-stdio__tool_shell_allow", TOUCH, CWD),
    ("codex", "codex-app-server__tool_shell", PRINTF, CWD),  # `/bin/bash -lc "..."`
    ("codex", "codex-app-server__approval_accept", TOUCH, CWD),
    ("codex-exec", "codex-exec__tool_shell", PRINTF, None),  # exec's items have no cwd
    ("gemini", "gemini-stream-json__tool_shell", PRINTF, None),  # nor has gemini's stream
    ("opencode", "opencode-serve__tool_shell", PRINTF, CWD),
    ("opencode", "opencode-serve__approval_once", TOUCH, CWD),
    ("acp", "acp-claude-code__reasoning", PRINTF, CWD),  # the session's (session/new cwd)
    ("acp", "acp-claude-code__tool_shell_allow", TOUCH, CWD),
    ("acp", "acp-codex__tool_shell_allow", TOUCH, CWD),  # argv ["/bin/bash", "-lc", ...]
    ("acp", "acp-gemini__tool_shell_allow", TOUCH, CWD),  # the command is the title
    ("qwen", "qwen-stream-json__tool_shell", PRINTF, CWD),
    ("kilo", "kilo-run-json__tool_shell", PRINTF, None),  # the run output names no cwd
    ("droid", "droid-stream-json__tool_shell", PRINTF, CWD),
    ("copilot", "copilot-json__tool_shell", PRINTF, None),  # its arguments name no cwd
    ("pi", "pi-json__tool_shell", PRINTF, None),  # nor do pi's
    ("pi", "pi-rpc__approval", TOUCH, None),
]


@pytest.mark.parametrize("provider, capture, command, cwd", COMMANDS,
                         ids=[c[1] for c in COMMANDS])
def test_a_captured_command_reads_the_same_in_every_runtime(provider, capture, command, cwd):
    found = [d / provider / f"{capture}.capture.jsonl" for d in (CAPTURED, MORE_RUNTIMES)]
    events = events_of(run_whole(provider, read_capture(next(p for p in found if p.exists()))))
    started, completed = _tool_items(events, "command_execution")
    expected = {"command": command, **({"cwd": cwd} if cwd else {})}
    assert _normalised(completed) == expected
    assert _normalised(started) in (expected, {})  # ACP may start a call before its input


def test_amps_command_reads_the_same():
    sid = "T-1"
    lines = capture_lines([
        ("agent", {"type": "system", "subtype": "init", "cwd": CWD, "session_id": sid}),
        ("agent", _claude_assistant(sid, "Bash", {"cmd": PRINTF, "cwd": CWD})),
        ("agent", _claude_result_line(sid, "fixture-ok\n")),
        ("agent", _claude_end(sid)),
    ])
    started, completed = _tool_items(events_of(assert_three_ways("amp", lines)),
                                     "command_execution")
    assert _normalised(started) == _normalised(completed) == {"command": PRINTF, "cwd": CWD}


def test_an_acp_command_runs_where_its_terminal_does():
    """ACP's tool calls carry no cwd of their own: a command runs in the session's
    directory (session/new `cwd`, as the captures above), unless the client terminal
    the agent creates for it names another (terminal/create `cwd`)."""
    def rpc(**m: Any) -> dict[str, Any]:
        return {"jsonrpc": "2.0", **m}

    def update(**u: Any) -> tuple[str, Any]:
        return ("agent", rpc(method="session/update", params={"sessionId": "s1", "update": u}))

    sub = f"{CWD}/sub"
    lines = capture_lines([
        ("client", rpc(id=1, method="session/new", params={"cwd": CWD, "mcpServers": []})),
        ("agent", rpc(id=1, result={"sessionId": "s1"})),
        ("client", rpc(id=2, method="session/prompt", params={
            "sessionId": "s1", "prompt": [{"type": "text", "text": "run it"}]})),
        update(sessionUpdate="tool_call", toolCallId="toolu_1", title="`printf`", kind="execute",
               status="pending", rawInput={"command": PRINTF, "description": "Print"}),
        ("agent", rpc(id=0, method="terminal/create", params={
            "sessionId": "s1", "command": PRINTF, "cwd": sub, "outputByteLimit": 32000})),
        ("client", rpc(id=0, result={"terminalId": "term_1"})),
        update(sessionUpdate="tool_call_update", toolCallId="toolu_1", status="completed",
               content=[{"type": "terminal", "terminalId": "term_1"}]),
        ("agent", rpc(id=2, result={"stopReason": "end_turn"})),
    ])
    started, completed = _tool_items(events_of(assert_three_ways("acp", lines)),
                                     "command_execution")
    assert _normalised(started) == {"command": PRINTF, "cwd": CWD}  # before its terminal
    assert _normalised(completed) == {"command": PRINTF, "cwd": sub}


# ---- the file creation (captures) ---------------------------------------------------------

CREATIONS = [
    ("claude", "claude-code-stream-json__file_write", CREATED, "file"),  # tool_use_result: create
    ("claude", "claude-code-sdk-stdio__file_write_allow", CREATED, "file"),
    ("codex", "codex-app-server__file_write", CREATED, "file"),  # kind add, diff = content
    ("codex-exec", "codex-exec__file_write", {"paths": [PATH]}, None),  # no content sent
    ("gemini", "gemini-stream-json__file_write", CREATED, "empty"),  # a write: old unknown
    ("opencode", "opencode-serve__file_write", CREATED, "file"),  # metadata: exists false
    ("acp", "acp-claude-code__file_write", CREATED, "empty"),  # oldText null
]


@pytest.mark.parametrize("provider, capture, expected, base", CREATIONS,
                         ids=[c[1] for c in CREATIONS])
def test_a_captured_file_creation_reads_the_same_in_every_runtime(provider, capture, expected,
                                                                    base):
    found = [d / provider / f"{capture}.capture.jsonl" for d in (CAPTURED, MORE_RUNTIMES)]
    events = events_of(run_whole(provider, read_capture(next(p for p in found if p.exists()))))
    _, completed = _tool_items(events, "file_change")
    assert _normalised(completed) == expected
    assert completed.get("diffBase") == base


# ---- the edit of an existing file (written natively) ---------------------------------------

OLD, NEW = "hello fixture", "hello world"


def _claude_assistant(sid: str, name: str, inp: dict[str, Any]) -> dict[str, Any]:
    return {"type": "assistant", "session_id": sid, "parent_tool_use_id": None, "uuid": "a1",
            "message": {"id": "msg_1", "type": "message", "role": "assistant", "model": "m",
                        "content": [{"type": "tool_use", "id": "toolu_1", "name": name,
                                     "input": inp}],
                        "stop_reason": "tool_use", "stop_sequence": None,
                        "usage": {"input_tokens": 10, "output_tokens": 5}}}


def _claude_result_line(sid: str, output: str, result: Any = None) -> dict[str, Any]:
    line: dict[str, Any] = {
        "type": "user", "session_id": sid, "parent_tool_use_id": None, "uuid": "u1",
        "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": output}]}}
    if result is not None:
        line["tool_use_result"] = result
    return line


def _claude_end(sid: str) -> dict[str, Any]:
    return {"type": "result", "subtype": "success", "is_error": False, "num_turns": 1,
            "duration_ms": 10, "result": "done", "session_id": sid,
            "usage": {"input_tokens": 10, "output_tokens": 5}}


def _claude_edit() -> list[tuple[str, Any]]:
    sid = "5f0c2a1e-0000-4000-8000-000000000001"
    return [
        ("agent", {"type": "system", "subtype": "init", "cwd": CWD, "session_id": sid,
                   "tools": ["Edit"], "model": "m", "uuid": "init"}),
        ("agent", _claude_assistant(sid, "Edit", {"file_path": PATH, "old_string": OLD,
                                                  "new_string": NEW})),
        ("agent", _claude_result_line(sid, f"The file {PATH} has been updated.", {
            "filePath": PATH, "oldString": OLD, "newString": NEW,
            "originalFile": OLD + "\n", "userModified": False, "replaceAll": False,
            "structuredPatch": [{"oldStart": 1, "oldLines": 1, "newStart": 1, "newLines": 1,
                                 "lines": [f"-{OLD}", f"+{NEW}"]}]})),
        ("agent", _claude_end(sid)),
    ]


def _amp_edit() -> list[tuple[str, Any]]:
    sid = "T-1"
    return [
        ("agent", {"type": "system", "subtype": "init", "cwd": CWD, "session_id": sid}),
        ("agent", _claude_assistant(sid, "edit_file", {"path": PATH, "old_str": OLD,
                                                       "new_str": NEW})),
        ("agent", _claude_result_line(sid, "ok")),
        ("agent", _claude_end(sid)),
    ]


def _qwen_edit() -> list[tuple[str, Any]]:
    """Qwen Code's `edit` tool (Gemini CLI's `replace`, renamed) in Claude's print-mode shape."""
    sid = "q-1"
    return [
        ("agent", {"type": "system", "subtype": "init", "uuid": sid, "cwd": CWD,
                   "session_id": sid}),
        ("agent", _claude_assistant(sid, "edit", {"file_path": PATH, "old_string": OLD,
                                                  "new_string": NEW})),
        ("agent", _claude_result_line(sid, "ok")),
        ("agent", _claude_end(sid)),
    ]


def _kilo_edit() -> list[tuple[str, Any]]:
    """Kilo's run output: OpenCode's edit tool part, in its final state only."""
    inp = {"filePath": PATH, "oldString": OLD, "newString": NEW}
    part = {"sessionID": "ses_1", "messageID": "msg_a"}
    return [
        ("agent", {"type": "step_start", "sessionID": "ses_1", "part": {
            **part, "id": "prt_s", "type": "step-start"}}),
        ("agent", {"type": "tool_use", "sessionID": "ses_1", "part": {
            **part, "id": "prt_t", "type": "tool", "tool": "edit", "callID": "call_1",
            "state": {"status": "completed", "input": inp, "output": "Edit applied successfully.",
                      "title": "fixture.txt", "time": {"start": 3, "end": 4},
                      "metadata": {"filediff": {"file": PATH, "before": OLD + "\n",
                                                "after": NEW + "\n"}}}}}),
        ("agent", {"type": "step_finish", "sessionID": "ses_1", "part": {
            **part, "id": "prt_f", "type": "step-finish", "reason": "stop"}}),
    ]


def _droid_create() -> list[tuple[str, Any]]:
    """droid's `Create` (its recorded file tool; its Edit's input is not on record)."""
    at = {"session_id": "d-1", "timestamp": 1}
    return [
        ("agent", {"type": "system", "subtype": "init", "cwd": CWD, "session_id": "d-1"}),
        ("agent", {"type": "tool_call", "id": "call_1", "messageId": "m1", "toolId": "Create",
                   "toolName": "Create", "parameters": {"file_path": PATH, "content": NEW + "\n"},
                   **at}),
        ("agent", {"type": "tool_result", "id": "call_1", "messageId": "m2", "toolId": "Create",
                   "isError": False, "value": "ok", **at}),
        ("agent", {"type": "completion", "finalText": "", "numTurns": 1, **at}),
    ]


def _copilot_edit() -> list[tuple[str, Any]]:
    """Copilot CLI's `edit` tool (path, old_str, new_str), requested and run."""
    def ev(kind: str, **data: Any) -> tuple[str, Any]:
        return ("agent", {"type": kind, "data": data, "id": f"e-{kind}", "parentId": None})

    inp = {"path": PATH, "old_str": OLD, "new_str": NEW}
    return [
        ev("user.message", content="Edit the file.", messageId="u1"),
        ev("assistant.message", messageId="m1", content="", toolRequests=[
            {"toolCallId": "call_1", "name": "edit", "arguments": inp, "type": "function"}]),
        ev("tool.execution_start", toolCallId="call_1", toolName="edit", arguments=inp),
        ev("tool.execution_complete", toolCallId="call_1", success=True,
           result={"content": "File edited."}),
        ev("assistant.idle"),
    ]


def _pi_edit() -> list[tuple[str, Any]]:
    """pi's `edit` tool (path, oldText, newText): called in a message, then run."""
    inp = {"path": PATH, "oldText": OLD, "newText": NEW}
    call = {"type": "toolCall", "id": "call_1", "name": "edit", "arguments": inp}
    return [
        ("agent", {"type": "session", "version": 3, "id": "p-1", "cwd": CWD}),
        ("agent", {"type": "agent_start"}),
        ("agent", {"type": "message_start", "message": {"role": "assistant", "content": []}}),
        ("agent", {"type": "message_update", "assistantMessageEvent": {
            "type": "toolcall_end", "contentIndex": 0, "toolCall": call}}),
        ("agent", {"type": "message_end", "message": {"role": "assistant", "content": [call],
                                                      "stopReason": "toolUse"}}),
        ("agent", {"type": "tool_execution_start", "toolCallId": "call_1", "toolName": "edit",
                   "args": inp}),
        ("agent", {"type": "tool_execution_end", "toolCallId": "call_1", "toolName": "edit",
                   "result": {"content": [{"type": "text", "text": "Edited."}]},
                   "isError": False}),
        ("agent", {"type": "agent_end", "messages": []}),
    ]


def _codex_edit() -> list[tuple[str, Any]]:
    item = {"type": "fileChange", "id": "call_1", "status": "inProgress", "changes": [
        {"path": PATH, "kind": {"type": "update", "move_path": None},
         "diff": f"@@ -1 +1 @@\n-{OLD}\n+{NEW}\n"}]}
    at = {"threadId": "thr_1", "turnId": "turn_1"}
    return [
        ("agent", {"method": "turn/started", "params": {
            "threadId": "thr_1", "turn": {"id": "turn_1", "items": [], "status": "inProgress"}}}),
        ("agent", {"method": "item/started", "params": {"item": item, **at}}),
        ("agent", {"method": "item/completed", "params": {
            "item": {**item, "status": "completed"}, **at}}),
        ("agent", {"method": "turn/completed", "params": {
            "threadId": "thr_1", "turn": {"id": "turn_1", "items": [], "status": "completed"}}}),
    ]


def _codex_exec_edit() -> list[tuple[str, Any]]:
    item = {"id": "item_1", "type": "file_change", "status": "in_progress",
            "changes": [{"path": PATH, "kind": "update"}]}
    return [
        ("agent", {"type": "thread.started", "thread_id": "thr_1"}),
        ("agent", {"type": "turn.started"}),
        ("agent", {"type": "item.started", "item": item}),
        ("agent", {"type": "item.completed", "item": {**item, "status": "completed"}}),
        ("agent", {"type": "turn.completed", "usage": {"input_tokens": 10, "output_tokens": 5}}),
    ]


def _gemini_edit() -> list[tuple[str, Any]]:
    tool_id = "replace__replace_1795975933900_0"
    return [
        ("agent", {"type": "init", "session_id": "g1", "model": "m"}),
        ("agent", {"type": "tool_use", "tool_name": "replace", "tool_id": tool_id,
                   "parameters": {"file_path": PATH, "old_string": OLD, "new_string": NEW}}),
        ("agent", {"type": "tool_result", "tool_id": tool_id, "status": "success",
                   "output": "Successfully modified file"}),
        ("agent", {"type": "result", "status": "success", "stats": {}}),
    ]


def _opencode_edit() -> list[tuple[str, Any]]:
    def ev(n: int, kind: str, **props: Any) -> tuple[str, Any]:
        return ("agent", {"id": f"evt_{n}", "type": kind, "properties": props})

    inp = {"filePath": PATH, "oldString": OLD, "newString": NEW}
    part = {"id": "prt_t", "messageID": "msg_a", "sessionID": "ses_1", "type": "tool",
            "tool": "edit", "callID": "call_1"}
    return [
        ev(1, "message.updated", sessionID="ses_1", info={
            "id": "msg_u", "sessionID": "ses_1", "role": "user", "time": {"created": 1}}),
        ev(2, "message.updated", sessionID="ses_1", info={
            "id": "msg_a", "sessionID": "ses_1", "role": "assistant", "time": {"created": 2}}),
        ev(3, "message.part.updated", sessionID="ses_1", part={
            **part, "state": {"status": "running", "input": inp, "time": {"start": 3}}}),
        ev(4, "message.part.updated", sessionID="ses_1", part={**part, "state": {
            "status": "completed", "input": inp, "output": "Edit applied successfully.",
            "title": "fixture.txt", "time": {"start": 3, "end": 4},
            "metadata": {"diagnostics": {},
                         # OpenCode's own diff is trimmed for display; filediff is exact
                         "diff": f"Index: {PATH}\n{'=' * 67}\n--- {PATH}\n+++ {PATH}\n"
                                 f"@@ -1,1 +1,1 @@\n-{OLD}\n+{NEW}\n",
                         "filediff": {"file": PATH, "before": OLD + "\n", "after": NEW + "\n",
                                      "additions": 1, "deletions": 1}}}}),
        ev(5, "session.idle", sessionID="ses_1"),
    ]


def _acp_edit() -> list[tuple[str, Any]]:
    def rpc(**m: Any) -> dict[str, Any]:
        return {"jsonrpc": "2.0", **m}

    def update(**u: Any) -> tuple[str, Any]:
        return ("agent", rpc(method="session/update", params={"sessionId": "s1", "update": u}))

    block = {"type": "diff", "path": PATH, "oldText": OLD + "\n", "newText": NEW + "\n"}
    return [
        ("client", rpc(id=1, method="session/new", params={"cwd": CWD, "mcpServers": []})),
        ("agent", rpc(id=1, result={"sessionId": "s1"})),
        ("client", rpc(id=2, method="session/prompt", params={
            "sessionId": "s1", "prompt": [{"type": "text", "text": "edit it"}]})),
        update(sessionUpdate="tool_call", toolCallId="call_1", title=f"Edit {PATH}",
               kind="edit", status="pending", content=[block], locations=[{"path": PATH}]),
        update(sessionUpdate="tool_call_update", toolCallId="call_1", status="completed"),
        ("agent", rpc(id=2, result={"stopReason": "end_turn"})),
    ]


def _codex_transcript_edit() -> list[tuple[str, Any]]:
    """A Codex 0.171 rollout: the apply_patch call, then its FileChange item."""
    def line(kind: str, **payload: Any) -> tuple[str, Any]:
        return ("agent", {"timestamp": "2026-01-01T00:00:00.000Z", "type": kind,
                          "payload": payload})

    patch = f"*** Begin Patch\n*** Update File: {PATH}\n@@\n-{OLD}\n+{NEW}\n*** End Patch\n"
    change = {"type": "update", "unified_diff": f"@@ -1 +1 @@\n-{OLD}\n+{NEW}\n",
              "move_path": None}
    return [
        line("session_meta", id="thr_1", cwd=CWD, cli_version="0.171.0"),
        line("event_msg", type="task_started", turn_id="turn_1"),
        line("response_item", type="custom_tool_call", name="apply_patch", call_id="call_1",
             input=patch),
        line("event_msg", type="item_completed", turn_id="turn_1", item={
            "type": "FileChange", "id": "call_1", "changes": {PATH: change},
            "status": "completed"}),
        line("event_msg", type="task_complete", turn_id="turn_1"),
    ]


def _opencode_transcript_edit() -> list[tuple[str, Any]]:
    """OpenCode's `event` rows of the same edit, its message completed with a finish."""
    events = [m for _, m in _opencode_edit() if m["type"] != "session.idle"]
    events.append({"id": "evt_9", "type": "message.updated", "properties": {
        "sessionID": "ses_1", "info": {"id": "msg_a", "sessionID": "ses_1", "role": "assistant",
                                       "finish": "stop", "time": {"created": 2, "completed": 5}}}})
    return [("agent", {"table": "event", "row": {
        "id": e["id"], "aggregate_id": "ses_1", "seq": n, "type": f"{e['type']}.1",
        "data": json.dumps(e["properties"])}}) for n, e in enumerate(events)]


def _claude_transcript_edit() -> list[tuple[str, Any]]:
    """Claude Code's session file: the lines of _claude_edit as rows (`sessionId`,
    `toolUseResult`), no init and no result."""
    sid = {"sessionId": "5f0c2a1e-0000-4000-8000-000000000001", "cwd": CWD}
    _, (_, call), (_, result), _ = _claude_edit()
    return [
        ("agent", {"type": "user", "uuid": "p1", **sid,
                   "message": {"role": "user", "content": "Edit the file."}}),
        ("agent", {**call, **sid}),
        ("agent", {"type": "user", "uuid": "u1", **sid, "message": result["message"],
                   "toolUseResult": result["tool_use_result"]}),
    ]


def _gemini_transcript_edit() -> list[tuple[str, Any]]:
    """Gemini CLI's chat file: the call of _gemini_edit as a recorded tool call."""
    call = {"id": "replace__replace_1795975933900_0", "name": "replace", "status": "success",
            "args": {"file_path": PATH, "old_string": OLD, "new_string": NEW},
            "resultDisplay": {"fileDiff": "", "fileName": "fixture.txt"}}
    return [
        ("agent", {"sessionId": "g1", "projectHash": "x", "startTime": "2026-01-01T00:00:00Z"}),
        ("agent", {"id": "u1", "type": "user", "content": [{"text": "Edit the file."}]}),
        ("agent", {"id": "m1", "type": "gemini", "content": "", "toolCalls": [call]}),
    ]


# (provider, native messages, expected fields, diffBase)
EDITS = [
    ("claude", _claude_edit, EDITED, "file"),  # structuredPatch: the file's hunks
    ("amp", _amp_edit, EDITED, "excerpt"),  # old_str / new_str only
    ("qwen", _qwen_edit, EDITED, "excerpt"),  # file_path / old_string / new_string
    ("kilo", _kilo_edit, EDITED, "file"),  # OpenCode's metadata.filediff
    ("copilot", _copilot_edit, EDITED, "excerpt"),  # old_str / new_str
    ("pi", _pi_edit, EDITED, "excerpt"),  # oldText / newText
    ("droid", _droid_create, {"paths": [PATH], "diff": (
        f"--- /dev/null\n+++ {PATH}\n@@ -0,0 +1 @@\n+{NEW}\n")}, "empty"),
    ("codex", _codex_edit, EDITED, "file"),  # bare hunks, given a header
    ("codex-exec", _codex_exec_edit, {"paths": [PATH]}, None),  # exec sends no diff
    ("gemini", _gemini_edit, EDITED, "excerpt"),
    ("opencode", _opencode_edit, EDITED, "file"),  # metadata.filediff before / after
    ("acp", _acp_edit, EDITED, "excerpt"),  # a diff block's oldText may be an excerpt
    ("codex-transcript", _codex_transcript_edit, EDITED, "file"),  # the item's bare hunks
    ("opencode-transcript", _opencode_transcript_edit, EDITED, "file"),  # as on the bus
    ("claude-transcript", _claude_transcript_edit, EDITED, "file"),  # as claude
    ("gemini-transcript", _gemini_transcript_edit, EDITED, "excerpt"),  # as gemini
]


@pytest.mark.parametrize("provider, messages, expected, base", EDITS,
                         ids=[e[0] for e in EDITS])
def test_an_edit_reads_the_same_in_every_runtime(provider, messages, expected, base):
    events = events_of(assert_three_ways(provider, capture_lines(messages())))
    started, completed = _tool_items(events, "file_change")
    assert _normalised(completed) == expected
    assert completed.get("diffBase") == base
    # what the call's input already says is on its start (Claude, OpenCode: the excerpt)
    assert _normalised(started)["paths"] == [PATH]
    assert _normalised(started).get("diff", expected.get("diff")) == expected.get("diff")


#: runtimes read from files, whose commands are compared with the live wire of the same run
FROM_FILES = frozenset({"codex-transcript", "opencode-transcript", "claude-transcript",
                        "gemini-transcript"})


def test_every_runtime_is_covered():
    runtimes = {r.id for r in RUNTIMES}
    # Amp has no capture: written above; the transcripts' commands are held to their live
    # wire's in tests/adapters/test_transcript_<runtime>.py
    assert {c[0] for c in COMMANDS} | {"amp"} | FROM_FILES == runtimes
    assert {e[0] for e in EDITS} == runtimes
