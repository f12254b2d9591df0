"""The conversation core's streams (adapters.core.emitter.Emitter, "Streams"): lengths and a
digest in the session, the bytes in a spool, a cap with a head and a moving tail."""

from __future__ import annotations

import random

import msgspec
import pytest

from adapters import MemorySpool, Session
from adapters.core import whole_fields
from adapters.core.contract import Stream
from adapters.core.emitter import Emitter


def emitter(spool: MemorySpool, streams: dict[str, Stream] | None = None, cap: int = 1 << 20
            ) -> Emitter:
    return Emitter("codex", "s1", 0, 0, False, "test", 0, streams, spool, cap)


def record(spool: MemorySpool, streams: dict[str, Stream], *texts: str, cap: int = 1 << 20
           ) -> dict[str, Stream]:
    """One record that appends `texts` to item i1's output; the streams after it, as
    the session stores them (encoded and decoded)."""
    out = emitter(spool, streams, cap)
    for t in texts:
        out.append("i1", "out", t)
    out._flush()
    return msgspec.msgpack.decode(msgspec.msgpack.encode(out.streams), type=dict[str, Stream])


def test_rest_is_the_part_of_a_final_text_not_carried_yet() -> None:
    out = emitter(MemorySpool())
    assert out.rest("i1", "text", "Hello") == "Hello"  # nothing streamed: all of it
    out.append("i1", "text", "He", spool=False)
    out.append("i1", "text", "l", spool=False)
    assert out.streamed("i1", "text") == 3
    assert out.rest("i1", "text", "Hello") == "lo"
    assert out.rest("i1", "text", "Hel") == ""
    assert out.rest("i1", "text", "Help!") == "p!"
    assert out.rest("i1", "text", "Hex, no") == ""  # diverged: never twice
    assert out.rest("i1", "text", "H") == ""  # shorter
    assert out.extends("i1", "text", "Hello") and not out.extends("i1", "text", "Hi")


def test_the_digest_tells_non_ascii_and_equal_length_texts_apart() -> None:
    out = emitter(MemorySpool())
    out.append("i1", "t", "é🙂", spool=False)
    assert out.rest("i1", "t", "é🙂!") == "!"
    assert out.rest("i1", "t", "e🙂!") == ""
    assert out.rest("i1", "t", "é🙃!") == ""


def test_a_spooled_stream_is_read_back_whole_across_records_and_dropped() -> None:
    spool = MemorySpool()
    streams = record(spool, {}, "a", "b")  # one record: one chunk
    assert len(spool) == 1
    streams = record(spool, streams, "c")
    streams = record(spool, streams, "d", "e")
    assert len(spool) == 3
    out = emitter(spool, streams)
    got = out.take("i1", "out")
    assert got is not None and (got.text, got.length, got.truncated) == ("abcde", 5, False)
    out._flush()
    assert len(spool) == 0 and out.streams == {}


def test_the_session_value_does_not_grow_with_the_stream() -> None:
    spool = MemorySpool()
    streams: dict[str, Stream] = {}
    sizes = []
    for _ in range(200):
        streams = record(spool, streams, "x" * 1000)
        sizes.append(len(msgspec.msgpack.encode(Session(state=0, streams=streams))))
    # lengths, chunk numbers and the SHA-256 midstate (32 bytes and under a block)
    assert max(sizes) < 80 + 32 + 64, sizes[-1]


def test_past_the_cap_the_output_keeps_its_head_and_tail_and_says_what_was_cut() -> None:
    spool = MemorySpool()
    streams: dict[str, Stream] = {}
    chunks = [f"{i:04d}" + "-" * 96 for i in range(100)]  # 100 bytes each, 10,000 in all
    for c in chunks:
        streams = record(spool, streams, c, cap=2000)
    assert len(spool) <= 2000 // 100 + 2  # the middle chunks were dropped as it went
    got = emitter(spool, streams, cap=2000).take("i1", "out")
    assert got is not None and got.truncated and got.length == 10_000
    head, _, tail = got.text.partition("\n[canonflow: ")
    assert head == "".join(chunks[:10])  # half the cap
    cut, _, tail = tail.partition(" characters left out]\n")
    assert "".join(chunks).endswith(tail) and 500 <= len(tail) <= 1000
    assert int(cut) == 10_000 - len(head) - len(tail)


