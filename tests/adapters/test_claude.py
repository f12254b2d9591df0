"""claude: the seed exhibit, the real recordings, the captured conversations, and
the stream-json behaviours the goldens do not pin down alone."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adapters import get
from adapters.claude import translator as claude
from tests.adapters.harness import (
    GOLDENS,
    SHARED,
    Stored,
    assert_envelope_invariants,
    assert_three_ways,
    assistant_texts,
    capture_lines,
    events_of,
    read_capture,
    read_native,
    run_whole,
)

CAPTURED = sorted((Path(__file__).parents[1] / "fixtures" / "captured" / "claude")
                  .glob("*.capture.jsonl"))
REAL_DIR = SHARED / "fixtures" / "real" / "claude"
REAL = sorted(REAL_DIR.glob("*.jsonl"))
EXHIBIT = SHARED / "fixtures" / "seed-exhibits" / "claude.json"
CLAUDE_GOLDENS = sorted((GOLDENS / "claude").glob("*.in.jsonl"))


def _ids(paths: list[Path]) -> list[str]:
    return [p.name.split(".")[0] for p in paths]


def assert_deltas_make_every_message(events: list[dict[str, Any]]) -> None:
    """The assistant text rebuilt from content.delta equals the final text of every
    assistant message: no text twice, no gap, no delta after completion."""
    deltas: dict[str, str] = {}
    done: set[str] = set()
    for e in events:
        if e["type"] == "content.delta" and e["payload"]["streamKind"] == "assistant_text":
            assert e["itemId"] not in done, "assistant_text delta after its item completed"
            deltas[e["itemId"]] = deltas.get(e["itemId"], "") + e["payload"]["delta"]
        if e["type"] == "item.completed" and e["payload"]["itemType"] == "assistant_message":
            done.add(e["itemId"])
            assert deltas.get(e["itemId"], "") == e["payload"].get("text", ""), e["itemId"]
    assert set(deltas) <= done, "assistant text never completed"


def _tools(events: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Completed tool items by provider tool-call id."""
    return {e["providerRefs"]["providerItemId"]: e["payload"] for e in events
            if e["type"] == "item.completed" and "toolName" in e["payload"]}


# ---- the seed exhibit (Python SDK classes as stream-json wire lines) -------------------

def _block(block: dict[str, Any]) -> dict[str, Any]:
    kind, fields = block["sdk_type"], block["fields"]
    wire_type = {"TextBlock": "text", "ThinkingBlock": "thinking", "ToolUseBlock": "tool_use",
                 "ToolResultBlock": "tool_result"}[kind]
    return {"type": wire_type, **fields}


def _wire(record: dict[str, Any]) -> dict[str, Any]:
    """One SDK message object of the exhibit as the stream-json line it was parsed from."""
    kind, f = record["sdk_type"], record["fields"]
    if kind == "StreamEvent":
        return {"type": "stream_event", "uuid": f["uuid"], "session_id": f["session_id"],
                "parent_tool_use_id": f["parent_tool_use_id"], "event": f["event"]}
    if kind == "AssistantMessage":
        message: dict[str, Any] = {"role": "assistant", "type": "message", "model": f["model"],
                                   "content": [_block(b) for b in f["content"]]}
        if f.get("message_id"):
            message["id"] = f["message_id"]
        return {"type": "assistant", "message": message,
                "parent_tool_use_id": f["parent_tool_use_id"]}
    if kind == "UserMessage":
        return {"type": "user", "message": {"role": "user",
                                            "content": [_block(b) for b in f["content"]]},
                "parent_tool_use_id": f["parent_tool_use_id"]}
    if kind == "ResultMessage":
        return {"type": "result", **f}
    raise AssertionError(f"exhibit input {kind} not converted")


@pytest.mark.skipif(not EXHIBIT.exists(), reason="../shared/fixtures/seed-exhibits is absent "
                                                 "(read from ../shared, never copied)")
