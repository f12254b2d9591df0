"""acp: the captured ACP conversations, the golden messages against the v1 schema,
and the behaviours the captures do not show (observations, seed 002 §5)."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from adapters.acp import translator as acp
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

CAPTURED = sorted((Path(__file__).parents[1] / "fixtures" / "captured" / "acp")
                  .glob("*.capture.jsonl"))
SCHEMA_DIR = SHARED / "protocols" / "acp" / "schema-v1"
NO_SCHEMA = pytest.mark.skipif(not (SCHEMA_DIR / "schema.json").exists(),
                               reason="../shared/protocols/acp is absent (the ACP schema is read "
                                      "from ../shared, never copied into the project)")
SID = "sess_1"


def _expect(path: Path) -> dict[str, Any]:
    return json.loads(path.with_name(path.name.replace(".capture.jsonl", ".expect.json")).read_text())


def _of(events: list[dict[str, Any]], *types: str) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] in types]


# ---- the captured conversations ------------------------------------------------


@pytest.mark.parametrize("path", CAPTURED, ids=[p.stem for p in CAPTURED])
def test_captured_conversation_translates_completely(path: Path):
    expect = _expect(path)
    events = events_of(assert_three_ways("acp", read_capture(path)))
    assert_envelope_invariants(events)
    assert assistant_texts(events) == [t["text"] for t in expect["assistant_texts"]]
    assert not _of(events, "runtime.warning")
    tools = [e for e in _of(events, "item.completed")
             if e["payload"]["itemType"] not in ("assistant_message", "user_message", "reasoning")]
    assert [t["providerRefs"]["providerItemId"] for t in tools] == [
        t["id"] for t in expect["tool_calls"]]
    for done, want in zip(tools, expect["tool_calls"], strict=True):
        assert done["payload"]["isError"] is want["is_error"]
        if want["output"] is not None:
            assert done["payload"]["output"] == want["output"]
    opened = _of(events, "request.opened")
    assert [e["providerRefs"]["providerRequestId"] for e in opened] == [
        r["id"] for r in expect["requests"]]
    assert len(_of(events, "request.resolved")) == len(opened)
    assert [e["payload"]["state"] for e in _of(events, "turn.completed")] == expect["turn_states"]


def test_claude_code_duplicate_tool_call_is_one_item_with_the_richer_input():
    path = next(p for p in CAPTURED if "claude-code__tool_shell" in p.name)
    events = events_of(run_whole("acp", read_capture(path)))
    bash = [e for e in events if e["type"].startswith("item.") and e["payload"].get("toolName") == "Bash"]
    assert [e["type"] for e in bash] == ["item.started", "item.updated", "item.completed"]
    assert bash[-1]["payload"]["input"] == {"command": "touch fixture-approval.txt",
                                           "description": "Run fixture command",
                                           "cwd": "/sandbox/workspace"}  # the session's
    assert bash[-1]["payload"]["itemType"] == "command_execution"


def test_gemini_permission_request_starts_the_tool_item():
    path = next(p for p in CAPTURED if "gemini__tool_shell" in p.name)
    events = events_of(run_whole("acp", read_capture(path)))
    started = _of(events, "item.started")[-2]  # the tool, before the second text
    assert started["payload"]["toolName"] == "Bash"
    assert started["payload"]["input"] == {"command": "touch fixture-approval.txt",
                                           "cwd": "/sandbox/workspace"}
    opened = _of(events, "request.opened")[0]
    assert opened["itemId"] == started["itemId"]
    assert opened["payload"]["requestType"] == "command_execution_approval"


# ---- the golden messages are real ACP v1 --------------------------------------------


@cache
def _defs(name: str) -> dict[str, Any]:
    return json.loads((SCHEMA_DIR / name).read_text())


@cache
def _validators() -> tuple[Any, Any]:
    from jsonschema import Draft202012Validator

    stable, unstable = _defs("schema.json"), _defs("schema.unstable.json")
    return Draft202012Validator(stable), Draft202012Validator(unstable)


def _named(schema: dict[str, Any], method: str, suffix: str) -> str | None:
    """The $defs entry for `method`'s Request / Response / Notification."""
    for name, d in schema["$defs"].items():
        if d.get("x-method") == method and name.endswith(suffix):
            return name
    return None


def _check(validator: Any, name: str, value: Any) -> list[str]:
    sub = {"$ref": f"#/$defs/{name}", "$defs": validator.schema["$defs"]}
    return [e.message for e in type(validator)(sub).iter_errors(value)]


