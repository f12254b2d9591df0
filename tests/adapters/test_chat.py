"""The chat projection (seed 001): the three saved translations, exactly, and the same
chat from every runtime.

The exhibits show selected records only (gaps in `input_index`); where a gap hides a
message the translation needs, the test supplies a minimal one in the runtime's real
shape and says so below. The Claude inputs are the Python SDK's objects, converted to
stream-json wire lines (tests/adapters/test_claude.py `_wire`).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from adapters import MemorySpool, get, new_session, providers, translate_record
from adapters.core import Session
from adapters.projections.chat import ACCUMULATED_MAX, ChatState, initial, project_event
from tests.adapters.harness import SHARED, capture_lines
from tests.adapters.test_claude import _wire as claude_wire
from topics.chat import encode_chat

EXHIBITS = SHARED / "fixtures" / "seed-exhibits"
if not EXHIBITS.is_dir():  # the copies kept in the project (seed-exhibits may be copied)
    EXHIBITS = SHARED.parent / "main" / "tests" / "fixtures" / "seed-exhibits"


def chat_per_input(provider: str, session_id: str, messages: list[tuple[str, Any]]
                   ) -> list[list[dict[str, Any]]]:
    """For each native message in order: the chat records it produced."""
    t = get(provider)
    session, spool = new_session(t), MemorySpool()
    chat: Session[ChatState] = Session(state=initial())
    out: list[list[dict[str, Any]]] = []
    for n, line in enumerate(capture_lines(messages)):
        session, events, failures = translate_record(t, session, session_id, [line], offset=n,
                                                     spool=spool)
        assert not failures, failures[0].error
        records: list[dict[str, Any]] = []
        for ev in events:
            chat, recs = project_event(chat, ev, offset=ev.seq, spool=spool)
            records += [json.loads(encode_chat(r)) for r in recs]
        out.append(records)
    return out


def assert_matches_exhibit(rows: list[tuple[int, Any, list[dict[str, Any]] | None]],
                           got: list[list[dict[str, Any]]],
                           users: list[tuple[int, str]]) -> None:
    """Every exhibit output, in order, with every field it shows (extra fields allowed);
    an empty output list means no chat record. Supplied inputs (None) are not checked.

    The exhibits predate the `user` record (what the user asked, issue 19), the one
    record the chat has added since: the `user` records are set aside and must be
    exactly `users` ((input_index, content), in order), so the only difference allowed
    is the added prompt. No exhibit shows a `user` record, so none of its is hidden."""
    added: list[tuple[int, str]] = []
    for (index, _msg, outputs), records in zip(rows, got, strict=True):
        added += [(index, r["content"]) for r in records if r["type"] == "user"]
        records = [r for r in records if r["type"] != "user"]
        if outputs is None:
            continue
        assert len(records) == len(outputs), (index, records)
        for want, have in zip(outputs, records, strict=True):
            shown = {k: have.get(k, "<missing>") for k in want}
            assert shown == want, (index, have)
    assert added == users


def _exhibit(name: str) -> list[tuple[int, Any, list[dict[str, Any]] | None]]:
    path = EXHIBITS / f"{name}.json"
    if not path.exists():
        pytest.skip(f"{path} is absent")
    return [(r["input_index"], r["input"], r["outputs"])
            for r in json.loads(path.read_text())["records"]]


def test_claude_exhibit_one_sentence_once():
    rows = [(i, claude_wire(m), o) for i, m, o in _exhibit("claude")]
    got = chat_per_input("claude", "synthetic-claude-session", [("agent", m) for _, m, _ in rows])
    assert_matches_exhibit(rows, got, users=[])  # its selected inputs hold no prompt


# Codex: inputs 1 and 8 (hidden by the exhibit) are the `item/started` notifications of
# the two agentMessage items, which carry each message's phase (commentary,
# final_answer); supplied here in the v0.171.0 shape.
def _codex_agent_message(item_id: str, phase: str) -> dict[str, Any]:
    return {"method": "item/started", "params": {
        "threadId": "synthetic-codex-thread", "turnId": "synthetic-codex-turn",
        "item": {"type": "agentMessage", "id": item_id, "text": "", "phase": phase}}}


def test_codex_exhibit_waits_for_the_complete_result():
    rows = _exhibit("codex") + [
        (1, _codex_agent_message("synthetic-commentary", "commentary"), None),
        (8, _codex_agent_message("synthetic-final", "final_answer"), None)]
    rows.sort(key=lambda r: r[0])
    got = chat_per_input("codex", "synthetic-codex-thread", [("agent", m) for _, m, _ in rows])
    assert_matches_exhibit(rows, got, users=[])  # its selected inputs hold no prompt


# OpenCode: inputs 1, 3 and 9 (hidden) are the `message.updated` events that give each
# message its role; supplied here in OpenCode's Message shape.
def _opencode_message(mid: str, role: str, created: int) -> dict[str, Any]:
    info: dict[str, Any] = {"id": mid, "sessionID": "synthetic-opencode-session", "role": role,
                            "time": {"created": created}}
    if role == "assistant":
        info.update(parentID="synthetic-user", modelID="synthetic-model", providerID="synthetic")
    return {"type": "message.updated", "properties": {"info": info}}


def test_opencode_exhibit_keeps_the_answer_and_skips_the_echo():
    rows = _exhibit("opencode") + [
        (1, _opencode_message("synthetic-user", "user", 1000), None),
        (3, _opencode_message("synthetic-commentary", "assistant", 1000), None),
        (9, _opencode_message("synthetic-final", "assistant", 1003), None)]
    rows.sort(key=lambda r: r[0])
    got = chat_per_input("opencode", "synthetic-opencode-session",
                         [("agent", m) for _, m, _ in rows])
    # input 2 is the user's prompt: still never streamed as the reply (no `text`), now
    # shown for what it is
    assert_matches_exhibit(rows, got,
                           users=[(2, "Synthetic user prompt must not be streamed.")])


# ---- one conversation, seven runtimes ----------------------------------------------
# "Checking the fixture." / Bash printf 'fixture-ok\n' -> "fixture-ok\n" / "Fixture
# complete.", each in the runtime's own native shape.

CMD = "printf 'fixture-ok\\n'"
OUT = "fixture-ok\n"
FIRST, LAST = "Checking the fixture.", "Fixture complete."
PROMPT = "Run the fixture."
#: Runtimes whose stream never carries the user's prompt (`codex exec --json` starts at
#: thread.started; the prompt is its command line's).
NO_PROMPT = frozenset({"codex-exec", "qwen", "kilo"})
#: Runtimes whose record never says a turn ended (Gemini CLI's chat file: its turn ends at
#: the next prompt, adapters/gemini_transcript).
NO_END = frozenset({"gemini-transcript"})


def _claude_like(session_key: str, bash_input: dict[str, Any], prompt_origin: str
                 ) -> list[tuple[str, Any]]:
    """Claude Code takes the prompt from its client (a client-origin line); Amp echoes it
    on its own output."""
    sid = {session_key: "sess-1"}
    prompt = (prompt_origin, {"type": "user", "parent_tool_use_id": None, **sid, "message": {
        "role": "user", "content": [{"type": "text", "text": PROMPT}]}})

    def assistant(mid: str, block: dict[str, Any]) -> tuple[str, Any]:
        return ("agent", {"type": "assistant", "parent_tool_use_id": None, **sid,
                          "message": {"id": mid, "type": "message", "role": "assistant",
                                      "model": "m", "content": [block]}})

    return [
        ("agent", {"type": "system", "subtype": "init", "model": "m", "tools": ["Bash"],
                   "cwd": "/w", **sid}),
        prompt,
        assistant("msg_1", {"type": "text", "text": FIRST}),
        assistant("msg_1", {"type": "tool_use", "id": "toolu_1", "name": "Bash",
                            "input": bash_input}),
        ("agent", {"type": "user", "parent_tool_use_id": None, **sid, "message": {
            "role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                                         "content": OUT, "is_error": False}]}}),
        assistant("msg_2", {"type": "text", "text": LAST}),
        ("agent", {"type": "result", "subtype": "success", "is_error": False, "result": LAST,
                   "num_turns": 2, **sid}),
    ]


def _qwen() -> list[tuple[str, Any]]:
    """Qwen Code: Claude Code's print mode without the prompt on the wire, one block per
    `assistant` line, each line with a message id of its own."""
    sid = {"session_id": "sess-1"}

    def assistant(mid: str, block: dict[str, Any]) -> tuple[str, Any]:
        return ("agent", {"type": "assistant", "uuid": mid, "parent_tool_use_id": None, **sid,
                          "message": {"id": mid, "type": "message", "role": "assistant",
                                      "model": "m", "content": [block], "stop_reason": None}})

    return [
        ("agent", {"type": "system", "subtype": "init", "uuid": "sess-1", "model": "m",
                   "tools": ["run_shell_command"], "cwd": "/w", "qwen_code_version": "0.15.10",
                   **sid}),
        assistant("a1", {"type": "text", "text": FIRST}),
        assistant("a2", {"type": "tool_use", "id": "call_1", "name": "run_shell_command",
                         "input": {"command": CMD}}),
        ("agent", {"type": "user", "uuid": "u1", "parent_tool_use_id": None, **sid, "message": {
            "role": "user", "content": [{"type": "tool_result", "tool_use_id": "call_1",
                                         "content": OUT, "is_error": False}]}}),
        assistant("a3", {"type": "text", "text": LAST}),
        ("agent", {"type": "result", "subtype": "success", "uuid": "r1", "is_error": False,
                   "result": LAST, "num_turns": 2, **sid}),
    ]


def _codex() -> list[tuple[str, Any]]:
    ids = {"threadId": "thr_1", "turnId": "turn_1"}

    def n(method: str, **params: Any) -> tuple[str, Any]:
        return ("agent", {"method": method, "params": {**ids, **params}})

    def message(item_id: str, text: str) -> list[tuple[str, Any]]:
        item = {"type": "agentMessage", "id": item_id, "text": ""}
        return [n("item/started", item=item),
                n("item/agentMessage/delta", itemId=item_id, delta=text),
                n("item/completed", item={**item, "text": text})]

    cmd = {"type": "commandExecution", "id": "call_1", "command": CMD, "cwd": "/w",
           "commandActions": [], "status": "inProgress"}
    prompt = {"type": "userMessage", "id": "u_1", "content": [{"type": "text", "text": PROMPT}]}
    return [
        ("agent", {"method": "turn/started", "params": {
            "threadId": "thr_1", "turn": {"id": "turn_1", "status": "inProgress", "items": []}}}),
        n("item/started", item=prompt),
        n("item/completed", item=prompt),
        *message("msg_1", FIRST),
        n("item/started", item=cmd),
        n("item/commandExecution/outputDelta", itemId="call_1", delta=OUT),
        n("item/completed", item={**cmd, "status": "completed", "aggregatedOutput": OUT,
                                  "exitCode": 0}),
        *message("msg_2", LAST),
        ("agent", {"method": "turn/completed", "params": {
            "threadId": "thr_1", "turn": {"id": "turn_1", "status": "completed", "items": []}}}),
    ]


def _codex_exec() -> list[tuple[str, Any]]:
    cmd = {"id": "item_1", "type": "command_execution", "command": CMD,
           "aggregated_output": "", "status": "in_progress"}
    return [("agent", m) for m in [
        {"type": "thread.started", "thread_id": "thr_1"},
        {"type": "turn.started"},
        {"type": "item.completed", "item": {"id": "item_0", "type": "agent_message", "text": FIRST}},
        {"type": "item.started", "item": cmd},
        {"type": "item.completed", "item": {**cmd, "aggregated_output": OUT, "exit_code": 0,
                                            "status": "completed"}},
        {"type": "item.completed", "item": {"id": "item_2", "type": "agent_message", "text": LAST}},
        {"type": "turn.completed", "usage": {"input_tokens": 1, "output_tokens": 1}},
    ]]


def _opencode() -> list[tuple[str, Any]]:
    sid = "ses_1"

    def ev(kind: str, **props: Any) -> tuple[str, Any]:
        return ("agent", {"type": kind, "properties": {"sessionID": sid, **props}})

    def message(mid: str, role: str) -> tuple[str, Any]:
        return ev("message.updated", info={"id": mid, "sessionID": sid, "role": role,
                                           "time": {"created": 1}})

    def text(pid: str, mid: str, body: str) -> tuple[str, Any]:
        return ev("message.part.updated", part={
            "id": pid, "sessionID": sid, "messageID": mid, "type": "text", "text": body,
            "time": {"start": 1, "end": 2}})

    tool = {"id": "prt_tool", "sessionID": sid, "messageID": "msg_a", "type": "tool",
            "callID": "call_1", "tool": "bash"}
    return [
        ev("session.status", status={"type": "busy"}),
        message("msg_u", "user"),
        ev("message.part.updated", part={"id": "prt_u", "sessionID": sid, "messageID": "msg_u",
                                         "type": "text", "text": PROMPT}),
        message("msg_a", "assistant"),
        text("prt_1", "msg_a", FIRST),
        ev("message.part.updated", part={**tool, "state": {"status": "pending", "input": {}}}),
        ev("message.part.updated", part={**tool, "state": {
            "status": "running", "input": {"command": CMD}, "time": {"start": 1}}}),
        ev("message.part.updated", part={**tool, "state": {
            "status": "completed", "input": {"command": CMD}, "output": OUT, "title": "fixture",
            "metadata": {}, "time": {"start": 1, "end": 2}}}),
        message("msg_b", "assistant"),
        text("prt_2", "msg_b", LAST),
        ev("session.idle"),
    ]


def _kilo() -> list[tuple[str, Any]]:
    """Kilo's `run --format json` (OpenCode's run output): finished parts only, no prompt."""
    sid = "ses_1"

    def line(kind: str, pid: str, mid: str, **part: Any) -> tuple[str, Any]:
        return ("agent", {"type": kind, "timestamp": 1, "sessionID": sid, "part": {
            "id": pid, "sessionID": sid, "messageID": mid, **part}})

    return [
        line("step_start", "prt_s1", "msg_a", type="step-start"),
        line("text", "prt_1", "msg_a", type="text", text=FIRST, time={"start": 1, "end": 2}),
        line("tool_use", "prt_tool", "msg_a", type="tool", callID="call_1", tool="bash", state={
            "status": "completed", "input": {"command": CMD}, "output": OUT, "title": "fixture",
            "metadata": {"output": OUT, "exit": 0}, "time": {"start": 1, "end": 2}}),
        line("step_finish", "prt_f1", "msg_a", type="step-finish", reason="tool-calls"),
        line("step_start", "prt_s2", "msg_b", type="step-start"),
        line("text", "prt_2", "msg_b", type="text", text=LAST, time={"start": 3, "end": 4}),
        line("step_finish", "prt_f2", "msg_b", type="step-finish", reason="stop"),
    ]


def _droid() -> list[tuple[str, Any]]:
    """droid's stream-json: whole lines of its own; it echoes the prompt."""
    at = {"session_id": "sess-1", "timestamp": 1}
    return [
        ("agent", {"type": "system", "subtype": "init", "cwd": "/w", "session_id": "sess-1",
                   "tools": ["Execute"], "model": "m"}),
        ("agent", {"type": "message", "role": "user", "id": "u1", "text": PROMPT, **at}),
        ("agent", {"type": "message", "role": "assistant", "id": "a1", "text": FIRST, **at}),
        ("agent", {"type": "tool_call", "id": "call_1", "messageId": "a1", "toolId": "Execute",
                   "toolName": "Execute", "parameters": {"command": CMD}, **at}),
        ("agent", {"type": "tool_result", "id": "call_1", "messageId": "r1", "toolId": "Execute",
                   "isError": False, "value": OUT, **at}),
        ("agent", {"type": "message", "role": "assistant", "id": "a2", "text": LAST, **at}),
        ("agent", {"type": "completion", "finalText": LAST, "numTurns": 2, **at}),
    ]


