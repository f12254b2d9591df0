"""The literal prefilter: the strings every match of a pattern contains, derived from
the pattern itself (its parse tree), so that a prefilter built from them cannot miss
a match. One RE2 pass for these strings decides whether an event is decoded and
scanned at all (`pipeline.privacy.redact`: most events hold no secret).
"""

from __future__ import annotations

import math
import re._constants as sre_c
import re._parser as sre_parse
from collections.abc import Iterable
from typing import Any, NamedTuple

import msgspec
import re2

_SET_CAP = 1024  # the most strings a literal set keeps before it gives up
_CLASS_CAP = 16  # the most characters a class may have to count as a literal


class _Lit(NamedTuple):
    """What every match of a piece of pattern looks like, lower-cased (the prefilter
    matches without case): `exact` the finite set of its matches (None: too many);
    every non-empty match starts with one of `pre` and ends with one of `suf` ("" in
    them: nothing known); `must` holds a string every match contains (None: no
    guarantee); `nullable`: it can match the empty string."""

    exact: frozenset[str] | None
    pre: frozenset[str]
    suf: frozenset[str]
    must: frozenset[str] | None
    nullable: bool


_UNKNOWN = frozenset({""})
_ANY = _Lit(None, _UNKNOWN, _UNKNOWN, None, False)
_EMPTY = _Lit(frozenset({""}), _UNKNOWN, _UNKNOWN, None, True)


def _product(a: Iterable[str], b: Iterable[str]) -> frozenset[str] | None:
    out = frozenset(x + y for x in a for y in b)
    return out if len(out) <= _SET_CAP else None


def _known(s: frozenset[str] | None) -> frozenset[str]:
    return s if s and "" not in s and len(s) <= _SET_CAP else _UNKNOWN


def _union(a: frozenset[str], b: frozenset[str]) -> frozenset[str]:
    return _UNKNOWN if "" in a or "" in b else _known(a | b)


def _better(a: frozenset[str] | None, b: frozenset[str] | None) -> frozenset[str] | None:
    """The more selective of two guarantees."""
    def score(s: frozenset[str] | None) -> float:
        # a character more is ~5 bits rarer; twice the strings, 1 bit more common
        return -1.0 if not s or "" in s else 5 * min(map(len, s)) - math.log2(len(s))
    return a if score(a) >= score(b) else b


def _pre(a: _Lit, b: _Lit) -> frozenset[str]:
    """What every non-empty match of a then b starts with."""
    if a.exact is None:
        return _union(a.pre, b.pre) if a.nullable else a.pre
    out: set[str] = set()
    for x in a.exact:
        if x:  # x itself is a prefix; x and b's start, when b cannot be empty
            out |= {x + p for p in b.pre} if "" not in b.pre and not b.nullable else {x}
        elif "" in b.pre:
            return _UNKNOWN
        else:
            out |= b.pre
    return _known(frozenset(out))


def _suf(a: _Lit, b: _Lit) -> frozenset[str]:
    """What every non-empty match of a then b ends with."""
    if b.exact is None:
        return _union(a.suf, b.suf) if b.nullable else b.suf
    out: set[str] = set()
    for y in b.exact:
        if y:
            out |= {s + y for s in a.suf} if "" not in a.suf and not a.nullable else {y}
        elif "" in a.suf:
            return _UNKNOWN
        else:
            out |= a.suf
    return _known(frozenset(out))


def _seq(items: list[_Lit]) -> _Lit:
    acc = _EMPTY
    for it in items:
        exact = _product(acc.exact, it.exact) \
            if acc.exact is not None and it.exact is not None else None
        pre = _pre(acc, it)
        suf = _suf(acc, it)
        must = _better(acc.must, it.must)
        if not acc.nullable and not it.nullable:
            must = _better(must, _product(acc.suf, it.pre))
        acc = _Lit(exact, pre, suf, _better(must, exact if exact and "" not in exact else None),
                   acc.nullable and it.nullable)
    return acc


def _node(op: Any, av: Any) -> _Lit:
    if op is sre_c.LITERAL:
        c = frozenset({chr(av).lower()})
        return _Lit(c, c, c, c, False)
    if op is sre_c.AT:
        return _EMPTY
    if op is sre_c.IN:
        chars: set[str] = set()
        for kind, value in av:
            if kind is sre_c.LITERAL:
                chars.add(chr(value).lower())
            elif kind is sre_c.RANGE and value[1] - value[0] < _CLASS_CAP:
                chars.update(chr(c).lower() for c in range(value[0], value[1] + 1))
            else:
                return _ANY
        if not chars or len(chars) > _CLASS_CAP:
            return _ANY
        s = frozenset(chars)
        return _Lit(s, s, s, s, False)
    if op is sre_c.SUBPATTERN:
        return _seq([_node(o, a) for o, a in av[3]])
    if op is sre_c.BRANCH:
        alts = [_seq([_node(o, a) for o, a in alt]) for alt in av[1]]
        exact = None if any(a.exact is None for a in alts) else \
            frozenset().union(*(a.exact for a in alts if a.exact is not None))
        if exact is not None and len(exact) > _SET_CAP:
            exact = None
        pre = suf = frozenset()
        for a in alts:
            pre, suf = _union(pre, a.pre), _union(suf, a.suf)
        musts = [a.must for a in alts]
        must = None if any(m is None or "" in m for m in musts) else \
            frozenset().union(*(m for m in musts if m is not None))
        nullable = any(a.nullable for a in alts)
        return _Lit(exact, pre, suf, None if nullable else must, nullable)
    if op in (sre_c.MAX_REPEAT, sre_c.MIN_REPEAT, sre_c.POSSESSIVE_REPEAT):
        lo, hi, sub = av
        inner = _seq([_node(o, a) for o, a in sub])
        if lo == 0:
            return _Lit(None, inner.pre, inner.suf, None, True)
        exact = inner.exact if lo == hi == 1 else None
        return _Lit(exact, inner.pre, inner.suf, inner.must, inner.nullable)
    return _ANY


def required_literals(pattern: str) -> frozenset[str] | None:
    """Lower-case strings one of which every match of `pattern` contains (matched
    without case); None when no such set can be shown (the pattern then runs on every
    event). Read from Python's parse of the pattern, which for the RE2 syntax used here
    has the same literal structure (a property test checks it on generated matches)."""
    try:
        parsed = sre_parse.parse(pattern.replace(r"\z", r"\Z"))
    except (re2.error, sre_c.error, ValueError, OverflowError, RecursionError):
        return None
    must = _seq([_node(op, av) for op, av in parsed]).must
    if not must or "" in must:
        return None
    # a string containing another one adds nothing
    return frozenset(m for m in must if not any(o != m and o in m for o in must))


def json_literals(literals: Iterable[str]) -> frozenset[str]:
    """The same literals as they show in the JSON text of a string holding them
    (msgspec's escapes: quote, backslash, control characters)."""
    return frozenset(msgspec.json.encode(x).decode()[1:-1] for x in literals)


def min_width(pattern: str) -> int:
    """The fewest characters (so bytes) a match of `pattern` spans; 0 when unknown."""
    try:
        return int(sre_parse.parse(pattern.replace(r"\z", r"\Z")).getwidth()[0])
    except (re2.error, sre_c.error, ValueError, OverflowError, RecursionError):
        return 0
