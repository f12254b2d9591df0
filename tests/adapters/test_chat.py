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

from adapters import MemorySpool, get, new_session, translate_record
from adapters.base import Session
from adapters.chat import ChatState, initial, project_event
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
                           got: list[list[dict[str, Any]]]) -> None:
    """Every exhibit output, in order, with every field it shows (extra fields allowed);
    an empty output list means no chat record. Supplied inputs (None) are not checked."""
    for (index, _msg, outputs), records in zip(rows, got, strict=True):
        if outputs is None:
            continue
        assert len(records) == len(outputs), (index, records)
        for want, have in zip(outputs, records, strict=True):
            shown = {k: have.get(k, "<missing>") for k in want}
            assert shown == want, (index, have)


def _exhibit(name: str) -> list[tuple[int, Any, list[dict[str, Any]] | None]]:
    path = EXHIBITS / f"{name}.json"
    if not path.exists():
        pytest.skip(f"{path} is absent")
    return [(r["input_index"], r["input"], r["outputs"])
            for r in json.loads(path.read_text())["records"]]


def test_claude_exhibit_one_sentence_once():
    rows = [(i, claude_wire(m), o) for i, m, o in _exhibit("claude")]
    got = chat_per_input("claude", "synthetic-claude-session", [("agent", m) for _, m, _ in rows])
    assert_matches_exhibit(rows, got)


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
    assert_matches_exhibit(rows, got)


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
    assert_matches_exhibit(rows, got)


# ---- one conversation, seven runtimes ----------------------------------------------
# "Checking the fixture." / Bash printf 'fixture-ok\n' -> "fixture-ok\n" / "Fixture
# complete.", each in the runtime's own native shape.

CMD = "printf 'fixture-ok\\n'"
OUT = "fixture-ok\n"
FIRST, LAST = "Checking the fixture.", "Fixture complete."


def _claude_like(session_key: str, bash_input: dict[str, Any]) -> list[tuple[str, Any]]:
    sid = {session_key: "sess-1"}

    def assistant(mid: str, block: dict[str, Any]) -> tuple[str, Any]:
        return ("agent", {"type": "assistant", "parent_tool_use_id": None, **sid,
                          "message": {"id": mid, "type": "message", "role": "assistant",
                                      "model": "m", "content": [block]}})

    return [
        ("agent", {"type": "system", "subtype": "init", "model": "m", "tools": ["Bash"],
                   "cwd": "/w", **sid}),
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
    return [
        ("agent", {"method": "turn/started", "params": {
            "threadId": "thr_1", "turn": {"id": "turn_1", "status": "inProgress", "items": []}}}),
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
                                         "type": "text", "text": "Run the fixture."}),
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


def _acp() -> list[tuple[str, Any]]:
    def update(**u: Any) -> tuple[str, Any]:
        return ("agent", {"jsonrpc": "2.0", "method": "session/update",
                          "params": {"sessionId": "s1", "update": u}})

    def chunk(text: str) -> tuple[str, Any]:
        return update(sessionUpdate="agent_message_chunk", content={"type": "text", "text": text})

    return [
        ("client", {"jsonrpc": "2.0", "id": 1, "method": "session/new",
                    "params": {"cwd": "/w", "mcpServers": []}}),
        ("agent", {"jsonrpc": "2.0", "id": 1, "result": {"sessionId": "s1"}}),
        ("client", {"jsonrpc": "2.0", "id": 2, "method": "session/prompt", "params": {
            "sessionId": "s1", "prompt": [{"type": "text", "text": "Run the fixture."}]}}),
        chunk(FIRST),
        update(sessionUpdate="tool_call", toolCallId="call_1", title=CMD, kind="execute",
               status="pending", rawInput={"command": CMD}),
        update(sessionUpdate="tool_call_update", toolCallId="call_1", status="completed",
               content=[{"type": "content", "content": {"type": "text", "text": OUT}}]),
        chunk(LAST),
        ("agent", {"jsonrpc": "2.0", "id": 2, "result": {"stopReason": "end_turn"}}),
    ]


def _gemini() -> list[tuple[str, Any]]:
    return [("agent", m) for m in [
        {"type": "init", "session_id": "g1", "model": "gemini"},
        {"type": "message", "role": "user", "content": "Run the fixture."},
        {"type": "message", "role": "assistant", "content": FIRST, "delta": True},
        {"type": "tool_use", "tool_name": "run_shell_command", "tool_id": "call_1",
         "parameters": {"command": CMD}},
        {"type": "tool_result", "tool_id": "call_1", "status": "success", "output": OUT},
        {"type": "message", "role": "assistant", "content": LAST, "delta": True},
        {"type": "result", "status": "success", "stats": {"input_tokens": 1, "output_tokens": 1}},
    ]]


CONVERSATIONS = {
    "claude": lambda: _claude_like("session_id", {"command": CMD}),
    "amp": lambda: _claude_like("session_id", {"cmd": CMD}),
    "codex": _codex,
    "codex-exec": _codex_exec,
    "opencode": _opencode,
    "acp": _acp,
    "gemini": _gemini,
}


def _essence(record: dict[str, Any]) -> tuple[Any, ...]:
    """A chat record without ids: what a reader sees."""
    t = record["type"]
    if t == "text":
        return (t, record["accumulated"])
    if t == "tool_use":
        return (t, record["name"], record["input"].get("command"))
    if t == "tool_result":
        return (t, record["content"], record["is_error"])
    if t == "done":
        return (t, record["result"], record["final_text"], record["is_error"])
    return (t,)


def test_every_runtime_covers_the_equivalence_conversation():
    from adapters import providers

    assert set(CONVERSATIONS) == set(providers())


@pytest.mark.parametrize("provider", sorted(CONVERSATIONS))
def test_the_same_conversation_gives_the_same_chat_in_every_runtime(provider: str):
    records = [r for rs in chat_per_input(provider, "s", CONVERSATIONS[provider]()) for r in rs]
    assert [_essence(r) for r in records] == [
        ("text", FIRST),
        ("tool_use", "Bash", CMD),
        ("tool_result", OUT, False),
        ("text", LAST),
        ("done", LAST, LAST, False),
    ]
    assert [r["seq"] for r in records] == list(range(1, len(records) + 1))
    assert len({r["event_id"] for r in records}) == len(records)