def _copilot() -> list[tuple[str, Any]]:
    """Copilot CLI's session events: the prompt, streamed text, a requested and run tool."""
    def ev(kind: str, **data: Any) -> tuple[str, Any]:
        return ("agent", {"type": kind, "data": data, "id": f"e{len(kind)}", "parentId": None})

    call = {"toolCallId": "call_1", "name": "bash", "arguments": {"command": CMD}}
    return [
        ev("user.message", content=PROMPT, transformedContent=f"<current_datetime/>{PROMPT}",
           messageId="u1"),
        ev("assistant.message_delta", messageId="m1", deltaContent=FIRST),
        ev("assistant.message", messageId="m1", content=FIRST, toolRequests=[call]),
        ev("tool.execution_start", toolCallId="call_1", toolName="bash",
           arguments={"command": CMD}),
        ev("tool.execution_complete", toolCallId="call_1", success=True,
           result={"content": OUT}),
        ev("assistant.message_delta", messageId="m2", deltaContent=LAST),
        ev("assistant.message", messageId="m2", content=LAST, toolRequests=[]),
        ev("assistant.idle"),
        ("agent", {"type": "result", "sessionId": "sess-1", "exitCode": 0, "usage": {}}),
    ]


def _pi() -> list[tuple[str, Any]]:
    """pi's json mode: the prompt's agent loop, two model calls, a bash call between."""
    def update(kind: str, index: int, **event: Any) -> tuple[str, Any]:
        return ("agent", {"type": "message_update", "assistantMessageEvent": {
            "type": kind, "contentIndex": index, **event}})

    call = {"type": "toolCall", "id": "call_1", "name": "bash", "arguments": {"command": CMD}}
    user = {"role": "user", "content": [{"type": "text", "text": PROMPT}]}
    return [
        ("agent", {"type": "session", "version": 3, "id": "sess-1", "cwd": "/w"}),
        ("agent", {"type": "agent_start"}),
        ("agent", {"type": "message_start", "message": user}),
        ("agent", {"type": "message_end", "message": user}),
        ("agent", {"type": "message_start", "message": {"role": "assistant", "content": []}}),
        update("text_start", 0),
        update("text_delta", 0, delta=FIRST),
        update("text_end", 0, content=FIRST),
        update("toolcall_end", 1, toolCall=call),
        ("agent", {"type": "message_end", "message": {"role": "assistant", "content": [
            {"type": "text", "text": FIRST}, call], "stopReason": "toolUse"}}),
        ("agent", {"type": "tool_execution_start", "toolCallId": "call_1", "toolName": "bash",
                   "args": {"command": CMD}}),
        ("agent", {"type": "tool_execution_end", "toolCallId": "call_1", "toolName": "bash",
                   "result": {"content": [{"type": "text", "text": OUT}]}, "isError": False}),
        ("agent", {"type": "message_start", "message": {"role": "assistant", "content": []}}),
        update("text_start", 0),
        update("text_delta", 0, delta=LAST),
        update("text_end", 0, content=LAST),
        ("agent", {"type": "message_end", "message": {"role": "assistant", "content": [
            {"type": "text", "text": LAST}], "stopReason": "stop"}}),
        ("agent", {"type": "agent_end", "messages": []}),
    ]


