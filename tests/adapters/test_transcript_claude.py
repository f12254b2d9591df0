"""claude-transcript: Claude Code's session files, against the live stream of the same run.

Every pair under tests/fixtures/ondisk/<runtime>/<scenario>/ (the files one real run
wrote to its HOME, and `live.jsonl`, the wire transcript of that run) is translated
twice: the session file by this adapter, the wire by the live one (claude, or acp for
claude-code-acp). Both must show the same assistant texts, tool calls with their
outputs, turns and their ends, errors and approvals, except what the file cannot
show: LOSSES lists it per runtime, each loss is applied to the live side, and each must
show in some pair (so the list says neither more nor less than the files). The files
are also fed whole, record by record and resumed, and the rows' finer points are
checked on rows written here.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from adapters import Line, MemorySpool, get, new_session, translate_record
from adapters.claude_transcript import FILES, HOMES
from tests.adapters.harness import (
    assert_three_ways,
    events_of,
    read_capture,
    read_native,
    run_whole,
)
from topics.canonical import TOOL_ITEM_TYPES, encode_event

ONDISK = Path(__file__).resolve().parents[1] / "fixtures" / "ondisk"
PROVIDER = "claude-transcript"

# ---- the comparison (shared with test_transcript_gemini) ----------------------------

Summary = dict[str, Any]


def summary(events: list[dict[str, Any]]) -> Summary:
    """What both sides must agree on: per turn (in order) its end state (None: it did
    not end) and its assistant texts and tool calls (name, status, the normalised
    command, output), then what
    came outside any turn; the number of runtime errors and of approval requests."""
    ends = {e["turnId"]: e["payload"]["state"] for e in events if e["type"] == "turn.completed"}
    order = [e["turnId"] for e in events if e["type"] == "turn.started"]
    turns: dict[Any, dict[str, Any]] = {t: {"state": ends.get(t), "texts": {}, "tools": []}
                                        for t in order}
    outside: dict[str, Any] = {"state": None, "texts": {}, "tools": []}
    for e in events:
        turn, p = turns.get(e.get("turnId"), outside), e["payload"]
        if e["type"] == "content.delta" and p["streamKind"] == "assistant_text":
            turn["texts"][e["itemId"]] = turn["texts"].get(e["itemId"], "") + p["delta"]
        if e["type"] == "item.completed" and p["itemType"] in TOOL_ITEM_TYPES:
            turn["tools"].append((p.get("toolName"), p["status"], p.get("command"),
                                  p.get("output", "")))
    kept = [turns[t] for t in order] + ([outside] if outside["texts"] or outside["tools"]
                                        else [])
    return {
        "turns": [{**t, "texts": list(t["texts"].values())} for t in kept],
        "errors": sum(e["type"] == "runtime.error" for e in events),
        "approvals": len({e.get("requestId") for e in events
                          if e["type"] in ("request.opened", "user-input.requested")}),
    }


def _last_turn_end(s: Summary) -> Summary:
    """The end of the last turn when it was answered normally: nothing after it says so."""
    turns = [dict(t) for t in s["turns"]]
    if turns and turns[-1]["state"] == "completed":
        turns[-1]["state"] = None
    return {**s, "turns": turns}


def _approvals(s: Summary) -> Summary:
    """Permission requests and their answers (only a refusal's outcome is kept)."""
    return {**s, "approvals": 0}


def _result_errors(s: Summary) -> Summary:
    """The runtime.error the live `result` of a turn that did not complete adds."""
    failed = sum(t["state"] not in (None, "completed") for t in s["turns"])
    return {**s, "errors": s["errors"] - failed}


def _errors(s: Summary) -> Summary:
    """Any error: the runtime records none."""
    return {**s, "errors": 0}


def _rolled_back(s: Summary) -> Summary:
    """A turn that did not complete is rolled back: what it said is gone, and whether it
    failed or was cancelled (its end says "failed")."""
    turns = [t if t["state"] in (None, "completed") else
             {"state": "failed", "texts": [], "tools": []} for t in s["turns"]]
    return {**s, "turns": turns}


LOSSES_BY_NAME: dict[str, Callable[[Summary], Summary]] = {
    "last_turn_end": _last_turn_end, "approvals": _approvals,
    "result_errors": _result_errors, "errors": _errors, "rolled_back": _rolled_back,
}


def expected_from_live(live: Summary, losses: tuple[str, ...]) -> Summary:
    for name in losses:
        live = LOSSES_BY_NAME[name](live)
    return live


def assert_same(disk: Summary, live: Summary, *, acp: bool = False) -> None:
    """The file's summary is the live one, but for tool outputs: the file carries at
    least what the wire shows (Gemini's file keeps the output the wire leaves out when
    its display is not text); over ACP, which frames an output its own way or sends
    none, either need only contain the other."""
    for d, lv in zip(disk["turns"], live["turns"], strict=False):
        assert [t[:3] for t in d["tools"]] == [t[:3] for t in lv["tools"]]
        for (*_, a), (*_, b) in zip(d["tools"], lv["tools"], strict=True):
            assert b.strip() in a or acp and a.strip() in b, (a, b)
    disk = {**disk, "turns": [{**t, "tools": len(t["tools"])} for t in disk["turns"]]}
    live = {**live, "turns": [{**t, "tools": len(t["tools"])} for t in live["turns"]]}
    assert disk == live


def pairs(*runtimes: str) -> list[Path]:
    return sorted(p.parent for r in runtimes for p in (ONDISK / r).glob("*/live.jsonl"))


def pair_id(path: Path) -> str:
    return f"{path.parent.name}/{path.name}"


def live_events(pair: Path, provider: str) -> list[dict[str, Any]]:
    return events_of(run_whole(provider, read_capture(pair / "live.jsonl")))


def assert_each_loss_shows(losses: tuple[str, ...], lives: list[Summary]) -> None:
    """Each loss listed changes what some pair's live stream shows (after the losses
    listed before it): the list says no more than the files."""
    for n, name in enumerate(losses):
        staged = [expected_from_live(s, losses[:n]) for s in lives]
        assert any(LOSSES_BY_NAME[name](s) != s for s in staged), (
            f"{name!r} is listed but no pair shows it")


# ---- the pairs -------------------------------------------------------------------

#: The runtime (the program and release that wrote the file) of each fixture folder.
RUNTIMES = {
    "claude-code-stream-json": "Claude Code 2.1.332",
    "claude-code-stream-json-partial": "Claude Code 2.1.332",
    "claude-code-sdk-stdio": "Claude Code 2.1.332",
    "acp-claude-code": "Claude Code 2.1.44",  # inside claude-code-acp 0.16.2
}
#: What each runtime's files cannot show (the translator's docstring, "Not in the file").
#: 2.1.332 writes every row once its message is whole, and its turns end in the file;
#: 2.1.44 writes rows as they stream, with no stop_reason.
LOSSES: dict[str, tuple[str, ...]] = {
    # a person's answer is kept on the tool result row: the request is inferred from it
    "Claude Code 2.1.332": ("result_errors",),
    "Claude Code 2.1.44": ("approvals", "last_turn_end"),
}
LIVE = {"acp-claude-code": "acp"}  # the live adapter of each folder's wire, else "claude"
PAIRS = pairs(*RUNTIMES)


def transcript(pair: Path) -> tuple[str, list[Line]]:
    """The session file of a run (found as the readers find it: HOMES, FILES) and its
    session id, the file's stem."""
    files = sorted(f for home in HOMES for pattern in FILES for f in (pair / home).glob(pattern))
    assert len(files) == 1, files
    return files[0].stem, read_native(files[0])


def _synthetic(events: list[dict[str, Any]]) -> set[str]:
    """The texts of the messages Claude Code writes in the model's place after an API
    error (model `<synthetic>`), as their runtime.error says them."""
    return {e["payload"]["message"] for e in events if e["type"] == "runtime.error"
            and (e["payload"].get("detail") or {}).get("model") == "<synthetic>"}


def _without(texts: set[str], s: Summary) -> Summary:
    return {**s, "turns": [{**t, "texts": [x for x in t["texts"] if x not in texts]}
                           for t in s["turns"]]}


def _acp(live: Summary) -> Summary:
    """Claude Code over ACP: the protocol's words for the same things. A cancelled
    prompt is the file's interrupted turn."""
    return {**live, "turns": [{**t, "state": "interrupted" if t["state"] == "cancelled"
                               else t["state"]} for t in live["turns"]]}


@pytest.mark.parametrize("pair", PAIRS, ids=pair_id)
def test_the_file_shows_what_the_live_stream_shows_but_its_runtimes_losses(pair: Path):
    runtime = pair.parent.name
    sid, lines = transcript(pair)
    disk_events = events_of(run_whole(PROVIDER, lines, sid))
    disk = summary(disk_events)
    wire = live_events(pair, LIVE.get(runtime, "claude"))
    live = expected_from_live(summary(wire), LOSSES[RUNTIMES[runtime]])
    if runtime.startswith("acp-"):
        live = _acp(live)
    # the live Claude adapter may show Claude Code's synthetic API-error message as
    # assistant text (its stream cannot tell a reader otherwise); the file's reader
    # says it only as the turn's runtime.error
    live = _without(_synthetic(wire), live)
    assert not _synthetic(disk_events) & {x for t in disk["turns"] for x in t["texts"]}
    assert_same(disk, live, acp=runtime.startswith("acp-"))


@pytest.mark.parametrize("runtime", sorted(LOSSES))
def test_each_listed_loss_shows_in_some_pair(runtime: str):
    lives = [summary(live_events(p, LIVE.get(p.parent.name, "claude"))) for p in PAIRS
             if RUNTIMES[p.parent.name] == runtime]
    assert_each_loss_shows(LOSSES[runtime], lives)


@pytest.mark.parametrize("pair", PAIRS, ids=pair_id)
def test_every_file_gives_the_same_events_whole_record_by_record_and_resumed(pair: Path):
    sid, lines = transcript(pair)
    events = events_of(assert_three_ways(PROVIDER, lines, sid))
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert len({e["eventId"] for e in events}) == len(events)
    started = {e["itemId"] for e in events if e["type"] == "item.started"}
    assert started <= {e["itemId"] for e in events if e["type"] == "item.completed"}
    assert not [e for e in events if e["type"] == "runtime.warning"], "a row of unknown type"
    assert {e["sessionId"] for e in events} == {sid}


@pytest.mark.parametrize("pair", PAIRS, ids=pair_id)
def test_what_only_the_file_has_is_mapped(pair: Path):
    """The prompt (print mode never echoes it), the release, and where 2.1.332 writes
    them, each turn's stop reason and usage and the session's cost."""
    sid, lines = transcript(pair)
    events = events_of(run_whole(PROVIDER, lines, sid))
    prompts = [e["payload"]["text"] for e in events if e["type"] == "item.completed"
               and e["payload"].get("author") == "user"]
    assert prompts and all(p.startswith("FIXTURE turn") for p in prompts)
    configured = [e for e in events if e["type"] == "session.configured"]
    version = configured[0]["payload"]["runtimeVersion"]
    assert version == ("2.1.44" if pair.parent.name.startswith("acp-") else "2.1.332")
    ended = [e["payload"] for e in events if e["type"] == "turn.completed"
             and e["payload"]["state"] == "completed"]
    if version == "2.1.332":
        assert all(p["usage"]["input_tokens"] > 0 and p["stopReason"] for p in ended)
        updates = [e["payload"] for e in events if e["type"] == "thread.token-usage.updated"]
        costs = [u["usage"] for u in updates if "tokens" not in u]  # cost-state's
        assert [c["totalCostUSD"] >= 0 and "modelUsage" in c for c in costs] == [True]
        # each turn with usage says the thread's total so far, as the live `result` does
        turns = [e["payload"]["tokens"] for e in events
                 if e["type"] == "turn.completed" and "tokens" in e["payload"]]
        totals = [u["tokens"] for u in updates if "tokens" in u]
        assert totals and [t["total"] for t in totals] == [
            sum(t["total"] for t in turns[:n + 1]) for n in range(len(turns))]


# ---- the rows' finer points, on rows written here --------------------------------

SID = "5e551011-0000-4000-8000-000000000001"


def row(kind: str, n: int, **fields: Any) -> dict[str, Any]:
    """A conversation row as Claude Code 2.1.332 writes it (the envelope fields)."""
    return {"type": kind, "uuid": f"u{n}", "timestamp": f"2026-12-01T10:00:{n:02d}.000Z",
            "sessionId": SID, "cwd": "/w", "version": "2.1.332", "isSidechain": False,
            **fields}


def prompt(n: int, text: str) -> dict[str, Any]:
    return row("user", n, message={"role": "user", "content": text})


def answer(n: int, mid: str, block: dict[str, Any], stop: str | None = "end_turn",
           **usage: int) -> dict[str, Any]:
    return row("assistant", n, message={"id": mid, "role": "assistant", "model": "m",
                                        "content": [block], "stop_reason": stop,
                                        "usage": usage or {"input_tokens": 10,
                                                           "output_tokens": 2}})


def text(t: str) -> dict[str, Any]:
    return {"type": "text", "text": t}


def run(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    lines = [Line(json.dumps(r).encode()) for r in rows]
    return events_of(assert_three_ways(PROVIDER, lines, SID))


def types(events: list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in events]


def test_the_rows_give_the_lifecycle_a_print_mode_stream_gives():
    events = run([prompt(1, "hi"), answer(2, "msg_1", text("Hello."))])
    assert types(events) == [
        "session.started", "thread.started", "session.configured", "turn.started",
        "item.started", "item.completed",  # the prompt
        "item.started", "content.delta", "item.completed"]  # the answer, one delta
    assert events[7]["payload"]["delta"] == "Hello." and events[7]["synthetic"]
    assert events[0]["createdAt"] == "2026-12-01T10:00:01.000Z"  # the rows' own times
    assert events[8]["createdAt"] == "2026-12-01T10:00:02.000Z"


def test_a_turn_ends_at_the_row_after_its_last_message_not_at_the_rows_it_writes_after():
    events = run([prompt(1, "hi"), answer(2, "msg_1", text("Hello.")),
                  row("attachment", 3, attachment={"type": "hook_success"}),
                  {"type": "last-prompt", "lastPrompt": "hi", "sessionId": SID},
                  {"type": "queue-operation", "operation": "enqueue", "sessionId": SID,
                   "timestamp": "2026-12-01T10:00:09.000Z"}])
    done = [e for e in events if e["type"] == "turn.completed"]
    assert len(done) == 1 and types(events)[-1] == "turn.completed"
    # at the time of the last row before the queue operation that revealed the end
    assert done[0]["createdAt"] == "2026-12-01T10:00:03.000Z"
    assert done[0]["payload"] == {
        "state": "completed", "stopReason": "end_turn",
        "usage": {"input_tokens": 10, "output_tokens": 2},
        "tokens": {"input": 10, "cachedInput": 0, "cacheWrite": 0, "output": 2,
                   "reasoningOutput": 0, "total": 12},
        "cost": {"source": "unpriced"}}


def test_turn_duration_ends_the_turn_with_its_duration():
    events = run([prompt(1, "hi"), answer(2, "msg_1", text("Hello.")),
                  row("system", 3, subtype="stop_hook_summary"),
                  row("system", 4, subtype="turn_duration", durationMs=1234)])
    assert types(events)[-1] == "turn.completed"
    assert events[-1]["payload"]["durationMs"] == 1234
    assert events[-1]["createdAt"] == "2026-12-01T10:00:04.000Z"


def test_a_message_after_the_last_one_means_the_turn_went_on():
    """A Stop hook that blocks makes Claude answer again in the same turn."""
    events = run([prompt(1, "hi"), answer(2, "msg_1", text("Done.")),
                  answer(3, "msg_2", text("One more thing.")),
                  row("system", 4, subtype="turn_duration", durationMs=5)])
    assert types(events).count("turn.started") == 1 == types(events).count("turn.completed")
    assert events[-1]["payload"]["usage"] == {"input_tokens": 20, "output_tokens": 4}


def test_a_messages_blocks_count_its_usage_once():
    events = run([prompt(1, "hi"),
                  answer(2, "msg_1", {"type": "thinking", "thinking": "hmm"},
                         input_tokens=7, output_tokens=3),
                  answer(3, "msg_1", text("Hello."), input_tokens=7, output_tokens=3),
                  {"type": "cost-state", "sessionId": SID, "totalCostUSD": 0.5}])
    end = next(e["payload"] for e in events if e["type"] == "turn.completed")
    assert end["usage"] == {"input_tokens": 7, "output_tokens": 3}
    assert end["totalCostUsd"] == 0.5
    assert [e["payload"]["itemType"] for e in events if e["type"] == "item.completed"] == [
        "user_message", "reasoning", "assistant_message"]
    assert types(events)[-1] == "thread.token-usage.updated"


def test_the_next_prompt_ends_a_turn_the_file_never_ended():
    """2.1.44 writes no stop_reason: its turns end at the next prompt."""
    events = run([prompt(1, "one"), answer(2, "msg_1", text("A"), stop=None),
                  prompt(3, "two"), answer(4, "msg_2", text("B"), stop=None)])
    assert [e["payload"]["state"] for e in events if e["type"] == "turn.completed"] == [
        "completed"]
    assert types(events).count("turn.started") == 2  # the last one stays open


def test_an_interrupt_ends_the_turn_and_an_api_error_fails_it():
    interrupted = run([prompt(1, "one"), answer(2, "msg_1", text("Th"), stop=None),
                       row("user", 3, message={"role": "user", "content": [
                           text("[Request interrupted by user]")]})])
    assert interrupted[-1]["payload"]["state"] == "interrupted"
    said = [e for e in interrupted if e["type"] == "item.completed"]
    assert said[-1]["payload"]["author"] == "runtime"
    failed = run([prompt(1, "one"),
                  row("system", 2, subtype="api_error", retryAttempt=1, maxRetries=1,
                      retryInMs=500, error={"status": 500, "message": "500 boom"}),
                  {**answer(3, "abc", text("API Error: 500 boom"), stop="stop_sequence"),
                   "isApiErrorMessage": True, "error": "server_error"}])
    errors = [e["payload"] for e in failed if e["type"] == "runtime.error"]
    assert [(p["message"], p["willRetry"]) for p in errors] == [
        ("500 boom", True), ("API Error: 500 boom", False)]
    assert failed[-1]["payload"]["state"] == "failed"
    assert failed[-1]["payload"]["errorMessage"] == "API Error: 500 boom"


def test_an_interrupt_after_its_turn_ended_says_nothing_new():
    events = run([prompt(1, "one"), answer(2, "msg_1", text("A")),
                  row("system", 3, subtype="turn_duration", durationMs=1),
                  row("user", 4, message={"role": "user", "content": [
                      text("[Request interrupted by user]")]})])
    assert types(events)[-1] == "turn.completed"


def test_a_refused_tool_is_declined_and_its_result_completes_it():
    events = run([prompt(1, "go"),
                  answer(2, "msg_1", {"type": "tool_use", "id": "toolu_1", "name": "Bash",
                                      "input": {"command": "touch x"}}, stop="tool_use"),
                  row("user", 3, message={"role": "user", "content": [
                      {"type": "tool_result", "tool_use_id": "toolu_1", "is_error": True,
                       "content": "denied"}]},
                      permissionDecision={"decision": "reject", "source": "user_reject"})])
    tool = [e["payload"] for e in events if e["type"] == "item.completed"][-1]
    assert (tool["itemType"], tool["status"], tool["output"], tool["isError"]) == (
        "command_execution", "declined", "denied", True)
    assert tool["input"] == {"command": "touch x", "cwd": "/w"}  # the rows' cwd


def _decided(decision: dict[str, Any]) -> list[dict[str, Any]]:
    return run([prompt(1, "go"),
                answer(2, "msg_1", {"type": "tool_use", "id": "toolu_1", "name": "Bash",
                                    "input": {"command": "touch x"}}, stop="tool_use"),
                row("user", 3, message={"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"}]},
                    permissionDecision=decision)])


