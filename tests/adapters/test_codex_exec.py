"""codex-exec: the real `codex exec --json` recordings and the captured conversations."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest

from adapters import Line
from adapters.core import UNSET
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
from topics.canonical import ContentDelta, ItemCompleted

REAL = sorted((SHARED / "fixtures" / "real" / "codex").glob("codex-exec-json-*.jsonl"))
CAPTURED = sorted((Path(__file__).parents[1] / "fixtures" / "captured" / "codex-exec")
                  .glob("*.capture.jsonl"))


def _final_message(lines) -> str:  # noqa: ANN001
    texts = [json.loads(ln.data)["item"]["text"] for ln in lines
             if json.loads(ln.data).get("type") == "item.completed"
             and json.loads(ln.data)["item"]["type"] == "agent_message"]
    return texts[-1]


@pytest.mark.skipif(not REAL, reason="../shared/fixtures/real/codex is absent (public recordings "
                                     "are read from ../shared, never copied into the project)")
@pytest.mark.parametrize("path", REAL, ids=[p.stem for p in REAL])
def test_real_recording_translates_completely(path: Path):
    lines = read_native(path)
    events = events_of(assert_three_ways("codex-exec", lines))
    assert assistant_texts(events)[-1] == _final_message(lines)
    assert_envelope_invariants(events)
    assert not [e for e in events if e["type"] == "runtime.warning"]
    assert events_of(run_whole("codex-exec", lines)) == events  # identical ids on a second run


@pytest.mark.parametrize("path", CAPTURED, ids=[p.stem for p in CAPTURED])
def test_captured_conversation_translates_completely(path: Path):
    lines = read_capture(path)
    events = events_of(assert_three_ways("codex-exec", lines))
    assert assistant_texts(events)[-1] == _final_message(lines)
    assert_envelope_invariants(events)
    assert not [e for e in events if e["type"] == "runtime.warning"]


def test_command_output_is_streamed_once_and_completed_whole():
    item = {"id": "i", "type": "command_execution", "command": "ls", "status": "in_progress"}
    lines = capture_lines([
        ("agent", {"type": "turn.started"}),
        ("agent", {"type": "item.started", "item": {**item, "aggregated_output": ""}}),
        ("agent", {"type": "item.updated", "item": {**item, "aggregated_output": "a\n"}}),
        ("agent", {"type": "item.updated", "item": {**item, "aggregated_output": "a\n"}}),
        ("agent", {"type": "item.completed", "item": {**item, "aggregated_output": "a\nb\n",
                                                       "exit_code": 0, "status": "completed"}}),
    ])
    events = events_of(assert_three_ways("codex-exec", lines))
    deltas = [e["payload"]["delta"] for e in events if e["type"] == "content.delta"]
    assert deltas == ["a\n", "b\n"]
    done = [e for e in events if e["type"] == "item.completed"][0]["payload"]
    assert (done["output"], done["exitCode"], done["isError"]) == ("a\nb\n", 0, False)
    assert done["toolName"] == "Bash" and done["input"] == {"command": "ls"}


def test_turn_failed_gives_error_then_failed_turn():
    lines = capture_lines([
        ("agent", {"type": "turn.started"}),
        ("agent", {"type": "turn.failed", "error": {"message": "boom"}}),
    ])
    types = [(e["type"], e["payload"].get("state")) for e in events_of(run_whole("codex-exec", lines))]
    assert types == [("turn.started", None), ("runtime.error", None), ("turn.completed", "failed")]


def test_a_new_turn_closes_an_unfinished_one_as_interrupted():
    lines = capture_lines([
        ("agent", {"type": "turn.started"}),
        ("agent", {"type": "item.started", "item": {"id": "c", "type": "command_execution",
                                                    "command": "sleep 9", "status": "in_progress"}}),
        ("agent", {"type": "turn.started"}),
        ("agent", {"type": "turn.completed", "usage": {}}),
    ])
    events = events_of(run_whole("codex-exec", lines))
    assert_envelope_invariants(events)
    states = [e["payload"]["state"] for e in events if e["type"] == "turn.completed"]
    assert states == ["interrupted", "completed"]


# ---- a long command output: a bounded session, the output spooled (adapters.core.emitter) -----


def _long_command(chunks: list[str]) -> Iterator[Line]:
    """A command printing `chunks`, one item.updated snapshot each, whose turn ends
    before it completes: only the spool still has its output then."""
    item = {"id": "c", "type": "command_execution", "command": "yes", "status": "in_progress"}
    yield Line(msgspec.json.encode({"type": "thread.started", "thread_id": "th-long"}))
    yield Line(msgspec.json.encode({"type": "turn.started"}))
    yield Line(msgspec.json.encode({"type": "item.started",
                                    "item": {**item, "aggregated_output": ""}}))
    output = ""
    for chunk in chunks:
        output += chunk
        yield Line(msgspec.json.encode({"type": "item.updated",
                                        "item": {**item, "aggregated_output": output}}))
    yield Line(msgspec.json.encode({"type": "turn.completed", "usage": {}}))


def test_a_long_command_output_keeps_the_session_small_and_is_delivered_whole():
    """2,000 snapshots growing by 1 KiB, fed record by record with the session encoded
    and decoded between records; the turn ends first, so the failed item's output is
    read back from the spool. (A completed command carries the native
    aggregated_output: test_command_output_is_streamed_once_and_completed_whole.)"""
    chunks = [f"{i:04d}" + "é" * 8 + "x" * 1003 + "\n" for i in range(2000)]  # 1 KiB each
    fed = Stored("codex-exec", list(_long_command(chunks)), cap=16 << 20)  # not the cap
    assert max(fed.sizes) < 4096, max(fed.sizes)
    assert fed.chunks[len(chunks) + 2] == len(chunks)  # the last snapshot: one chunk a record
    assert [e.payload.delta for e in fed.events if isinstance(e, ContentDelta)] == chunks
    [done] = [e.payload for e in fed.events if isinstance(e, ItemCompleted)]
    assert (done.status, done.output, done.outputTruncated) == ("failed", "".join(chunks), UNSET)
    assert len(fed.spool) == 0 and fed.session.streams == {}


# ---- the thread's running total (README "Token usage") ----------------------------------


def _usage(inp: int, cached: int, out: int, reasoning: int) -> dict[str, int]:
    return {"input_tokens": inp, "cached_input_tokens": cached, "output_tokens": out,
            "reasoning_output_tokens": reasoning}


def _totals(events: list[dict]) -> list[tuple[str, dict | None]]:  # type: ignore[type-arg]
    return [(e["type"], e["payload"].get("tokens")) for e in events
            if e["type"] in ("thread.token-usage.updated", "turn.completed")]


def test_the_thread_total_adds_up_the_turns_and_goes_out_before_each_turn_completed():
    lines = capture_lines([
        ("agent", {"type": "thread.started", "thread_id": "th"}),
        ("agent", {"type": "turn.started"}),
        ("agent", {"type": "turn.completed", "usage": _usage(1000, 600, 300, 120)}),
        ("agent", {"type": "turn.started"}),
        ("agent", {"type": "turn.completed", "usage": _usage(200, 100, 50, 0)}),
    ])
    # fed whole, record by record and resumed at every cut: a restored state keeps counting
    events = events_of(assert_three_ways("codex-exec", lines))
    first = {"input": 1000, "cachedInput": 600, "cacheWrite": 0, "output": 300,
             "reasoningOutput": 120, "total": 1300}
    second = {"input": 200, "cachedInput": 100, "cacheWrite": 0, "output": 50,
              "reasoningOutput": 0, "total": 250}
    both = {"input": 1200, "cachedInput": 700, "cacheWrite": 0, "output": 350,
            "reasoningOutput": 120, "total": 1550}
    assert _totals(events) == [("thread.token-usage.updated", first), ("turn.completed", first),
                               ("thread.token-usage.updated", both), ("turn.completed", second)]
    updated = [e for e in events if e["type"] == "thread.token-usage.updated"]
    assert updated[1]["payload"]["usage"] == _usage(200, 100, 50, 0)  # the native object


def test_a_repeated_turn_completed_is_counted_once_in_the_thread_total():
    done = ("agent", {"type": "turn.completed", "usage": _usage(10, 0, 5, 0)})
    lines = capture_lines([("agent", {"type": "turn.started"}), done, done])
    events = events_of(run_whole("codex-exec", lines))
    once = {"input": 10, "cachedInput": 0, "cacheWrite": 0, "output": 5, "reasoningOutput": 0,
            "total": 15}
    # the turn's own tokens as before (each turn.completed carries its message's); the
    # thread's total counts them once
    assert _totals(events) == [("thread.token-usage.updated", once), ("turn.completed", once),
                               ("thread.token-usage.updated", once), ("turn.completed", once)]


def test_a_turn_completed_without_usage_states_no_total():
    lines = capture_lines([("agent", {"type": "turn.started"}),
                           ("agent", {"type": "turn.completed"})])
    events = events_of(run_whole("codex-exec", lines))
    assert _totals(events) == [("turn.completed", None)]


@pytest.mark.parametrize("path", CAPTURED, ids=[p.stem for p in CAPTURED])
def test_each_captured_thread_total_is_the_sum_of_its_turns_so_far(path: Path):
    events = events_of(run_whole("codex-exec", read_capture(path)))
    turns: dict | None = None  # type: ignore[type-arg]
    stated = []
    for e in events:
        if e["type"] == "thread.token-usage.updated":
            stated.append(e["payload"]["tokens"])
        elif e["type"] == "turn.completed" and "tokens" in e["payload"]:
            t = e["payload"]["tokens"]
            turns = t if turns is None else {k: turns[k] + t[k] for k in t}
            assert stated[-1] == turns  # stated right before, this turn included
    assert stated and turns is not None