def test_seed_exhibit_text_once_then_tool_use_tool_result_and_done():
    exhibit = json.loads(EXHIBIT.read_text())
    lines = capture_lines([("agent", _wire(r["input"])) for r in exhibit["records"]])
    events = events_of(assert_three_ways("claude", lines))
    assert_envelope_invariants(events)
    assert_deltas_make_every_message(events)
    # "One sentence, once": the delta carries the sentence, the full message adds the tool only
    deltas = [e["payload"]["delta"] for e in events if e["type"] == "content.delta"]
    assert deltas == ["Checking the fixture."]
    assert assistant_texts(events) == ["Checking the fixture."]
    tool = _tools(events)["synthetic-call-1"]
    assert tool["toolName"] == "Bash" and tool["itemType"] == "command_execution"
    assert tool["input"]["command"] == "printf 'fixture-ok\\n'"
    assert (tool["output"], tool["isError"], tool["status"]) == ("fixture-ok\n", False, "completed")
    done = [e["payload"] for e in events if e["type"] == "turn.completed"]
    assert [d["state"] for d in done] == ["completed"]
    assert not [e for e in events if e["type"] == "runtime.warning"]


# ---- real recordings ------------------------------------------------------------------

@pytest.mark.skipif(not REAL, reason="../shared/fixtures/real/claude is absent (public recordings "
                                     "are read from ../shared, never copied into the project)")
@pytest.mark.parametrize("path", REAL, ids=_ids(REAL))
def test_real_recording_translates_completely(path: Path):
    lines = read_native(path)
    events = events_of(assert_three_ways("claude", lines))
    assert_envelope_invariants(events)
    assert_deltas_make_every_message(events)
    assert not [e for e in events if e["type"] == "runtime.warning"]
    natives = [json.loads(ln.data) for ln in lines]
    texts = [b["text"] for m in natives if m["type"] == "assistant"
             for b in m["message"]["content"] if b["type"] == "text"]
    assert assistant_texts(events) == texts
    results = {b["tool_use_id"]: b["content"] for m in natives if m["type"] == "user"
               for b in m["message"]["content"] if b["type"] == "tool_result"}
    assert {k: v["output"] for k, v in _tools(events).items()} == results
    assert [e["payload"]["state"] for e in events if e["type"] == "turn.completed"] == ["completed"]
    assert events_of(run_whole("claude", lines)) == events  # identical ids on a second run


# ---- captured conversations against their oracles ----------------------------------------

@pytest.mark.parametrize("path", CAPTURED, ids=_ids(CAPTURED))
def test_captured_conversation_matches_its_oracle(path: Path):
    expect = json.loads(path.with_name(path.name.replace(".capture.jsonl", ".expect.json"))
                        .read_text())
    events = events_of(assert_three_ways("claude", read_capture(path)))
    assert_envelope_invariants(events)
    assert_deltas_make_every_message(events)
    assert assistant_texts(events) == [t["text"] for t in expect["assistant_texts"]]
    reasoning: dict[str, str] = {}
    for e in events:
        if e["type"] == "content.delta" and e["payload"]["streamKind"] == "reasoning_text":
            reasoning[e["itemId"]] = reasoning.get(e["itemId"], "") + e["payload"]["delta"]
    assert list(reasoning.values()) == expect["reasoning_texts"]
    tools = _tools(events)
    for call in expect["tool_calls"]:
        assert tools[call["id"]]["output"] == call["output"]
        assert tools[call["id"]]["toolName"] == call["name"]
    opened = {e["providerRefs"]["providerRequestId"]: e["requestId"] for e in events
              if e["type"] == "request.opened"}
    resolved = {e["requestId"]: e["payload"]["decision"] for e in events
                if e["type"] == "request.resolved"}
    assert {r["id"]: resolved[opened[r["id"]]] for r in expect["requests"]} == \
        {r["id"]: r["decision"] for r in expect["requests"]}
    assert [e["payload"]["state"] for e in events if e["type"] == "turn.completed"] == \
        expect["turn_states"]
    assert not [e for e in events if e["type"] == "runtime.warning"]


