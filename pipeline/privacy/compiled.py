"""The redaction rules compiled (pipeline.privacy.redact): what a match masks, the RE2
programs and their options, the literal prefilters, and the work budget a record may
spend. Compiled once per rule set and process, shared by every Redactor.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

import re2

from pipeline.privacy.literals import json_literals, min_width, required_literals
from pipeline.privacy.rules import MASK, SECRET_MEMBERS

#: A record's work budget is at least this many units (Budget), and a match weighs
#: MATCH_COST units (see DEFAULT_BUDGET in pipeline.privacy.redact).
BUDGET_FLOOR = 1 << 20
MATCH_COST = 8192


class RedactionError(ValueError):
    """The redaction settings are invalid (a bad pattern, a hook that cannot be loaded)."""


# ---------------------------------------------------------------------------
# Masking
# ---------------------------------------------------------------------------

_REPLACEMENT = {"s": MASK, "q": b'"' + MASK + b'"', "e": b'\\"' + MASK + b'\\"'}

Span = tuple[int, int, bytes]


def spans_of(rx: Any, names: dict[int, bytes], text: bytes) -> list[Span]:
    """What each match of `rx` in `text` masks: its named groups that took part, else
    the whole match (reference and fast path alike)."""
    out: list[Span] = []
    for m in rx.finditer(text):
        out += match_spans(m, names)
    return out


def match_spans(m: Any, names: dict[int, bytes]) -> list[Span]:
    got = [(m.start(i), m.end(i), rep) for i, rep in names.items() if m.start(i) >= 0]
    return got or [(m.start(), m.end(), MASK)]


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


def _group_names(rx: Any) -> dict[int, bytes]:
    names = {(n.decode() if isinstance(n, bytes) else n): i for n, i in rx.groupindex.items()}
    return {i: _REPLACEMENT[n[0]] for n, i in sorted(names.items(), key=lambda x: x[1])
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
    __slots__ = ("pattern", "rx", "names", "literals")

    def __init__(self, pattern: str):
        self.pattern = pattern
        self.rx = compile_pattern(pattern, max_mem=8 << 20)
        self.names = _group_names(self.rx)
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