def _acp_update(**u: Any) -> tuple[str, Any]:
    return ("agent", {"jsonrpc": "2.0", "method": "session/update",
                      "params": {"sessionId": "s1", "update": u}})


def _acp_chunk(text: str) -> tuple[str, Any]:
    return _acp_update(sessionUpdate="agent_message_chunk", content={"type": "text", "text": text})


def _acp_turn(*middle: tuple[str, Any]) -> list[tuple[str, Any]]:
    """An ACP session opened, one prompt, `middle`, the prompt's answer."""
    return [
        ("client", {"jsonrpc": "2.0", "id": 1, "method": "session/new",
                    "params": {"cwd": "/w", "mcpServers": []}}),
        ("agent", {"jsonrpc": "2.0", "id": 1, "result": {"sessionId": "s1"}}),
        ("client", {"jsonrpc": "2.0", "id": 2, "method": "session/prompt", "params": {
            "sessionId": "s1", "prompt": [{"type": "text", "text": PROMPT}]}}),
        *middle,
        ("agent", {"jsonrpc": "2.0", "id": 2, "result": {"stopReason": "end_turn"}}),
    ]


def _acp() -> list[tuple[str, Any]]:
    return _acp_turn(
        _acp_chunk(FIRST),
        _acp_update(sessionUpdate="tool_call", toolCallId="call_1", title=CMD, kind="execute",
                    status="pending", rawInput={"command": CMD}),
        _acp_update(sessionUpdate="tool_call_update", toolCallId="call_1", status="completed",
                    content=[{"type": "content", "content": {"type": "text", "text": OUT}}]),
        _acp_chunk(LAST),
    )