@pytest.mark.parametrize("path", CLAUDE_GOLDENS, ids=_ids(CLAUDE_GOLDENS))
def test_golden_assistant_text_comes_once_from_deltas(path: Path):
    assert_deltas_make_every_message(events_of(run_whole("claude", read_capture(path))))


# ---- stream-json behaviours ------------------------------------------------------------

SID = "sess-1"


def _assistant(mid: str | None, *blocks: dict[str, Any], parent: str | None = None,
               **extra: Any) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": list(blocks)}
    if mid:
        message["id"] = mid
    return {"type": "assistant", "message": message, "parent_tool_use_id": parent,
            "session_id": SID, **extra}


def _se(event: dict[str, Any], parent: str | None = None) -> dict[str, Any]:
    return {"type": "stream_event", "event": event, "parent_tool_use_id": parent, "session_id": SID}


def _result(**extra: Any) -> dict[str, Any]:
    return {"type": "result", "subtype": "success", "is_error": False, "session_id": SID,
            "result": "", **extra}


def _run(*messages: tuple[str, dict[str, Any]]) -> list[dict[str, Any]]:
    events = events_of(assert_three_ways("claude", capture_lines(list(messages))))
    assert_envelope_invariants(events)
    assert_deltas_make_every_message(events)
    return events


def test_assistant_line_after_the_block_stop_adds_no_text():
    """Older writers sent the full line after content_block_stop: nothing is repeated."""
    events = _run(
        ("agent", _se({"type": "message_start", "message": {"id": "m1"}})),
        ("agent", _se({"type": "content_block_start", "index": 0,
                       "content_block": {"type": "text", "text": ""}})),
        ("agent", _se({"type": "content_block_delta", "index": 0,
                       "delta": {"type": "text_delta", "text": "Hi there."}})),
        ("agent", _se({"type": "content_block_stop", "index": 0})),
        ("agent", _assistant("m1", {"type": "text", "text": "Hi there."})),
        ("agent", _se({"type": "message_stop"})),
        ("agent", _result()),
    )
    assert assistant_texts(events) == ["Hi there."]
    assert sum(e["type"] == "item.completed" for e in events) == 1


def test_deltas_without_block_start_get_a_stub_item_first():
    events = _run(
        ("agent", _se({"type": "content_block_delta", "index": 0,
                       "delta": {"type": "text_delta", "text": "Part one, "}})),
        ("agent", _se({"type": "content_block_delta", "index": 0,
                       "delta": {"type": "text_delta", "text": "part two."}})),
        ("agent", _assistant(None, {"type": "text", "text": "Part one, part two."})),
        ("agent", _result()),
    )
    kinds = [(e["type"], e["synthetic"]) for e in events if e.get("itemId")]
    assert kinds[0] == ("item.started", True)
    assert assistant_texts(events) == ["Part one, part two."]


def test_parallel_tool_uses_of_one_message_keep_their_own_items():
    events = _run(
        ("agent", _assistant("m1", {"type": "tool_use", "id": "t1", "name": "Read",
                                    "input": {"file_path": "a"}})),
        ("agent", _assistant("m1", {"type": "tool_use", "id": "t2", "name": "Read",
                                    "input": {"file_path": "b"}})),
        ("agent", {"type": "user", "session_id": SID, "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t2", "content": "B"},
            {"type": "tool_result", "tool_use_id": "t1", "content": "A"}]}}),
        ("agent", _result()),
    )
    tools = _tools(events)
    assert {k: v["output"] for k, v in tools.items()} == {"t1": "A", "t2": "B"}
    started = [e["itemId"] for e in events if e["type"] == "item.started"]
    assert len(set(started)) == 2


