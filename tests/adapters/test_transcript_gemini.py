"""gemini-transcript: Gemini CLI's chat files, against the live stream of the same run.

As tests/adapters/test_transcript_claude.py (whose comparison this uses): every pair
under tests/fixtures/ondisk/{gemini-stream-json,acp-gemini}/ is translated from its
chat file by this adapter and from its wire by the live one (gemini, or acp for
`gemini --acp`), and both must show the same turns, texts, tools, errors and
approvals except what LOSSES says the file cannot show; each loss must show in some
pair. The files are also fed whole, record by record and resumed, and the records'
finer points (rewrites by id, `$set`, thoughts, tool calls) are checked on records
written here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from adapters import Line, MemorySpool, get, new_session, translate_record
from adapters.gemini_transcript import FILES, HOMES
from tests.adapters.harness import assert_three_ways, events_of, read_native, run_whole
from tests.adapters.test_transcript_claude import (
    Summary,
    assert_each_loss_shows,
    assert_same,
    expected_from_live,
    live_events,
    pair_id,
    pairs,
    summary,
)
from topics.canonical import encode_event

PROVIDER = "gemini-transcript"

#: The runtime that wrote each fixture folder's files (`--acp` runs the same CLI).
RUNTIMES = {"gemini-stream-json": "Gemini CLI 0.61.0", "acp-gemini": "Gemini CLI 0.61.0"}
#: What its files cannot show (the translator's docstring, "Not in the file"): no
#: record says a turn ended, no error is written, a failed or cancelled turn is rolled
#: back, and `--acp`'s permission dialogue is not kept.
LOSSES: dict[str, tuple[str, ...]] = {
    "Gemini CLI 0.61.0": ("approvals", "errors", "rolled_back", "last_turn_end"),
}
LIVE = {"acp-gemini": "acp"}  # else "gemini"
PAIRS = pairs(*RUNTIMES)


def chats(pair: Path) -> dict[str, list[Line]]:
    """The run's chat files (found as the readers find them: HOMES, FILES) by session
    id, the header's `sessionId`."""
    files = sorted(f for home in HOMES for pattern in FILES for f in (pair / home).glob(pattern))
    out = {}
    for f in files:
        lines = read_native(f)
        out[json.loads(lines[0].data)["sessionId"]] = lines
    return out


def _live_session(events: list[dict[str, Any]]) -> str:
    return next(e["payload"]["providerThreadId"] for e in events if e["type"] == "thread.started")


@pytest.mark.parametrize("pair", PAIRS, ids=pair_id)
def test_the_file_shows_what_the_live_stream_shows_but_its_runtimes_losses(pair: Path):
    runtime = pair.parent.name
    live = live_events(pair, LIVE.get(runtime, "gemini"))
    files = chats(pair)
    sid = _live_session(live)
    disk = summary(events_of(run_whole(PROVIDER, files.pop(sid), sid)))
    expected = expected_from_live(summary(live), LOSSES[RUNTIMES[runtime]])
    assert_same(disk, expected, acp=runtime.startswith("acp-"))
    # `--acp` also writes the session it creates at start-up and never uses
    assert len(files) == (1 if runtime.startswith("acp-") else 0)
    for other, lines in files.items():
        events = events_of(run_whole(PROVIDER, lines, other))
        assert [e["payload"].get("author") for e in events if e["type"] == "item.completed"] == [
            "runtime"]  # its context, and nothing else
        assert "turn.started" not in [e["type"] for e in events]


@pytest.mark.parametrize("runtime", sorted(LOSSES))
def test_each_listed_loss_shows_in_some_pair(runtime: str):
    lives: list[Summary] = [summary(live_events(p, LIVE.get(p.parent.name, "gemini")))
                            for p in PAIRS if RUNTIMES[p.parent.name] == runtime]
    assert_each_loss_shows(LOSSES[runtime], lives)


@pytest.mark.parametrize("pair", PAIRS, ids=pair_id)
def test_every_file_gives_the_same_events_whole_record_by_record_and_resumed(pair: Path):
    for sid, lines in chats(pair).items():
        events = events_of(assert_three_ways(PROVIDER, lines, sid))
        assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
        assert len({e["eventId"] for e in events}) == len(events)
        started = {e["itemId"] for e in events if e["type"] == "item.started"}
        assert started <= {e["itemId"] for e in events if e["type"] == "item.completed"}
        assert "runtime.warning" not in [e["type"] for e in events]
        assert {e["sessionId"] for e in events} == {sid}


@pytest.mark.parametrize("pair", PAIRS, ids=pair_id)
def test_what_only_the_file_has_is_mapped(pair: Path):
    """The injected context (author runtime), each message's tokens, summed on the turn
    it ends, and the model that answered."""
    sid = _live_session(live_events(pair, LIVE.get(pair.parent.name, "gemini")))
    events = events_of(run_whole(PROVIDER, chats(pair)[sid], sid))
    context = [e["payload"]["text"] for e in events if e["type"] == "item.completed"
               and e["payload"].get("author") == "runtime"]
    assert len(context) == 1 and context[0].startswith("<session_context>")
    usages = [e["payload"]["usage"] for e in events if e["type"] == "thread.token-usage.updated"]
    answers = [e for e in events if e["type"] == "item.completed"
               and e["payload"]["itemType"] == "assistant_message"]
    if answers:
        assert usages and all(u["input"] > 0 and u["output"] > 0 for u in usages)
    assert {e["payload"]["model"] for e in events if e["type"] == "turn.started"
            and "model" in e["payload"]} <= {"gemini-3.8-flash"}