def _gemini() -> list[tuple[str, Any]]:
    return [("agent", m) for m in [
        {"type": "init", "session_id": "g1", "model": "gemini"},
        {"type": "message", "role": "user", "content": PROMPT},
        {"type": "message", "role": "assistant", "content": FIRST, "delta": True},
        {"type": "tool_use", "tool_name": "run_shell_command", "tool_id": "call_1",
         "parameters": {"command": CMD}},
        {"type": "tool_result", "tool_id": "call_1", "status": "success", "output": OUT},
        {"type": "message", "role": "assistant", "content": LAST, "delta": True},
        {"type": "result", "status": "success", "stats": {"input_tokens": 1, "output_tokens": 1}},
    ]]


def _codex_transcript() -> list[tuple[str, Any]]:
    """A Codex 0.171 rollout: items completed whole, the command started by its call."""
    def line(kind: str, **payload: Any) -> tuple[str, Any]:
        return ("agent", {"timestamp": "2026-01-01T00:00:00.000Z", "type": kind,
                          "payload": payload})

    def done(item: dict[str, Any]) -> tuple[str, Any]:
        return line("event_msg", type="item_completed", turn_id="turn_1", item=item)

    return [
        line("session_meta", id="thr_1", cwd="/w", cli_version="0.171.0"),
        line("event_msg", type="task_started", turn_id="turn_1"),
        done({"type": "UserMessage", "id": "u_1", "content": [{"type": "text", "text": PROMPT}]}),
        done({"type": "AgentMessage", "id": "msg_1", "content": [{"type": "Text", "text": FIRST}]}),
        line("response_item", type="function_call", name="exec_command", call_id="call_1",
             arguments=json.dumps({"cmd": CMD})),
        done({"type": "CommandExecution", "id": "call_1", "command": ["/bin/bash", "-lc", CMD],
              "cwd": "file:///w", "status": "completed", "aggregated_output": OUT,
              "exit_code": 0}),
        done({"type": "AgentMessage", "id": "msg_2", "content": [{"type": "Text", "text": LAST}]}),
        line("event_msg", type="task_complete", turn_id="turn_1", last_agent_message=LAST),
    ]


