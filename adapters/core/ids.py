"""Deterministic ids and digests, and the native message ids that tell a message sent
twice from two messages alike.

Ids: eventIds, canonical ids (`thr_`, `itm_`, ...) and createdAt strings are pure
functions of their arguments (no clock, no uuid4), so the same input always gives the
same ids.

Native message ids: what tells a message sent twice from two messages alike.

A sidecar that retries a produce without idempotence, or forwards a line twice, makes
the same native message arrive again in another record; translated again it would
repeat its text ("ThiThis is ..."). Where a runtime gives every message an id (its
translator's `message_id`, None where it has none), the driver
(adapters.core.record.translate_record) remembers the last DEDUPE_KEPT messages of the
session (62-bit digests of id and bytes, `message_digest`) and drops a message with the
same id and the same bytes as one of them. Messages without an id cannot be told from a
legitimate repeat (two identical text deltas "." in a row are two dots), so they are
never dropped.
"""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Any, Final

#: How many recent message ids a session remembers (a retried produce repeats a record
#: right after it, or a few records later).
DEDUPE_KEPT: Final = 16


def jsonrpc_message_id(obj: dict[str, Any], origin: str) -> str | None:
    """The id of a JSON-RPC 2.0 request or response, per direction (client and agent
    number their requests apart); notifications (deltas, updates) have none."""
    rid = obj.get("id")
    if not isinstance(rid, (str, int)) or isinstance(rid, bool):
        return None
    kind = "req" if "method" in obj else "res"
    return f"{origin}:{kind}:{rid}"


#: A translator's `message_id`: the id of a native message (decoded, with its origin),
#: or None for a message without one.
MessageId = Callable[[dict[str, Any], str], str | None]


# ---------------------------------------------------------------------------
# Deterministic ids
# ---------------------------------------------------------------------------


# The helpers below are pure functions of their arguments; the caches only save the
# hashing and date formatting that dominated the adapter core's profile
# (`canonflow bench`), and never change a result.


def _digest(parts: tuple[str, ...], size: int) -> str:
    return hashlib.blake2b("\x1f".join(parts).encode(), digest_size=size).hexdigest()


@lru_cache(maxsize=1 << 14)
def _event_prefix(provider: str, session_id: str, epoch_ms: int) -> str:
    h = _digest((provider, session_id, str(epoch_ms)), 10)
    return f"{h[:8]}-{h[8:12]}-8{h[13:16]}-{'89ab'[int(h[16], 16) & 3]}{h[17:20]}-"


def event_id(provider: str, session_id: str, seq: int, epoch_ms: int = 0) -> str:
    """The eventId of the `seq`-th event of a session: UUID-shaped (version 8), a hash
    of (provider, session, epoch) followed by `seq` in its last 12 hex digits.

    The same input always gives the same ids, so a consumer can drop the duplicates a
    crash or a replay produces; one session's ids sort by seq. `epoch_ms` is the time
    of the session state's first record: a session closed for idleness and started
    again later gets new ids, never the ids of its first life.
    """
    return _with_seq(_event_prefix(provider, session_id, epoch_ms), seq)


#: `seq` in 12 hex digits, made once for the first SEQ_HEX_KEPT seqs of a session (1 MB):
#: formatting one was a third of stamping an event (callgrind: 2k instructions of 5.9k).
SEQ_HEX_KEPT: Final = 1 << 14
_SEQ_HEX: Final = tuple(["%012x" % n for n in range(SEQ_HEX_KEPT)])  # noqa: UP031


def _with_seq(prefix: str, seq: int) -> str:
    """An eventId: its session's prefix, then `seq` in 12 hex digits. Compiled, "%" is
    one call where an f-string with a format spec is two."""
    if 0 <= seq < SEQ_HEX_KEPT:
        return prefix + _SEQ_HEX[seq]
    return prefix + "%012x" % seq  # noqa: UP031


def canonical_id(prefix: str, session_id: str, *parts: str) -> str:
    """A canonical id (`thr_`, `trn_`, `itm_`, `req_`, ...) derived from provider ids."""
    return _canonical_id((prefix, session_id, *parts))


_CANONICAL_IDS: Final[dict[tuple[str, ...], str]] = {}
_CANONICAL_IDS_KEPT: Final = 1 << 16


