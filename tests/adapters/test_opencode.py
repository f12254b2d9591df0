"""opencode: the seed exhibit, the real 1.1.49 recording, the captured 1.18.33 conversations,
and the protocol coverage (every `Event.*` of the OpenAPI document mapped or ignored)."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adapters import (
    MalformedRecord,
    Session,
    get,
    new_session,
    translate_record,
)
from adapters.opencode import translator as opencode
from adapters.opencode.common import _RING, _closed_key
from adapters.opencode.messages import _IGNORED_PARTS, _PART_HANDLERS
from tests.adapters.harness import (
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
from topics.canonical import decode_event, encode_event

HERE = Path(__file__).parents[1]
EXHIBIT = HERE / "fixtures" / "seed-exhibits" / "opencode.json"
REAL = SHARED / "fixtures" / "real" / "opencode" / \
    "opencode-1.1.49_sse-event_two-turns_text-reply-then-list-tool.jsonl"
OPENAPI = SHARED / "protocols" / "opencode" / "openapi-2026-01" / "openapi.json"
CAPTURED = sorted((HERE / "fixtures" / "captured" / "opencode").glob("*.capture.jsonl"))
TOOL_TYPES = {"command_execution", "file_change", "mcp_tool_call", "dynamic_tool_call",
              "collab_agent_tool_call", "web_search", "image_view"}


def _per_record(lines: list[Any], sid: str = "s1") -> list[list[dict[str, Any]]]:
    """The canonical events of each input line, fed one record at a time."""
    session = new_session(get("opencode"))
    out = []
    for n, line in enumerate(lines, 1):
        session, events, failures = translate_record(get("opencode"), session, sid, [line],
                                                     offset=n)
        assert not failures, failures[0].error
        out.append([json.loads(encode_event(e)) for e in events])
    return out


def _warnings(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == "runtime.warning"]


# ---- the seed exhibit (seed 001, OpenCode) -----------------------------------------------

# The exhibit leaves out inputs 0, 1, 3 and 9. Inputs 1, 3 and 9 are the message.updated
# events that give each message its role; they are supplied here, minimal but in
# OpenCode's real shape (1.1.x Message: id, sessionID, role, time, and for an assistant
# message its parent). Input 0 is not needed.
_SID = "synthetic-opencode-session"


def _message(mid: str, role: str, created: int) -> dict[str, Any]:
    info: dict[str, Any] = {"id": mid, "sessionID": _SID, "role": role, "time": {"created": created}}
    if role == "assistant":
        info.update(parentID="synthetic-user", modelID="synthetic-model", providerID="synthetic")
    return {"type": "message.updated", "properties": {"info": info}}


_SUPPLIED = {1: _message("synthetic-user", "user", 1000),
             3: _message("synthetic-commentary", "assistant", 1000),
             9: _message("synthetic-final", "assistant", 1003)}


def _exhibit() -> list[tuple[int, dict[str, Any], list[dict[str, Any]] | None]]:
    records = json.loads(EXHIBIT.read_text())["records"]
    rows: list[tuple[int, dict[str, Any], list[dict[str, Any]] | None]] = [
        (r["input_index"], r["input"], r["outputs"]) for r in records]
    rows += [(i, m, None) for i, m in _SUPPLIED.items()]
    return sorted(rows, key=lambda r: r[0])


def test_seed_exhibit_is_fed_three_ways_with_its_missing_roles_supplied():
    rows = _exhibit()
    lines = capture_lines([("agent", m) for _, m, _ in rows])
    events = events_of(assert_three_ways("opencode", lines))
    assert_envelope_invariants(events)
    assert not _warnings(events)
    assert assistant_texts(events) == ["Checking the fixture.", "Fixture complete."]


def test_seed_exhibit_record_by_record_matches_the_saved_chat_outputs():
    rows = _exhibit()
    per = _per_record(capture_lines([("agent", m) for _, m, _ in rows]))
    texts: dict[str, str] = {}
    for (index, _msg, outputs), events in zip(rows, per, strict=True):
        deltas = [e for e in events if e["type"] == "content.delta"
                  and e["payload"]["streamKind"] == "assistant_text"]
        for d in deltas:
            texts[d["itemId"]] = texts.get(d["itemId"], "") + d["payload"]["delta"]
        tools = [e for e in events if e["payload"].get("itemType") in TOOL_TYPES]
        done = [e for e in events if e["type"] == "turn.completed"]
        if outputs is None:  # a supplied message.updated: roles only
            assert not deltas and not tools and not done, index
            continue
        kinds = [o["type"] for o in outputs]
        if not outputs:
            # the user's prompt echo, a pending tool, a repeated snapshot, a second idle
            assert not deltas and not tools and not done, (index, events)
        if index == 2:
            user = [e for e in events if e["payload"].get("itemType") == "user_message"]
            assert user[-1]["type"] == "item.completed"
            assert user[-1]["payload"]["text"] == "Synthetic user prompt must not be streamed."
        if "text" in kinds:
            (o,) = outputs
            assert deltas, index
            accumulated = texts[deltas[-1]["itemId"]]
            # snapshots emit their new text whole: "Fixture " then "complete." (seed 001)
            assert [d["payload"]["delta"] for d in deltas] == [o["content"]], index
            assert accumulated == o["accumulated"], index
        if "tool_use" in kinds:
            (o,) = outputs
            (start,) = [e for e in tools if e["type"] == "item.started"]
            assert start["payload"]["toolName"] == o["name"] == "Bash"
            assert start["payload"]["input"] == o["input"]
            assert start["providerRefs"]["providerItemId"] == o["tool_use_id"]
        if "tool_result" in kinds:
            (o,) = outputs
            (end,) = [e for e in tools if e["type"] == "item.completed"]
            assert end["payload"]["output"] == o["content"]
            assert end["payload"]["isError"] is o["is_error"]
            assert end["providerRefs"]["providerItemId"] == o["tool_use_id"]
        if "done" in kinds:
            (o,) = outputs
            assert [e["payload"]["state"] for e in done] == ["completed"]
            finals = [e["payload"]["text"] for e in events if e["type"] == "item.completed"
                      and e["payload"]["itemType"] == "assistant_message"]
            assert finals[-1] == o["result"]
    assert list(texts.values()) == ["Checking the fixture.", "Fixture complete."]


# ---- the real 1.1.49 recording ------------------------------------------------------------


@pytest.mark.skipif(not REAL.exists(), reason="../shared/fixtures/real/opencode is absent "
                    "(public recordings are read from ../shared, never copied into the project)")
def test_real_1_1_49_recording_translates_completely():
    lines = read_native(REAL)
    assert len(lines) == 71
    events = events_of(assert_three_ways("opencode", lines))
    assert_envelope_invariants(events)
    assert not _warnings(events)
    natives = [json.loads(ln.data) for ln in lines]
    finals = {}
    for m in natives:
        part = m["properties"].get("part") or {}
        if part.get("type") == "text" and part.get("time", {}).get("end"):
            finals[part["id"]] = part["text"]
    # the assistant text of both turns reconstructs exactly from the deltas
    assert assistant_texts(events) == list(finals.values()) == [
        "Hello from OpenCode",
        "Here are the top-level contents of the current directory:\n\n"
        "- **capture-native.ts** - A TypeScript file\n- **snapshots/** - A directory"]
    # the user prompts are user_message items, never assistant text
    prompts = [e["payload"]["text"] for e in events if e["type"] == "item.completed"
               and e["payload"]["itemType"] == "user_message"]
    assert prompts == ["Respond with exactly: 'Hello from OpenCode'. Nothing else.",
                       "List the files in the current directory. Use the list/ls tool. "
                       "Only list the top-level contents, do not recurse."]
    assert not any(p in t for p in prompts for t in assistant_texts(events))
    # the bash tool item completes with its whole output
    (tool,) = [e for e in events if e["type"] == "item.completed"
               and e["payload"]["itemType"] == "command_execution"]
    assert tool["payload"]["toolName"] == "Bash"
    assert tool["payload"]["input"]["command"] == "ls -la"
    assert tool["payload"]["output"].startswith("total 24\n")
    assert tool["payload"]["output"].endswith("snapshots\n")
    assert (tool["payload"]["exitCode"], tool["payload"]["isError"]) == (0, False)
    assert tool["providerRefs"]["providerItemId"] == "toolu_017THj1iZNELroZgmFbqC6Ma"
    turns = [e["payload"]["state"] for e in events if e["type"] == "turn.completed"]
    assert turns == ["completed", "completed"]
    assert events_of(run_whole("opencode", lines)) == events  # identical ids on a second run


@pytest.mark.skipif(not REAL.exists(), reason="../shared/fixtures/real/opencode is absent")
def test_state_is_left_empty_after_a_conversation():
    session = new_session(get("opencode"))
    for n, line in enumerate(read_native(REAL), 1):
        session, _events, _failed = translate_record(get("opencode"), session, "s1", [line],
                                                     offset=n)
    state = session.state
    assert not state.parts and not state.requests
    assert len(state.closed) <= _RING
    assert len(msgspec.msgpack.encode(state)) < 4096


def test_closed_ids_are_kept_as_keys_and_a_state_stored_before_still_swallows_resends():
    """State.closed keeps 8-byte keys of the closed part and request ids (9 bytes each in
    msgpack instead of 31-41: the ring of 64 is written with every record); a state
    stored by the version before holds the ids themselves and still reads. Either way a
    finished part sent again (under a new bus event id) adds nothing."""
    path = next(p for p in CAPTURED if "tool_shell" in p.name)
    session = new_session(get("opencode"))
    for n, line in enumerate(read_capture(path), 1):
        session, _events, _failed = translate_record(get("opencode"), session, "s1", [line],
                                                     offset=n)
    state = session.state
    assert state.closed and all(isinstance(k, int) for k in state.closed)
    resent = []
    for n, line in enumerate(read_capture(path)):
        msg = json.loads(line.data)
        part = msg.get("properties", {}).get("part") or {}
        pid = part.get("id") or msg.get("properties", {}).get("partID")
        if msg.get("type") in ("message.part.updated", "message.part.delta") and pid:
            resent.append((pid, ("agent", {**msg, "id": f"evt_resent_{n}"})))
    closed = sorted({pid for pid, _ in resent if _closed_key(pid) in state.closed})
    assert closed  # the parts of the conversation are closed
    before = msgspec.structs.replace(state, closed=tuple(closed))
    before = msgspec.msgpack.decode(msgspec.msgpack.encode(before), type=type(state))
    for stored in (state, before):
        s = msgspec.structs.replace(session, state=stored)
        lines = capture_lines([m for pid, m in resent if pid in closed])
        for n, line in enumerate(lines, 1000):
            s, events, failed = translate_record(get("opencode"), s, "s1", [line], offset=n)
            assert events == [] and failed == []


# ---- the captured 1.18.33 conversations (v2 shape) ---------------------------------------


@pytest.mark.parametrize("path", CAPTURED, ids=[p.name.split("__")[1].split(".")[0]
                                                 for p in CAPTURED])
def test_captured_conversation_matches_its_oracle(path: Path):
    expect = json.loads(path.with_name(path.name.replace(".capture.jsonl", ".expect.json"))
                        .read_text())
    events = events_of(assert_three_ways("opencode", read_capture(path)))
    assert_envelope_invariants(events)
    assert not _warnings(events)
    assert assistant_texts(events) == [t["text"] for t in expect["assistant_texts"]]
    done = {e["providerRefs"]["providerItemId"]: e["payload"] for e in events
            if e["type"] == "item.completed" and e["payload"]["itemType"] in TOOL_TYPES}
    assert len(done) == len(expect["tool_calls"])
    for call in expect["tool_calls"]:
        assert done[call["id"]]["output"] == call["output"]
        assert done[call["id"]]["isError"] is call["is_error"]
    opened = {e["providerRefs"]["providerRequestId"] for e in events
              if e["type"] == "request.opened"}
    resolved = {e["providerRefs"]["providerRequestId"]: e["payload"]["decision"]
                for e in events if e["type"] == "request.resolved"}
    assert opened == {r["id"] for r in expect["requests"]}
    assert resolved == {r["id"]: r["decision"] for r in expect["requests"] if r["answered"]}
    states = [e["payload"]["state"] for e in events if e["type"] == "turn.completed"]
    assert states == expect["turn_states"]
    reasoning = ["".join(e["payload"]["delta"] for e in events if e["type"] == "content.delta"
                         and e["payload"]["streamKind"] == "reasoning_text"
                         and e["itemId"] == item)
                 for item in dict.fromkeys(e["itemId"] for e in events
                                           if e["payload"].get("itemType") == "reasoning")]
    assert reasoning == expect["reasoning_texts"]


# ---- behaviour in isolation -------------------------------------------------------------


_EVENT_IDS = itertools.count(1)


def _v2(kind: str, **props: Any) -> tuple[str, dict[str, Any]]:
    # every bus event has an id of its own (a repeated id and body is a duplicate)
    return ("agent", {"id": f"evt_{kind}_{next(_EVENT_IDS)}", "type": kind, "properties": props})


def _text_part(pid: str, text: str, end: bool = False) -> tuple[str, dict[str, Any]]:
    time = {"start": 1, **({"end": 2} if end else {})}
    return _v2("message.part.updated", sessionID="ses_1",
               part={"id": pid, "messageID": "msg_a", "sessionID": "ses_1", "type": "text",
                     "text": text, "time": time})


_PROMPT = [
    _v2("message.updated", sessionID="ses_1",
        info={"id": "msg_u", "sessionID": "ses_1", "role": "user", "time": {"created": 1}}),
    _v2("message.updated", sessionID="ses_1",
        info={"id": "msg_a", "sessionID": "ses_1", "role": "assistant", "time": {"created": 2}}),
]


def test_trimmed_closing_snapshot_still_matches_the_deltas():
    # OpenCode trims a part's end when it closes: deltas "Hi\n" + "there \n" close as
    # "Hi\nthere"; the canonical deltas must add up to the final text, not to more
    lines = capture_lines([*_PROMPT, _text_part("prt_1", ""),
                           _v2("message.part.delta", sessionID="ses_1", messageID="msg_a",
                               partID="prt_1", field="text", delta="Hi\n"),
                           _v2("message.part.delta", sessionID="ses_1", messageID="msg_a",
                               partID="prt_1", field="text", delta="there \n"),
                           _text_part("prt_1", "Hi\nthere", end=True)])
    events = events_of(assert_three_ways("opencode", lines))
    assert assistant_texts(events) == ["Hi\nthere"]


def test_a_second_idle_and_repeated_busy_emit_nothing():
    busy = _v2("session.status", sessionID="ses_1", status={"type": "busy"})
    idle = _v2("session.idle", sessionID="ses_1")
    per = _per_record(capture_lines([busy, busy, busy, idle, idle]))
    assert [[e["type"] for e in evs] for evs in per] == [
        ["session.started", "thread.started", "turn.started"], [], [], ["turn.completed"], []]


def test_global_event_wrapper_gives_the_same_events():
    plain = [_PROMPT[0], _text_part("prt_1", "hello", end=True)]
    wrapped = [(o, {"directory": "/w", "project": "p", "payload": m}) for o, m in plain]
    assert run_whole("opencode", capture_lines(plain)) == \
        run_whole("opencode", capture_lines(wrapped))


_TOOL = {"id": "prt_t", "messageID": "msg_a", "sessionID": "ses_1", "type": "tool",
         "tool": "bash", "callID": "call_1"}
_PENDING = _v2("message.part.updated", sessionID="ses_1",
               part={**_TOOL, "state": {"status": "pending", "input": {}, "raw": ""}})
_ABORTED = _v2("message.part.updated", sessionID="ses_1",
               part={**_TOOL, "state": {"status": "error", "input": {},
                                        "error": "Tool execution aborted",
                                        "time": {"start": 1, "end": 2}}})
_ABORT = _v2("session.error", sessionID="ses_1",
             error={"name": "MessageAbortedError", "data": {"message": "aborted"}})
_IDLE = _v2("session.status", sessionID="ses_1", status={"type": "idle"})


@pytest.mark.parametrize("order, tool_output", [
    # 1.18 (Effect runner): the error, the aborted tool parts, then idle
    ([_ABORT, _ABORTED, _IDLE], "Tool execution aborted"),
    # 1.1.x: cancel() sets idle first, the aborted stream reports afterwards
    ([_IDLE, _ABORT, _ABORTED], None),
], ids=["error-then-idle", "idle-then-error"])
def test_an_interrupt_ends_the_turn_once_as_interrupted(order, tool_output):
    lines = capture_lines([*_PROMPT, _PENDING, *order])
    events = events_of(assert_three_ways("opencode", lines))
    assert_envelope_invariants(events)
    assert [e["payload"]["state"] for e in events if e["type"] == "turn.completed"] == \
        ["interrupted"]
    assert sum(e["type"] == "turn.started" for e in events) == 1
    assert any(e["type"] == "runtime.error" for e in events)
    # the tool call the model made is not lost: it is an item, failed, with the runtime's
    # own error when that arrives inside the turn
    (tool_done,) = [e for e in events if e["type"] == "item.completed"
                    and e["payload"]["itemType"] == "command_execution"]
    assert tool_done["payload"]["status"] == "failed"
    assert tool_done["payload"].get("output") == tool_output


def _status(kind: str, **extra: Any) -> tuple[str, dict[str, Any]]:
    return ("agent", {"type": "session.status",
                      "properties": {"sessionID": "ses_1", "status": {"type": kind, **extra}}})


def _plain(kind: str, **props: Any) -> tuple[str, dict[str, Any]]:
    """A 1.1.x bus event: no event id."""
    return ("agent", {"type": kind, "properties": props})


_RETRY = _status("retry", attempt=1, message="The server had an error", next=5)
_IDLE_11 = [_status("idle"), _plain("session.idle", sessionID="ses_1")]
_ABORT_11 = _plain("session.error", sessionID="ses_1",
                   error={"name": "MessageAbortedError",
                          "data": {"message": "The operation was aborted."}})


def _message_completed(**extra: Any) -> tuple[str, dict[str, Any]]:
    return _plain("message.updated", info={
        "id": "msg_a", "sessionID": "ses_1", "role": "assistant",
        "time": {"created": 2, "completed": 9}, **extra})


_ABORTED_MESSAGE = _message_completed(error={"name": "MessageAbortedError",
                                     "data": {"message": "The operation was aborted."}})


@pytest.mark.parametrize("after_retry", [
    # processor.ts: cancel() sets idle at once; the retry's sleep rejects, the next call
    # aborts, then session.error and the message completed with the error
    [*_IDLE_11, _ABORT_11, _ABORTED_MESSAGE],
    # as 1.1.65 recorded its interrupt: an idle after each report
    [*_IDLE_11, _ABORT_11, *_IDLE_11, _ABORTED_MESSAGE, *_IDLE_11],
    # the message completed without session.error, then idle (the v2 runner, 1.18)
    [_message_completed(), *_IDLE_11],
    # idle, then the completion without session.error
    [*_IDLE_11, _message_completed()],
], ids=["1.1.x", "1.1.65-idles", "completed-then-idle", "idle-then-completed"])
def test_a_turn_aborted_while_waiting_to_retry_ends_interrupted_with_its_error(after_retry):
    lines = capture_lines([*_PROMPT, _status("busy"), _RETRY, *after_retry])
    events = events_of(assert_three_ways("opencode", lines))
    assert_envelope_invariants(events)
    (done,) = [e for e in events if e["type"] == "turn.completed"]
    assert done["payload"]["state"] == "interrupted"
    errors = [e for e in events if e["type"] == "runtime.error"]
    assert [e["payload"]["willRetry"] for e in errors] == (
        [True, False] if _ABORT_11 in after_retry else [True])
    # every error inside the turn: before its end, with its id
    assert all(e["turnId"] == done["turnId"] and e["seq"] < done["seq"] for e in errors)
    if _ABORT_11 in after_retry:
        assert done["payload"]["errorMessage"] == "The operation was aborted."
    assert events[-1] is done or all(e["type"] != "turn.started" for e in events[
        events.index(done):])


def test_a_retry_that_resumes_completes_its_turn_at_idle():
    lines = capture_lines([*_PROMPT, _status("busy"), _RETRY, _status("busy"),
                           _text_part("prt_1", "Hello", end=True),
                           _message_completed(finish="stop"), *_IDLE_11])
    events = events_of(assert_three_ways("opencode", lines))
    assert [e["payload"]["state"] for e in events if e["type"] == "turn.completed"] == \
        ["completed"]
    assert assistant_texts(events) == ["Hello"]


def test_an_idle_while_waiting_to_retry_is_held_until_the_next_prompt_at_most():
    # no report ever comes: the next prompt ends the turn, interrupted, before its own
    prompt = _plain("message.updated", info={"id": "msg_u2", "sessionID": "ses_1",
                                             "role": "user", "time": {"created": 10}})
    lines = capture_lines([*_PROMPT, _status("busy"), _RETRY, *_IDLE_11, prompt])
    events = events_of(assert_three_ways("opencode", lines))
    assert [(e["type"], e["payload"].get("state")) for e in events
            if e["type"] in ("turn.started", "turn.completed")] == [
        ("turn.started", None), ("turn.completed", "interrupted"), ("turn.started", None)]


ERROR_500 = SHARED / "fixtures" / "ondisk" / "opencode-serve" / "error_500" / "live.jsonl"


@pytest.mark.skipif(not ERROR_500.exists(), reason="../shared/fixtures/ondisk is absent")
def test_the_recorded_abort_after_two_retries_ends_the_turn_interrupted():
    # opencode 1.18.33, aborted by the client after two retry statuses: the message
    # completes without an error, no session.error, then idle
    events = events_of(assert_three_ways("opencode", read_capture(ERROR_500)))
    assert [e["payload"]["state"] for e in events if e["type"] == "turn.completed"] == \
        ["interrupted"]
    assert not [e for e in events if e["type"] == "runtime.warning"]


def test_a_shape_error_is_a_malformed_record_not_a_crash():
    line = capture_lines([_v2("message.part.updated", sessionID="ses_1", part="nope")])
    _session, events, failures = translate_record(get("opencode"), new_session(get("opencode")),
                                                  "s1", line, offset=1)
    assert not events and len(failures) == 1


_KNOWN = sorted(opencode._HANDLERS) + ["session.next.text.delta", "sync", "plugin.added"]
_JSON = st.recursive(st.none() | st.booleans() | st.integers(-2**62, 2**62)
                     | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8),
                     lambda inner: st.lists(inner, max_size=3)
                     | st.dictionaries(st.text(max_size=8), inner, max_size=3),
                     max_leaves=8)
_ID = st.sampled_from(["a", "b", "c"])
_PART = st.fixed_dictionaries(
    {"id": _ID, "messageID": _ID,
     "type": st.sampled_from(["text", "reasoning", "tool", "step-finish", "retry", "patch"])},
    optional={"text": st.text(max_size=6) | _JSON, "time": _JSON | st.just({"end": 1}),
              "callID": _ID, "tool": st.sampled_from(["bash", "read", "x"]),
              "state": _JSON | st.fixed_dictionaries(
                  {"status": st.sampled_from(["pending", "running", "completed", "error"])},
                  optional={"input": _JSON, "output": _JSON, "metadata": _JSON,
                            "error": _JSON})})
_PROPS = st.fixed_dictionaries(
    {}, optional={"sessionID": st.sampled_from(["ses_1", "ses_2"]) | _JSON,
                  "info": _JSON | st.fixed_dictionaries(
                      {"id": _ID}, optional={"role": st.sampled_from(["user", "assistant"]),
                                             "time": _JSON}),
                  "part": _JSON | _PART, "status": _JSON, "partID": _ID | _JSON,
                  "delta": st.text(max_size=4) | _JSON, "field": _JSON, "id": _ID | _JSON,
                  "requestID": _ID | _JSON, "reply": _JSON, "error": _JSON, "diff": _JSON,
                  "todos": _JSON, "questions": _JSON, "tool": _JSON})


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(_KNOWN), _PROPS), max_size=8))
def test_any_message_translates_or_is_reported_malformed(messages):
    """Whatever the properties, a message translates into events that survive the schema
    round trip, or fails as MalformedRecord (the driver turns an AdapterError into a dead
    letter); the state always survives the table codec."""
    t = get("opencode")
    session = new_session(t)
    codec = msgspec.msgpack.Decoder(Session[opencode.State])
    for n, (kind, props) in enumerate(messages, 1):
        line = capture_lines([("agent", {"type": kind, "properties": props})])
        session, events, failures = translate_record(t, session, "s1", line, offset=n)
        assert all(isinstance(f.error, MalformedRecord) for f in failures), failures
        assert all(decode_event(encode_event(e)) == e for e in events)
        assert codec.decode(msgspec.msgpack.encode(session)) == session


# ---- protocol coverage ---------------------------------------------------------------------


@pytest.mark.skipif(not OPENAPI.exists(), reason="../shared/protocols/opencode is absent "
                                                 "(protocol schemas are read from ../shared)")
def test_every_openapi_event_type_is_mapped_or_ignored():
    schemas = json.loads(OPENAPI.read_text())["components"]["schemas"]
    types = {s["properties"]["type"]["const"] for name, s in schemas.items()
             if name.startswith("Event.")}
    assert len(types) == 42
    unhandled = sorted(types - set(opencode._HANDLERS) - opencode.IGNORED)
    assert not unhandled, f"Event types neither mapped nor ignored: {unhandled}"


def test_ignored_types_are_not_also_mapped_and_each_has_a_reason():
    assert not set(opencode._HANDLERS) & opencode.IGNORED
    assert all(reason.strip() for reason in opencode.IGNORED_REASONS.values())
    assert all(reason.strip() for reason in _IGNORED_PARTS.values())
    assert not set(_PART_HANDLERS) & set(_IGNORED_PARTS)


def test_each_known_event_type_alone_gives_no_warning():
    # a minimal message of every known type either maps, is ignored, or is malformed;
    # it is never reported as unknown
    for kind in [*opencode._HANDLERS, *opencode.IGNORED]:
        line = capture_lines([_v2(kind, sessionID="ses_1")])
        _s, events, _failures = translate_record(get("opencode"), new_session(get("opencode")),
                                                 "s1", line, offset=1)
        assert not _warnings([json.loads(encode_event(e)) for e in events]), kind


# ---- long streams: the state keeps lengths and digests, the spool keeps the text ---------


def _delta(pid: str, text: str) -> tuple[str, dict[str, Any]]:
    return _v2("message.part.delta", sessionID="ses_1", messageID="msg_a", partID=pid,
               field="text", delta=text)


def _bash(status: str, **state: Any) -> tuple[str, dict[str, Any]]:
    return _v2("message.part.updated", sessionID="ses_1",
               part={**_TOOL, "state": {"status": status, "input": {"command": "yes"}, **state}})


#: A per-item cap above every stream here: these tests check the spool, not the cap
#: (tests/adapters/test_streams.py does).
LONG_CAP = 16 << 20


def _stored(messages: list[tuple[str, dict[str, Any]]]
            ) -> tuple[list[dict[str, Any]], list[int], list[int]]:
    """Fed as the session table keeps it (harness.Stored, cap LONG_CAP): the events, the
    encoded session's size and the spool's chunk count after each record."""
    fed = Stored("opencode", capture_lines(messages), cap=LONG_CAP)
    return fed.dicts(), fed.sizes, fed.chunks


def _completed(events: list[dict[str, Any]], item_type: str) -> dict[str, Any]:
    (done,) = [e["payload"] for e in events if e["type"] == "item.completed"
               and e["payload"]["itemType"] == item_type]
    return done


@pytest.mark.parametrize("close", ["snapshot", "message"])
def test_a_long_stream_keeps_the_session_small_and_completes_its_items_whole(close):
    """2,000 text deltas of 1 KiB (each ending in a newline, held back until the next),
    then a command whose output grows by 1 KiB per update (OpenCode re-sends a running
    command's whole output so far: 200 updates are 20 MB of input already). The part
    closes with its trimmed closing snapshot, or, cut off, with its message: then its
    text comes back whole from the spool."""
    parts = [f"{i:05d} " + "x" * 1017 + "\n" for i in range(2000)]
    answer = "".join(parts)
    output = "".join(f"{i:05d} " + "y" * 1017 + "\n" for i in range(200))
    closing = _text_part("prt_1", answer.rstrip(), end=True) if close == "snapshot" else \
        _v2("message.updated", sessionID="ses_1",
            info={"id": "msg_a", "sessionID": "ses_1", "role": "assistant",
                  "time": {"created": 2, "completed": 3}})
    messages = [*_PROMPT, _text_part("prt_1", ""), *(_delta("prt_1", p) for p in parts),
                _PENDING,
                *(_bash("running", metadata={"output": output[:1024 * (i + 1)]},
                        time={"start": 1}) for i in range(200)),
                _bash("completed", output=output, metadata={"output": output, "exit": 0},
                      title="yes", time={"start": 1, "end": 2}),
                closing, _IDLE]
    events, sizes, chunks = _stored(messages)
    assert max(sizes) < 4096, max(sizes)
    assert max(chunks) >= 2000 and chunks[-1] == 0  # spooled, and dropped on completion
    assert_envelope_invariants(events)
    # every delta is forwarded as it comes, its trailing newline moved to the next one
    deltas = [e["payload"]["delta"] for e in events if e["type"] == "content.delta"
              and e["payload"]["streamKind"] == "assistant_text"]
    assert deltas[:2000] == [parts[0][:-1]] + ["\n" + p[:-1] for p in parts[1:]]
    text = answer.rstrip() if close == "snapshot" else answer  # cut off: flushes all
    assert "".join(deltas) == text
    assert _completed(events, "assistant_message")["text"] == text
    streamed = "".join(e["payload"]["delta"] for e in events if e["type"] == "content.delta"
                       and e["payload"]["streamKind"] == "command_output")
    assert streamed == output
    tool = _completed(events, "command_execution")
    assert (tool["output"], tool["exitCode"]) == (output, 0)
    assert [e["payload"]["state"] for e in events if e["type"] == "turn.completed"] == \
        ["completed"]


def test_a_snapshot_diverging_from_a_long_streamed_text_re_bases_on_their_common_prefix():
    chunks = [f"{i:03d}" + "a" * 97 for i in range(10)]  # 1,000 characters: spooled
    said = "".join(chunks)
    diverged = said[:450] + "B" * 600
    lines = capture_lines([*_PROMPT, _text_part("prt_1", ""),
                           *(_delta("prt_1", c) for c in chunks),
                           _text_part("prt_1", said[:300]),  # stale: adds nothing
                           _text_part("prt_1", diverged),  # read back from the spool
                           _delta("prt_1", "!"),
                           _text_part("prt_1", diverged + "!", end=True)])
    events = events_of(assert_three_ways("opencode", lines))
    deltas = [e["payload"]["delta"] for e in events if e["type"] == "content.delta"]
    assert deltas == [*chunks, "B" * 600, "!"]  # from the first differing character
    assert _completed(events, "assistant_message")["text"] == diverged + "!"


@pytest.mark.parametrize("role", ["assistant", "user"])
def test_a_long_text_buffered_while_its_role_is_unknown_is_spooled_then_released(role):
    # no prompt seen yet (a stream joined mid-way): the part waits for its message's role
    chunks = [f"{i:03d} " + "c" * 95 + "\n" for i in range(200)]  # 20,000 characters
    text = "".join(chunks)
    message = _v2("message.updated", sessionID="ses_1",
                  info={"id": "msg_a", "sessionID": "ses_1", "role": role,
                        "time": {"created": 2}})
    messages = [_text_part("prt_1", ""), *(_delta("prt_1", c) for c in chunks), message,
                _text_part("prt_1", text.rstrip(), end=True), _IDLE]
    events, sizes, chunks_left = _stored(messages)
    assert max(sizes) < 4096, max(sizes)
    assert chunks_left[-1] == 0
    assert events == events_of(run_whole("opencode", capture_lines(messages)))
    if role == "assistant":
        # released at once, its trailing newline held back; the closing snapshot ends it
        assert assistant_texts(events) == [text.rstrip()]
        assert _completed(events, "assistant_message")["text"] == text.rstrip()
    else:
        assert assistant_texts(events) == []
        assert _completed(events, "user_message")["text"] == text


def test_a_long_run_of_whitespace_held_back_is_spooled_and_emitted_exactly():
    run = [" \n\t" * 5 for _ in range(40)]  # 600 characters of whitespace
    lines = capture_lines([*_PROMPT, _text_part("prt_1", ""), _delta("prt_1", "a"),
                           *(_delta("prt_1", w) for w in run), _delta("prt_1", "b"),
                           _text_part("prt_1", "a" + "".join(run) + "b", end=True)])
    events = events_of(assert_three_ways("opencode", lines))
    deltas = [e["payload"]["delta"] for e in events if e["type"] == "content.delta"]
    assert deltas == ["a", "".join(run) + "b"]


def test_a_long_session_error_message_is_spooled_until_the_turn_ends():
    message = "".join(f"{i:05d} the provider refused the request\n" for i in range(3000))
    busy = _v2("session.status", sessionID="ses_1", status={"type": "busy"})
    error = _v2("session.error", sessionID="ses_1",
                error={"name": "APIError", "data": {"message": message}})
    events, sizes, chunks = _stored([*_PROMPT, busy, error, busy, busy, _IDLE])
    assert max(sizes) < 4096, max(sizes)
    assert chunks[-1] == 0
    (done,) = [e["payload"] for e in events if e["type"] == "turn.completed"]
    assert (done["state"], done["errorMessage"]) == ("failed", message)


def test_a_command_output_that_does_not_extend_what_was_streamed_adds_nothing():
    # metadata.output is the output so far; one that does not begin with what was
    # streamed (a window that dropped its head) has no new suffix: never a misaligned one
    lines = capture_lines([*_PROMPT, _PENDING,
                           _bash("running", metadata={"output": "one\n"}),
                           _bash("running", metadata={"output": "one\ntwo\n"}),
                           _bash("running", metadata={"output": "two\nthree\nfour\n"}),
                           _bash("completed", output="one\ntwo\nthree\nfour\n",
                                 metadata={"exit": 0})])
    events = events_of(assert_three_ways("opencode", lines))
    deltas = [e["payload"]["delta"] for e in events if e["type"] == "content.delta"]
    assert deltas == ["one\n", "two\n"]
    assert _completed(events, "command_execution")["output"] == "one\ntwo\nthree\nfour\n"