@pytest.mark.parametrize(("decision", "outcome"), [
    ({"decision": "accept", "source": "user_temporary", "grantScope": "once"}, "accept"),
    ({"decision": "accept", "source": "user_temporary", "grantScope": "session"},
     "accept_for_session"),
    ({"decision": "accept", "source": "user_permanent"}, "accept_for_session"),
    ({"decision": "reject", "source": "user_reject"}, "decline"),
])
def test_a_persons_recorded_decision_is_the_request_it_implies(decision, outcome):
    events = _decided(decision)
    opened = [e for e in events if e["type"] == "request.opened"]
    resolved = [e for e in events if e["type"] == "request.resolved"]
    assert len(opened) == len(resolved) == 1
    assert opened[0]["requestId"] == resolved[0]["requestId"]
    assert opened[0]["synthetic"] and resolved[0]["synthetic"]
    assert "inferred" in opened[0]["payload"]["detail"]
    assert opened[0]["payload"]["requestType"] == "command_execution_approval"
    assert (resolved[0]["payload"]["decision"], resolved[0]["payload"]["outcome"]) == (
        decision["decision"], outcome)
    assert resolved[0]["payload"]["resolution"] == decision
    # the request is about the tool call, and comes before its completion
    assert opened[0]["itemId"] == [e for e in events if e["type"] == "item.completed"][-1][
        "itemId"]
    assert types(events).index("request.resolved") < len(events) - 1 - types(
        events)[::-1].index("item.completed")