def test_ask_user_question_without_a_permission_tool_is_resolved_by_its_result():
    questions = [{"question": "Which?", "options": [{"label": "A"}, {"label": "B"}]}]
    events = _run(
        ("agent", _assistant("m1", {"type": "tool_use", "id": "q1", "name": "AskUserQuestion",
                                    "input": {"questions": questions}})),
        ("agent", {"type": "user", "session_id": SID,
                   "message": {"role": "user", "content": [
                       {"type": "tool_result", "tool_use_id": "q1", "content": "A"}]},
                   "tool_use_result": {"questions": questions, "answers": {"Which?": "A"}}}),
        ("agent", _result()),
    )
    asked = [e for e in events if e["type"] == "user-input.requested"]
    answered = [e for e in events if e["type"] == "user-input.resolved"]
    assert [e["payload"]["questions"] for e in asked] == [questions]
    assert [e["payload"]["answers"] for e in answered] == [{"Which?": "A"}]
    assert asked[0]["requestId"] == answered[0]["requestId"]
    assert asked[0]["providerRefs"]["providerItemId"] == "q1"


def test_a_pending_permission_is_cancelled_when_the_turn_ends():
    events = _run(
        ("agent", _assistant("m1", {"type": "tool_use", "id": "t1", "name": "Bash",
                                    "input": {"command": "touch x"}})),
        ("agent", {"type": "control_request", "request_id": "r1",
                   "request": {"subtype": "can_use_tool", "tool_name": "Bash",
                               "input": {"command": "touch x"}, "tool_use_id": "t1"}}),
        ("agent", {**_result(), "subtype": "error_during_execution", "is_error": True,
                   "terminal_reason": "aborted_tools"}),
    )
    opened = [e for e in events if e["type"] == "request.opened"]
    resolved = [e for e in events if e["type"] == "request.resolved"]
    assert opened[0]["payload"]["requestType"] == "command_execution_approval"
    assert opened[0]["providerRefs"] == {"providerThreadId": SID, "providerItemId": "t1",
                                         "providerRequestId": "r1"}
    assert [(e["requestId"], e["payload"]["decision"]) for e in resolved] == \
        [(opened[0]["requestId"], "cancelled")]
    tool = _tools(events)["t1"]
    assert tool["status"] == "failed"
    assert [e["payload"]["state"] for e in events if e["type"] == "turn.completed"] == \
        ["interrupted"]


def test_a_result_without_any_turn_still_ends_one_failed_turn():
    events = _run(("agent", {**_result(), "subtype": "error_during_execution", "is_error": True,
                             "errors": ["startup failed"]}))
    types = [e["type"] for e in events]
    assert types[-3:] == ["turn.started", "runtime.error", "turn.completed"]
    assert events[-1]["payload"] == {"state": "failed", "errorMessage": "startup failed"}


def test_subagent_messages_hang_under_their_task_item():
    events = _run(
        ("agent", _assistant("m1", {"type": "tool_use", "id": "task1", "name": "Agent",
                                    "input": {"description": "look", "prompt": "look"}})),
        ("agent", _assistant("s1", {"type": "text", "text": "Looking."}, parent="task1")),
        ("agent", {"type": "user", "session_id": SID, "parent_tool_use_id": None,
                   "message": {"role": "user", "content": [
                       {"type": "tool_result", "tool_use_id": "task1", "content": "Done."}]}}),
        ("agent", _result()),
    )
    task_item = next(e["itemId"] for e in events if e["type"] == "item.started")
    nested = [e for e in events if e["type"] == "content.delta"]
    assert nested[0]["parentItemId"] == task_item
    assert nested[0]["providerRefs"]["providerParentItemId"] == "task1"
    assert _tools(events)["task1"]["itemType"] == "collab_agent_tool_call"


def test_the_state_forgets_a_turn_once_it_ends():
    t = get("claude")
    lines = read_capture(GOLDENS / "claude" / "parallel_tools.in.jsonl")
    from adapters import new_session, translate_record
    session = new_session(t)
    session, _, failures = translate_record(t, session, "s", lines, offset=1)
    assert not failures
    state = session.state
    assert (state.msgs, state.blocks, state.tools, state.pending, state.streams) == ({}, {}, {}, {},
                                                                                    {})
    assert msgspec.msgpack.decode(msgspec.msgpack.encode(state), type=claude.State) == state


