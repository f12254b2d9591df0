"""The consumer library's part without I/O (topics.consumer): dedupe by the ranges of
seqs seen per session life and partition, gaps as values, handled prefixes, and what a version-N reader does with
version N+1 events (README "Schema evolution")."""

from __future__ import annotations

import json
from typing import Any

from adapters.core.ids import event_id
from topics.canonical import SCHEMA_VERSION, ContentDelta, TurnCompleted, TurnStarted
from topics.catalog import CANONICAL_TOPIC, CHAT_TOPIC
from topics.chat import ChatText
from topics.consumer import MAX_RANGES, Gap, Tracker, Unknown, decode

TP = (CANONICAL_TOPIC, 0)


def event(seq: int, *, session: str = "s1", epoch: int = 0, type_: str = "turn.started",
          payload: dict[str, Any] | None = None, **extra: Any) -> bytes:
    return json.dumps({
        "type": type_, "schemaVersion": SCHEMA_VERSION,
        "eventId": event_id("claude", session, seq, epoch), "seq": seq, "provider": "claude",
        "sessionId": session, "createdAt": "2026-12-01T00:00:00.000Z", "synthetic": False,
        "payload": payload if payload is not None else {"model": "m"}, **extra}).encode()


def feed_all(tracker: Tracker, values: list[bytes], tp: tuple[str, int] = TP,
             start: int = 0) -> list[Any]:
    out: list[Any] = []
    for n, v in enumerate(values):
        out += tracker.feed(tp, start + n, v)
    return out


def test_events_come_out_typed():
    t = Tracker()
    t.assigned(TP, 0, complete=True)
    (e,) = feed_all(t, [event(1)])
    assert isinstance(e, TurnStarted) and e.payload.model == "m"


def test_a_redelivered_event_is_dropped_by_the_seqs_its_life_was_seen_with():
    t = Tracker()
    t.assigned(TP, 0, complete=True)
    got = feed_all(t, [event(1), event(2), event(3), event(2), event(3), event(4)])
    assert [e.seq for e in got] == [1, 2, 3, 4] and t.duplicates == 2


def test_a_new_life_of_the_same_session_starts_at_seq_1_and_is_not_a_copy():
    t = Tracker()
    t.assigned(TP, 0, complete=True)
    got = feed_all(t, [event(1), event(2), event(1, epoch=99), event(2, epoch=99)])
    assert [e.seq for e in got] == [1, 2, 1, 2] and t.gaps == 0


def test_a_skipped_seq_is_a_gap_value_before_the_event():
    t = Tracker()
    t.assigned(TP, 0, complete=True)
    got = feed_all(t, [event(1), event(2), event(5), event(6)])
    assert [type(x).__name__ for x in got] == ["TurnStarted", "TurnStarted", "Gap",
                                               "TurnStarted", "TurnStarted"]
    gap = got[2]
    assert (gap.sessionId, gap.after, gap.before, gap.missing, gap.offset) == ("s1", 2, 5, 2, 2)


def test_a_first_sight_past_seq_1_is_a_gap_only_when_the_partition_was_read_whole():
    whole, partial = Tracker(), Tracker()
    whole.assigned(TP, 0, complete=True)
    partial.assigned(TP, 40, complete=False)
    assert isinstance(feed_all(whole, [event(3)])[0], Gap)
    assert [type(x) for x in feed_all(partial, [event(3)], start=40)] == [TurnStarted]


def test_chat_records_have_seqs_of_their_own():
    t = Tracker()
    for tp in (TP, (CHAT_TOPIC, 0)):
        t.assigned(tp, 0, complete=True)
    eid = event_id("claude", "s1", 1)
    chat = json.dumps({"type": "text", "session_id": "s1", "provider": "claude", "seq": 1,
                       "event_id": f"{eid}.0", "source_event_id": eid, "content": "hi",
                       "accumulated": "hi"}).encode()
    assert len(feed_all(t, [event(1), event(2)])) == 2
    (c,) = t.feed((CHAT_TOPIC, 0), 0, chat)
    assert isinstance(c, ChatText) and c.content == "hi"
    assert t.feed((CHAT_TOPIC, 0), 1, chat) == []


def test_only_the_contiguous_handled_prefix_is_committed():
    t = Tracker()
    t.assigned(TP, 10, complete=False)
    a, b, c = feed_all(t, [event(1), event(2), event(3)], start=10)
    assert t.commits() == {}
    t.handled(b)
    assert t.commits() == {}  # 10 is not handled yet: committing 12 would skip it
    t.handled(a)
    assert t.commits() == {TP: 12}
    t.committed({TP: 12})
    assert t.commits() == {}
    t.handled(c)
    t.handled(c)  # twice: nothing more
    assert t.commits() == {TP: 13}


