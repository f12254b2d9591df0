"""adapters.core.sha256: a SHA-256 whose midstate is stored between updates."""

from __future__ import annotations

import hashlib
import random

import pytest

from adapters.core import sha256


def digest_of(pieces: list[bytes]) -> str:
    state, size = b"", 0
    for p in pieces:
        state = sha256.extend(state, size, p)
        size += len(p)
        assert len(state) == 32 + size % 64 or (size == 0 and state == b"")
    return sha256.hexdigest(state, size)


def random_pieces(rng: random.Random) -> tuple[bytes, list[bytes]]:
    data = rng.randbytes(rng.randrange(0, 700))
    cuts = sorted(rng.randrange(0, len(data) + 1) for _ in range(rng.randrange(0, 6)))
    bounds = [0, *cuts, len(data)]
    return data, [data[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]


@pytest.mark.parametrize("seed", range(40))
def test_any_split_of_the_bytes_gives_hashlibs_digest(seed: int) -> None:
    data, pieces = random_pieces(random.Random(seed))
    assert digest_of(pieces) == hashlib.sha256(data).hexdigest()


def test_the_midstate_is_the_same_whatever_the_split() -> None:
    data = bytes(range(256)) * 5
    one = sha256.extend(b"", 0, data)
    state, size = b"", 0
    for i in range(0, len(data), 7):
        state = sha256.extend(state, size, data[i:i + 7])
        size += len(data[i:i + 7])
    assert state == one


@pytest.mark.parametrize("seed", range(10))
def test_the_python_compression_gives_the_same_states_and_digests(
        seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    data, pieces = random_pieces(random.Random(seed))
    with_lib = [sha256.extend(b"", 0, data)]
    monkeypatch.setattr(sha256, "_LIB", [None, None])
    assert digest_of(pieces) == hashlib.sha256(data).hexdigest()
    assert sha256.extend(b"", 0, data) == with_lib[0]


def test_libcrypto_is_used_where_it_is_there() -> None:
    """The measured cost (0.6 ms per MiB) is libcrypto's: on this machine it loads."""
    assert sha256._functions()[0] is not None
