"""OpenCode: a part's text, kept in the state while short and spooled once longer
(translator, "Streams").

A part's emitted text and its unsent text are each kept in the state while short (up
to common._KEPT characters: Part.said, Part.held) and spooled once longer (streams
"text" and "held" of its item; the state's copy is then ""): most parts never reach the
spool, and the state stays small however long a part.
"""

from __future__ import annotations

import os

from adapters.core.emitter import Emitter
from adapters.core.emitter import replace as _replace
from adapters.core.spool import Whole
from adapters.opencode.common import _KEPT
from adapters.opencode.state import Part


def _add(out: Emitter, item: str, stream: str, kept: str, text: str) -> str:
    """Add `text` to the stream whose short form is `kept`; the new short form."""
    if not text:
        return kept
    if len(kept) + len(text) <= _KEPT and out.streamed(item, stream) < 0:
        return kept + text
    out.append(item, stream, kept + text)
    return ""


def _len(out: Emitter, item: str, stream: str, kept: str) -> int:
    return max(out.streamed(item, stream), 0) + len(kept)


def _extends(out: Emitter, item: str, stream: str, kept: str, text: str) -> bool:
    """Does `text` begin with all the stream holds?"""
    if out.streamed(item, stream) < 0:
        return text.startswith(kept)
    return out.extends(item, stream, text)


def _read(out: Emitter, item: str, stream: str, kept: str, take: bool) -> Whole:
    """All the stream holds; `take` closes it."""
    got = out.take(item, stream) if take else out.whole(item, stream)
    return got if got is not None else Whole(kept, len(kept), False)


def _hold(out: Emitter, pid: str, part: Part, text: str) -> Part:
    """Add `text` to the part's unsent text."""
    held = _add(out, out.id("itm", pid), "held", part.held, text)
    return _replace(part, held=held) if held != part.held else part


def _unsent(out: Emitter, pid: str, part: Part) -> tuple[str, Part]:
    """The part's unsent text, taken out of the state and the spool."""
    text = _read(out, out.id("itm", pid), "held", part.held, take=True).text
    return text, _replace(part, held="") if part.held else part


def _rebuffer(out: Emitter, pid: str, part: Part, text: str) -> Part:
    """Make `text` (a snapshot of a part whose role is unknown) its buffered text; only
    what a growing snapshot adds is spooled."""
    item = out.id("itm", pid)
    if _extends(out, item, "held", part.held, text):
        return _hold(out, pid, part, text[_len(out, item, "held", part.held):])
    out.drop(item, "held")
    return _hold(out, pid, _replace(part, held=""), text)


def _common_prefix(a: str, b: str) -> str:
    return os.path.commonprefix([a, b])  # character-wise; pure, no file system access
