"""Deterministic ids and digests (adapters.core.ids): the shortcuts give what the
definitions give."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from adapters.core.ids import (
    _EMPTY_DIGEST,
    SEQ_HEX_KEPT,
    _bytes_digest,
    _event_prefix,
    _extend,
    event_id,
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