def test_dropped_copies_count_as_handled_and_a_tombstone_is_unknown():
    t = Tracker()
    t.assigned(TP, 0, complete=True)
    (a,) = t.feed(TP, 0, event(1))
    assert t.feed(TP, 1, event(1)) == []
    (tomb,) = t.feed(TP, 2, None)
    assert isinstance(tomb, Unknown) and tomb.value == b"" and tomb.type is None
    t.handled(a)
    assert t.commits() == {TP: 2}
    t.handled(tomb)
    assert t.commits() == {TP: 3}


def test_history_below_the_committed_offset_drops_copies_published_past_it():
    """A crashed worker published seq 4-5 again after the reader had handled and
    committed up to seq 5: read back, the history says so."""
    t = Tracker()
    t.assigned(TP, 5, complete=True)
    for v in [event(1), event(2), event(3), event(4), event(5)]:
        t.history(TP, v)
    got = feed_all(t, [event(4), event(5), event(6)], start=5)
    assert [e.seq for e in got] == [6] and t.gaps == 0


def test_lives_remembered_are_bounded_and_a_forgotten_one_raises_no_false_gap():
    t = Tracker(max_lives=3)
    t.assigned(TP, 0, complete=True)
    values = [event(1, session=f"s{i}") for i in range(5)] + [event(2, session="s0")]
    got = feed_all(t, values)
    assert len(t.lives) == 3 and t.forgot
    assert not any(isinstance(x, Gap) for x in got)


def test_memory_per_life_is_one_range_whatever_the_length_of_the_session():
    t = Tracker()
    t.assigned(TP, 0, complete=True)
    for item in feed_all(t, [event(s) for s in range(1, 2001)]):
        t.handled(item)
    (seen,) = t.lives.values()
    assert seen.ranges == {TP: [1, 2000]} and seen.count == 1
    assert t.partitions[TP].open == {} and t._where == {}


# ---- seqs that jump, sessions on two partitions --------------------------------------

FORGED = 10**12 - 1  # the highest seq an eventId's 12 hex digits hold
TP1 = (CANONICAL_TOPIC, 1)


def seqs(items: list[Any]) -> list[Any]:
    return [("gap", x.after, x.before) if isinstance(x, Gap) else x.seq for x in items]


def test_a_forged_huge_seq_is_a_gap_and_the_events_after_it_are_not_copies():
    t = Tracker()
    t.assigned(TP, 0, complete=True)
    got = feed_all(t, [event(s) for s in range(1, 6)] + [event(FORGED)]
                   + [event(s) for s in range(6, 10)] + [event(7), event(FORGED)])
    assert seqs(got) == [1, 2, 3, 4, 5, ("gap", 5, FORGED), FORGED, 6, 7, 8, 9]
    assert t.duplicates == 2


def test_a_forged_huge_seq_first_on_a_partition_read_from_now_hides_nothing():
    t = Tracker()
    t.assigned(TP, 40, complete=False)
    got = feed_all(t, [event(FORGED)] + [event(s) for s in range(83, 90)] + [event(85)],
                   start=40)
    assert seqs(got) == [FORGED, 83, 84, 85, 86, 87, 88, 89] and t.duplicates == 1


def test_a_forged_seq_on_another_partition_hides_nothing_on_this_one():
    t = Tracker()
    for tp in (TP, TP1):
        t.assigned(tp, 0, complete=True)
    got = t.feed(TP1, 0, event(FORGED)) + t.feed(TP1, 1, event(3))
    got += feed_all(t, [event(s) for s in range(1, 6)])
    assert seqs(got) == [("gap", 0, FORGED), FORGED, ("gap", 0, 3), 3, 1, 2, 3, 4, 5]


def test_a_session_on_two_partitions_is_merged_by_seq_whatever_is_read_first():
    """Its records moved from partition 0 to 1 at seq 50; partition 1 is read first."""
    t = Tracker()
    for tp in (TP, TP1):
        t.assigned(tp, 0, complete=True)
    later = feed_all(t, [event(s) for s in range(50, 83)] + [event(60)], tp=TP1)
    earlier = feed_all(t, [event(s) for s in range(1, 50)] + [event(49)])
    assert seqs(later) == [("gap", 0, 50), *range(50, 83)]
    assert seqs(earlier) == list(range(1, 50)) and t.duplicates == 2
    (seen,) = t.lives.values()
    assert seen.ranges == {TP1: [50, 82], TP: [1, 49]}
    # read in seq order, no gap at all
    t = Tracker()
    for tp in (TP, TP1):
        t.assigned(tp, 0, complete=True)
    got = feed_all(t, [event(s) for s in range(1, 50)])
    got += feed_all(t, [event(s) for s in range(50, 83)], tp=TP1)
    assert seqs(got) == list(range(1, 83))