@pytest.mark.parametrize("decision", [
    {"decision": "accept", "source": "config", "reasonType": "rule", "ruleSource": "cliArg"},
    {"decision": "reject", "source": "config", "reasonCode": "unknown"},
])
def test_a_rules_decision_is_no_request(decision):
    events = _decided(decision)
    assert not [e for e in events if e["type"].startswith("request.")]
    tool = [e["payload"] for e in events if e["type"] == "item.completed"][-1]
    assert tool["status"] == ("declined" if decision["decision"] == "reject" else "completed")


def test_the_message_written_after_an_api_error_is_the_turns_error_not_its_answer():
    failed = row("assistant", 2, isApiErrorMessage=True, error="unknown", message={
        "id": "msg_e", "role": "assistant", "model": "<synthetic>", "stop_reason": "stop_sequence",
        "content": [text('API Error: 500 {"type":"error","error":{"type":"api_error",'
                         '"message":"Internal server error"}}')],
        "usage": {"input_tokens": 0, "output_tokens": 0}})
    events = run([prompt(1, "go"), failed])
    assert not [e for e in events if e["type"] == "content.delta"]
    [error] = [e["payload"] for e in events if e["type"] == "runtime.error"]
    assert (error["detail"]["status"], error["detail"]["providerErrorType"]) == (500, "api_error")
    assert events[-1]["type"] == "turn.completed"
    assert events[-1]["payload"]["state"] == "failed"
    assert events[-1]["payload"]["errorMessage"].startswith("API Error: 500")