def _opencode_transcript() -> list[tuple[str, Any]]:
    """OpenCode's `event` rows: the bus conversation's durable events (no status, no
    idle), the last message completed with its finish."""
    events = [m for _, m in _opencode() if m["type"] not in ("session.status", "session.idle")]
    events.append({"type": "message.updated", "properties": {"sessionID": "ses_1", "info": {
        "id": "msg_b", "sessionID": "ses_1", "role": "assistant", "finish": "stop",
        "time": {"created": 1, "completed": 3}}}})
    return [("agent", {"table": "event", "row": {
        "id": f"evt_{n}", "aggregate_id": "ses_1", "seq": n, "type": f"{e['type']}.1",
        "data": json.dumps(e["properties"])}}) for n, e in enumerate(events)]


def _claude_transcript() -> list[tuple[str, Any]]:
    """Claude Code's session file: the stream's lines as rows (`sessionId`, the prompt
    its own row, the final stop_reason), the turn ended by `turn_duration`."""
    rows = []
    for _, line in _claude_like("session_id", {"command": CMD}, "client")[1:-1]:
        row = {k: v for k, v in line.items() if k not in ("session_id", "parent_tool_use_id")}
        rows.append(("agent", {**row, "sessionId": "sess-1", "cwd": "/w"}))
    rows[-1][1]["message"] = {**rows[-1][1]["message"], "stop_reason": "end_turn"}
    rows.append(("agent", {"type": "system", "subtype": "turn_duration", "durationMs": 9,
                           "sessionId": "sess-1"}))
    return rows


