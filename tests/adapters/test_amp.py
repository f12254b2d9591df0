"""amp: `amp --stream-json` through the Claude-shaped adapter, the flat format,
and the same chat view as Claude for an equivalent conversation."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from adapters.amp import translator as amp
from tests.adapters.harness import (
    GOLDENS,
    assert_envelope_invariants,
    assert_three_ways,
    assistant_texts,
    capture_lines,
    events_of,
    read_capture,
    run_whole,
)
from tests.adapters.test_claude import assert_deltas_make_every_message

AMP_GOLDENS = sorted((GOLDENS / "amp").glob("*.in.jsonl"))
SID = "T-abc"


def _run(provider: str, *messages: tuple[str, dict[str, Any]]) -> list[dict[str, Any]]:
    events = events_of(assert_three_ways(provider, capture_lines(list(messages))))
    assert_envelope_invariants(events)
    assert_deltas_make_every_message(events)
    return events


@pytest.mark.parametrize("path", AMP_GOLDENS, ids=[p.name.split(".")[0] for p in AMP_GOLDENS])
def test_golden_text_comes_once_and_every_turn_ends(path: Path):
    events = events_of(run_whole("amp", read_capture(path)))
    assert_deltas_make_every_message(events)
    # no native deltas: one synthetic full-text delta per message
    assert all(e["synthetic"] for e in events if e["type"] == "content.delta")
    started = sum(e["type"] == "turn.started" for e in events)
    assert started == sum(e["type"] == "turn.completed" for e in events) >= 1


def test_bash_input_names_the_command_as_every_runtime_does():
    events = _run("amp",
                  ("agent", {"type": "assistant", "session_id": SID, "message": {
                      "id": "m1", "role": "assistant", "content": [
                          {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"cmd": "ls"}}]}}),
                  ("agent", {"type": "user", "session_id": SID, "message": {"role": "user", "content": [
                      {"type": "tool_result", "tool_use_id": "t1", "content": "a", "is_error": False}]}}),
                  ("agent", {"type": "result", "subtype": "success", "is_error": False,
                             "result": "", "session_id": SID}))
    done = next(e["payload"] for e in events if e["type"] == "item.completed")
    assert (done["itemType"], done["toolName"], done["input"]["command"], done["output"]) == \
        ("command_execution", "Bash", "ls", "a")
    assert next(e for e in events if e["type"] == "item.completed")["providerRefs"][
        "providerItemId"] == "t1"


def test_error_result_carries_amps_error_string():
    events = _run("amp", ("agent", {"type": "result", "subtype": "error_during_execution",
                                    "is_error": True, "error": "boom", "session_id": SID,
                                    "duration_ms": 3, "num_turns": 1}))
    error = next(e["payload"] for e in events if e["type"] == "runtime.error")
    assert error["message"] == "boom"
    assert events[-1]["payload"] == {"state": "failed", "durationMs": 3, "errorMessage": "boom"}


def test_flat_tool_call_arguments_may_be_a_json_string():
    events = _run("amp",
                  ("agent", {"type": "tool_call", "tool_call": {"id": "c1", "name": "create_file",
                                                                "arguments": "{\"path\": \"x\"}"}}),
                  ("agent", {"type": "tool_result", "id": "c1", "content": "ok"}),
                  ("agent", {"type": "done"}))
    done = next(e["payload"] for e in events if e["type"] == "item.completed")
    assert (done["itemType"], done["toolName"], done["input"], done["output"]) == \
        ("file_change", "Write", {"path": "x"}, "ok")
    assert [e["type"] for e in events[-2:]] == ["turn.completed", "session.exited"]


def test_stream_events_and_control_requests_are_not_amp():
    events = _run("amp", ("agent", {"type": "control_request", "request_id": "r",
                                    "request": {"subtype": "can_use_tool"}}))
    assert [e["payload"]["detail"]["nativeType"] for e in events
            if e["type"] == "runtime.warning"] == ["control_request"]
    assert amp.IGNORED == frozenset()


def _chat(events: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """What a chat shows: text, tool use, tool result, done."""
    view: list[tuple[Any, ...]] = []
    for e in events:
        p = e["payload"]
        if e["type"] == "item.completed" and p["itemType"] == "assistant_message":
            view.append(("text", p["text"]))
        elif e["type"] == "item.started" and "toolName" in p:
            view.append(("tool_use", p["toolName"], p["input"]["command"]))
        elif e["type"] == "item.completed" and "toolName" in p:
            view.append(("tool_result", e["providerRefs"]["providerItemId"], p["output"],
                         p["isError"]))
        elif e["type"] == "turn.completed":
            view.append(("done", p["state"]))
    return view


def test_an_equivalent_conversation_gives_the_same_chat_as_claude():
    def conversation(bash_input: dict[str, str]) -> list[tuple[str, dict[str, Any]]]:
        return [
            ("agent", {"type": "system", "subtype": "init", "session_id": SID, "tools": ["Bash"],
                       "mcp_servers": []}),
            ("agent", {"type": "assistant", "session_id": SID, "message": {
                "id": "m1", "role": "assistant", "content": [
                    {"type": "text", "text": "Running it."},
                    {"type": "tool_use", "id": "t1", "name": "Bash", "input": bash_input}]}}),
            ("agent", {"type": "user", "session_id": SID, "message": {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "fixture-ok",
                 "is_error": False}]}}),
            ("agent", {"type": "assistant", "session_id": SID, "message": {
                "id": "m2", "role": "assistant", "content": [{"type": "text", "text": "Done."}]}}),
            ("agent", {"type": "result", "subtype": "success", "is_error": False,
                       "result": "Done.", "session_id": SID}),
        ]

    claude_chat = _chat(_run("claude", *conversation({"command": "printf 'fixture-ok\\n'"})))
    amp_chat = _chat(_run("amp", *conversation({"cmd": "printf 'fixture-ok\\n'"})))
    assert claude_chat == amp_chat == [
        ("text", "Running it."), ("tool_use", "Bash", "printf 'fixture-ok\\n'"),
        ("tool_result", "t1", "fixture-ok", False), ("text", "Done."), ("done", "completed")]
    assert assistant_texts(_run("amp", *conversation({"cmd": "x"}))) == ["Running it.", "Done."]
