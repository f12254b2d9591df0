"""Unified diffs of file changes, written once for every runtime (ItemPayload `diff`).

Every runtime describes a file change its own way: the old and new texts of the whole
file (OpenCode's `filediff`, ACP's diff blocks), a replaced excerpt and its replacement
(Claude's Edit `old_string`/`new_string`, Gemini's replace, Amp's edit_file), the new
content alone (Claude's and Gemini's Write, Codex's added file), hunks without headers
(Codex's update), hunk records (Claude's `structuredPatch`). Each becomes one file's part
of a unified diff (`--- old` / `+++ new` header, `/dev/null` for an empty side, hunks with
three lines of context, GNU's "\\ No newline at end of file"); `diff_fields` joins the
parts and says what they were computed against (`diffBase`):

* `file`: the file's content before the change; hunks carry the file's line numbers;
* `excerpt`: only the replaced text and its replacement; line numbers count from the
  excerpt's first line (an excerpt's unterminated last line is a partial line, not the
  end of the file: it gets no "No newline" marker);
* `empty`: the old content is not known (a Write: the file may be new or may have been
  overwritten), diffed against empty.

Cost: linear in the texts but for the changed middle. Lines common to both ends are set
aside first (an edit of a large file compares only what changed); difflib compares the
rest, unless both sides of it together exceed MATCH_MAX lines, when the middle is written
as removed then added (a correct diff, not a minimal one). A diff longer than the
per-item cap is cut in its middle at line ends, like an output (`diffTruncated`,
`diffLength`).
"""

from __future__ import annotations

import difflib
from typing import Any, Final

#: The most lines difflib compares in one diff (both sides of the changed middle).
MATCH_MAX: Final = 20_000
#: Lines of context around each change.
CONTEXT: Final = 3
#: diffBase values, most exact first: an item's diff is as exact as its least exact part.
BASES: Final = ("file", "excerpt", "empty")
_NO_EOL: Final = "\\ No newline at end of file\n"

Op = tuple[int, int, int, int]  # a change: old lines [i1, i2) become new lines [j1, j2)


def text_diff(path: str, old: str | None, new: str | None, excerpt: bool = False,
              new_path: str | None = None) -> str:
    """One file's unified diff from its old and new texts: `old` None is an empty old
    side (`--- /dev/null`: a new file, or old content unknown), `new` None a deleted
    file; `excerpt` marks texts that are parts of the file. "" when nothing changed."""
    a = _lines(old or "", excerpt)
    b = _lines(new or "", excerpt)
    header = _header(path if old is not None else None,
                     (new_path or path) if new is not None else None)
    body = _hunks(a, b, _changes(a, b))
    if not body and old is not None and new is not None and new_path in (None, path):
        return ""
    return header + body


def hunks_diff(path: str, body: str, old_missing: bool = False, new_missing: bool = False,
               new_path: str | None = None) -> str:
    """One file's part from a unified diff a runtime wrote: kept from its own `--- `
    header on (a preamble before it, like jsdiff's `Index:` lines, is dropped), else
    given a header (Codex's update diffs are bare hunks)."""
    if body.startswith("--- "):
        text = body
    else:
        at = -1 if body.startswith("@@") else body.find("\n--- ")
        text = body[at + 1:] if at >= 0 else _header(
            None if old_missing else path, None if new_missing else (new_path or path)) + body
    return text if text.endswith("\n") else text + "\n"


def records_diff(path: str, hunks: list[Any], new_file: bool = False) -> str:
    """One file's part from hunk records (`{oldStart, oldLines, newStart, newLines,
    lines}`, the lines without their newline: Claude's structuredPatch). "" when a
    record is not of that shape."""
    out = [_header(None if new_file else path, path)]
    for h in hunks:
        if not isinstance(h, dict) or not isinstance(h.get("lines"), list):
            return ""
        nums = [h.get(k) for k in ("oldStart", "oldLines", "newStart", "newLines")]
        ints = [v for v in nums if type(v) is int]  # not a bool
        if len(ints) != 4:
            return ""
        out.append(f"@@ -{_range_of(ints[0], ints[1])} +{_range_of(ints[2], ints[3])} @@\n")
        out.extend(line + "\n" for line in h["lines"] if isinstance(line, str))
    return "".join(out)