def _gemini_transcript() -> list[tuple[str, Any]]:
    """Gemini CLI's chat file: the text written, then again with its tool call."""
    first = {"id": "m1", "type": "gemini", "content": FIRST}
    call = {"id": "call_1", "name": "run_shell_command", "args": {"command": CMD},
            "status": "success", "resultDisplay": OUT}
    return [("agent", r) for r in [
        {"sessionId": "g1", "projectHash": "x", "startTime": "2026-01-01T00:00:00.000Z"},
        {"id": "u1", "type": "user", "content": [{"text": PROMPT}]},
        first, {**first, "toolCalls": [call]},
        {"id": "u2", "type": "user", "content": [{"functionResponse": {
            "id": "call_1", "name": "run_shell_command", "response": {"output": OUT}}}]},
        {"id": "m2", "type": "gemini", "content": LAST},
    ]]


CONVERSATIONS = {
    "claude": lambda: _claude_like("session_id", {"command": CMD}, "client"),
    "amp": lambda: _claude_like("session_id", {"cmd": CMD}, "agent"),
    "qwen": _qwen,
    "kilo": _kilo,
    "droid": _droid,
    "copilot": _copilot,
    "pi": _pi,
    "codex": _codex,
    "codex-exec": _codex_exec,
    "opencode": _opencode,
    "acp": _acp,
    "gemini": _gemini,
    "codex-transcript": _codex_transcript,
    "opencode-transcript": _opencode_transcript,
    "claude-transcript": _claude_transcript,
    "gemini-transcript": _gemini_transcript,
}