def _canonical_id(key: tuple[str, ...]) -> str:
    """canonical_id(*key), cached. A dict keyed by a tuple the caller builds directly,
    rather than lru_cache behind `*parts`: compiled, 3.6% fewer instructions in the
    adapter core (callgrind). The cache is emptied when full; its values are pure."""
    cid = _CANONICAL_IDS.get(key)
    if cid is None:
        if len(_CANONICAL_IDS) >= _CANONICAL_IDS_KEPT:
            _CANONICAL_IDS.clear()
        cid = _CANONICAL_IDS[key] = f"{key[0]}_{_digest(key[1:], 12)}"
    return cid


@lru_cache(maxsize=1024)
def _iso_day(days: int) -> str:
    return datetime.fromtimestamp(days * 86400, tz=UTC).strftime("%Y-%m-%dT")


@lru_cache(maxsize=1 << 12)
def _iso_second(secs: int) -> str:
    """`YYYY-MM-DDTHH:MM:SS.` of epoch seconds: a session's messages share few seconds,
    so only the milliseconds are formatted per call."""
    days, rem = divmod(secs, 86_400)
    mins, secs = divmod(rem, 60)
    hours, mins = divmod(mins, 60)
    return f"{_iso_day(days)}{hours:02d}:{mins:02d}:{secs:02d}."


_MILLIS: Final = tuple(f"{milli:03d}Z" for milli in range(1000))  # each createdAt's tail


_iso_second_cached: Final = _iso_second  # a C static compiled (a decorated function is not)


def iso_ms(ms: int) -> str:
    """Epoch milliseconds as ISO 8601 UTC with milliseconds (never the local zone)."""
    return _iso_second_cached(ms // 1000) + _MILLIS[ms % 1000]


_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_MAX_MS: Final = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z
_ONE_MS: Final = timedelta(milliseconds=1)


def iso_to_ms(value: Any) -> int | None:
    """Epoch milliseconds of an ISO 8601 time a runtime wrote ("2026-12-01T13:33:08.141Z";
    without a zone, UTC), the inverse of iso_ms; None for anything else or a time before
    1970 (the transcripts' rows give their own times: nothing reads the clock)."""
    if not isinstance(value, str):
        return None
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    ms = (when - _EPOCH) // _ONE_MS
    return ms if 0 <= ms <= _MAX_MS else None


_EMPTY_DIGEST: Final = 1  # Stream.digest of no text: CRC-32 0, Adler-32 1
# zlib's functions as Final names: compiled, `zlib.crc32` is an attribute lookup on the
# module at each call (callgrind: 0.5k instructions a message, a tenth of the digest)
_crc32: Final = zlib.crc32
_adler32: Final = zlib.adler32


def _extend(digest: int, data: bytes) -> int:
    """The digest of (what `digest` digests) + `data`: CRC-32 and Adler-32 of the
    bytes, side by side in one int. Both run on from a previous value, so a stream's
    digest grows append by append, and any text's prefix is checked against it in one
    pass of zlib's C (Emitter.rest): measured 0.5 ms per MB, where a polynomial hash
    over one big int took 4.5 ms."""
    return (_crc32(data, digest >> 32) << 32) | _adler32(data, digest & 0xFFFFFFFF)


def _bytes_digest(data: bytes) -> int:
    """_extend(_EMPTY_DIGEST, data) in one step: the empty digest's halves are zlib's own
    starting values (compiled, the shift and mask of a 64-bit int are calls)."""
    return (_crc32(data) << 32) | _adler32(data)


def message_digest(data: bytes) -> int:
    """The digest by which the driver tells a native message sent again (Session.seen):
    `_bytes_digest` less its two lowest bits, inverted. So it is negative and fits in 62
    bits: compiled, comparing two of them is one instruction, where two 64-bit ints are
    objects compared by a call (callgrind: 16 comparisons were 1.8-4.1k instructions a
    message). The digests of earlier versions (`_bytes_digest`, never negative) still
    match: `seen_before`."""
    return ~((_crc32(data) << 30) | (_adler32(data) >> 2))


def seen_before(seen: list[int], digest: int) -> bool:
    """Whether `digest` (message_digest) is one of the last DEDUPE_KEPT of `seen`, a
    session's digests in order, including those an earlier version stored (its 64-bit
    `_bytes_digest`: a restarted worker's sessions keep dropping the copies they dropped
    before)."""
    recent = seen if len(seen) <= DEDUPE_KEPT else seen[-DEDUPE_KEPT:]
    if digest in recent:  # one C loop, interpreted as compiled
        return True
    if not recent or recent[0] < 0:
        return False  # no digest of an earlier version: those are the oldest, never negative
    for d in recent:
        if d >= 0 and ~(d >> 2) == digest:
            return True
    return False
