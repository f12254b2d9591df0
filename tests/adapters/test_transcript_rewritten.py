"""A session file rewritten and sent again from its start (a compaction, an edit of its
history, a truncation and a rewrite): every line translated already is recognised,
however far back, only the new lines are translated, and what recognises them stays
bounded.

Each case feeds the first part of a real session file record by record (the state
encoded and decoded between records, as the worker's table keeps it), then the
rewritten file from its start: its old lines (one of them changed under its id), then
new ones. The events must be those of the final file translated once: nothing twice,
nothing new dropped.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from adapters import Line, MemorySpool, Session, get, new_session, translate_record
from adapters.codex_transcript.translator import _resent
from adapters.core.contract import HighWater
from adapters.core.ids import iso_to_ms
from adapters.core.resent import NEAR_KEPT, resent
from tests.adapters.harness import events_of, read_native
from topics.canonical import encode_event

ONDISK = Path(__file__).resolve().parents[1] / "fixtures" / "ondisk"
SKEW = 2_000  # the skew of the adapters that place lines by their times


def feed(provider: str, session: Session[Any], sid: str, lines: list[Line], start: int,
         spool: MemorySpool) -> tuple[Session[Any], list[dict[str, Any]]]:
    t = get(provider)
    enc, dec = msgspec.msgpack.Encoder(), msgspec.msgpack.Decoder(Session[t.state_type])  # type: ignore[name-defined]
    out: list[bytes] = []
    for n, line in enumerate(lines, start):
        session, events, failures = translate_record(t, dec.decode(enc.encode(session)), sid,
                                                     [line], offset=n, spool=spool)
        assert not failures, f"line {n} failed: {failures[0].error}"
        out.extend(encode_event(e) for e in events)
    return session, events_of(out)


def once(provider: str, sid: str, lines: list[Line]) -> list[dict[str, Any]]:
    return feed(provider, new_session(get(provider)), sid, lines, 0, MemorySpool())[1]


def sent_twice(provider: str, sid: str, first: list[Line], again: list[Line]
               ) -> tuple[Session[Any], list[dict[str, Any]]]:
    """`first` (a file as it grew), then `again` (the file rewritten, from its start)."""
    spool = MemorySpool()
    session, events = feed(provider, new_session(get(provider)), sid, first, 0, spool)
    session, more = feed(provider, session, sid, again, len(first), spool)
    return session, events + more


def edited(line: Line, edit: Callable[[dict[str, Any]], None]) -> Line:
    """The line as a rewrite may change it: other bytes, the same id and time."""
    obj = json.loads(line.data)
    edit(obj)
    return Line(json.dumps(obj).encode())


def deltas(events: list[dict[str, Any]]) -> list[str]:
    return [e["payload"]["delta"] for e in events if e["type"] == "content.delta"]


def texts(events: list[dict[str, Any]]) -> str:
    return "".join(deltas(events))


# ---- the cases: a real file, where it was cut, which old line the rewrite changed ----


def claude(scenario: str) -> tuple[str, list[Line]]:
    (f,) = (ONDISK / scenario).glob(".claude/projects/*/*.jsonl")
    return f.stem, read_native(f)


def codex(scenario: str) -> tuple[str, list[Line]]:
    (f,) = (ONDISK / scenario).glob(".codex/sessions/*/*/*/rollout-*.jsonl")
    lines = read_native(f)
    return json.loads(lines[0].data)["payload"]["id"], lines


def gemini(scenario: str) -> tuple[str, list[Line]]:
    files = sorted((ONDISK / scenario).glob(".gemini/tmp/*/chats/session-*.jsonl"))
    lines = read_native(max(files, key=lambda f: f.stat().st_size))  # the conversation's
    return json.loads(lines[0].data)["sessionId"], lines


def opencode(scenario: str) -> tuple[str, list[Line]]:
    dump = ONDISK / scenario / ".local/share/opencode/opencode.db.rows.jsonl"
    got = sorted((r["row"] for r in map(json.loads, dump.read_text().splitlines())
                  if r["table"] == "event"), key=lambda row: row["seq"])
    return got[0]["aggregate_id"], [Line(json.dumps({"table": "event", "row": row}).encode())
                                    for row in got]


def _text_of_first_assistant_row(lines: list[Line]) -> int:
    return next(n for n, ln in enumerate(lines) if b'"type":"assistant"' in ln.data
                and b'"type":"text"' in ln.data)


def _claude_edit(obj: dict[str, Any]) -> None:
    for block in obj["message"]["content"]:
        if block.get("type") == "text":
            block["text"] += " (edited)"


def _first_gemini_text(lines: list[Line]) -> int:
    return next(n for n, ln in enumerate(lines) if b'"type":"gemini"' in ln.data
                and b'"content":""' not in ln.data)


def _gemini_edit(obj: dict[str, Any]) -> None:
    obj["content"] = "rewritten"


def _codex_edit(obj: dict[str, Any]) -> None:
    obj["payload"]["edited"] = True


CASES: dict[str, tuple[str, Callable[[], tuple[str, list[Line]]],
                       Callable[[list[Line]], int] | None, Callable[[dict[str, Any]], None]]] = {
    "claude-2.1.332": ("claude-transcript", lambda: claude("claude-code-sdk-stdio/multi_turn"),
                       _text_of_first_assistant_row, _claude_edit),
    "claude-2.1.44": ("claude-transcript", lambda: claude("acp-claude-code/tool_shell_allow"),
                      _text_of_first_assistant_row, _claude_edit),
    "codex-0.171": ("codex-transcript", lambda: codex("codex-app-server/multi_turn"),
                    lambda lines: 3, _codex_edit),
    "codex-0.137": ("codex-transcript", lambda: codex("acp-codex/interrupt"), None,
                    _codex_edit),
    "gemini-stream-json": ("gemini-transcript", lambda: gemini("gemini-stream-json/tool_shell"),
                           _first_gemini_text, _gemini_edit),
    "gemini-acp": ("gemini-transcript", lambda: gemini("acp-gemini/tool_shell_allow"),
                   None, _gemini_edit),
    "opencode": ("opencode-transcript", lambda: opencode("opencode-serve/multi_turn"),
                 lambda lines: 2, lambda obj: obj["row"].update(data=json.dumps(
                     {**json.loads(obj["row"]["data"]), "edited": True}))),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_rewritten_file_sent_again_translates_only_its_new_lines(case: str):
    provider, load, pick, edit = CASES[case]
    sid, lines = load()
    whole = once(provider, sid, lines)
    assert texts(whole)
    for cut in sorted({len(lines) // 3, 2 * len(lines) // 3, len(lines) - 1}):
        again = list(lines)  # compaction-like: the same lines, then the new ones
        if pick is not None and pick(lines) < cut:
            again[pick(lines)] = edited(lines[pick(lines)], edit)
        _, got = sent_twice(provider, sid, lines[:cut], again)
        assert texts(got) == texts(whole), f"cut at {cut}"
        assert got == whole, f"cut at {cut}"


@pytest.mark.parametrize("case", sorted(set(CASES) - {"claude-2.1.44"}))
def test_a_file_sent_again_whole_adds_nothing(case: str):
    """A truncated file written again as it was: every line is old. (claude-2.1.44's
    file is 6 lines: the driver's last DEDUPE_KEPT digests know them all already.)"""
    provider, load, _, _ = CASES[case]
    sid, lines = load()
    _, got = sent_twice(provider, sid, lines, lines)
    assert got == once(provider, sid, lines)


# ---- a long session: lines far behind the mark, more than the mark keeps near it ----

SID = "5e551011-0000-4000-8000-0000000000aa"


def _row(kind: str, n: int, **fields: Any) -> dict[str, Any]:
    """A Claude Code 2.1.332 row, `n` seconds into the session."""
    return {"type": kind, "uuid": f"u{n}", "sessionId": SID, "cwd": "/w",
            "version": "2.1.332", "isSidechain": False,
            "timestamp": f"2026-12-01T{10 + n // 3600:02d}:{n // 60 % 60:02d}:{n % 60:02d}.000Z",
            **fields}


def long_session(turns: int, *, burst: int = 0) -> list[Line]:
    """`turns` turns of a prompt and an answer each, a second apart; the last turn's
    answer comes as `burst` more rows in its last second (more than the mark keeps)."""
    rows = []
    for k in range(turns):
        n = 2 * k
        rows.append(_row("user", n, message={"role": "user", "content": f"prompt {k}"}))
        rows.append(_row("assistant", n + 1, message={
            "id": f"msg_{k}", "role": "assistant", "model": "m",
            "content": [{"type": "text", "text": f"answer {k}"}], "stop_reason": "end_turn",
            "usage": {"input_tokens": 10, "output_tokens": 2}}))
    end = 2 * turns
    for b in range(burst):
        rows.append({**_row("attachment", end, attachment={"type": "hook_success", "n": b}),
                     "uuid": f"burst-{b}"})
    return [Line(json.dumps(r).encode()) for r in rows]


def test_a_long_session_rewritten_is_recognised_far_back_with_a_bounded_mark():
    lines = long_session(300)
    whole = once("claude-transcript", SID, lines)
    compacted = lines[:10] + lines[400:]  # rows dropped from its middle, then new rows
    session, got = sent_twice("claude-transcript", SID, lines[:500], compacted)
    assert got == whole
    assert deltas(got).count("answer 7") == 1
    mark = session.state.mark
    assert len(mark.near) <= 2 * NEAR_KEPT
    assert len(msgspec.msgpack.encode(mark)) <= 3 + 2 * 9 + 2 * NEAR_KEPT * 9  # int64s


def test_more_rows_near_the_mark_than_it_keeps_are_never_dropped():
    """Rows the mark no longer keeps near it (here the last answer before a burst of
    rows in its last second), sent again, are translated again; no new row is lost."""
    lines = long_session(5, burst=3 * NEAR_KEPT)
    more = long_session(8)[10:]
    _, got = sent_twice("claude-transcript", SID, lines, lines + more)
    assert deltas(got) == [f"answer {k}" for k in range(5)] + ["answer 4"] + [
        f"answer {k}" for k in range(5, 8)]


# ---- the mark alone: any file its runtime could write ----------------------------


@given(steps=st.lists(st.tuples(st.integers(-SKEW + 1, SKEW // 40), st.booleans()),
                      min_size=1, max_size=120),
       cut=st.integers(0, 120))
@settings(max_examples=300, deadline=None)
@example(steps=[(0, True)] * 60, cut=50)  # more lines in one millisecond than it keeps
@example(steps=[(0, n % 2 == 0) for n in range(80)], cut=70)
def test_the_mark_drops_no_new_line_and_every_old_one_it_keeps(
        steps: list[tuple[int, bool]], cut: int):
    """Lines stamped up to SKEW - 1 before the latest one (the runtime's promise), some
    with an id, some without: fed once, none is dropped; fed in part then whole again,
    no new line is dropped and an old one passes only past NEAR_KEPT lines near the
    mark."""
    lines, high = [], 0
    for n, (step, has_id) in enumerate(steps):
        key = max(high + step, 0)
        high = max(high, key)
        lines.append((key, f"id-{n}" if has_id else None, {"n": n}))
    mark = HighWater()
    for key, ident, obj in lines:
        old, mark = resent(mark, key, ident, obj, SKEW)
        assert not old
        assert len(mark.near) <= 2 * NEAR_KEPT
    cut = min(cut, len(lines))
    mark = HighWater()
    for key, ident, obj in lines[:cut]:
        mark = resent(mark, key, ident, obj, SKEW)[1]
    near = sum(1 for key, _, _ in lines[:cut] if key > mark.key - SKEW)
    passed = []
    for n, (key, ident, obj) in enumerate(lines):
        old, mark = resent(mark, key, ident, obj, SKEW)
        if not old:
            passed.append(n)
    again = [n for n in passed if n < cut]
    assert passed[len(again):] == list(range(cut, len(lines)))  # every new line, once
    assert len(again) <= max(0, near - NEAR_KEPT)  # old lines past what the mark keeps


def test_rollout_lines_numbered_again_from_zero_later_are_new():
    """Were a resumed thread's ordinals to start again from 0, its lines come later:
    an ordinal at or below the mark is old only if its time is not after the latest."""
    sid, lines = codex("codex-app-server/multi_turn")
    session, _ = sent_twice("codex-transcript", sid, lines, [])
    state = session.state
    for line in lines:
        obj = json.loads(line.data)
        when = iso_to_ms(obj["timestamp"])
        assert when is not None
        assert _resent(state, obj["ordinal"], when, obj)[0]  # the same line: old
        assert not _resent(state, obj["ordinal"], when + 3_600_000, obj)[0]  # an hour on