def diff_fields(parts: list[tuple[str, str]], cap: int) -> dict[str, Any]:
    """ItemPayload's `diff` and `diffBase` from (part, base) pairs, the parts joined in
    order; past `cap` UTF-8 bytes the diff keeps its head and its tail around a line
    that says how many characters were left out, with `diffTruncated` and `diffLength`
    (its whole length in characters). Nothing when no part has text."""
    texts = [p for p, _ in parts if p]
    if not texts:
        return {}
    base = max((b for p, b in parts if p), key=BASES.index)
    text = "".join(texts)
    fields: dict[str, Any] = {"diff": text, "diffBase": base}
    if len(text) * 4 <= cap:  # within the cap whatever the characters
        return fields
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= cap:
        return fields
    fields.update(diff=_cut(data, cap, len(text)), diffTruncated=True, diffLength=len(text))
    return fields


# ---- internals ------------------------------------------------------------------------


def _lines(text: str, excerpt: bool) -> list[str]:
    """The lines of `text`, each with its "\\n" but an unterminated last one (an
    excerpt's is terminated: it is part of a line, not the file's end)."""
    if not text:
        return []
    if excerpt and not text.endswith("\n"):
        text += "\n"
    lines = text.split("\n")
    last = lines.pop()  # "" when the text ends with a newline
    out = [line + "\n" for line in lines]
    if last:
        out.append(last)
    return out


def _header(old: str | None, new: str | None) -> str:
    return f"--- {old if old is not None else '/dev/null'}\n" \
           f"+++ {new if new is not None else '/dev/null'}\n"


def _changes(a: list[str], b: list[str]) -> list[Op]:
    """The changes that turn `a` into `b`, in order (see the module docstring, "Cost")."""
    n, m = len(a), len(b)
    lo = 0
    while lo < n and lo < m and a[lo] == b[lo]:
        lo += 1
    hi = 0  # lines common to both ends, after the common start
    while hi < n - lo and hi < m - lo and a[n - 1 - hi] == b[m - 1 - hi]:
        hi += 1
    a_end, b_end = n - hi, m - hi
    if lo == a_end and lo == b_end:
        return []
    if lo == a_end or lo == b_end or (a_end - lo) + (b_end - lo) > MATCH_MAX:
        return [(lo, a_end, lo, b_end)]
    matcher = difflib.SequenceMatcher(None, a[lo:a_end], b[lo:b_end])
    return [(i1 + lo, i2 + lo, j1 + lo, j2 + lo)
            for tag, i1, i2, j1, j2 in matcher.get_opcodes() if tag != "equal"]


def _hunks(a: list[str], b: list[str], changes: list[Op]) -> str:
    """The hunks of `changes`: changes closer than twice the context share a hunk."""
    groups: list[list[Op]] = []
    for op in changes:
        if groups and op[0] - groups[-1][-1][1] <= 2 * CONTEXT:
            groups[-1].append(op)
        else:
            groups.append([op])
    out: list[str] = []
    for group in groups:
        first, last = group[0], group[-1]
        a_lo = max(0, first[0] - CONTEXT)
        a_hi = min(len(a), last[1] + CONTEXT)
        b_lo = first[2] - (first[0] - a_lo)
        b_hi = last[3] + (a_hi - last[1])
        out.append(f"@@ -{_range_of(a_lo + 1, a_hi - a_lo)} +{_range_of(b_lo + 1, b_hi - b_lo)} @@\n")
        at = a_lo  # the next old line to write
        for i1, i2, j1, j2 in group:
            _put(out, " ", a, at, i1)
            _put(out, "-", a, i1, i2)
            _put(out, "+", b, j1, j2)
            at = i2
        _put(out, " ", a, at, a_hi)
    return "".join(out)


def _put(out: list[str], sign: str, lines: list[str], start: int, end: int) -> None:
    for i in range(start, end):
        line = lines[i]
        out.append(sign + line if line.endswith("\n") else sign + line + "\n" + _NO_EOL)


def _range_of(start: int, count: int) -> str:
    """A hunk range (1-based `start`): "start" for one line, "line before,0" for none."""
    if count == 1:
        return str(start)
    if count == 0:
        return f"{max(start - 1, 0)},0"
    return f"{start},{count}"


def _cut(data: bytes, cap: int, chars: int) -> str:
    """`data` (UTF-8) cut to about `cap` bytes: its first half and last quarter, at line
    ends when there are any (a newline byte never splits a character)."""
    head_end = data.rfind(b"\n", 0, cap // 2) + 1 or cap // 2
    tail_start = data.find(b"\n", len(data) - cap // 4) + 1 or len(data) - cap // 4
    head = data[:head_end].decode("utf-8", "ignore")
    tail = data[tail_start:].decode("utf-8", "ignore")
    left = chars - len(head) - len(tail)
    return f"{head}[canonflow: {left} characters left out]\n{tail}"
