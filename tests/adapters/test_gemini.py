"""gemini: the captured `gemini --output-format stream-json` runs, and the behaviours
the captures do not show (observations; packages/core/src/output/types.ts)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest

from adapters import Line, MemorySpool, new_session, translate_record
from adapters.core import UNSET
from adapters.gemini import translator as gemini
from tests.adapters.harness import (
    Stored,
    assert_envelope_invariants,
    assert_three_ways,
    assistant_texts,
    capture_lines,
    events_of,
    read_capture,
    run_whole,
)
from topics.canonical import ContentDelta, ItemCompleted

CAPTURED = sorted((Path(__file__).parents[1] / "fixtures" / "captured" / "gemini")
                  .glob("*.capture.jsonl"))
SID = "sess-g"


def _expect(path: Path) -> dict[str, Any]:
    return json.loads(path.with_name(path.name.replace(".capture.jsonl", ".expect.json")).read_text())


def _of(events: list[dict[str, Any]], *types: str) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] in types]


def _lines(*msgs: dict[str, Any]) -> list[Line]:
    return capture_lines([("agent", {"timestamp": "2026-11-29T18:12:12.800Z", **m}) for m in msgs])


INIT = {"type": "init", "session_id": SID, "model": "auto"}
USER = {"type": "message", "role": "user", "content": "do it"}


@pytest.mark.parametrize("path", CAPTURED, ids=[p.stem for p in CAPTURED])
def test_captured_run_translates_completely(path: Path):
    expect = _expect(path)
    events = events_of(assert_three_ways("gemini", read_capture(path)))
    assert_envelope_invariants(events)
    assert assistant_texts(events) == [t["text"] for t in expect["assistant_texts"]]
    assert not _of(events, "runtime.warning", "runtime.error")
    tools = [e for e in _of(events, "item.completed")
             if e["payload"]["itemType"] not in ("assistant_message", "user_message")]
    assert [t["providerRefs"]["providerItemId"] for t in tools] == [
        t["id"] for t in expect["tool_calls"]]
    for done, want in zip(tools, expect["tool_calls"], strict=True):
        assert done["payload"]["output"] == (want["output"] or "")
        assert done["payload"]["isError"] is want["is_error"]
    assert [e["payload"]["state"] for e in _of(events, "turn.completed")] == expect["turn_states"]


def test_the_echoed_prompt_is_a_user_message_never_assistant_text():
    events = events_of(run_whole("gemini", _lines(INIT, USER, {"type": "result", "status": "success"})))
    user = _of(events, "item.completed")[0]["payload"]
    assert (user["itemType"], user["role"], user["text"]) == ("user_message", "user", "do it")
    assert not _of(events, "content.delta")


def test_shell_tool_is_a_command_execution_with_command_and_cwd():
    tid = "run_shell_command__run_shell_command_1_0"
    events = events_of(assert_three_ways("gemini", _lines(
        INIT, USER,
        {"type": "tool_use", "tool_name": "run_shell_command", "tool_id": tid,
         "parameters": {"command": "ls", "dir_path": "/w"}},
        {"type": "tool_result", "tool_id": tid, "status": "success", "output": "a\nb"},
        {"type": "result", "status": "success"})))
    done = _of(events, "item.completed")[-1]
    assert done["providerRefs"]["providerItemId"] == tid
    p = done["payload"]
    assert (p["itemType"], p["toolName"], p["input"], p["output"]) == (
        "command_execution", "Bash", {"command": "ls", "cwd": "/w"}, "a\nb")


def test_text_after_a_tool_is_a_new_assistant_item():
    tid = "read_file__read_file_1_0"
    events = events_of(run_whole("gemini", _lines(
        INIT, USER,
        {"type": "message", "role": "assistant", "content": "Reading.", "delta": True},
        {"type": "tool_use", "tool_name": "read_file", "tool_id": tid, "parameters": {"file_path": "/a"}},
        {"type": "tool_result", "tool_id": tid, "status": "success", "output": "A"},
        {"type": "message", "role": "assistant", "content": "It says A.", "delta": True},
        {"type": "result", "status": "success"})))
    assert assistant_texts(events) == ["Reading.", "It says A."]
    messages = [e["payload"]["text"] for e in _of(events, "item.completed")
                if e["payload"]["itemType"] == "assistant_message"]
    assert messages == ["Reading.", "It says A."]


def test_warning_error_lines_let_the_run_go_on():
    events = events_of(run_whole("gemini", _lines(
        INIT, USER, {"type": "error", "severity": "warning", "message": "Loop detected"},
        {"type": "result", "status": "success"})))
    err = _of(events, "runtime.error")[0]["payload"]
    assert (err["willRetry"], err["message"]) == (True, "Loop detected")
    assert _of(events, "turn.completed")[0]["payload"]["state"] == "completed"


def test_fatal_error_line_then_bare_error_result_reports_once():
    events = events_of(run_whole("gemini", _lines(
        INIT, USER, {"type": "error", "severity": "error", "message": "invalid stream"},
        {"type": "result", "status": "error"})))
    assert [e["payload"]["message"] for e in _of(events, "runtime.error")] == ["invalid stream"]
    done = _of(events, "turn.completed")[0]["payload"]
    assert (done["state"], done["errorMessage"]) == ("failed", "invalid stream")


def test_api_error_result_is_a_runtime_error_and_a_failed_turn():
    events = events_of(run_whole("gemini", _lines(INIT, USER, {
        "type": "result", "status": "error", "error": {"type": "unknown", "message": "[API Error: 500]"}})))
    assert [e["type"] for e in events][-2:] == ["runtime.error", "turn.completed"]
    assert _of(events, "turn.completed")[0]["payload"]["state"] == "failed"


def test_unknown_type_is_a_warning_with_the_raw_line():
    events = events_of(run_whole("gemini", _lines(INIT, {"type": "thought", "content": "x"})))
    warning = _of(events, "runtime.warning")[0]
    assert warning["raw"]["payload"]["content"] == "x"


def test_wrong_shapes_are_malformed_records():
    for bad in (b'{"content":"x"}', b'{"type":"message","role":"assistant","content":3}',
                b'{"type":"message","role":"system","content":"x"}', b'{"type":"tool_use"}'):
        _, events, failures = translate_record(gemini, new_session(gemini), "s", [Line(bad)],  # type: ignore[arg-type]
                                               offset=0)
        assert not events and len(failures) == 1


def test_state_survives_msgpack_and_is_empty_after_the_result():
    session, spool = new_session(gemini), MemorySpool()  # type: ignore[arg-type]
    lines = _lines(INIT, USER, {"type": "tool_use", "tool_name": "glob", "tool_id": "g", "parameters": {}},
                   {"type": "message", "role": "assistant", "content": "x", "delta": True})
    for n, line in enumerate(lines):
        session, _, failures = translate_record(gemini, session, "s", [line], offset=n,  # type: ignore[arg-type]
                                                spool=spool)
        assert not failures
    state = session.state
    assert msgspec.msgpack.decode(msgspec.msgpack.encode(state), type=gemini.State) == state
    session, _, _ = translate_record(gemini, session, "s", _lines({"type": "result", "status": "success"}),  # type: ignore[arg-type]
                                     offset=99, spool=spool)
    assert len(spool) == 0
    assert session.state.tools == {} and session.state.reply is None


# ---- one chat view across runtimes (issue 6 "Done when") --------------------------


def _chat(events: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """A readable chat: text, tool_use, tool_result, done (seed 001), from canonical events."""
    texts: dict[str, str] = {}
    view: list[tuple[Any, ...]] = []
    for e in events:
        p = e["payload"]
        if e["type"] == "content.delta" and p["streamKind"] == "assistant_text":
            texts[e["itemId"]] = texts.get(e["itemId"], "") + p["delta"]
        elif e["type"] == "item.completed" and p["itemType"] == "assistant_message":
            view.append(("text", texts.pop(e["itemId"], "")))
        elif e["type"] == "item.started" and p.get("toolName"):
            view.append(("tool_use", p["toolName"], p["input"].get("command")))
        elif e["type"] == "item.completed" and p.get("toolName"):
            view.append(("tool_result", p["output"], p["isError"]))
        elif e["type"] == "turn.completed":
            view.append(("done", p["state"]))
    return view


def test_gemini_and_acp_give_the_same_chat_view():
    tid = "run_shell_command__run_shell_command_1_0"
    stream_json = _lines(
        INIT, USER,
        {"type": "message", "role": "assistant", "content": "Running it.", "delta": True},
        {"type": "tool_use", "tool_name": "run_shell_command", "tool_id": tid,
         "parameters": {"command": "printf ok"}},
        {"type": "tool_result", "tool_id": tid, "status": "success", "output": "ok"},
        {"type": "message", "role": "assistant", "content": "It printed ok.", "delta": True},
        {"type": "result", "status": "success"})

    def upd(**u: Any) -> tuple[str, Any]:
        return ("agent", {"jsonrpc": "2.0", "method": "session/update",
                          "params": {"sessionId": SID, "update": u}})

    acp = capture_lines([
        ("client", {"jsonrpc": "2.0", "id": 1, "method": "session/new",
                    "params": {"cwd": "/w", "mcpServers": []}}),
        ("agent", {"jsonrpc": "2.0", "id": 1, "result": {"sessionId": SID}}),
        ("client", {"jsonrpc": "2.0", "id": 2, "method": "session/prompt",
                    "params": {"sessionId": SID, "prompt": [{"type": "text", "text": "do it"}]}}),
        upd(sessionUpdate="agent_message_chunk", content={"type": "text", "text": "Running it."}),
        upd(sessionUpdate="tool_call", toolCallId=tid, title="printf ok", kind="execute",
            status="in_progress", rawInput={"command": "printf ok"}),
        upd(sessionUpdate="tool_call_update", toolCallId=tid, status="completed",
            content=[{"type": "content", "content": {"type": "text", "text": "ok"}}]),
        upd(sessionUpdate="agent_message_chunk", content={"type": "text", "text": "It printed ok."}),
        ("agent", {"jsonrpc": "2.0", "id": 2, "result": {"stopReason": "end_turn"}}),
    ])
    want = [("text", "Running it."), ("tool_use", "Bash", "printf ok"), ("tool_result", "ok", False),
            ("text", "It printed ok."), ("done", "completed")]
    assert _chat(events_of(run_whole("gemini", stream_json))) == want
    assert _chat(events_of(run_whole("acp", acp))) == want


# ---- a long reply: a bounded session, the text spooled (adapters.core.emitter) ---------------


def test_a_long_reply_keeps_the_session_small_and_completes_whole():
    """2,000 deltas of 1 KiB, fed record by record with the session encoded and decoded
    between records: Gemini never sends the reply whole, so its item's text is read
    back from the spool on completion, and the spool is empty after it."""
    chunks = [f"{i:04d}" + "é" * 8 + "x" * 1003 + "\n" for i in range(2000)]  # 1 KiB each
    lines = _lines(INIT, USER,
                   *({"type": "message", "role": "assistant", "content": c, "delta": True}
                     for c in chunks),
                   {"type": "result", "status": "success"})
    fed = Stored("gemini", lines, SID, cap=16 << 20)  # the spool is checked, not the cap
    assert max(fed.sizes) < 4096, max(fed.sizes)
    assert fed.chunks[len(chunks) + 1] == len(chunks)  # the last delta: one chunk a record
    assert [e.payload.delta for e in fed.events if isinstance(e, ContentDelta)] == chunks
    [done] = [e.payload for e in fed.events if isinstance(e, ItemCompleted)
              and e.payload.itemType == "assistant_message"]
    assert (done.text, done.textTruncated) == ("".join(chunks), UNSET)
    assert len(fed.spool) == 0 and fed.session.streams == {}
