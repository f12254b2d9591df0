"""Lines a session file gives again, and how a transcript adapter knows them.

A runtime that rewrites a session file (a compaction, an edit of its history) makes the
shipper read the file again from its start and send every line of it again. Most of
those lines were translated already, however far back; some may be new. Translated
again, the old ones would repeat their text under new ids.

Remembering every line translated would make a session's stored state grow with the
session, and the worker writes that state to the changelog at every change: a long
session would cost quadratic time. So a transcript adapter keeps a high-water mark in
its runtime's own order (HighWater), of bounded size:

* Each line has a key, a number that grows as the runtime writes its file: Codex's
  `ordinal`, OpenCode's `seq`, or the line's own time in ms where the runtime writes
  its lines in time order. A line without a key of its own takes the key of the line
  before it.
* `key` is the greatest key translated. A line above it is new. A line at or below
  `key - skew` is old: the runtime wrote it before the lines already translated.
  `skew` is how much earlier than a line it wrote already the runtime may stamp a line
  it writes later (0 for a counter; for times, lines written in the same millisecond
  and the small inversions a runtime makes).
* In between, `near` decides: the digests of the lines translated with keys in that
  window (their ids where they have one, else their content: the decoded line encoded
  again with sorted keys, so a line written again with other spacing or key order is
  the same line). A line found there is old; any other line is new.

Bound: `near` keeps at most NEAR_KEPT pairs of a distance below `key` (under `skew`)
and a 62-bit digest, so a session's mark is at most 2 + 2 * NEAR_KEPT integers (about
400 bytes as the table stores it), whatever the session's length. When `near` is full,
the line farthest below the mark makes room: past NEAR_KEPT lines within `skew` of the
mark, those it let go, sent again, are translated again (a repeat, never a loss).
A line is dropped only if its key says it was written before what was translated, or
its id or content was translated within the window, so no new line is dropped as long
as the runtime's keys keep their promise (each adapter's header says which one it
relies on).
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

from adapters.core.contract import HighWater
from adapters.core.ids import message_digest

#: (key, digest) pairs a mark keeps of the lines near it (HighWater.near).
NEAR_KEPT: Final = 32
_sorted_json: Final = msgspec.json.Encoder(order="sorted").encode


def resent(mark: HighWater, key: int | None, ident: str | None, obj: dict[str, Any],
           skew: int) -> tuple[bool, HighWater]:
    """(whether the line was translated already, the mark once it is).

    `key` is the line's key (None: a line the mark cannot place, always new and not
    recorded), `ident` the runtime's id of the line (None: its content tells it from the
    lines beside it), `obj` the decoded line, `skew` the runtime's inversion bound
    (module docstring). Raises nothing."""
    if key is None:
        return False, mark
    top = mark.key
    if key <= top - skew:
        return True, mark if mark.last == key else HighWater(key=top, last=key,
                                                             near=mark.near)
    if key > top and skew == 0:
        return False, HighWater(key=key, last=key)
    digest = message_digest(ident.encode() if ident is not None
                            else _sorted_json(obj))
    near = mark.near
    if key <= top:
        for i in range(1, len(near), 2):
            if near[i] == digest:
                return True, mark if mark.last == key else HighWater(key=top, last=key,
                                                                     near=near)
    high = max(top, key)
    shift = high - top  # the pairs' distances are from the mark's key: they move with it
    kept: list[int] = []
    for i in range(0, len(near), 2):
        behind = near[i] + shift
        if behind < skew:
            kept += (behind, near[i + 1])
    kept += (high - key, digest)
    if len(kept) > 2 * NEAR_KEPT:
        # full: the line farthest below the mark goes, the last to come among equals.
        # So an old line sent again that the mark had let go, translated again, goes
        # again itself: it never pushes out the next old line (and that one the next).
        far = max(range(0, len(kept), 2), key=lambda i: (kept[i], i))
        del kept[far:far + 2]
    return False, HighWater(key=high, last=key, near=tuple(kept))


def raised(mark: HighWater, key: int, skew: int) -> HighWater:
    """The mark once a line at `key` was translated that another mark placed (its key
    at least `key`, its near lines as far below it as they were, `key` the last)."""
    if key <= mark.key:
        return mark if mark.last == key else HighWater(key=mark.key, last=key,
                                                       near=mark.near)
    shift = key - mark.key
    near = mark.near
    kept: list[int] = []
    for i in range(0, len(near), 2):
        if near[i] + shift < skew:
            kept += (near[i] + shift, near[i + 1])
    return HighWater(key=key, last=key, near=tuple(kept))