# ---- the records' finer points, on records written here ---------------------------

SID = "0b5e55ed-0000-4000-8000-000000000002"
HEADER = {"sessionId": SID, "projectHash": "ab", "startTime": "2026-12-01T10:00:00.000Z",
          "lastUpdated": "2026-12-01T10:00:00.000Z", "kind": "main"}


def at(n: int) -> str:
    return f"2026-12-01T10:00:{n:02d}.000Z"


def user(mid: str, n: int, content: Any) -> dict[str, Any]:
    return {"id": mid, "timestamp": at(n), "type": "user", "content": content}


def gemini(mid: str, n: int, content: str = "", **fields: Any) -> dict[str, Any]:
    return {"id": mid, "timestamp": at(n), "type": "gemini", "content": content,
            "thoughts": [], "model": "gemini-x", **fields}


def shell(call_id: str, status: str, n: int, **fields: Any) -> dict[str, Any]:
    return {"id": call_id, "name": "run_shell_command", "args": {"command": "ls"},
            "status": status, "timestamp": at(n), **fields}


def response(call_id: str, body: dict[str, Any]) -> dict[str, Any]:
    return {"functionResponse": {"id": call_id, "name": "run_shell_command", "response": body}}


def run(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    lines = [Line(json.dumps(r).encode()) for r in records]
    return events_of(assert_three_ways(PROVIDER, lines, SID))


def types(events: list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in events]


def completed(events: list[dict[str, Any]], item_type: str | None = None) -> list[dict[str, Any]]:
    return [e["payload"] for e in events if e["type"] == "item.completed"
            and item_type in (None, e["payload"]["itemType"])]


def test_a_chat_gives_the_lifecycle_a_live_stream_gives():
    events = run([HEADER, {"$set": {"messages": [user("ctx", 0, [{"text": "<ctx>"}])]}},
                  user("p1", 1, [{"text": "hi"}]), {"$set": {"lastUpdated": at(1)}},
                  gemini("g1", 2, "Hello.", tokens={"input": 5, "output": 2, "total": 7})])
    assert types(events) == [
        "session.started", "thread.started", "session.configured",
        "item.started", "item.completed",  # the context, in no turn
        "turn.started", "item.started", "item.completed",  # the prompt
        "item.started", "content.delta", "item.completed", "thread.token-usage.updated"]
    assert "turnId" not in events[4] and events[4]["payload"]["author"] == "runtime"
    assert events[9]["payload"] == {"streamKind": "assistant_text", "delta": "Hello."}
    assert events[10]["createdAt"] == at(2)


def test_a_message_written_again_adds_only_what_is_new():
    """stream-json writes the text, then the same id with its tool calls; a changed text
    is not sent again."""
    first = gemini("g1", 2, "Running it.", tokens={"input": 5, "output": 2})
    events = run([HEADER, user("p1", 1, "go"), first,
                  {**first, "content": "Running it!",
                   "toolCalls": [shell("c1", "success", 3, resultDisplay="ok")]},
                  user("r1", 4, [response("c1", {"output": "<untrusted_context>ok"})]),
                  gemini("g2", 5, "Done.", tokens={"input": 6, "output": 1}),
                  user("p2", 6, "next")])
    assert [p["text"] for p in completed(events, "assistant_message")] == ["Running it.", "Done."]
    tools = completed(events, "command_execution")
    assert [(t["toolName"], t["status"], t["output"]) for t in tools] == [("Bash", "completed",
                                                                          "ok")]
    end = next(e["payload"] for e in events if e["type"] == "turn.completed")
    assert end == {"state": "completed", "usage": {"input": 11, "output": 3},
                   "tokens": {"input": 11, "cachedInput": 0, "cacheWrite": 0, "output": 3,
                              "reasoningOutput": 0, "total": 14},
                   "cost": {"source": "unpriced"}}
    assert types(events).count("thread.token-usage.updated") == 2


def test_a_tool_call_completes_once_its_status_is_final():
    running = gemini("g1", 2, "", toolCalls=[shell("c1", "executing", 2)])
    events = run([HEADER, user("p1", 1, "go"), running,
                  {**running, "toolCalls": [shell("c1", "cancelled", 4)]},
                  {**running, "toolCalls": [shell("c1", "cancelled", 4)]}])
    assert types(events)[-2:] == ["item.started", "item.completed"]
    tool = completed(events, "command_execution")[0]
    assert (tool["status"], tool["isError"], tool["input"]) == ("declined", True,
                                                               {"command": "ls"})
    assert events[-1]["createdAt"] == at(4)  # when it finished


def test_a_call_only_a_function_response_shows_is_started_and_completed():
    """`--acp` writes a refused call as the function response alone: declined."""
    events = run([HEADER, user("p1", 1, "go"), gemini("g1", 2, "Trying."),
                  user("r1", 3, [response("run_shell_command__run_shell_command_1_0",
                                          {"error": "Tool \"x\" was canceled by the user."})]),
                  user("r2", 4, [response("run_shell_command__run_shell_command_1_1",
                                          {"error": "boom"})])])
    tool = completed(events, "command_execution")[0]
    assert (tool["status"], tool["output"], tool["isError"]) == (
        "declined", "Tool \"x\" was canceled by the user.", True)
    assert completed(events, "command_execution")[1]["status"] == "failed"
    assert [e["synthetic"] for e in events if e["type"] == "item.started"][-1] is True


def test_thoughts_are_a_reasoning_item_before_the_text():
    events = run([HEADER, user("p1", 1, "go"),
                  gemini("g1", 2, "Answer.", thoughts=[
                      {"subject": "Planning", "description": "", "timestamp": at(2)},
                      {"subject": "", "description": "The user wants", "timestamp": at(2)},
                      {"subject": "", "description": "an answer.", "timestamp": at(2)}])])
    assert [(p["itemType"], p["text"]) for p in completed(events)[1:]] == [
        ("reasoning", "**Planning** The user wants an answer."), ("assistant_message", "Answer.")]
    deltas = [e["payload"] for e in events if e["type"] == "content.delta"]
    assert [d["streamKind"] for d in deltas] == ["reasoning_text", "assistant_text"]


def test_a_set_that_drops_the_prompt_rolls_the_turn_back_and_restating_history_says_nothing():
    ctx = user("ctx", 0, [{"text": "<ctx>"}])
    events = run([HEADER, {"$set": {"messages": [ctx]}}, user("p1", 1, "one"),
                  {"$set": {"messages": [ctx], "lastUpdated": at(3)}},
                  user("p2", 4, "two"), gemini("g2", 5, "Two."),
                  {"$set": {"messages": [ctx, user("p2", 4, "two"), gemini("g2", 5, "2!")]}}])
    ends = [e for e in events if e["type"] == "turn.completed"]
    assert [e["payload"]["state"] for e in ends] == ["failed"]
    assert "rolled this turn back" in ends[0]["payload"]["errorMessage"]
    assert ends[0]["createdAt"] == at(3)
    assert [p["text"] for p in completed(events, "assistant_message")] == ["Two."]
    assert types(events).count("turn.started") == 2


def test_a_rewind_ends_the_open_turn_and_a_second_header_repeats_nothing():
    events = run([HEADER, {"$set": {"messages": []}}, {**HEADER, "startTime": at(1)},
                  user("p1", 2, "one"), gemini("g1", 3, "One."), {"$rewindTo": "p1"}])
    assert types(events).count("session.configured") == 1
    assert types(events)[-1] == "turn.completed"
    assert events[-1]["payload"]["state"] == "completed"


def test_a_cli_resuming_the_session_ends_the_turn_the_last_one_left_open():
    events = run([HEADER, user("p1", 1, "one"), gemini("g1", 2, "One."),
                  {"$set": {"sessionId": SID, "lastUpdated": at(9)}}, user("p2", 10, "two")])
    ends = [e for e in events if e["type"] == "turn.completed"]
    assert [(e["payload"]["state"], e["createdAt"]) for e in ends] == [("completed", at(9))]
    assert types(events).count("thread.started") == 1


def test_notices_and_unknown_records():
    events = run([HEADER, user("p1", 1, "go"),
                  {"id": "w", "timestamp": at(2), "type": "warning", "content": "Loop?"},
                  {"id": "e", "timestamp": at(3), "type": "error", "content": "Quota."},
                  {"id": "i", "timestamp": at(4), "type": "info", "content": "noted"},
                  {"id": "x", "timestamp": at(5), "type": "mystery", "content": ""},
                  {"$later": 1}])
    errors = [e["payload"] for e in events if e["type"] == "runtime.error"]
    assert [(p["message"], p["willRetry"]) for p in errors] == [("Loop?", True), ("Quota.", False)]
    assert [e["payload"]["detail"]["nativeType"] for e in events
            if e["type"] == "runtime.warning"] == ["mystery", "$later"]


def test_bad_records_are_dead_lettered_alone():
    records = [HEADER, {"nothing": "known"}, {"$set": []}, {"type": "user", "id": 5},
               user("p1", 1, 7), user("p1", 1, "ok")]
    lines = [Line(json.dumps(r).encode()) for r in records]
    t = get(PROVIDER)
    _, events, failures = translate_record(t, new_session(t), SID, lines, offset=0,
                                           spool=MemorySpool())
    assert [f.line for f in failures] == [1, 2, 3, 4]
    assert [json.loads(encode_event(e))["type"] for e in events][-3:] == [
        "turn.started", "item.started", "item.completed"]
