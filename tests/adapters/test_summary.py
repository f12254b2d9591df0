"""The session summary as a function of a session's events (adapters.projections.summary):
record by record it equals all at once, it survives the stored state's encoding, and
its size does not grow with the session."""

from __future__ import annotations

import json

import msgspec

from adapters import MemorySpool, get, new_session, translate_record
from adapters.core import Line
from adapters.projections.summary import summarize
from topics.sessions import SummaryState, decode_summary, encode_summary, record
from topics.usage import tokens

CONVERSATION = [
    {"type": "thread.started", "thread_id": "th"}, {"type": "turn.started"},
    {"type": "item.completed", "item": {"id": "item_0", "type": "agent_message", "text": "ok"}},
    {"type": "turn.completed", "usage": {"input_tokens": 7, "cached_input_tokens": 2,
                                         "output_tokens": 5}},
]


def _events(turns: int) -> list[list[object]]:
    tr = get("codex-exec")
    session, spool, out = new_session(tr), MemorySpool(), []
    lines = CONVERSATION[:1] + CONVERSATION[1:] * turns
    for n, msg in enumerate(lines):
        line = Line(json.dumps(msg).encode(), "agent", 1_764_000_000_000 + n)
        session, events, _ = translate_record(tr, session, "s1", [line], offset=n, spool=spool)
        out.append(events)
    return out


def test_record_by_record_equals_all_at_once_and_counts_the_turns():
    per_record = _events(3)
    everything = [e for events in per_record for e in events]
    whole = summarize(None, everything)
    folded = None
    for events in per_record:
        folded = summarize(folded, events)
    assert folded == whole
    first, last = everything[0], everything[-1]
    s = record(folded, last)
    assert (s.sessionId, s.provider, s.turns, s.turnOpen, s.openRequests) == (
        "s1", "codex-exec", 3, False, 0)
    assert s.tokens == tokens(input=21, cachedInput=6, output=15)
    assert (s.firstActivity, s.lastActivity, s.lastSeq, s.lastEventId, s.closedAt) == (
        first.createdAt, last.createdAt, last.seq, last.eventId, None)
    assert record(folded, last, closing=True).closedAt == last.createdAt


def test_a_record_of_deltas_leaves_the_stored_part_as_it_was():
    per_record = _events(1)
    before = summarize(None, [e for events in per_record[:2] for e in events])
    delta = [e for events in per_record for e in events if e.__struct_config__.tag
             == "item.completed"]
    assert delta and summarize(before, delta) is before


def test_the_stored_part_round_trips_and_the_topic_form_has_field_names():
    events = [e for events in _events(1) for e in events]
    s = summarize(None, events)
    assert isinstance(s, SummaryState)
    assert msgspec.msgpack.decode(msgspec.msgpack.encode(s), type=SummaryState) == s
    assert len(msgspec.msgpack.encode(s)) < 100
    topic = json.loads(encode_summary(record(s, events[-1])))
    assert topic["sessionId"] == "s1" and topic["turns"] == 1
    assert decode_summary(encode_summary(record(s, events[-1]))) == record(s, events[-1])


def test_its_size_does_not_grow_with_the_session():
    short = summarize(None, [e for events in _events(1) for e in events])
    long = summarize(None, [e for events in _events(200) for e in events])
    assert long.turns == 200
    assert len(msgspec.msgpack.encode(long)) - len(msgspec.msgpack.encode(short)) < 16