def test_unknown_control_subtypes_warn_and_known_queries_are_ignored():
    events = _run(
        ("client", {"type": "control_request", "request_id": "c1",
                    "request": {"subtype": "get_context_usage"}}),
        ("client", {"type": "control_request", "request_id": "c2",
                    "request": {"subtype": "teleport"}}),
        ("agent", {"type": "control_response", "response": {"subtype": "success",
                                                             "request_id": "c1", "response": {}}}),
    )
    warnings = [e["payload"]["detail"]["nativeType"] for e in events
                if e["type"] == "runtime.warning"]
    assert warnings == ["control_request/teleport"]


def test_client_set_model_reconfigures_the_session():
    events = _run(
        ("client", {"type": "control_request", "request_id": "c1",
                    "request": {"subtype": "set_model", "model": "claude-haiku-5-5"}}),
        ("agent", {"type": "control_response", "response": {"subtype": "success",
                                                             "request_id": "c1"}}),
    )
    configured = [e["payload"]["config"] for e in events if e["type"] == "session.configured"]
    assert configured == [{"model": "claude-haiku-5-5"}]


@pytest.mark.parametrize("message", [
    {"type": "assistant"},
    {"type": "assistant", "message": {"content": 3}},
    {"type": "stream_event", "event": {"type": "content_block_delta"}},
    {"type": "control_request", "request_id": "r"},
    {"type": "system"},
    {"subtype": "init"},
])
def test_wrongly_shaped_messages_are_malformed_records(message: dict[str, Any]):
    from adapters import new_session, translate_record
    t = get("claude")
    _, events, failures = translate_record(t, new_session(t), "s",
                                           capture_lines([("agent", message)]), offset=1)
    assert len(failures) == 1 and not events


def test_every_ignored_type_says_why():
    assert claude.IGNORED == frozenset(claude.IGNORED_REASONS)
    assert all(reason.strip() for reason in claude.IGNORED_REASONS.values())
    assert not set(claude._HANDLERS) & claude.IGNORED
    assert not {f"system/{s}" for s in claude._SYSTEM} & claude.IGNORED


def test_a_stream_that_breaks_off_ends_its_item_and_the_fallback_is_its_own_message():
    """error_stream: a partial stream, a retry, then a non-streamed fallback message."""
    events = _run(
        ("agent", _se({"type": "message_start", "message": {"id": "m1"}})),
        ("agent", _se({"type": "content_block_start", "index": 0,
                       "content_block": {"type": "text", "text": ""}})),
        ("agent", _se({"type": "content_block_delta", "index": 0,
                       "delta": {"type": "text_delta", "text": "Hel"}})),
        ("agent", {"type": "system", "subtype": "api_retry", "attempt": 1, "max_retries": 1,
                   "retry_delay_ms": 10, "error_status": None, "error": "unknown",
                   "session_id": SID}),
        ("agent", _se({"type": "message_start", "message": {"id": "m2"}})),
        ("agent", _assistant("m3", {"type": "text", "text": "Hello."}, stop_reason="end_turn")),
        ("agent", _result()),
    )
    completed = [(e["payload"]["status"], e["payload"]["text"]) for e in events
                 if e["type"] == "item.completed"]
    assert completed == [("failed", "Hel"), ("completed", "Hello.")]
    assert assistant_texts(events) == ["Hel", "Hello."]


_TYPES = ["system", "assistant", "user", "result", "stream_event", "control_request",
          "control_response", "control_cancel_request", "tool_progress", "message", "tool_call",
          "tool_result", "done", "error"]
_json = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                     lambda inner: st.lists(inner, max_size=3)
                     | st.dictionaries(st.sampled_from(["type", "subtype", "id", "index", "content",
                                                        "message", "event", "request", "response",
                                                        "request_id", "tool_use_id", "text",
                                                        "delta", "input", "name"]), inner,
                                       max_size=4),
                     max_leaves=12)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["agent", "client"]),
                          st.fixed_dictionaries({"type": st.sampled_from(_TYPES)},
                                                optional={"message": _json, "event": _json,
                                                          "request": _json, "response": _json,
                                                          "subtype": _json, "request_id": _json,
                                                          "tool_call": _json, "content": _json})),
                min_size=1, max_size=6),
       st.sampled_from(["claude", "amp"]))