def _essence(record: dict[str, Any]) -> tuple[Any, ...]:
    """A chat record without ids: what a reader sees."""
    t = record["type"]
    if t == "user":
        return (t, record["content"])
    if t == "text":
        return (t, record["accumulated"])
    if t == "tool_use":
        return (t, record["name"], record["input"].get("command"))
    if t == "tool_result":
        return (t, record["content"], record["is_error"])
    if t == "done":
        return (t, record["result"], record["final_text"], record["is_error"])
    return (t,)


def test_every_conversation_is_of_a_registered_runtime():
    assert set(CONVERSATIONS) <= set(providers())


@pytest.mark.parametrize("provider", providers())  # every registered runtime (topics.runtimes)
def test_the_same_conversation_gives_the_same_chat_in_every_runtime(provider: str):
    assert provider in CONVERSATIONS, (
        f"no equivalence conversation for {provider}: add its native messages to CONVERSATIONS")
    records = [r for rs in chat_per_input(provider, "s", CONVERSATIONS[provider]()) for r in rs]
    asked = [] if provider in NO_PROMPT else [("user", PROMPT)]
    assert [_essence(r) for r in records] == [
        *asked,
        ("text", FIRST),
        ("tool_use", "Bash", CMD),
        ("tool_result", OUT, False),
        ("text", LAST),
        *([] if provider in NO_END else [("done", LAST, LAST, False)]),
    ]
    assert [r["seq"] for r in records] == list(range(1, len(records) + 1))
    assert len({r["event_id"] for r in records}) == len(records)


# ---- the user's prompt, and only the user's ------------------------------------------


def _claude_user(origin: str, text: str, **extra: Any) -> tuple[str, Any]:
    return (origin, {"type": "user", "session_id": "sess-1", "parent_tool_use_id": None,
                     "message": {"role": "user", "content": [{"type": "text", "text": text}]},
                     **extra})


def _codex_items(*items: dict[str, Any]) -> list[tuple[str, Any]]:
    ids = {"threadId": "thr_1", "turnId": "turn_1"}
    out: list[tuple[str, Any]] = [("agent", {"method": "turn/started", "params": {
        "threadId": "thr_1", "turn": {"id": "turn_1", "status": "inProgress", "items": []}}})]
    for item in items:
        out += [("agent", {"method": "item/started", "params": {**ids, "item": item}}),
                ("agent", {"method": "item/completed", "params": {**ids, "item": item}})]
    return out