def test_a_life_keeps_a_bounded_number_of_ranges_whatever_it_is_sent():
    t = Tracker()
    t.assigned(TP, 0, complete=True)
    forged = [event(FORGED - 2 * n) for n in range(1000)]
    got = feed_all(t, [event(s) for s in range(1, 11)] + forged
                   + [event(s) for s in range(11, 21)])
    (seen,) = t.lives.values()
    assert seen.count == sum(len(r) for r in seen.ranges.values()) // 2 == MAX_RANGES
    assert seen.ranges[TP][:2] == [1, 20]  # the session's own range is never the shortest
    assert [x for x in seqs(got) if isinstance(x, int) and x < 100] == list(range(1, 21))


def test_the_same_event_id_on_two_partitions_is_committed_on_both():
    t = Tracker()
    for tp in (TP, TP1):
        t.assigned(tp, 0, complete=True)
    (a,) = t.feed(TP, 0, event(1))
    (b,) = t.feed(TP1, 0, event(1))
    t.handled(a)
    t.handled(b)
    assert t.commits() == {TP: 1, TP1: 1} and t._where == {} and t._more == {}


def test_a_forged_huge_seq_read_back_as_history_hides_nothing_after_the_restart():
    t = Tracker()
    t.assigned(TP, 7, complete=True)
    for v in [event(s) for s in range(1, 6)] + [event(FORGED), event(6)]:
        t.history(TP, v)
    got = feed_all(t, [event(6), event(7), event(8)], start=7)
    assert seqs(got) == [7, 8] and t.duplicates == 1


def test_a_reader_that_commits_nothing_keeps_nothing_per_record():
    t = Tracker(offsets=False)
    t.assigned(TP, 0, complete=True)
    got = feed_all(t, [event(s) for s in range(1, 1001)] + [event(5), b"not json"])
    assert len(got) == 1001 and t.duplicates == 1
    assert t.partitions[TP].open == {} and t._where == {} and t.commits() == {}


# ---- schema evolution: a version-N reader, version N+1 events -------------------


def test_unknown_fields_of_a_future_version_are_ignored():
    future = event(1, schemaVersion=SCHEMA_VERSION + 1, agentIds=["a1"], tenant="t",
                   payload={"model": "m", "effort": "high", "routing": {"pool": "eu"}})
    e = decode(CANONICAL_TOPIC, 0, 0, future)
    assert isinstance(e, TurnStarted) and e.payload.effort == "high"


def test_an_unknown_event_type_is_an_unknown_value_deduplicated_and_gap_checked():
    t = Tracker()
    t.assigned(TP, 0, complete=True)
    future = event(2, type_="session.forked", payload={"into": "s2"})
    got = feed_all(t, [event(1), future, future, event(4, type_="session.forked",
                                                        payload={})])
    assert [type(x).__name__ for x in got] == ["TurnStarted", "Unknown", "Gap", "Unknown"]
    u = got[1]
    assert (u.type, u.seq, u.sessionId, u.value, u.offset) == ("session.forked", 2, "s1",
                                                                future, 1)
    t.handled(got[0])
    t.handled(u)
    assert t.commits() == {TP: 3}  # the copy at 2 was dropped: handled


def test_a_new_enum_value_is_an_unknown_value_not_a_crash():
    future = event(1, type_="turn.completed", payload={"state": "paused"})
    u = decode(CANONICAL_TOPIC, 0, 7, future)
    assert isinstance(u, Unknown) and u.type == "turn.completed" and "state" in u.reason
    ok = decode(CANONICAL_TOPIC, 0, 7, event(1, type_="turn.completed",
                                             payload={"state": "completed"}))
    assert isinstance(ok, TurnCompleted)


def test_a_record_that_is_no_event_is_unknown_without_envelope_and_still_committable():
    t = Tracker()
    t.assigned(TP, 0, complete=True)
    got = feed_all(t, [b"not json", b'{"type": 3}'])
    assert [(u.type, u.sessionId) for u in got] == [(None, None), (None, None)]
    for u in got:
        t.handled(u)
    assert t.commits() == {TP: 2}


def test_every_future_delta_still_decodes():
    e = decode(CANONICAL_TOPIC, 0, 0, event(1, type_="content.delta", payload={
        "streamKind": "assistant_text", "delta": "x", "audience": "all"}))
    assert isinstance(e, ContentDelta) and e.payload.delta == "x"