def test_any_message_translates_or_is_a_malformed_record(messages, provider):
    from adapters import MalformedRecord, new_session, translate_record
    t = get(provider)
    session = new_session(t)
    for n, line in enumerate(capture_lines(messages), 1):
        session, _, failures = translate_record(t, session, "s", [line], offset=n)
        assert all(isinstance(f.error, MalformedRecord) for f in failures), failures


def test_a_long_stream_keeps_the_session_small_and_completes_its_items_whole():
    """2,000 text deltas of 1 KiB, a tool input streamed in parts, and a large tool
    result, fed record by record with the session encoded and decoded between records:
    the stored session stays under 4 KiB, the streamed bytes live in the spool until
    their item completes, and the completed items carry them whole."""

    parts = [f"{i:05d}" + "." * 1018 + "\n" for i in range(2000)]  # 1 KiB each
    answer = "".join(parts)
    command = {"command": "seq 1 200000", "description": "count"}
    json_text = msgspec.json.encode(command).decode()
    json_parts = [json_text[i:i + 3] for i in range(0, len(json_text), 3)]
    output = "".join(f"{n}\n" for n in range(1, 200001))  # 1.3 MB, sent whole (Claude
    # streams no tool output)
    delta = ({"type": "content_block_delta", "index": 0,
              "delta": {"type": "text_delta", "text": p}} for p in parts)
    json_delta = ({"type": "content_block_delta", "index": 1,
                   "delta": {"type": "input_json_delta", "partial_json": p}} for p in json_parts)
    tool_use = {"type": "tool_use", "id": "t1", "name": "Bash", "input": command}
    messages = [
        {"type": "system", "subtype": "init", "cwd": "/w", "session_id": SID, "model": "m"},
        _se({"type": "message_start", "message": {"id": "m1"}}),
        _se({"type": "content_block_start", "index": 0,
             "content_block": {"type": "text", "text": ""}}),
        *map(_se, delta),
        # the stop before the block's line: the item completes from the spool
        _se({"type": "content_block_stop", "index": 0}),
        _assistant("m1", {"type": "text", "text": answer}),
        _se({"type": "content_block_start", "index": 1,
             "content_block": {**tool_use, "input": {}}}),
        *map(_se, json_delta),
        _se({"type": "content_block_stop", "index": 1}),  # the input, from the spool
        _assistant("m1", tool_use),
        _se({"type": "message_stop"}),
        {"type": "user", "session_id": SID, "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": output}]}},
        _result(),
    ]
    # a cap above the streams: the spool is checked here, not the cap
    fed = Stored("claude", capture_lines([("agent", m) for m in messages]), cap=16 << 20)
    events = fed.dicts()
    assert max(fed.sizes) < 4096, max(fed.sizes)
    assert max(fed.chunks) >= 2000  # the text was spooled, one chunk per record...
    assert fed.chunks[-1] == 0 and len(fed.spool) == 0  # ...and dropped with its item

    assert_envelope_invariants(events)
    assert_deltas_make_every_message(events)
    text_deltas = [e["payload"]["delta"] for e in events if e["type"] == "content.delta"]
    assert len(text_deltas) == 2000 and "".join(text_deltas) == answer
    completed = [e["payload"] for e in events if e["type"] == "item.completed"]
    assert [(p["itemType"], p["status"]) for p in completed] == [
        ("assistant_message", "completed"), ("command_execution", "completed")]
    assert completed[0]["text"] == answer and "textTruncated" not in completed[0]
    assert completed[1]["input"] == {**command, "cwd": "/w"}
    assert completed[1]["output"] == output
    updated = [e["payload"] for e in events if e["type"] == "item.updated"]
    assert updated[0]["input"] == {**command, "cwd": "/w"}  # finalized from the streamed JSON