def test_a_failed_line_leaves_the_streams_and_spool_as_they_were() -> None:
    spool = MemorySpool()
    streams = record(spool, {}, "kept")
    out = emitter(spool, streams)
    out._begin_line()
    out.append("i1", "out", "+fine")
    out._begin_line()
    out.append("i1", "out", "+lost")
    out.append("i2", "text", "lost too")
    out.drop("i1", "out")
    out._rollback()
    assert out.streamed("i2", "text") == -1
    got = out.whole("i1", "out")
    assert got is not None and got.text == "kept+fine"


@pytest.mark.parametrize("seed", range(5))
def test_random_appends_in_random_records_read_back_exactly(seed: int) -> None:
    rng = random.Random(seed)
    spool = MemorySpool()
    streams: dict[str, Stream] = {}
    text = ""
    for _ in range(rng.randrange(1, 40)):
        parts = ["".join(rng.choice("ab é\n🙂") for _ in range(rng.randrange(0, 9)))
                 for _ in range(rng.randrange(1, 4))]
        text += "".join(parts)
        streams = record(spool, streams, *parts)
    out = emitter(spool, streams)
    assert out.rest("i1", "out", text + "!") == "!"
    got = out.take("i1", "out")
    assert got is not None and got.text == text


def test_no_chunk_holds_more_than_16k_characters_whatever_one_record_appends() -> None:
    """A table value stays within 64 KiB: a record that appends a 100,000-character
    snapshot, or many small texts, spools them in chunks of at most 16 Ki characters."""
    spool = MemorySpool()
    streams = record(spool, {}, "é" * 100_000)
    streams = record(spool, streams, *(["abc" * 100] * 200))
    assert max(len(c) for c in spool.chunks.values()) <= 16 * 1024
    assert max(len(c.encode()) for c in spool.chunks.values()) <= 64 * 1024
    got = emitter(spool, streams).take("i1", "out")
    assert got is not None and got.text == "é" * 100_000 + "abc" * 100 * 200


@pytest.mark.parametrize("seed", range(3))
def test_past_the_cap_the_whole_carries_the_sha256_of_every_byte_appended(seed: int) -> None:
    """The digest follows the stream across records (its midstate stored in the
    session, encoded and decoded between them), whatever the split of its appends."""
    import hashlib

    rng = random.Random(seed)
    spool = MemorySpool()
    streams: dict[str, Stream] = {}
    text = ""
    while len(text.encode()) < 20_000:
        parts = ["".join(rng.choice("ab é\n🙂\x00") for _ in range(rng.randrange(0, 300)))
                 for _ in range(rng.randrange(1, 4))]
        text += "".join(parts)
        streams = record(spool, streams, *parts, cap=2000)
    got = emitter(spool, streams, cap=2000).take("i1", "out")
    assert got is not None and got.truncated and got.length == len(text)
    assert got.sha256 == hashlib.sha256(text.encode()).hexdigest()
    assert whole_fields(got)["outputSha256"] == got.sha256


def test_a_whole_within_the_cap_carries_no_digest() -> None:
    spool = MemorySpool()
    streams = record(spool, {}, "short")
    assert whole_fields(emitter(spool, streams).whole("i1", "out")) == {"output": "short"}


def test_a_stream_kept_whole_is_never_cut_at_the_cap() -> None:
    """A tool input streamed in parts (Claude's input_json_delta) is parsed at its end:
    cut at the cap it would not parse."""
    spool = MemorySpool()
    out = emitter(spool, {}, cap=2000)
    parts = ['{"content": "', *(["x" * 100] * 100), '"}']
    for p in parts:
        out.append("i1", "json", p, whole=True)
    out._flush()
    got = emitter(spool, out.streams, cap=2000).take("i1", "json")
    assert got is not None and not got.truncated and got.text == "".join(parts)


def test_a_stream_stored_without_a_digest_completes_without_one() -> None:
    """A stream an older version stored (no midstate after its first bytes) gets no
    digest rather than a wrong one."""
    spool = MemorySpool()
    streams = record(spool, {}, "x" * 1500, cap=2000)
    streams = {k: msgspec.structs.replace(v, sha=b"") for k, v in streams.items()}
    for _ in range(5):
        streams = record(spool, streams, "y" * 500, cap=2000)
    got = emitter(spool, streams, cap=2000).take("i1", "out")
    assert got is not None and got.truncated and got.sha256 is None
    assert "outputSha256" not in whole_fields(got) and whole_fields(got)["outputLength"] == 4000
