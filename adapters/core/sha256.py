"""SHA-256 computed across records: the digest of a stream whose bytes arrive as
deltas over many records, with a state of fixed size that is stored between them.

The state is SHA-256's own midstate: the eight chaining words H0..H7 (32 bytes,
big-endian, as FIPS 180-4 writes them) followed by the bytes of the block not
compressed yet (fewer than 64), and the stream's byte count kept beside it (the
caller's `Stream.size`). An empty state is the start (nothing hashed). It is plain
bytes, so it survives the session's msgpack encoding and the changelog, and it does
not depend on how the bytes were split into updates: replay and the worker, one
record or many, give the same state and the same digest.

Python's hashlib objects cannot be serialized, so the compression runs in OpenSSL's
libcrypto through ctypes (SHA256_Update on a SHA256_CTX built from the midstate and
read back from it; libcrypto is the library Python's hashlib links). Measured with
OpenSSL 3.0: 0.6 ms per MiB, and about 2 us for an update that completes a block
(one that does not is a bytes concatenation, no call). Where libcrypto lacks those
functions or its context does not have the layout expected here (checked once
against hashlib), the same compression runs in Python: the same state and digests, at about
4 s per MiB interpreted.
"""

from __future__ import annotations

import ctypes
import hashlib
import struct
from typing import Any, Final

#: The initial chaining words H0..H7 (FIPS 180-4, 5.3.3), big-endian.
_IV: Final = bytes.fromhex("6a09e667bb67ae853c6ef372a54ff53a510e527f9b05688c1f83d9ab5be0cd19")
_K: Final = (
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
    0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
    0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
    0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
    0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
    0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
    0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
    0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
    0xc67178f2,
)
_M32: Final = 0xFFFFFFFF
#: sizeof(SHA256_CTX): h[8], Nl, Nh, data[16], num, md_len, all 32-bit words
_CTX_SIZE: Final = 112
_DATA_AT: Final = 40
_NUM_AT: Final = 104

# the midstate's words (big-endian) and the context's (native), packed in one call each
_BE_WORDS: Final = struct.Struct(">8I")
_CTX_HEAD: Final = struct.Struct("=10I")  # h[8], Nl, Nh
_CTX_TAIL: Final = struct.Struct("=II")  # num, md_len
_CTX_WORDS: Final = struct.Struct("=8I")
_NUM: Final = struct.Struct("=I")

#: libcrypto's SHA256_Update and SHA256_Final, once looked up ([] before the first use;
#: [None, None]: not usable, the compression runs in Python)
_LIB: list[Any] = []


def extend(state: bytes, size: int, data: bytes) -> bytes:
    """The midstate after `data` follows the `size` bytes `state` hashed."""
    if not data:
        return state
    if not state:
        state = _IV
    if len(state) - 32 + len(data) < 64:  # no block completed: nothing to compress
        return state + data
    update = _functions()[0]
    if update is None:
        return _py_extend(state, data)
    ctx = _context(state, size)
    update(ctx, data, len(data))
    raw = ctx.raw
    num = _NUM.unpack_from(raw, _NUM_AT)[0]
    return _BE_WORDS.pack(*_CTX_WORDS.unpack_from(raw, 0)) + raw[_DATA_AT:_DATA_AT + num]


def hexdigest(state: bytes, size: int) -> str:
    """The SHA-256 (lowercase hex) of the `size` bytes `state` hashed."""
    if not state:
        state = _IV
    final = _functions()[1]
    if final is None:
        return _py_final(state, size)
    ctx = _context(state, size)
    out = ctypes.create_string_buffer(32)
    final(out, ctx)
    return out.raw.hex()


def _context(state: bytes, size: int) -> Any:
    """A SHA256_CTX holding the midstate `state` after `size` bytes."""
    pending = state[32:]
    bits = size * 8
    return ctypes.create_string_buffer(
        _CTX_HEAD.pack(*_BE_WORDS.unpack_from(state, 0), bits & _M32, (bits >> 32) & _M32)
        + pending + bytes(64 - len(pending)) + _CTX_TAIL.pack(len(pending), 32), _CTX_SIZE)


def _functions() -> list[Any]:
    if not _LIB:
        _LIB.extend(_load())
    return _LIB


def _load() -> list[Any]:
    """libcrypto's SHA256_Update and SHA256_Final, or [None, None] where they are
    missing or do not agree with hashlib on a test stream."""
    try:
        import _hashlib  # the module linked to libcrypto: its symbols resolve through it

        lib = ctypes.CDLL(_hashlib.__file__)
        update, final = lib.SHA256_Update, lib.SHA256_Final
    except (ImportError, OSError, AttributeError):
        return [None, None]
    _LIB[:] = [update, final]
    probe = bytes(range(256)) * 3
    try:
        state = b""
        size = 0
        for piece in (probe[:1], probe[1:70], probe[70:200], probe[200:]):
            state = extend(state, size, piece)
            size += len(piece)
        ok = hexdigest(state, size) == hashlib.sha256(probe).hexdigest()
    except (OSError, ValueError, struct.error):
        ok = False
    _LIB.clear()
    return [update, final] if ok else [None, None]


def _py_extend(state: bytes, data: bytes) -> bytes:
    """extend() in Python: `state` is not empty and `data` completes a block."""
    h = list(struct.unpack_from(">8I", state, 0))
    buf = state[32:] + data
    end = len(buf) - len(buf) % 64
    for at in range(0, end, 64):
        _compress(h, buf, at)
    return struct.pack(">8I", *h) + buf[end:]


def _py_final(state: bytes, size: int) -> str:
    pending = state[32:]
    tail = pending + b"\x80" + bytes((55 - len(pending)) % 64) + struct.pack(">Q", size * 8)
    h = list(struct.unpack_from(">8I", state, 0))
    for at in range(0, len(tail), 64):
        _compress(h, tail, at)
    return struct.pack(">8I", *h).hex()


def _compress(h: list[int], block: bytes, at: int) -> None:
    """One SHA-256 compression (FIPS 180-4, 6.2.2) of block[at:at + 64] into `h`."""
    w = list(struct.unpack_from(">16I", block, at))
    for t in range(16, 64):
        x, y = w[t - 15], w[t - 2]
        s0 = ((x >> 7) | (x << 25)) ^ ((x >> 18) | (x << 14)) ^ (x >> 3)
        s1 = ((y >> 17) | (y << 15)) ^ ((y >> 19) | (y << 13)) ^ (y >> 10)
        w.append((w[t - 16] + (s0 & _M32) + w[t - 7] + (s1 & _M32)) & _M32)
    a, b, c, d, e, f, g, k = h
    for t in range(64):
        s1 = ((e >> 6) | (e << 26)) ^ ((e >> 11) | (e << 21)) ^ ((e >> 25) | (e << 7))
        ch = (e & f) ^ (~e & g)
        t1 = (k + (s1 & _M32) + ch + _K[t] + w[t]) & _M32
        s0 = ((a >> 2) | (a << 30)) ^ ((a >> 13) | (a << 19)) ^ ((a >> 22) | (a << 10))
        maj = (a & b) ^ (a & c) ^ (b & c)
        k, g, f, e = g, f, e, (d + t1) & _M32
        d, c, b, a = c, b, a, (t1 + (s0 & _M32) + maj) & _M32
    for i, v in enumerate((a, b, c, d, e, f, g, k)):
        h[i] = (h[i] + v) & _M32
