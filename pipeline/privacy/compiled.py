"""The redaction rules compiled (pipeline.privacy.redact): what a match masks, the RE2
programs and their options, the literal prefilters, and the work budget a record may
spend. Compiled once per rule set and process, shared by every Redactor.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

import msgspec
import re2

from pipeline.privacy.literals import json_literals, min_width, required_literals
from pipeline.privacy.rules import MASK, SECRET_MEMBERS, secret_member

#: A record's work budget is at least this many units (Budget), and a match weighs
#: MATCH_COST units (see DEFAULT_BUDGET in pipeline.privacy.redact).
BUDGET_FLOOR = 1 << 20
MATCH_COST = 8192
#: units a byte of a JSON value that value_end reads weighs (Python's `re` hops between
#: quotes and brackets: ~30 times RE2's cost a byte)
VALUE_COST = 32


class RedactionError(ValueError):
    """The redaction settings are invalid (a bad pattern, a hook that cannot be loaded)."""


# ---------------------------------------------------------------------------
# Masking
# ---------------------------------------------------------------------------

_QUOTED = b'"' + MASK + b'"'
_ESCAPED = b'\\"' + MASK + b'\\"'
#: what a named group's first letter says: `s` is masked, `q` and `e` masked in quotes
#: (escaped quotes); `v` and `w` start a JSON value (in JSON text, in JSON held in a JSON
#: string) that is masked whole; `n` and `m` are the member names of those values,
#: masked only when their decoded name says secret
_REPLACEMENT = {"s": MASK, "q": _QUOTED, "e": _ESCAPED, "v": _QUOTED, "w": _ESCAPED,
                "n": b"", "m": b""}

Span = tuple[int, int, bytes]
#: a rule's named groups: group number -> (first letter of its name, replacement)
Names = dict[int, tuple[str, bytes]]


def spans_of(rx: Any, names: Names, text: bytes) -> list[Span]:
    """What each match of `rx` in `text` masks: its named groups that took part, else
    the whole match (reference and fast path alike)."""
    out: list[Span] = []
    for m in rx.finditer(text):
        out += match_spans(m, names)
    return out


def match_spans(m: Any, names: Names) -> list[Span]:
    got: list[Span] = []
    for i, (kind, rep) in names.items():
        start = m.start(i)
        if start < 0:
            continue
        if kind in "nm":
            if not _secret_name(m.group(i), twice=kind == "m"):
                return []
        elif kind in "vw":
            got.append((start, value_end(m.string, start, escaped=kind == "w"), rep))
        else:
            got.append((start, m.end(i), rep))
    return got or [(m.start(), m.end(), MASK)]


def _secret_name(raw: bytes, twice: bool) -> bool:
    """Whether a member name written with JSON escapes (`twice`: JSON held in a JSON
    string) says secret once decoded."""
    try:
        name = msgspec.json.decode(b'"' + raw + b'"', type=str)
        if twice:
            name = msgspec.json.decode(b'"' + name.encode("utf-8", "surrogatepass") + b'"',
                                       type=str)
    except (msgspec.DecodeError, msgspec.ValidationError, UnicodeEncodeError):
        return False
    return secret_member(name)


_STOPS = re.compile(rb'[\\"\[\]{}]')
_SCALAR_END = re.compile(rb"[,\]}\s]")
_SCALAR_END_ESCAPED = re.compile(rb'[,\]}\s\\"]')


def value_end(text: bytes, start: int, *, escaped: bool) -> int:
    """Where the JSON value that starts at `start` in `text` ends: a string, an array or
    an object (brackets inside strings do not count), or a scalar. `escaped`: the JSON
    is held in a JSON string (its quotes written \\", its escapes doubled). A value cut
    short runs to the end of the text, or of the string that holds it: masked to there."""
    n = len(text)
    if not (text[start] in b'[{"' or (escaped and text.startswith(b'\\"', start))):
        m = (_SCALAR_END_ESCAPED if escaped else _SCALAR_END).search(text, start)
        return m.start() if m is not None else n
    depth, in_str, p = 0, False, start
    while (m := _STOPS.search(text, p)) is not None:
        p = m.start()
        c = text[p]
        if c == 0x5C:  # a backslash: an escape
            after = text[p + 1:p + 2]
            p += 2
            if escaped and after == b'"':  # a quote of the held JSON
                in_str = not in_str
                if not in_str and depth == 0:
                    return p
            elif escaped and after == b"\\" and in_str:  # an escape of the held JSON
                p += 2 if text[p:p + 1] == b"\\" else 1
            continue
        if c == 0x22:  # '"'
            if escaped:
                return p  # the string that holds the JSON ends here
            in_str = not in_str
            p += 1
            if not in_str and depth == 0:
                return p
            continue
        p += 1
        if in_str:
            continue
        depth += 1 if c in (0x5B, 0x7B) else -1
        if depth <= 0:
            return p
    return n


def mask(text: bytes, spans: list[Span]) -> bytes:
    """`text` with each span replaced; overlapping spans merge (the first one's
    replacement stands for the merged stretch)."""
    out, last = [], 0
    for start, end, rep in sorted(spans):
        if end <= last:
            continue
        if start < last:  # overlaps the stretch already masked: extend it
            out.append(b"")
        else:
            out += [text[last:start], rep]
        last = end
    out.append(text[last:])
    return b"".join(out)


def _group_names(rx: Any) -> Names:
    names = {(n.decode() if isinstance(n, bytes) else n): i for n, i in rx.groupindex.items()}
    return {i: (n[0], _REPLACEMENT[n[0]]) for n, i in sorted(names.items(), key=lambda x: x[1])
            if n[:1] in _REPLACEMENT}


def _options(max_mem: int = 64 << 20, never_capture: bool = False) -> Any:
    opts = re2.Options()
    opts.max_mem = max_mem  # room for the DFA: a DFA out of memory would fall back to NFA
    opts.never_capture = never_capture
    opts.log_errors = False  # a bad pattern is RedactionError's one line, not RE2's log too
    return opts


def compile_pattern(pattern: str, **options: Any) -> Any:
    try:
        return re2.compile(pattern.encode(), _options(**options))
    except re2.error as e:
        why = e.args[0] if e.args else ""
        why = why.decode(errors="replace") if isinstance(why, bytes) else str(why)
        raise RedactionError(f"invalid redaction pattern {pattern!r} (RE2 syntax: no "
                             f"look-around or back-references): {why}") from None


def _alternation(literals: Iterable[str], *patterns: str) -> str:
    return "(?i:" + "|".join([re2.escape(x) for x in sorted(literals)] + list(patterns)) + ")"


_UNANCHORED = re2._Anchor.UNANCHORED


def _finder(rx: Any) -> Callable[..., tuple[int, int] | None]:
    """`find(data, pos=0)`: the span of `rx`'s first match in `data` from `pos`, or
    None. Calls google-re2's compiled RE2 (version pinned) without the wrapper's
    generator, ~1 us a call less: this runs on every event."""
    match = rx._regexp.Match

    def find(data: bytes, pos: int = 0) -> tuple[int, int] | None:
        span = match(_UNANCHORED, data, pos, len(data))[0]
        return None if span[0] < 0 else span

    return find


def _never(data: bytes, pos: int = 0) -> None:
    return None


class Budget:
    """Work a record may still spend (deterministic: bytes scanned and matches, never
    the clock, so the same record always publishes the same bytes)."""

    __slots__ = ("left", "spent")

    def __init__(self, size: int, per_byte: int):
        self.left = max(BUDGET_FLOOR, per_byte * size)
        self.spent = 0

    def spend(self, units: int) -> bool:
        """False once the budget is gone."""
        self.spent += units
        self.left -= units
        return self.left >= 0

    def scanned(self, units: int) -> None:
        """Work that is always done (one pass of the combined rules): counted, not
        limited."""
        self.spent += units


class _Pattern:
    __slots__ = ("pattern", "rx", "names", "literals", "values")

    def __init__(self, pattern: str):
        self.pattern = pattern
        self.rx = compile_pattern(pattern, max_mem=8 << 20)
        self.names = _group_names(self.rx)
        #: its matches mask JSON values found by value_end (work beyond RE2's)
        self.values = any(kind in "vw" for kind, _ in self.names.values())
        self.literals = required_literals(pattern)


class Compiled(NamedTuple):
    """A rule set compiled: the rules, the prefilters, the detector and the RE2 set."""

    rules: list[_Pattern]
    always: bool  # a pattern without a provable literal: scan every event
    min: int
    text_prefilter: Callable[..., tuple[int, int] | None]
    json_prefilter: Callable[..., tuple[int, int] | None]
    detector: Callable[..., tuple[int, int] | None]
    set: Any


@functools.lru_cache(maxsize=8)
def compiled(patterns: tuple[str, ...], members_rule: bool) -> Compiled:
    """The compiled form of a rule set, built once per process: compiling the built-in
    rules costs 40-90 ms, and every Normalizer and Replayer builds a Redactor (the test
    suite made 356 of them, 15 CPU-seconds). RE2's compiled objects are immutable, so
    Redactors share them; what a Redactor counts (work, budget) stays its own."""
    rules = [_Pattern(p) for p in patterns]
    literals: set[str] = set()
    always = False
    for rule in rules:
        if rule.literals is None:
            always = True
        else:
            literals |= rule.literals
    least = min((min_width(p) for p in patterns), default=0)
    if not rules:
        return Compiled(rules, always, least, _never, _never, _never, None)
    members = SECRET_MEMBERS if members_rule else ()
    # Raw text (dead letters) holds the literals as they are; a JSON member named like
    # a secret there may have a space before its colon.
    text_prefilter = _finder(compile_pattern(_alternation(literals | set(members)),
                                             max_mem=8 << 20))
    # Encoded events hold them JSON-escaped, and a secret member's name right before
    # `":`. Another encoder than msgspec may write a printable character, a tab or a
    # line end as \u00XX, K (Kelvin) and long s (k and s without case) as \u212a /
    # \u017f, "/" as "\/", or a space before a member's colon: such text goes the slow way.
    json_prefilter = _finder(compile_pattern(_alternation(
        json_literals(literals) | {m + '":' for m in members},
        r"\\(?:/|u(?:[^0]|0[^0]|00[^01]|000[9adAD]))", r'"[ \t\r\n]+:'),
        max_mem=8 << 20))
    detector = _finder(compile_pattern("|".join(f"(?:{p})" for p in patterns), never_capture=True))
    search_set = re2.Set.SearchSet(_options())
    for p in patterns:
        search_set.Add(p.encode())
    search_set.Compile()
    return Compiled(rules, always, least, text_prefilter, json_prefilter, detector, search_set)
