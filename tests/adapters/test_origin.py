"""Codex app-server and ACP messages that come without their origin (no `origin` header, a
capture line without `origin`, a native file): the translator reads who sent each one
from the message (`origin_of`), or the line is a dead letter (UnknownOrigin)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from adapters import Line, MemorySpool, get, new_session, translate_record
from adapters.acp import translator as acp
from adapters.codex import translator as codex
from adapters.core.contract import UnknownOrigin
from tests.adapters.harness import GOLDENS, SHARED, assert_three_ways, read_capture, run_whole
from topics.canonical import encode_event

CAPTURED = Path(__file__).resolve().parents[1] / "fixtures" / "captured"
CONVERSATIONS = sorted([*(CAPTURED / "codex").glob("*.capture.jsonl"),
                        *(CAPTURED / "acp").glob("*.capture.jsonl"),
                        *(GOLDENS / "codex").glob("*.in.jsonl"),
                        *(GOLDENS / "acp").glob("*.in.jsonl")])
#: the conversations with messages whose side cannot be told without their origin
#: (test_an_undecidable_message_is_a_dead_letter_and_the_rest_translate has them)
UNDECIDABLE = {"codex/unknown_method.in.jsonl", "acp/unknown_messages.in.jsonl",
               "acp/tools_permission_allowed.in.jsonl"}
CODEX_SCHEMAS = SHARED / "protocols" / "codex" / "app-server-json-schema"
ACP_SCHEMAS = SHARED / "protocols" / "acp"
NO_SCHEMAS = pytest.mark.skipif(
    not CODEX_SCHEMAS.is_dir() or not ACP_SCHEMAS.is_dir(),
    reason="../shared/protocols is absent (the schemas are read from ../shared, never copied "
           "into the project)")


def _provider(path: Path) -> str:
    return path.parent.name


def _stripped(lines: list[Line]) -> list[Line]:
    return [Line(line.data, None, line.time_ms) for line in lines]


def _run(provider: str, lines: list[Line]) -> tuple[list[dict[str, Any]], list[tuple[int, Any]]]:
    """(events, (line number, error) of every failed line), the lines fed one a record."""
    t = get(provider)
    session, spool = new_session(t), MemorySpool()
    events: list[dict[str, Any]] = []
    failed: list[tuple[int, Any]] = []
    for n, line in enumerate(lines, 1):
        session, got, failures = translate_record(t, session, "s1", [line], offset=n,
                                                  spool=spool)
        events += [json.loads(encode_event(e)) for e in got]
        failed += [(n, f.error) for f in failures]
    return events, failed


@pytest.mark.parametrize("path", [p for p in CONVERSATIONS
                                  if f"{_provider(p)}/{p.name}" not in UNDECIDABLE],
                         ids=lambda p: f"{_provider(p)}/{p.stem}")
def test_a_conversation_without_origins_gives_the_same_events(path: Path):
    provider, lines = _provider(path), read_capture(path)
    assert any(line.origin == "client" for line in lines)
    # raw.origin included: the side read from each message is the one the capture says
    assert run_whole(provider, _stripped(lines), include_raw=True) == \
        run_whole(provider, lines, include_raw=True)
    assert assert_three_ways(provider, _stripped(lines)) == run_whole(provider, lines)


def test_without_its_origin_the_client_is_not_taken_for_the_agent():
    """The Codex approval capture: its client requests (initialize, thread/start,
    turn/start) open no request, and the user's decision resolves the one real one."""
    lines = _stripped(read_capture(CAPTURED / "codex" / "codex-app-server__approval_accept"
                                               ".capture.jsonl"))
    events, failed = _run("codex", lines)
    assert not failed
    opened = [e for e in events if e["type"] == "request.opened"]
    resolved = [e for e in events if e["type"] == "request.resolved"]
    assert len(opened) == 1 and opened[0]["payload"]["requestType"] == "command_execution_approval"
    assert [e["requestId"] for e in resolved] == [opened[0]["requestId"]]
    assert resolved[0]["payload"]["decision"] == "accept"


@pytest.mark.parametrize("name", sorted(UNDECIDABLE))
def test_an_undecidable_message_is_a_dead_letter_and_the_rest_translate(name: str):
    provider, file = name.split("/")
    lines = read_capture(GOLDENS / provider / file)
    events, failed = _run(provider, _stripped(lines))
    assert failed and all(isinstance(e, UnknownOrigin) for _, e in failed)
    assert all("came without an origin" in str(e) for _, e in failed)
    # the lines that failed are the ones whose side the message does not settle; every
    # other line gives what it gives with its origin
    kept = [line for n, line in enumerate(lines, 1) if n not in {k for k, _ in failed}]
    assert events == _run(provider, kept)[0]


