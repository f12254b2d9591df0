"""Deterministic ids and digests (adapters.core.ids): the shortcuts give what the
definitions give."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from adapters.core.ids import (
    _EMPTY_DIGEST,
    DEDUPE_KEPT,
    SEQ_HEX_KEPT,
    _bytes_digest,
    _event_prefix,
    _extend,
    event_id,
    message_digest,
    seen_before,
)


def test_an_event_id_ends_in_its_seq_in_12_hex_digits_past_the_table_too():
    prefix = _event_prefix("codex", "s1", 0)
    for seq in [0, 1, 9, 10, 255, SEQ_HEX_KEPT - 1, SEQ_HEX_KEPT, SEQ_HEX_KEPT + 1, 2**40,
                2**48 - 1]:
        eid = event_id("codex", "s1", seq)
        assert eid == prefix + format(seq, "012x")
        assert len(eid) == 36 and int(eid[-12:], 16) == seq


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=300), more=st.lists(st.binary(max_size=40), max_size=4))
def test_the_digest_of_bytes_is_the_empty_digest_extended_by_them(data: bytes,
                                                                 more: list[bytes]):
    assert _bytes_digest(data) == _extend(_EMPTY_DIGEST, data)
    grown = _bytes_digest(data)
    for chunk in more:  # a stream's digest, append by append: the digest of them all
        grown = _extend(grown, chunk)
    assert grown == _bytes_digest(data + b"".join(more))


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=300), others=st.lists(st.binary(max_size=300), max_size=24),
       stored=st.integers(0, 24))
def test_a_message_digest_is_a_small_negative_int_and_old_digests_still_match(
        data: bytes, others: list[bytes], stored: int):
    """The dedupe digest fits in 62 bits (compiled, a small int) and is negative; a
    session stored by an earlier version holds 64-bit `_bytes_digest` values (its
    `stored` oldest digests, the rest this version's), which match the same bytes all the
    same. Only the last DEDUPE_KEPT digests count."""
    digest = message_digest(data)
    assert -(2**62) <= digest < 0
    assert digest == ~(_bytes_digest(data) >> 2)
    seen = [_bytes_digest(o) if k < stored else message_digest(o) for k, o in enumerate(others)]
    recent = others[-DEDUPE_KEPT:]
    assert seen_before(seen, digest) is (data in recent)
    assert seen_before(seen + [digest], digest)
    assert seen_before([_bytes_digest(data)] + seen[-DEDUPE_KEPT + 1:], digest)


def test_seen_before_is_exact_on_a_digest_its_old_form_only_nears():
    """Only the two lowest bits of an old digest are dropped: one that differs above
    them is another message."""
    data = b'{"uuid":"u1","type":"stream_event"}'
    old = _bytes_digest(data)
    assert seen_before([old ^ 1], message_digest(data))  # the two dropped bits
    assert seen_before([old ^ 3], message_digest(data))
    assert not seen_before([old ^ 4], message_digest(data))
    assert not seen_before([old ^ (1 << 63)], message_digest(data))
    assert not seen_before([message_digest(data) ^ 1], message_digest(data))


def test_only_the_last_dedupe_kept_digests_count():
    digests = [message_digest(b"m%d" % k) for k in range(DEDUPE_KEPT + 4)]
    assert not seen_before(digests, digests[3])  # five back past the last 16
    assert seen_before(digests, digests[4])
    old = [_bytes_digest(b"m%d" % k) for k in range(DEDUPE_KEPT + 4)]
    assert not seen_before(old, digests[3]) and seen_before(old, digests[4])