def _schema_errors(msg: dict[str, Any], pending: dict[tuple[str, str], str],
                   origin: str) -> list[str]:
    """Why `msg` is not ACP v1 (stable, else unstable); [] when it is."""
    stable, unstable = _validators()
    errors = [e.message for e in stable.iter_errors(msg)]
    if errors:
        return errors
    method = msg.get("method")
    if method is not None:
        suffix = "Request" if "id" in msg else "Notification"
        if "id" in msg:
            pending[(origin, json.dumps(msg["id"]))] = method
        if method.startswith("_"):
            return []  # extension methods: any params
    else:
        asker = "agent" if origin == "client" else "client"
        method = pending.pop((asker, json.dumps(msg["id"])), None)
        if method is None or method.startswith("_"):
            return [] if method else ["a response to no request"]
        suffix = "Response"
        if "error" in msg:
            return _check(stable, "Error", msg["error"])
    value = msg.get("params") if suffix != "Response" else msg.get("result")
    for validator in (stable, unstable):
        name = _named(validator.schema, method, suffix)
        if name is None:
            continue
        # JSON-RPC libraries send `null` for an empty result (claude-code-acp does)
        if value is None and suffix == "Response" and not validator.schema["$defs"][name].get("required"):
            return []
        if not _check(validator, name, value):
            return []
    return [f"{method} {suffix.lower()} matches neither the stable nor the unstable schema"]


GOLDEN_INPUTS = sorted((GOLDENS / "acp").glob("*.in.jsonl"))


@NO_SCHEMA
@pytest.mark.parametrize("path", GOLDEN_INPUTS, ids=[p.name for p in GOLDEN_INPUTS])
def test_every_golden_message_is_valid_acp_v1(path: Path):
    pending: dict[tuple[str, str], str] = {}
    for n, raw in enumerate(path.read_text().splitlines(), 1):
        line = json.loads(raw)
        errors = _schema_errors(line["msg"], pending, line["origin"])
        assert not errors, f"{path.name} line {n}: {errors[:3]}"


@NO_SCHEMA
@pytest.mark.parametrize("path", CAPTURED, ids=[p.stem for p in CAPTURED])
def test_every_captured_message_is_valid_acp_v1(path: Path):
    pending: dict[tuple[str, str], str] = {}
    for n, raw in enumerate(path.read_text().splitlines(), 1):
        line = json.loads(raw)
        assert not _schema_errors(line["msg"], pending, line["origin"]), f"line {n}"


@NO_SCHEMA
def test_every_session_update_kind_of_the_schema_is_mapped_or_ignored():
    kinds = [o["properties"]["sessionUpdate"]["const"]
             for o in _defs("schema.json")["$defs"]["SessionUpdate"]["oneOf"]]
    assert kinds, "no SessionUpdate kinds found in the schema"
    unmapped = [k for k in kinds if k not in acp._UPDATES and k not in acp.IGNORED]
    assert not unmapped


@NO_SCHEMA
def test_every_method_of_the_schema_is_mapped_or_ignored():
    meta = _defs("meta.json")
    methods = {*meta["agentMethods"].values(), *meta["clientMethods"].values(),
               *meta["protocolMethods"].values()}
    handled = {*acp._AGENT_REQUESTS, *acp._CLIENT_REQUESTS, "session/update", *acp.IGNORED}
    assert methods - handled == set()


# ---- behaviours ------------------------------------------------------------------