def test_rows_written_by_the_runtime_on_the_users_side_open_no_turn():
    events = run([row("user", 1, isMeta=True, message={"role": "user", "content": "Caveat"})])
    assert "turn.started" not in types(events)
    assert events[-1]["payload"]["author"] == "runtime"


def test_sidechain_ignored_and_unknown_rows():
    events = run([prompt(1, "hi"),
                  {**answer(2, "msg_x", text("subagent")), "isSidechain": True},
                  row("file-history-snapshot", 3), row("mystery", 4),
                  row("system", 5, subtype="mystery")])
    assert types(events)[-2:] == ["runtime.warning", "runtime.warning"]
    assert [e["payload"]["detail"]["nativeType"] for e in events[-2:]] == [
        "mystery", "system/mystery"]
    assert "subagent" not in json.dumps(events[:-2])


def test_bad_rows_are_dead_lettered_alone():
    good = [prompt(1, "hi"), answer(3, "msg_1", text("ok"))]
    bad = [{"no": "type"}, row("user", 2, message="not an object"), row("system", 2)]
    lines = [Line(json.dumps(r).encode()) for r in [good[0], *bad, good[1]]]
    t = get(PROVIDER)
    session, events, failures = translate_record(t, new_session(t), SID, lines, offset=0,
                                                 spool=MemorySpool())
    assert [f.line for f in failures] == [1, 2, 3]
    assert [json.loads(encode_event(e))["type"] for e in events][-3:] == [
        "item.started", "content.delta", "item.completed"]


def test_claude_code_exiting_mid_turn_fails_the_turn():
    """A turn cut short (max turns): its last message asked for a tool, then the exit."""
    events = run([prompt(1, "go"),
                  answer(2, "msg_1", {"type": "tool_use", "id": "toolu_1", "name": "Read",
                                      "input": {"file_path": "/w/a"}}, stop="tool_use"),
                  row("user", 3, message={"role": "user", "content": [
                      {"type": "tool_result", "tool_use_id": "toolu_1", "content": "a"}]}),
                  {"type": "cost-state", "sessionId": SID, "totalCostUSD": 0.25}])
    end = next(e["payload"] for e in events if e["type"] == "turn.completed")
    assert (end["state"], end["totalCostUsd"]) == ("failed", 0.25)
    assert "exited" in end["errorMessage"]
