"""codex: the Codex app-server adapter against the real captures, the v0.171.0 JSON
schemas, the seed exhibit, and messages generated from those schemas."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adapters import Line, MemorySpool, Session, get, new_session, translate_record
from adapters.codex import legacy, requests
from adapters.codex import translator as adapter
from adapters.core import AdapterError, MalformedRecord, canonical_id
from tests.adapters.harness import (
    GOLDENS,
    SHARED,
    assert_envelope_invariants,
    assert_three_ways,
    assistant_texts,
    capture_lines,
    events_of,
    read_capture,
    run_whole,
)
from topics.canonical import encode_event

SCHEMAS = SHARED / "protocols" / "codex" / "app-server-json-schema"
NO_SCHEMAS = pytest.mark.skipif(
    not SCHEMAS.is_dir(), reason="../shared/protocols/codex is absent (the Codex JSON schemas are "
                                 "read from ../shared, never copied into the project)")
EXHIBIT = SHARED / "fixtures" / "seed-exhibits" / "codex.json"
CAPTURED = sorted((Path(__file__).parents[1] / "fixtures" / "captured" / "codex")
                  .glob("*.capture.jsonl"))
GOLDEN_INPUTS = sorted((GOLDENS / "codex").glob("*.in.jsonl"))

#: seed 002 §3.2 (the request types it names; the others open as `unknown`)
SEED_REQUEST_TYPES = {
    "item/commandExecution/requestApproval": "command_execution_approval",
    "item/fileChange/requestApproval": "file_change_approval",
    "applyPatchApproval": "apply_patch_approval",
    "execCommandApproval": "exec_command_approval",
    "item/tool/requestUserInput": "tool_user_input",
    "item/tool/call": "dynamic_tool_call",
    "account/chatgptAuthTokens/refresh": "auth_tokens_refresh",
}


# ---- helpers ------------------------------------------------------------------------


def _schema(name: str) -> dict[str, Any]:
    return json.loads((SCHEMAS / name).read_text())


def _methods(name: str) -> list[str]:
    return [v["properties"]["method"]["enum"][0] for v in _schema(name)["oneOf"]]


def _run(messages: list[tuple[str, Any]]) -> list[dict[str, Any]]:
    return events_of(assert_three_ways("codex", capture_lines(messages)))


def _of(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == kind]


def _cid(prefix: str, *parts: str) -> str:
    return canonical_id(prefix, "s1", *parts)


T, U = "thr-1", "turn-1"  # Codex thread and turn ids of the hand-written scenarios


def _turn(status: str = "completed", **extra: Any) -> dict[str, Any]:
    return {"threadId": T, "turn": {"id": U, "items": [], "status": status, **extra}}


def _started() -> list[tuple[str, Any]]:
    return [("agent", {"method": "turn/started", "params": _turn("inProgress")})]


def _item(method: str, item: dict[str, Any]) -> tuple[str, Any]:
    return ("agent", {"method": method, "params": {"threadId": T, "turnId": U, "item": item,
                                                   "startedAtMs": 0, "completedAtMs": 0}})


def _delta(method: str, item_id: str, delta: str, **extra: Any) -> tuple[str, Any]:
    return ("agent", {"method": method, "params": {"threadId": T, "turnId": U, "itemId": item_id,
                                                   "delta": delta, **extra}})


# ---- the real captures ----------------------------------------------------------------


@pytest.mark.parametrize("path", CAPTURED, ids=[p.stem for p in CAPTURED])
def test_captured_conversation_translates_completely(path: Path):
    expect = json.loads(path.with_name(path.name.replace(".capture.jsonl", ".expect.json"))
                        .read_text())
    events = events_of(assert_three_ways("codex", read_capture(path)))
    assert_envelope_invariants(events)
    assert assistant_texts(events) == [t["text"] for t in expect["assistant_texts"]]
    assert not _of(events, "runtime.warning")
    tools = [e for e in _of(events, "item.completed") if e["payload"].get("toolName")]
    assert [e["providerRefs"]["providerItemId"] for e in tools] == [
        t["id"] for t in expect["tool_calls"]]
    for event, tool in zip(tools, expect["tool_calls"], strict=True):
        assert event["payload"]["output"] == (tool["output"] or "")
        assert event["payload"]["isError"] is tool["is_error"]
    opened = _of(events, "request.opened")
    assert [e["providerRefs"]["providerRequestId"] for e in opened] == [
        r["id"] for r in expect["requests"]]
    resolved = _of(events, "request.resolved")
    assert [e["payload"].get("decision") for e in resolved] == [
        r["decision"] for r in expect["requests"]]
    assert [e["payload"]["state"] for e in _of(events, "turn.completed")] == expect["turn_states"]


# ---- the legacy mirror: codex/event/<type> (app-server up to 2026-03) -----------------------

#: Every `type` of codex-rs/protocol's EventMsg from 2025-09 until the app-server stopped
#: mirroring them (2026-03-12, "stop emitting codex/event/ notifications"), read from the
#: protocol's history: the app-server forwarded each as `codex/event/<type>`.
LEGACY_TYPES = frozenset("""
error warning context_compacted thread_rolled_back task_started task_complete token_count
agent_message user_message agent_message_delta agent_reasoning agent_reasoning_delta
agent_reasoning_raw_content agent_reasoning_raw_content_delta agent_reasoning_section_break
session_configured thread_name_updated mcp_startup_update mcp_startup_complete
mcp_tool_call_begin mcp_tool_call_end web_search_begin web_search_end exec_command_begin
exec_command_output_delta terminal_interaction exec_command_end view_image_tool_call
exec_approval_request request_user_input dynamic_tool_call_request dynamic_tool_call_response
elicitation_request apply_patch_approval_request request_permissions skill_request_approval
deprecation_notice background_event undo_started undo_completed stream_error patch_apply_begin
patch_apply_end turn_diff get_history_entry_response mcp_list_tools_response
list_custom_prompts_response list_skills_response list_remote_skills_response
remote_skill_downloaded list_models_response conversation_path conversation_history
session_renamed skills_update_available plan_update turn_aborted shutdown_complete
entered_review_mode exited_review_mode raw_response_item item_started item_completed
agent_message_content_delta plan_delta reasoning_content_delta reasoning_raw_content_delta
collab_agent_spawn_begin collab_agent_spawn_end collab_agent_interaction_begin
collab_agent_interaction_end collab_waiting_begin collab_waiting_end collab_close_begin
collab_close_end collab_resume_begin collab_resume_end model_reroute
realtime_conversation_started realtime_conversation_realtime realtime_conversation_closed
image_generation_begin image_generation_end hook_started hook_completed
""".split())
#: The server notifications of the 0.100-era app-server (codex-rs at 2026-02-11).
V2_NOTIFICATIONS_0_100 = frozenset("""
error thread/started thread/name/updated thread/tokenUsage/updated turn/started turn/completed
turn/diff/updated turn/plan/updated item/started item/completed rawResponseItem/completed
item/agentMessage/delta item/plan/delta item/commandExecution/outputDelta
item/commandExecution/terminalInteraction item/fileChange/outputDelta item/mcpToolCall/progress
mcpServer/oauthLogin/completed account/updated account/rateLimits/updated app/list/updated
item/reasoning/summaryTextDelta item/reasoning/summaryPartAdded item/reasoning/textDelta
thread/compacted deprecationNotice configWarning windows/worldWritableWarning
account/login/completed authStatusChange loginChatGptComplete sessionConfigured
""".split())
MIRROR = GOLDENS / "codex" / "legacy_mirror_0_100.in.jsonl"


def _legacy(kind: str, turn: str = U, **body: Any) -> tuple[str, Any]:
    return ("agent", {"method": f"codex/event/{kind}",
                      "params": {"id": turn, "msg": {"type": kind, **body}, "conversationId": T}})


def _is_legacy(line: Line) -> bool:
    return json.loads(line.data).get("method", "").startswith("codex/event/")


def test_every_legacy_event_type_is_ignored_translated_or_warned_once():
    ignored, translated = set(legacy.LEGACY_IGNORED), set(legacy.LEGACY_HANDLERS)
    warned = set(legacy.LEGACY_WARNED)
    assert not ignored & translated and not ignored & warned and not translated & warned
    assert ignored | translated | warned == LEGACY_TYPES, (
        f"not covered: {LEGACY_TYPES - ignored - translated - warned}; not in the protocol: "
        f"{(ignored | translated | warned) - LEGACY_TYPES}")
    assert all(r.strip() for r in (*legacy.LEGACY_IGNORED_REASONS.values(),
                                   *legacy.LEGACY_WARNED.values()))


def test_the_legacy_mirror_adds_nothing_to_the_v2_conversation():
    lines = read_capture(MIRROR)
    bare = [ln for ln in lines if not _is_legacy(ln)]
    assert len(bare) < len(lines) - 30
    mirrored = run_whole("codex", lines)
    assert mirrored == run_whole("codex", bare)
    # the order the issue describes (each legacy twin after its v2 notification; 0.100
    # sent it before): the same
    after: list[Line] = []
    held: list[Line] = []
    for ln in lines:
        if _is_legacy(ln):
            held.append(ln)
        else:
            after.append(ln)
            after.extend(held)
            held.clear()
    assert run_whole("codex", after + held) == mirrored
    events = events_of(mirrored)
    assert not _of(events, "runtime.warning")
    assert [e["payload"]["state"] for e in _of(events, "turn.completed")] == [
        "completed", "interrupted"]


def test_legacy_events_that_no_v2_notification_carries_are_translated():
    events = _run([
        _legacy("mcp_startup_update", "", server="docs", status={"state": "starting"}),
        _legacy("mcp_startup_update", "", server="docs",
                status={"state": "failed", "error": "handshake timed out"}),
        _legacy("mcp_startup_complete", "", ready=[], failed=[
            {"server": "docs", "error": "handshake timed out"}], cancelled=[]),
        _legacy("warning", message="Model gpt-x is deprecated; using gpt-y"),
    ])
    # the shape of mcpServer/startupStatus/updated, which replaced them in later releases
    assert [e["payload"]["status"] for e in _of(events, "mcp.status.updated")] == [
        {"name": "docs", "status": "starting", "error": None},
        {"name": "docs", "status": "failed", "error": "handshake timed out"}]
    (warning,) = _of(events, "config.warning")
    assert warning["payload"] == {"summary": "Model gpt-x is deprecated; using gpt-y"}
    assert warning["threadId"] == _cid("thr", T)
    assert not _of(events, "runtime.warning")


def test_legacy_events_with_content_of_their_own_warn_once_per_kind_per_session():
    messages = [_legacy("background_event", message=f"step {n}") for n in range(3)]
    messages += [_legacy("undo_started", message=None), _legacy("undo_completed", success=True),
                 _legacy("undo_started", message=None)]
    messages += [_legacy("hologram_rendered", frame=n) for n in range(40)]
    events = _run(messages)
    warnings = _of(events, "runtime.warning")
    assert [w["raw"]["messageType"] for w in warnings] == [
        "codex/event/background_event", "codex/event/undo_started",
        "codex/event/undo_completed", "codex/event/hologram_rendered"]
    assert all(w["threadId"] == _cid("thr", T) for w in warnings)
    assert "background_event" in warnings[0]["payload"]["message"]
    # another session warns again
    assert len(_of(_run(messages[:1]), "runtime.warning")) == 1


def test_the_legacy_warned_kinds_stay_bounded():
    kinds = [f"kind_{n}" for n in range(legacy.LEGACY_WARNED_KEPT + 10)]
    session = new_session(get("codex"))
    for n, kind in enumerate(kinds):
        session, _events, failures = translate_record(
            get("codex"), session, "s1", capture_lines([_legacy(kind)]), offset=n)
        assert not failures
    assert len(session.state.legacyWarned) == legacy.LEGACY_WARNED_KEPT


# ---- the schema: every method mapped or ignored ------------------------------------------


@NO_SCHEMAS
def test_every_schema_notification_is_mapped_or_ignored():
    methods = _methods("ServerNotification.json")
    assert len(methods) == 87
    handled, ignored = set(adapter._HANDLERS), adapter.IGNORED
    assert not handled & ignored, "a method both mapped and ignored"
    assert set(methods) == handled | ignored, (
        f"unmapped: {set(methods) - handled - ignored}; not in the schema: "
        f"{(handled | ignored) - set(methods)}")
    assert all(reason.strip() for reason in adapter.IGNORED_REASONS.values())


@NO_SCHEMAS
def test_every_client_method_is_known():
    assert set(_methods("ClientRequest.json")) == adapter.CLIENT_REQUESTS
    assert set(_methods("ClientNotification.json")) == adapter.CLIENT_NOTIFICATIONS


@NO_SCHEMAS
@pytest.mark.parametrize("method", _methods("ServerRequest.json") if SCHEMAS.is_dir() else [])
def test_every_server_request_opens_a_request_keyed_by_its_id(method: str):
    params = {"threadId": T, "turnId": U, "itemId": "call-1", "questions": []}
    events = _run([
        ("agent", {"id": 7, "method": method, "params": params}),
        ("client", {"id": 7, "result": {}}),
        ("agent", {"method": "serverRequest/resolved", "params": {"threadId": T, "requestId": 7}}),
    ])
    opened = _of(events, "request.opened")
    assert len(opened) == 1
    assert opened[0]["requestId"] == _cid("req", "7")
    assert opened[0]["providerRefs"]["providerRequestId"] == "7"
    assert opened[0]["payload"]["requestType"] == SEED_REQUEST_TYPES.get(
        method, requests.REQUEST_TYPES[method])
    if method in ("item/tool/requestUserInput", "mcpServer/elicitation/request"):
        assert [e["requestId"] for e in _of(events, "user-input.requested")] == [_cid("req", "7")]
        assert [e["requestId"] for e in _of(events, "user-input.resolved")] == [_cid("req", "7")]
    resolved = _of(events, "request.resolved")
    assert [e["requestId"] for e in resolved] == [_cid("req", "7")]  # once, not twice
    assert not _of(events, "runtime.warning")


# ---- golden inputs are real protocol messages ---------------------------------------------


def _response_schema(method: str) -> dict[str, Any] | None:
    name = "".join(p[:1].upper() + p[1:] for p in method.replace("/", " ").split()) + "Response.json"
    for folder in (SCHEMAS, SCHEMAS / "v2", SCHEMAS / "v1"):
        if (folder / name).exists():
            return json.loads((folder / name).read_text())
    return None


@NO_SCHEMAS
@pytest.mark.parametrize("path", GOLDEN_INPUTS, ids=[p.name for p in GOLDEN_INPUTS])
def test_golden_inputs_validate_against_the_schemas(path: Path):
    import jsonschema

    validators = {k: jsonschema.Draft7Validator(_schema(f)) for k, f in (
        ("agent-request", "ServerRequest.json"), ("agent-notification", "ServerNotification.json"),
        ("client-request", "ClientRequest.json"), ("client-notification", "ClientNotification.json"))}
    known = {k: set(_methods(f)) for k, f in (
        ("agent-request", "ServerRequest.json"), ("agent-notification", "ServerNotification.json"),
        ("client-request", "ClientRequest.json"), ("client-notification", "ClientNotification.json"))}
    pending: dict[str, dict[Any, str]] = {"agent": {}, "client": {}}  # requests by who sent them
    if path == MIRROR:  # written in codex 0.100's shapes, which the 0.171.0 schemas are not
        return _check_methods_0_100(path)
    for n, raw in enumerate(path.read_text().splitlines(), 1):
        cap = json.loads(raw)
        origin, msg = cap["origin"], cap["msg"]
        if "method" in msg:
            kind = f"{origin}-{'request' if 'id' in msg else 'notification'}"
            if "id" in msg:
                pending[origin][msg["id"]] = msg["method"]
            if msg["method"] not in known[kind]:
                # only the golden about a newer Codex may use methods the schema lacks
                assert path.name.startswith("unknown_"), f"line {n}: {msg['method']} not in schema"
                continue
            errors = list(validators[kind].iter_errors(msg))
        else:
            asked = pending["client" if origin == "agent" else "agent"].pop(msg["id"])
            schema = _response_schema(asked)
            if schema is None or "result" not in msg:
                continue
            errors = list(jsonschema.Draft7Validator(schema).iter_errors(msg["result"]))
        assert not errors, f"line {n}: {jsonschema.exceptions.best_match(errors).message}"


def _check_methods_0_100(path: Path) -> None:
    """Every method of the 0.100-era golden is one that release defined."""
    for n, raw in enumerate(path.read_text().splitlines(), 1):
        cap = json.loads(raw)
        method = cap["msg"].get("method")
        if method is None:
            continue
        if cap["origin"] == "client":
            assert method in adapter.CLIENT_REQUESTS | adapter.CLIENT_NOTIFICATIONS, f"line {n}"
        elif method.startswith("codex/event/"):
            assert method.removeprefix("codex/event/") in LEGACY_TYPES, f"line {n}: {method}"
            assert cap["msg"]["params"]["msg"]["type"] == method.removeprefix("codex/event/")
        else:
            assert method in V2_NOTIFICATIONS_0_100, f"line {n}: {method}"


# ---- the seed exhibit (seed 001's chat view) --------------------------------------------------


def _chat(events: list[dict[str, Any]]) -> list[tuple[str, Any]]:
    """The readable chat of seed 001, derived from canonical events only."""
    chat: list[tuple[str, Any]] = []
    last_text: dict[str, str] = {}
    for e in events:
        p = e["payload"]
        if e["type"] == "content.delta" and p["streamKind"] == "assistant_text":
            chat.append(("text", p["delta"]))
        elif e["type"] == "item.started" and p.get("toolName"):
            chat.append(("tool_use", (e["providerRefs"]["providerItemId"], p["toolName"],
                                      p["input"])))
        elif e["type"] == "item.completed" and p.get("toolName"):
            chat.append(("tool_result", (e["providerRefs"]["providerItemId"], p["output"],
                                         p["isError"])))
        elif e["type"] == "item.completed" and p["itemType"] == "assistant_message":
            last_text[e["turnId"]] = p["text"]
        elif e["type"] == "turn.completed":
            chat.append(("done", last_text.get(e["turnId"])))
    return chat


@pytest.mark.skipif(not EXHIBIT.exists(), reason="../shared/fixtures/seed-exhibits is absent")
def test_seed_exhibit_gives_the_chat_view_of_seed_001():
    records = json.loads(EXHIBIT.read_text())["records"]
    events = _run([("agent", r["input"]) for r in records])
    assert_envelope_invariants(events)
    assert not _of(events, "runtime.warning")
    assert _chat(events) == [
        ("text", "Checking the fixture."),
        ("tool_use", ("synthetic-call-1", "Bash",
                      {"command": "printf 'fixture-ok\\n'", "cwd": "/tmp/fixture-workspace"})),
        ("tool_result", ("synthetic-call-1", "fixture-ok\n", False)),
        ("text", "Fixture "),
        ("text", "complete."),
        ("done", "Fixture complete."),
    ]
    # the two chunks stream as command output; the whole output comes once, on completion
    chunks = [e["payload"]["delta"] for e in _of(events, "content.delta")
              if e["payload"]["streamKind"] == "command_output"]
    assert chunks == ["fixture-", "ok\n"]


# ---- behaviour, scenario by scenario -----------------------------------------------------------


def test_client_and_server_request_ids_are_separate_spaces():
    events = _run([
        ("client", {"id": 0, "method": "thread/start", "params": {}}),
        ("agent", {"id": 0, "method": "item/commandExecution/requestApproval",
                   "params": {"threadId": T, "turnId": U, "itemId": "c", "startedAtMs": 0}}),
        # the server answers the client's request 0: that resolves no approval
        ("agent", {"id": 0, "result": {"thread": {"id": T}, "model": "m"}}),
        # the client answers the server's request 0
        ("client", {"id": 0, "result": {"decision": "acceptForSession"}}),
    ])
    assert [e["type"] for e in events if e["type"] != "session.started"] == [
        "request.opened", "session.configured", "thread.started", "request.resolved"]
    assert _of(events, "request.resolved")[0]["payload"]["decision"] == "acceptForSession"


def test_command_output_prefers_aggregated_output_and_falls_back_to_the_deltas():
    base = {"type": "commandExecution", "command": "x", "cwd": "/w", "commandActions": [],
            "status": "inProgress"}
    events = _run([
        *_started(),
        _item("item/started", {**base, "id": "a"}),
        _delta("item/commandExecution/outputDelta", "a", "line-2\n"),
        _item("item/completed", {**base, "id": "a", "status": "completed", "exitCode": 0,
                                 "aggregatedOutput": "line-1\nline-2\n"}),
        _item("item/started", {**base, "id": "b"}),
        _delta("item/commandExecution/outputDelta", "b", "part 1, "),
        _delta("item/commandExecution/outputDelta", "b", "part 2"),
        _item("item/completed", {**base, "id": "b", "status": "completed", "exitCode": 2,
                                 "aggregatedOutput": None}),
    ])
    done = {e["providerRefs"]["providerItemId"]: e["payload"]
            for e in _of(events, "item.completed")}
    assert done["a"]["output"] == "line-1\nline-2\n" and done["a"]["isError"] is False
    assert done["b"]["output"] == "part 1, part 2"
    assert (done["b"]["status"], done["b"]["exitCode"], done["b"]["isError"]) == ("failed", 2, True)
    assert done["a"]["input"] == {"command": "x", "cwd": "/w"} and done["a"]["toolName"] == "Bash"


@pytest.mark.parametrize(("deltas", "final", "expected"), [
    ([], "Whole text.", ["Whole text."]),  # no deltas: one synthetic full-text delta
    (["Hel", "lo."], "Hello.", ["Hel", "lo."]),  # deltas carried it all: nothing more
    (["Hel"], "Hello.", ["Hel", "lo."]),  # deltas stopped early: only the missing suffix
    (["Something else"], "Hello.", ["Something else"]),  # disagreement: never repeat text
])
def test_agent_message_text_is_sent_once(deltas: list[str], final: str, expected: list[str]):
    msg = {"type": "agentMessage", "id": "m", "text": "", "phase": "final_answer"}
    events = _run([*_started(), _item("item/started", msg),
                   *[_delta("item/agentMessage/delta", "m", d) for d in deltas],
                   _item("item/completed", {**msg, "text": final})])
    assert [e["payload"]["delta"] for e in _of(events, "content.delta")] == expected
    done = _of(events, "item.completed")[0]["payload"]
    assert (done["text"], done["phase"], done["role"]) == (final, "final_answer", "assistant")
    assert "text" not in done["data"]  # the text is never in `data` too


def test_interrupted_turn_completes_the_streaming_message_before_the_turn():
    events = _run([
        *_started(),
        _delta("item/agentMessage/delta", "m", "Once upon"),
        ("agent", {"method": "turn/completed", "params": _turn("interrupted")}),
    ])
    assert [e["type"] for e in events[-2:]] == ["item.completed", "turn.completed"]
    item, turn = events[-2], events[-1]
    assert item["synthetic"] and item["payload"]["text"] == "Once upon"
    assert item["payload"]["status"] == "failed"
    assert turn["payload"]["state"] == "interrupted"
    assert_envelope_invariants(events)


def test_interrupted_reasoning_completes_with_its_streamed_parts_joined():
    events = _run([
        *_started(),
        _delta("item/reasoning/summaryTextDelta", "r", "Plan", summaryIndex=0),
        _delta("item/reasoning/summaryTextDelta", "r", " it.", summaryIndex=0),
        _delta("item/reasoning/summaryTextDelta", "r", "Then é.", summaryIndex=1),
        _delta("item/reasoning/textDelta", "r", "raw", contentIndex=0),
        ("agent", {"method": "turn/completed", "params": _turn("interrupted")}),
    ])
    done = _of(events, "item.completed")[0]
    assert done["synthetic"] and done["payload"]["text"] == "Plan it.\n\nThen é.\n\nraw"


def test_long_streams_keep_the_session_small_and_complete_whole_from_the_spool():
    # 2,000 deltas of 1 KiB each: a command whose completion has no aggregatedOutput
    # (the output is the deltas), then an answer whose turn is interrupted (the
    # synthetic completion carries the streamed text); the session is encoded and
    # decoded between records, as the worker's table stores it
    chunks = [f"{i:05d}" + "é" * 1018 + "\n" for i in range(2000)]  # 1,024 characters
    output, answer = "".join(chunks), "".join(c.upper() for c in chunks)
    cmd = {"type": "commandExecution", "id": "c", "command": "x", "cwd": "/w",
           "commandActions": [], "status": "inProgress"}
    lines = capture_lines([
        *_started(),
        _item("item/started", cmd),
        *[_delta("item/commandExecution/outputDelta", "c", c) for c in chunks],
        _item("item/completed", {**cmd, "status": "completed", "exitCode": 0,
                                 "aggregatedOutput": None}),
        _item("item/started", {"type": "agentMessage", "id": "m", "text": "", "phase": None}),
        *[_delta("item/agentMessage/delta", "m", c.upper()) for c in chunks],
        ("agent", {"method": "turn/completed", "params": _turn("interrupted")}),
    ])
    translator = get("codex")
    enc, dec = msgspec.msgpack.Encoder(), msgspec.msgpack.Decoder(Session[adapter.State])
    session, spool = new_session(translator), MemorySpool()
    encoded: list[bytes] = []
    largest = 0
    for n, line in enumerate(lines, 1):
        # a cap above the streams: the spool is checked here, not the cap
        session, got, failures = translate_record(translator, dec.decode(enc.encode(session)),
                                                  "s1", [line], offset=n, spool=spool,
                                                  cap=16 << 20)
        assert not failures
        encoded.extend(encode_event(e) for e in got)
        largest = max(largest, len(enc.encode(session)))
        if n == len(chunks) + 3:  # the command completed: its chunks are gone
            assert len(spool) == 0 and not session.streams
    assert largest < 4096, largest
    assert len(spool) == 0 and not session.streams
    events = events_of(encoded)
    deltas: dict[str, list[str]] = {}
    for e in _of(events, "content.delta"):
        deltas.setdefault(e["payload"]["streamKind"], []).append(e["payload"]["delta"])
    assert "".join(deltas["command_output"]) == output
    assert "".join(deltas["assistant_text"]) == answer
    done = {e["providerRefs"]["providerItemId"]: e for e in _of(events, "item.completed")}
    assert done["c"]["payload"]["output"] == output and not done["c"]["synthetic"]
    assert done["m"]["payload"]["text"] == answer and done["m"]["synthetic"]
    assert "outputTruncated" not in done["c"]["payload"]
    assert "textTruncated" not in done["m"]["payload"]
    assert_envelope_invariants(events)


def test_a_delta_before_its_item_opens_the_turn_and_a_stub_item():
    msg = {"type": "agentMessage", "id": "m", "text": "", "phase": "commentary"}
    events = _run([
        _delta("item/agentMessage/delta", "m", "Early "),
        _item("item/started", msg),  # late start: adds nothing
        _delta("item/agentMessage/delta", "m", "text."),
        ("agent", {"method": "turn/completed", "params": _turn()}),
    ])
    assert [(e["type"], e["synthetic"]) for e in events] == [
        ("session.started", True), ("thread.started", True), ("turn.started", True),
        ("item.started", True), ("content.delta", False), ("content.delta", False),
        ("item.completed", True), ("turn.completed", False)]
    done = _of(events, "item.completed")[0]["payload"]
    assert (done["text"], done["status"]) == ("Early text.", "completed")
    assert_envelope_invariants(events)


def test_a_request_is_resolved_once_and_an_unanswered_one_stays_open():
    approval = {"threadId": T, "turnId": U, "itemId": "c", "startedAtMs": 0}
    lines = capture_lines([
        *_started(),
        ("agent", {"id": 0, "method": "item/fileChange/requestApproval", "params": approval}),
        ("agent", {"id": 1, "method": "item/fileChange/requestApproval", "params": approval}),
        ("agent", {"method": "serverRequest/resolved", "params": {"threadId": T, "requestId": 0}}),
        ("client", {"id": 0, "result": {"decision": "accept"}}),  # late: already resolved
        ("agent", {"method": "turn/completed", "params": _turn()}),
    ])
    events = events_of(run_whole("codex", lines))
    assert [e["providerRefs"]["providerRequestId"] for e in _of(events, "request.resolved")] == ["0"]
    session = _session_after(lines)
    assert list(session.state.requests) == ["1"]  # never answered: still open, not lost


def _session_after(lines: list[Line]) -> Session[Any]:
    translator = get("codex")
    session, spool = new_session(translator), MemorySpool()
    for n, line in enumerate(lines):
        session, _, failures = translate_record(translator, session, "s1", [line], offset=n,
                                                spool=spool)
        assert not failures
    return session


@pytest.mark.parametrize(("decision", "verb"), [
    ("cancel", "cancel"),
    ({"acceptWithExecpolicyAmendment": {"execpolicy_amendment": ["ls"]}}, "accept"),
    ({"applyNetworkPolicyAmendment": {"network_policy_amendment": {"host": "h", "action": "deny"}}},
     "decline"),
])
def test_approval_decisions_keep_the_amendment_object(decision: Any, verb: str):
    events = _run([
        ("agent", {"id": 3, "method": "item/commandExecution/requestApproval",
                   "params": {"threadId": T, "turnId": U, "itemId": "c", "startedAtMs": 0}}),
        ("client", {"id": 3, "result": {"decision": decision}}),
    ])
    payload = _of(events, "request.resolved")[0]["payload"]
    assert payload["decision"] == verb
    assert payload.get("resolution") == (decision if isinstance(decision, dict) else None)


@pytest.mark.parametrize(("info", "cls"), [
    ("internalServerError", "provider_error"),
    ({"responseStreamDisconnected": {"httpStatusCode": 502}}, "transport_error"),
    ("unauthorized", "permission_error"),
    ("badRequest", "validation_error"),
    (None, "provider_error"),
])
def test_error_notifications_keep_their_class_and_retry(info: Any, cls: str):
    events = _run([("agent", {"method": "error", "params": {
        "threadId": T, "turnId": U, "willRetry": True,
        "error": {"message": "boom", "codexErrorInfo": info}}})])
    payload = _of(events, "runtime.error")[0]["payload"]
    assert (payload["class"], payload["willRetry"], payload["message"]) == (cls, True, "boom")


def test_auth_refresh_answer_never_copies_the_token():
    events = _run([
        ("agent", {"id": 0, "method": "account/chatgptAuthTokens/refresh",
                   "params": {"reason": "unauthorized"}}),
        ("client", {"id": 0, "result": {"accessToken": "SECRET", "chatgptAccountId": "acc"}}),
    ])
    assert "SECRET" not in json.dumps(events)
    assert _of(events, "request.resolved")[0]["payload"]["resolution"] == {"chatgptAccountId": "acc"}


def test_state_drops_finished_work_and_survives_msgpack():
    lines = read_capture(CAPTURED[0]) if CAPTURED else []
    session = _session_after(lines)
    state = session.state
    assert not state.items and not state.turns and not state.requests and not state.pending
    assert msgspec.msgpack.decode(msgspec.msgpack.encode(state), type=adapter.State) == state


@pytest.mark.parametrize(("origin", "msg"), [
    ("agent", {"foo": 1}),
    ("agent", {"method": 5}),
    ("agent", {"method": "item/started", "params": [1]}),
    ("agent", {"method": "item/started", "params": {"item": {"type": "userMessage"}}}),
    ("agent", {"method": "turn/completed", "params": {"threadId": T}}),
    ("agent", {"id": True, "result": {}}),
    ("agent", {"id": [1], "method": "item/tool/call", "params": {}}),
    ("client", {"id": None, "method": "turn/start", "params": {}}),
    ("client", {"id": {}, "result": {"decision": "accept"}}),
])
def test_malformed_messages_are_malformed_records(origin: str, msg: dict[str, Any]):
    translator = get("codex")
    _, events, failures = translate_record(translator, new_session(translator), "s1",
                                           capture_lines([(origin, msg)]), offset=0)
    assert len(failures) == 1 and isinstance(failures[0].error, AdapterError)
    assert not events


def test_unknown_methods_warn_with_the_raw_message_and_unknown_requests_open():
    events = _run([
        ("agent", {"method": "thread/hologram/updated", "params": {"threadId": T}}),
        ("agent", {"id": 5, "method": "item/hologram/request", "params": {"x": 1}}),
    ])
    warning = _of(events, "runtime.warning")[0]
    assert warning["raw"]["messageType"] == "thread/hologram/updated"
    assert warning["threadId"] == _cid("thr", T)
    opened = _of(events, "request.opened")[0]
    assert opened["payload"] == {"requestType": "unknown", "detail": "item/hologram/request",
                                 "args": {"x": 1}}
    assert opened["raw"]["messageType"] == "item/hologram/request"


# ---- properties ---------------------------------------------------------------------------------


_ANY_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=2) | st.dictionaries(st.text(max_size=3), inner,
                                                                max_size=2),
    max_leaves=4)
#: few distinct strings, so that generated ids collide (same item, turn or request)
_STRINGS = st.sampled_from(["", "a", "b", "id-1"]) | st.text(max_size=4)


def _merge(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    out = {**a, **{k: v for k, v in b.items() if k not in ("properties", "required")}}
    out["properties"] = {**a.get("properties", {}), **b.get("properties", {})}
    out["required"] = sorted(set(a.get("required", [])) | set(b.get("required", [])))
    return out


def _strategy(schema: Any, defs: dict[str, Any], depth: int = 0) -> st.SearchStrategy[Any]:
    """A Hypothesis strategy for the JSON Schema subset the Codex schemas use.

    (hypothesis-jsonschema 0.23.1 cannot draw objects with this Hypothesis: it calls the
    removed `many.more()`.) Deep recursion is cut by drawing only required fields."""
    if schema is True or schema == {}:
        return _ANY_JSON
    if "$ref" in schema:
        target = defs[schema["$ref"].rsplit("/", 1)[-1]]
        rest = {k: v for k, v in schema.items() if k != "$ref"}
        return _strategy(_merge(target, rest) if rest.get("properties") else target, defs,
                         depth + 1)
    if "allOf" in schema:
        merged = {k: v for k, v in schema.items() if k != "allOf"}
        for part in schema["allOf"]:
            while "$ref" in part:
                part = defs[part["$ref"].rsplit("/", 1)[-1]]
            merged = _merge(merged, part)
        return _strategy(merged, defs, depth)
    for key in ("oneOf", "anyOf"):
        if key in schema:
            base = {k: v for k, v in schema.items() if k != key}
            return st.one_of([_strategy(_merge(base, alt) if base.get("properties") or
                                        base.get("type") else alt, defs, depth)
                              for alt in schema[key]])
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    if "const" in schema:
        return st.just(schema["const"])
    kind = schema.get("type", "object" if "properties" in schema else None)
    if isinstance(kind, list):
        return st.one_of([_strategy({**schema, "type": k}, defs, depth) for k in kind])
    if kind == "object":
        props = schema.get("properties", {})
        required = set(schema.get("required", []))
        return st.fixed_dictionaries(
            {k: _strategy(props[k], defs, depth + 1) for k in props if k in required},
            optional={} if depth > 6 else {k: _strategy(v, defs, depth + 1)
                                            for k, v in props.items() if k not in required})
    if kind == "array":
        items = schema.get("items", True)
        return st.lists(_strategy(items, defs, depth + 1), max_size=0 if depth > 6 else 2)
    if kind == "string":
        return _STRINGS
    if kind == "integer":
        return st.integers(min_value=int(schema.get("minimum", -2)), max_value=3)
    if kind == "number":
        return st.integers(0, 3) | st.floats(0, 10, allow_nan=False)
    if kind == "boolean":
        return st.booleans()
    if kind == "null":
        return st.none()
    return _ANY_JSON


@cache
def _message_strategies() -> dict[str, st.SearchStrategy[list[tuple[str, Any]]]]:
    """Per schema method: the lines of one message, a server request followed (or
    not) by the client's answer drawn from the method's response schema."""
    out: dict[str, st.SearchStrategy[list[tuple[str, Any]]]] = {}
    for name, is_request in (("ServerNotification.json", False), ("ServerRequest.json", True)):
        doc = _schema(name)
        for variant in doc["oneOf"]:
            method = variant["properties"]["method"]["enum"][0]
            params = _strategy(variant["properties"]["params"], doc["definitions"])
            if not is_request:
                out[method] = params.map(lambda p, m=method: [("agent", {"method": m, "params": p})])
                continue
            ref = variant["properties"]["params"]["$ref"].rsplit("/", 1)[-1]
            response = _schema(ref.replace("Params", "Response") + ".json")
            answer = _strategy(response, response.get("definitions", {}))
            out[method] = st.tuples(params, st.integers(0, 2), st.none() | answer).map(
                lambda t, m=method: [("agent", {"id": t[1], "method": m, "params": t[0]})]
                + ([("client", {"id": t[1], "result": t[2]})] if t[2] is not None else []))
    return out


#: the methods that share items, turns and requests: drawn together, they interleave
_LIFECYCLE = ("item/", "turn/", "serverRequest/", "error", "applyPatchApproval",
              "execCommandApproval", "account/chatgptAuthTokens", "mcpServer/elicitation")


def _conversations(only_lifecycle: bool) -> st.SearchStrategy[list[tuple[str, Any]]]:
    strategies = [s for m, s in sorted(_message_strategies().items())
                  if not only_lifecycle or m.startswith(_LIFECYCLE)]
    return st.lists(st.one_of(strategies), min_size=1, max_size=10).map(
        lambda pieces: [m for piece in pieces for m in piece])


_PROPERTY = settings(max_examples=80, deadline=None, database=None,
                     suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                            HealthCheck.filter_too_much])


@NO_SCHEMAS
@pytest.mark.parametrize("only_lifecycle", [False, True], ids=["all-methods", "lifecycle"])
def test_schema_generated_conversations_translate_without_failure_or_warning(only_lifecycle: bool):
    codec = msgspec.msgpack.Decoder(Session[adapter.State])

    @_PROPERTY
    @given(_conversations(only_lifecycle))
    def check(messages: list[tuple[str, Any]]) -> None:
        translator = get("codex")
        session, spool = new_session(translator), MemorySpool()
        for n, line in enumerate(capture_lines(messages)):
            session, events, failures = translate_record(translator, session, "s1", [line],
                                                         offset=n, spool=spool)
            assert not failures, f"{line.data!r}: {failures[0].error}"
            assert not [e for e in events if e.__struct_config__.tag == "runtime.warning"], \
                line.data
            for e in events:
                encode_event(e)
            assert codec.decode(msgspec.msgpack.encode(session)) == session

    check()


@settings(max_examples=150, deadline=None, database=None)
@given(st.sampled_from(["agent", "client"]),
       st.dictionaries(st.sampled_from(["id", "method", "params", "result", "error"]),
                       st.sampled_from(["item/started", "item/completed", "turn/completed",
                                        "item/agentMessage/delta", "serverRequest/resolved",
                                        "item/tool/call", "error", "turn/started"]) | _ANY_JSON,
                       max_size=4))
def test_any_message_translates_or_raises_adapter_error(origin: str, msg: dict[str, Any]):
    translator = get("codex")
    lines = [Line(json.dumps(msg).encode(), origin)]  # type: ignore[arg-type]
    # translate_record turns every AdapterError into a failure; anything else escapes,
    # and bad input is a MalformedRecord (an InternalError would be canonflow's bug)
    _, _, failures = translate_record(translator, new_session(translator), "s1", lines, offset=0)
    assert all(isinstance(f.error, MalformedRecord) for f in failures), failures


def test_past_the_default_cap_a_completion_carries_head_tail_length_and_the_deltas_digest():
    """At the default cap (64 KiB), a 200 KiB command output and an interrupted 200 KiB
    answer: their completions are cut with the whole's length and SHA-256, which is
    the SHA-256 of the deltas joined; fed whole, record by record and resumed at
    every cut (the digest's midstate stored in the session between records), the
    events are the same."""
    import hashlib

    chunks = [f"{i:05d}" + "é" * 1018 + "\n" for i in range(200)]
    output, answer = "".join(chunks), "".join(c.upper() for c in chunks)
    cmd = {"type": "commandExecution", "id": "c", "command": "x", "cwd": "/w",
           "commandActions": [], "status": "inProgress"}
    lines = capture_lines([
        *_started(),
        _item("item/started", cmd),
        *[_delta("item/commandExecution/outputDelta", "c", c) for c in chunks],
        _item("item/completed", {**cmd, "status": "completed", "exitCode": 0,
                                 "aggregatedOutput": None}),
        _item("item/started", {"type": "agentMessage", "id": "m", "text": "", "phase": None}),
        *[_delta("item/agentMessage/delta", "m", c.upper()) for c in chunks],
        ("agent", {"method": "turn/completed", "params": _turn("interrupted")}),
    ])
    events = events_of(assert_three_ways("codex", lines))
    done = {e["providerRefs"]["providerItemId"]: e["payload"]
            for e in _of(events, "item.completed")}
    for got, field, whole in ((done["c"], "output", output), (done["m"], "text", answer)):
        assert got[field + "Truncated"] is True and got[field + "Length"] == len(whole)
        assert got[field + "Sha256"] == hashlib.sha256(whole.encode()).hexdigest()
        head, _, rest = got[field].partition("\n[canonflow: ")
        cut, _, tail = rest.partition(" characters left out]\n")
        assert whole.startswith(head) and whole.endswith(tail)
        assert len(head) + int(cut) + len(tail) == len(whole)
        assert len(got[field].encode()) <= 64 * 1024 + 100