def _rpc(**m: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", **m}


def _update(**u: Any) -> dict[str, Any]:
    return _rpc(method="session/update", params={"sessionId": SID, "update": u})


def _session(*rest: tuple[str, Any]) -> list[tuple[str, Any]]:
    return [("client", _rpc(id=1, method="session/new", params={"cwd": "/w", "mcpServers": []})),
            ("agent", _rpc(id=1, result={"sessionId": SID})),
            ("client", _rpc(id=2, method="session/prompt",
                            params={"sessionId": SID, "prompt": [{"type": "text", "text": "go"}]})),
            *rest]


def test_client_and_agent_request_ids_are_kept_apart():
    # the agent's request id 2 collides with the client's session/prompt id 2
    lines = capture_lines(_session(
        ("agent", _rpc(id=2, method="fs/read_text_file", params={"sessionId": SID, "path": "/w/a"})),
        ("client", _rpc(id=2, result={"content": "file a"})),
        ("agent", _rpc(id=2, result={"stopReason": "end_turn"})),
    ))
    events = events_of(assert_three_ways("acp", lines))
    assert_envelope_invariants(events)
    read = _of(events, "item.completed")[-1]["payload"]
    assert (read["toolName"], read["output"], read["input"]) == ("Read", "file a", {"file_path": "/w/a"})
    assert [e["payload"]["state"] for e in _of(events, "turn.completed")] == ["completed"]


def test_native_replay_without_origins_still_pairs_responses():
    lines = capture_lines([(("agent"), m) for _, m in _session(
        ("agent", _update(sessionUpdate="agent_message_chunk", content={"type": "text", "text": "hi"})),
        ("agent", _rpc(id=2, result={"stopReason": "end_turn"})))])
    events = events_of(run_whole("acp", lines))
    assert [e["type"] for e in events][-2:] == ["item.completed", "turn.completed"]
    assert not _of(events, "runtime.warning")


def test_tool_call_update_is_a_partial_merge():
    tc = "call_1"
    lines = capture_lines(_session(
        ("agent", _update(sessionUpdate="tool_call", toolCallId=tc, title="Read a.py", kind="read",
                          rawInput={"path": "/w/a.py"}, locations=[{"path": "/w/a.py"}])),
        ("agent", _update(sessionUpdate="tool_call_update", toolCallId=tc, status="in_progress")),
        ("agent", _update(sessionUpdate="tool_call_update", toolCallId=tc, status="completed",
                          content=[{"type": "content", "content": {"type": "text", "text": "print(1)"}}])),
        ("agent", _rpc(id=2, result={"stopReason": "end_turn"})),
    ))
    events = events_of(assert_three_ways("acp", lines))
    done = _of(events, "item.completed")[-1]["payload"]
    assert done["title"] == "Read a.py" and done["toolName"] == "Read"
    assert done["input"] == {"path": "/w/a.py", "file_path": "/w/a.py"}
    assert (done["status"], done["output"], done["isError"]) == ("completed", "print(1)", False)


def test_rejected_permission_without_a_tool_report_closes_the_tool_declined():
    lines = capture_lines(_session(
        ("agent", _rpc(id=0, method="session/request_permission", params={
            "sessionId": SID, "toolCall": {"toolCallId": "t1", "title": "rm -rf x", "kind": "execute"},
            "options": [{"optionId": "no", "name": "Reject", "kind": "reject_once"}]})),
        ("client", _rpc(id=0, result={"outcome": {"outcome": "selected", "optionId": "no"}})),
        ("agent", _rpc(id=2, result={"stopReason": "end_turn"})),
    ))
    events = events_of(assert_three_ways("acp", lines))
    resolved = _of(events, "request.resolved")[0]["payload"]
    assert resolved["decision"] == "reject_once" and resolved["resolution"]["optionId"] == "no"
    tool = _of(events, "item.completed")[-1]["payload"]
    assert (tool["status"], tool["toolName"], tool["input"]) == (
        "declined", "Bash", {"command": "rm -rf x", "cwd": "/w"})


def test_prompt_error_is_a_runtime_error_and_a_failed_turn():
    lines = capture_lines(_session(
        ("agent", _update(sessionUpdate="agent_message_chunk", content={"type": "text", "text": "x"})),
        ("agent", _rpc(id=2, error={"code": -32603, "message": "Internal error", "data": {"k": 1}})),
    ))
    events = events_of(assert_three_ways("acp", lines))
    assert [e["type"] for e in events][-3:] == ["item.completed", "runtime.error", "turn.completed"]
    err = _of(events, "runtime.error")[0]["payload"]
    assert (err["class"], err["detail"]["data"]) == ("provider_error", {"k": 1})
    assert _of(events, "turn.completed")[0]["payload"]["state"] == "failed"


@pytest.mark.parametrize("code, cls", [(-32601, "validation_error"), (-32602, "validation_error"),
                                       (-32000, "permission_error"), (-32603, "provider_error"),
                                       (500, "provider_error")])
def test_error_codes_map_to_error_classes(code: int, cls: str):
    lines = capture_lines([("client", _rpc(id=9, method="session/set_mode",
                                           params={"sessionId": SID, "modeId": "m"})),
                           ("agent", _rpc(id=9, error={"code": code, "message": "no"}))])
    assert events_of(run_whole("acp", lines))[0]["payload"]["class"] == cls


def test_a_new_prompt_supersedes_the_open_one():
    lines = capture_lines(_session(
        ("client", _rpc(id=3, method="session/prompt",
                        params={"sessionId": SID, "prompt": [{"type": "text", "text": "again"}]})),
        ("agent", _rpc(id=2, result={"stopReason": "cancelled"})),
        ("agent", _rpc(id=3, result={"stopReason": "end_turn"})),
    ))
    events = events_of(assert_three_ways("acp", lines))
    assert_envelope_invariants(events)
    assert [e["payload"]["state"] for e in _of(events, "turn.completed")] == ["cancelled", "completed"]


def test_unknown_session_update_kind_is_a_warning_carrying_the_raw_message():
    lines = capture_lines(_session(("agent", _update(sessionUpdate="brand_new_kind", x=1))))
    warning = _of(events_of(run_whole("acp", lines)), "runtime.warning")[0]
    assert warning["payload"]["detail"] == {"nativeType": "brand_new_kind"}
    assert warning["raw"]["payload"]["params"]["update"]["x"] == 1


def test_wrong_shapes_are_malformed_records():
    from adapters import Line, new_session, translate_record

    for bad in (b'{"jsonrpc":"2.0"}', b'{"jsonrpc":"2.0","method":3}',
                b'{"jsonrpc":"2.0","method":"session/update","params":{"update":{"x":1}}}',
                b'{"jsonrpc":"2.0","id":true,"result":{}}'):
        _, events, failures = translate_record(acp, new_session(acp), "s", [Line(bad)], offset=0)  # type: ignore[arg-type]
        assert not events and len(failures) == 1


def test_state_survives_msgpack_and_drops_completed_items():
    import msgspec

    lines = capture_lines(_session(
        ("agent", _update(sessionUpdate="tool_call", toolCallId="t", title="x", kind="execute",
                          status="completed", rawInput={"command": "true"})),
        ("agent", _rpc(id=2, result={"stopReason": "end_turn"}))))
    from adapters import new_session, translate_record

    session = new_session(acp)
    for n, line in enumerate(lines):
        session, _, failures = translate_record(acp, session, "s", [line], offset=n)  # type: ignore[arg-type]
        assert not failures
    state = session.state
    assert msgspec.msgpack.decode(msgspec.msgpack.encode(state), type=acp.State) == state
    assert state.tools == {} and state.client == {} and state.agent == {}


def test_a_long_answer_and_command_output_are_spooled_not_kept_in_the_session():
    """2,000 answer chunks of 1 KiB and a command whose terminal output is polled as
    growing snapshots (ACP never sends tool output as deltas), fed record by record:
    the stored session stays small, the completed items carry everything."""
    import msgspec

    from adapters import MemorySpool, Session, new_session, translate_record
    from topics.canonical import ContentDelta, ItemCompleted

    chunks = [f"{i:05d}" + "abcdefgh" * 127 + "\n" for i in range(2000)]  # 1 KiB each
    answer = "".join(chunks)
    output = "".join(f"{i:04d} " + "o" * 16378 + "\n" for i in range(64))  # 1 MiB, 64 polls
    polls = [output[:(i + 1) * 16384] for i in range(64)]
    tc, term = "call_long", "term-1"
    lines = capture_lines(_session(
        ("agent", _update(sessionUpdate="tool_call", toolCallId=tc, title="make", kind="execute",
                          status="pending", rawInput={"command": "make"})),
        ("agent", _rpc(id=0, method="terminal/create", params={"sessionId": SID, "command": "make"})),
        ("client", _rpc(id=0, result={"terminalId": term})),
        ("agent", _update(sessionUpdate="tool_call_update", toolCallId=tc, status="in_progress",
                          content=[{"type": "terminal", "terminalId": term}])),
        *[m for n, p in enumerate(polls, 1) for m in (
            ("agent", _rpc(id=n, method="terminal/output",
                           params={"sessionId": SID, "terminalId": term})),
            ("client", _rpc(id=n, result={"output": p, "truncated": False})))],
        ("agent", _update(sessionUpdate="tool_call_update", toolCallId=tc, status="completed")),
        *[("agent", _update(sessionUpdate="agent_message_chunk",
                            content={"type": "text", "text": c})) for c in chunks],
        ("agent", _rpc(id=2, result={"stopReason": "end_turn"})),
    ))
    enc, dec = msgspec.msgpack.Encoder(), msgspec.msgpack.Decoder(Session[acp.State])
    session, spool, events, sizes = new_session(acp), MemorySpool(), [], []
    for n, line in enumerate(lines, 1):
        # a cap above the streams: the spool is checked here, not the cap
        session, evs, failures = translate_record(acp, session, "s", [line], offset=n,  # type: ignore[arg-type]
                                                  spool=spool, cap=16 << 20)
        assert not failures
        events += [e for e in evs if isinstance(e, (ContentDelta, ItemCompleted))]
        encoded = enc.encode(session)
        sizes.append(len(encoded))
        session = dec.decode(encoded)
    assert max(sizes) < 4096, max(sizes)
    assert "".join(e.payload.delta for e in events if isinstance(e, ContentDelta)) == answer
    done = [e.payload for e in events if isinstance(e, ItemCompleted)]
    bash = next(p for p in done if p.toolName == "Bash")
    assert (bash.output, bash.outputTruncated, bash.status) == (output, msgspec.UNSET, "completed")
    assert done[-1].itemType == "assistant_message" and done[-1].text == answer
    assert len(spool) == 0 and session.streams == {}


# ---- claude-agent-acp (@agentclientprotocol/claude-agent-acp, the successor of
# @zed-industries/claude-code-acp): message shapes as its source emits them -------------


def _claude_bash(tc: str, command: str, description: str, done: dict[str, Any]
                 ) -> list[tuple[str, Any]]:
    """A Bash call as claude-agent-acp reports it to a client without the terminal
    extension: the streamed tool_use (`rawInput: {}`), the full input with the
    description as text content, then the tool_result (rawOutput, content)."""
    meta = {"claudeCode": {"toolName": "Bash"}}
    return [
        ("agent", _update(sessionUpdate="tool_call", toolCallId=tc, _meta=meta, name="Bash",
                          rawInput={}, status="pending", title="Terminal", kind="execute",
                          content=[])),
        ("agent", _update(sessionUpdate="tool_call_update", toolCallId=tc, _meta=meta,
                          rawInput={"command": command, "description": description},
                          title=command, kind="execute",
                          content=[{"type": "content",
                                    "content": {"type": "text", "text": description}}])),
        ("agent", _update(sessionUpdate="tool_call_update", toolCallId=tc,
                          **{"_meta": meta, **done})),
    ]


def test_claude_agent_acp_command_without_output_does_not_output_its_description():
    lines = capture_lines(_session(
        *_claude_bash("toolu_1", "touch marker", "Create the marker",
                      {"status": "completed", "rawOutput": ""}),
        ("agent", _rpc(id=2, result={"stopReason": "end_turn"}))))
    events = events_of(assert_three_ways("acp", lines))
    done = _of(events, "item.completed")[-1]["payload"]
    assert (done["toolName"], done["itemType"], done["status"]) == (
        "Bash", "command_execution", "completed")
    assert done["output"] == ""
    assert (done["title"], done["detail"]) == ("touch marker", "Create the marker")
    assert done["input"] == {"command": "touch marker", "description": "Create the marker",
                             "cwd": "/w"}
    updated = _of(events, "item.updated")[-1]["payload"]
    assert "output" not in updated and updated["detail"] == "Create the marker"


def test_claude_agent_acp_command_output_is_its_result_not_its_description():
    result = {"status": "completed", "rawOutput": "fixture-ok",
              "content": [{"type": "content", "content": {
                  "type": "text", "text": "```console\nfixture-ok\n```"}}]}
    lines = capture_lines(_session(
        *_claude_bash("toolu_2", "printf 'fixture-ok\\n'", "Run fixture command", result),
        ("agent", _rpc(id=2, result={"stopReason": "end_turn"}))))
    done = _of(events_of(assert_three_ways("acp", lines)), "item.completed")[-1]["payload"]
    assert done["output"] == "```console\nfixture-ok\n```"
    assert "Run fixture command" not in done["output"]
    assert done["detail"] == "Run fixture command"


def test_claude_agent_acp_result_without_content_is_read_from_raw_output_or_tool_response():
    # the PostToolUse hook's update carries the structured result; the tool_result a
    # rawOutput of text blocks
    hook = {"_meta": {"claudeCode": {"toolName": "Bash", "toolResponse": {
        "stdout": "a.ts\nb.ts", "stderr": "", "interrupted": False, "isImage": False}}}}
    lines = capture_lines(_session(
        *_claude_bash("toolu_3", "ls", "List files", hook),
        ("agent", _update(sessionUpdate="tool_call_update", toolCallId="toolu_3",
                          status="completed", _meta={"terminal_exit": {
                              "terminal_id": "toolu_3", "exit_code": 0, "signal": None}})),
        *_claude_bash("toolu_4", "ls src", "List sources",
                      {"status": "completed",
                       "rawOutput": [{"type": "text", "text": "app.ts"}]}),
        ("agent", _rpc(id=2, result={"stopReason": "end_turn"}))))
    done = [e["payload"] for e in _of(events_of(assert_three_ways("acp", lines)),
                                      "item.completed")][-2:]
    assert [(d["output"], d["detail"], d.get("exitCode")) for d in done] == [
        ("a.ts\nb.ts", "List files", 0), ("app.ts", "List sources", None)]


def test_a_chunk_without_message_id_is_its_own_message():
    # claude-agent-acp's informational chunks carry no messageId; the answer's do
    note = "Note: bypassPermissions is not available when running as root."
    lines = capture_lines(_session(
        ("agent", _update(sessionUpdate="agent_message_chunk",
                          content={"type": "text", "text": note})),
        ("agent", _update(sessionUpdate="agent_message_chunk", messageId="msg_1",
                          content={"type": "text", "text": "Hello "})),
        ("agent", _update(sessionUpdate="agent_message_chunk", messageId="msg_1",
                          content={"type": "text", "text": "there."})),
        ("agent", _update(sessionUpdate="agent_message_chunk",
                          content={"type": "text", "text": "Compacting..."})),
        ("agent", _rpc(id=2, result={"stopReason": "end_turn"}))))
    events = events_of(assert_three_ways("acp", lines))
    assert assistant_texts(events) == [note, "Hello there.", "Compacting..."]
    refs = [e.get("providerRefs", {}).get("providerItemId")
            for e in _of(events, "item.completed")
            if e["payload"]["itemType"] == "assistant_message"]
    assert refs == [None, "msg_1", None]


def test_chunks_without_message_ids_still_form_one_message():
    lines = capture_lines(_session(
        *[("agent", _update(sessionUpdate="agent_message_chunk",
                            content={"type": "text", "text": t})) for t in ("a", "b", "c")],
        ("agent", _rpc(id=2, result={"stopReason": "end_turn"}))))
    assert assistant_texts(events_of(assert_three_ways("acp", lines))) == ["abc"]


def test_auth_status_update_is_auth_status_and_account():
    status = {"kind": "account", "label": "Claude Max",
              "account": {"plan": "max", "email": "dev@example.com"}}
    lines = capture_lines([
        ("agent", _rpc(method="_auth/status_update", params={"authStatus": status})),
        ("agent", _rpc(method="_auth/status_update", params={
            "authStatus": {"kind": "none", "label": "Not logged in"}}))])
    events = events_of(assert_three_ways("acp", lines))
    assert not _of(events, "runtime.warning")
    auth = [e["payload"] for e in _of(events, "auth.status")]
    assert auth == [{"isAuthenticating": False, "output": ["Claude Max"]},
                    {"isAuthenticating": False, "output": ["Not logged in"],
                     "error": "Not logged in"}]
    assert [e["payload"]["account"] for e in _of(events, "account.updated")] == [
        status, {"kind": "none", "label": "Not logged in"}]


def test_session_info_and_usage_updates_are_thread_metadata_and_token_usage():
    lines = capture_lines(_session(
        ("agent", _update(sessionUpdate="usage_update", used=3, size=200000,
                          cost={"amount": 0.25, "currency": "USD"},
                          _meta={"_claude/model": "claude-sonnet-4-6"})),
        ("agent", _rpc(id=2, result={"stopReason": "end_turn"})),
        ("agent", _update(sessionUpdate="session_info_update", title="Fix the bug",
                          updatedAt="2026-11-29T18:00:00.000Z")),
        ("agent", _update(sessionUpdate="session_info_update", title=None))))
    events = events_of(assert_three_ways("acp", lines))
    usage = _of(events, "thread.token-usage.updated")[0]
    assert usage["payload"]["usage"] == {"used": 3, "size": 200000,
                                         "cost": {"amount": 0.25, "currency": "USD"}}
    assert usage["turnId"]
    meta = [e["payload"] for e in _of(events, "thread.metadata.updated")]
    assert meta == [{"name": "Fix the bug", "metadata": {"updatedAt": "2026-11-29T18:00:00.000Z"}},
                    {"metadata": {"title": None}}]