def _codex(messages: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[tuple[int, Any]]]:
    return _run("codex", [Line(json.dumps(m).encode(), None) for m in messages])


def _acp(messages: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[tuple[int, Any]]]:
    return _run("acp", [Line(json.dumps(m).encode(), None) for m in messages])


def test_a_response_is_the_side_opposite_the_request_it_answers():
    events, failed = _codex([
        {"id": 0, "method": "initialize", "params": {"clientInfo": {"name": "c", "version": "1"}}},
        {"id": 0, "result": {"userAgent": "c/0.171.0 (Linux; x86_64)"}},
        {"id": 5, "method": "item/commandExecution/requestApproval",
         "params": {"threadId": "t", "turnId": "u", "itemId": "i", "command": "ls"}},
        {"id": 5, "result": {"decision": "decline"}},
    ])
    assert not failed
    assert [e["type"] for e in events] == ["session.started", "request.opened",
                                           "request.resolved"]
    assert events[-1]["payload"]["decision"] == "decline"


def test_codex_messages_no_side_settles_are_dead_letters():
    events, failed = _codex([
        {"id": 1, "method": "thread/start", "params": {}},
        {"id": 1, "method": "item/commandExecution/requestApproval",
         "params": {"threadId": "t", "turnId": "u", "itemId": "i"}},
        {"id": 1, "result": {}},  # the server's answer, or the user's decision?
        {"id": 9, "result": {}},  # answers nothing in flight
        {"method": "thread/hologram/updated", "params": {}},  # no side defines it
    ])
    assert [(n, type(e)) for n, e in failed] == [(3, UnknownOrigin), (4, UnknownOrigin),
                                                 (5, UnknownOrigin)]
    assert "requests of both sides have that id in flight" in str(failed[0][1])
    assert "no request has that id in flight" in str(failed[1][1])
    assert [e["type"] for e in events] == ["session.started", "request.opened"]


def test_acp_methods_both_sides_send_are_dead_letters():
    _, failed = _acp([
        {"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": 1}},
        {"jsonrpc": "2.0", "id": 2, "method": "mcp/message", "params": {}},
        {"jsonrpc": "2.0", "method": "_zed/telemetry", "params": {}},
    ])
    assert [(n, type(e)) for n, e in failed] == [(1, UnknownOrigin), (2, UnknownOrigin),
                                                 (3, UnknownOrigin)]


def test_every_side_table_is_disjoint_and_covers_what_the_adapter_handles():
    assert not codex.CLIENT_METHODS & codex.AGENT_METHODS
    assert not acp.CLIENT_SENT & acp.AGENT_SENT
    assert set(acp._CLIENT_REQUESTS) <= acp.CLIENT_SENT
    assert {*acp._AGENT_REQUESTS, *acp._NOTIFICATIONS} <= acp.AGENT_SENT


def _codex_methods(name: str) -> set[str]:
    schema = json.loads((CODEX_SCHEMAS / name).read_text())
    return {v["properties"]["method"]["enum"][0] for v in schema["oneOf"]}


@NO_SCHEMAS
def test_codex_sides_are_the_schemas():
    assert codex.CLIENT_METHODS == _codex_methods("ClientRequest.json") | \
        _codex_methods("ClientNotification.json")
    assert codex.AGENT_METHODS == _codex_methods("ServerRequest.json") | \
        _codex_methods("ServerNotification.json")


@NO_SCHEMAS
def test_acp_sides_are_the_schemas():
    metas = [json.loads((ACP_SCHEMAS / f).read_text()) for f in (
        "schema-v1/meta.json", "schema-v1/meta.unstable.json", "schema-v2-draft/meta.json")]
    answered_by_agent = {m for meta in metas for m in meta["agentMethods"].values()}
    answered_by_client = {m for meta in metas for m in meta["clientMethods"].values()}
    both = answered_by_agent & answered_by_client | \
        {m for meta in metas for m in meta["protocolMethods"].values()}
    assert acp.CLIENT_SENT - {"session/set_model"} == answered_by_agent - both
    assert acp.AGENT_SENT - {"_auth/status_update"} == answered_by_client - both
