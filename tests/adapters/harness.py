"""Feeding native conversations through a translator three ways (STYLE.md "Tests").

* whole: every line in one session, state kept in memory;
* record by record: the session state encoded (msgpack, as the pipeline's tables
  store it) and decoded again between every two records;
* resumed: state saved mid-stream at every cut point, then resumed.

All three must give byte-identical canonical events.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import msgspec

from adapters import Line, MemorySpool, Session, get, new_session, translate_record
from adapters.core import DEFAULT_ITEM_CAP
from topics.canonical import encode_event
from topics.records import capture_line_decoder

SHARED = Path(__file__).resolve().parents[3] / "shared"
GOLDENS = Path(__file__).resolve().parent / "goldens"
UPDATE = os.environ.get("UPDATE_GOLDENS") == "1"


def read_capture(path: Path) -> list[Line]:
    """Lines of a capture file (`{"origin", "t", "msg"}` per line)."""
    out = []
    for raw in path.read_bytes().splitlines():
        if raw.strip():
            cap = capture_line_decoder.decode(raw)
            out.append(Line(bytes(cap.msg), cap.origin, cap.t))
    return out


def read_native(path: Path) -> list[Line]:
    """Lines of a native file (every line from the agent)."""
    return [Line(raw) for raw in path.read_bytes().splitlines() if raw.strip()]


def capture_lines(messages: list[tuple[str, Any]]) -> list[Line]:
    """Lines from (origin, message object) pairs, for scenarios written in Python."""
    return [Line(json.dumps(m, separators=(",", ":")).encode(), origin) for origin, m in messages]  # type: ignore[arg-type]


def _codec(provider: str) -> tuple[Any, Any]:
    t = get(provider)
    return msgspec.msgpack.Encoder(), msgspec.msgpack.Decoder(Session[t.state_type])  # type: ignore[name-defined]


def _feed(provider: str, session: Session[Any], lines: list[Line], start: int, sid: str,
          include_raw: bool, spool: MemorySpool) -> tuple[Session[Any], list[bytes]]:
    t = get(provider)
    out: list[bytes] = []
    for n, line in enumerate(lines, start):
        session, events, failures = translate_record(t, session, sid, [line], offset=n,
                                                     include_raw=include_raw, spool=spool)
        assert not failures, f"line {n} failed: {failures[0].error}"
        out.extend(encode_event(e) for e in events)
    return session, out


def run_whole(provider: str, lines: list[Line], sid: str = "s1",
              include_raw: bool = False) -> list[bytes]:
    spool = MemorySpool()
    session, out = _feed(provider, new_session(get(provider)), lines, 1, sid, include_raw, spool)
    assert_spool_holds_open_streams_only(session, spool)
    return out


def run_record_by_record(provider: str, lines: list[Line], sid: str = "s1") -> list[bytes]:
    enc, dec = _codec(provider)
    session = new_session(get(provider))
    spool = MemorySpool()
    out: list[bytes] = []
    for n, line in enumerate(lines, 1):
        session = dec.decode(enc.encode(session))
        session, events = _feed(provider, session, [line], n, sid, False, spool)
        out.extend(events)
    return out


def run_resumed(provider: str, lines: list[Line], cut: int, sid: str = "s1") -> list[bytes]:
    enc, dec = _codec(provider)
    spool = MemorySpool()
    session, first = _feed(provider, new_session(get(provider)), lines[:cut], 1, sid, False,
                           spool)
    saved = enc.encode(session)
    session, rest = _feed(provider, dec.decode(saved), lines[cut:], cut + 1, sid, False, spool)
    return first + rest


class Stored:
    """A conversation fed record by record as the worker's tables keep it (the session
    encoded and decoded between records, its chunks in one spool): the events, and
    after each record the encoded session's size and the spool's chunk count."""

    def __init__(self, provider: str, lines: list[Line], sid: str = "s1",
                 cap: int = DEFAULT_ITEM_CAP):
        t = get(provider)
        enc, dec = _codec(provider)
        self.spool = MemorySpool()
        self.events: list[Any] = []
        self.sizes: list[int] = []
        self.chunks: list[int] = []
        session = new_session(t)
        for n, line in enumerate(lines, 1):
            session, got, failures = translate_record(t, session, sid, [line], offset=n,
                                                      spool=self.spool, cap=cap)
            assert not failures, f"line {n} failed: {failures[0].error}"
            stored = enc.encode(session)
            self.sizes.append(len(stored))
            self.chunks.append(len(self.spool))
            session = dec.decode(stored)
            self.events.extend(got)
        self.session = session

    def dicts(self) -> list[dict[str, Any]]:
        """The events as JSON objects."""
        return [json.loads(encode_event(e)) for e in self.events]


def assert_spool_holds_open_streams_only(session: Session[Any], spool: MemorySpool) -> None:
    """The spool holds chunks of the streams still open, and nothing else: the
    conversation core drops an item's chunks when it completes."""
    left = {key for (_, key, _) in spool.chunks} - set(session.streams)
    assert not left, f"chunks of closed streams left in the spool: {sorted(left)[:5]}"


def assert_three_ways(provider: str, lines: list[Line], sid: str = "s1") -> list[bytes]:
    """Feed `lines` whole, record by record and resumed at every cut; all must agree."""
    whole = run_whole(provider, lines, sid)
    assert run_record_by_record(provider, lines, sid) == whole, "record-by-record output differs"
    for cut in range(1, len(lines)):
        assert run_resumed(provider, lines, cut, sid) == whole, f"resumed at line {cut} differs"
    return whole


def events_of(encoded: list[bytes]) -> list[dict[str, Any]]:
    return [json.loads(b) for b in encoded]


def check_golden(provider: str, name: str, encoded: list[bytes]) -> None:
    """Compare with goldens/<provider>/<name>.out.jsonl (UPDATE_GOLDENS=1 rewrites it)."""
    path = GOLDENS / provider / f"{name}.out.jsonl"
    text = b"".join(e + b"\n" for e in encoded)
    if UPDATE or not path.exists():
        if not UPDATE:
            raise AssertionError(f"missing golden {path}; run with UPDATE_GOLDENS=1 and review it")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text)
    assert path.read_bytes() == text, f"output differs from golden {path}"


def assistant_texts(events: list[dict[str, Any]]) -> list[str]:
    """Assistant text per item, in order of first delta (as canoncheck reconstructs it)."""
    texts: dict[str, list[str]] = {}
    for e in events:
        if e["type"] == "content.delta" and e["payload"]["streamKind"] == "assistant_text":
            texts.setdefault(e.get("itemId"), []).append(e["payload"]["delta"])
    return ["".join(v) for v in texts.values()]


def assert_envelope_invariants(events: list[dict[str, Any]]) -> None:
    """seq 1..N per session, unique eventIds, every started item and turn completed."""
    seqs: dict[str, list[int]] = {}
    for e in events:
        seqs.setdefault(e["sessionId"], []).append(e["seq"])
    for s in seqs.values():
        assert s == list(range(1, len(s) + 1))
    assert len({e["eventId"] for e in events}) == len(events)
    started = {e["itemId"] for e in events if e["type"] == "item.started"}
    completed = {e["itemId"] for e in events if e["type"] == "item.completed"}
    assert started <= completed, f"items never completed: {started - completed}"
    turns = {e["turnId"] for e in events if e["type"] == "turn.started"}
    done = {e["turnId"] for e in events if e["type"] == "turn.completed"}
    assert turns <= done, f"turns never completed: {turns - done}"