def _opencode_user_parts(*parts: dict[str, Any]) -> list[tuple[str, Any]]:
    sid = "ses_1"
    info = {"id": "msg_u", "sessionID": sid, "role": "user", "time": {"created": 1}}
    return [("agent", {"type": "message.updated", "properties": {"sessionID": sid, "info": info}}),
            *[("agent", {"type": "message.part.updated", "properties": {"sessionID": sid, "part": {
                "sessionID": sid, "messageID": "msg_u", "type": "text", **p}}}) for p in parts]]


#: (runtime, native messages, the user records' content, every user_message's author)
PROMPTS = [
    # Claude Code writes its own user lines (an interrupt notice), a subagent's prompt
    # (parent_tool_use_id) and synthetic ones: none is what the user asked
    ("claude", [_claude_user("client", "Tidy up."),
                _claude_user("agent", "[Request interrupted by user]", uuid="u1"),
                _claude_user("agent", "Find config.toml", uuid="u2",
                             parent_tool_use_id="toolu_task"),
                _claude_user("client", "Summary of the conversation.", isSynthetic=True)],
     ["Tidy up."], ["user", "runtime", "agent", "runtime"]),
    # Amp echoes the prompt itself; a subagent's prompt is still not the user's
    ("amp", [_claude_user("agent", "Tidy up."),
             _claude_user("agent", "Find config.toml", parent_tool_use_id="toolu_task")],
     ["Tidy up."], ["user", "agent"]),
    ("codex", _codex_items(
        {"type": "userMessage", "id": "u_1", "content": [{"type": "text", "text": "Tidy up."}]},
        {"type": "hookPrompt", "id": "h_1", "fragments": [{"text": "Remember the style guide."}]}),
     ["Tidy up."], ["user", "hook"]),
    # OpenCode flags the text it adds to the user's message (a file's content) synthetic
    ("opencode", _opencode_user_parts({"id": "prt_1", "text": "Tidy up."},
                                      {"id": "prt_2", "text": "<file>a.txt</file>",
                                       "synthetic": True}),
     ["Tidy up."], ["user", "runtime"]),
]


@pytest.mark.parametrize(("provider", "messages", "shown", "authors"), PROMPTS,
                         ids=[p for p, *_ in PROMPTS])
def test_the_chat_shows_what_the_user_asked_and_never_an_injected_prompt(
        provider: str, messages: list[tuple[str, Any]], shown: list[str], authors: list[str]):
    from tests.adapters.harness import Stored

    events = Stored(provider, capture_lines(messages)).events
    assert [e.payload.author for e in events if e.__struct_config__.tag == "item.completed"
            and e.payload.itemType == "user_message"] == authors
    records = [r for rs in chat_per_input(provider, "s", messages) for r in rs]
    users = [r for r in records if r["type"] == "user"]
    assert [r["content"] for r in users] == shown
    # the same record shape for every runtime
    assert all(set(r) == {"type", "session_id", "provider", "seq", "event_id",
                          "source_event_id", "turn_id", "content", "item_id"} for r in users)


@pytest.mark.parametrize("length", [ACCUMULATED_MAX, ACCUMULATED_MAX + 1, 64 * 1024])
def test_a_turns_done_carries_a_long_answer_whole_once(length: int):
    """`result` is the final answer whole; `final_text` repeats it only while it is short
    (ACCUMULATED_MAX characters, as `accumulated`): a long answer is not doubled."""
    answer = ("All done. " * (length // 10 + 1))[:length]
    chunks = [answer[i:i + 1000] for i in range(0, length, 1000)]
    records = [r for rs in chat_per_input("acp", "s1", _acp_turn(*map(_acp_chunk, chunks)))
               for r in rs]
    assert "".join(r["content"] for r in records if r["type"] == "text") == answer
    [done] = [r for r in records if r["type"] == "done"]
    assert done["result"] == answer
    assert done["final_text"] == (answer if length <= ACCUMULATED_MAX else "")
