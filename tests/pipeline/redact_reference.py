"""The slow reference path of redaction (issue 24/25): what the Redactor's fast path
must give, byte for byte. No prefilter, no combined pass, no skipped field: every
rule runs on every string (keys and envelope included) of the event decoded by the
standard library, and every member name is checked."""

from __future__ import annotations

import json
from typing import Any

import msgspec

from pipeline.privacy.redact import MASK, Redactor, mask, secret_member, spans_of

_TEXT = MASK.decode()


def _secret_value(v: Any) -> Any:
    if isinstance(v, str):
        return _TEXT if v else v
    if isinstance(v, bool) or v is None:
        return v
    if isinstance(v, (int, float)):
        return _TEXT
    if isinstance(v, dict):
        return {k: _secret_value(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_secret_value(x) for x in v]
    return v


def reference_text(r: Redactor, data: bytes) -> bytes:
    spans = [s for rule in r._rules for s in spans_of(rule.rx, rule.names, data)]
    return mask(data, spans)


def _string(r: Redactor, s: str) -> str:
    return reference_text(r, s.encode("utf-8", "surrogatepass")).decode("utf-8", "surrogatepass")


def _walk(r: Redactor, node: Any) -> Any:
    if isinstance(node, str):
        return _string(r, node)
    if isinstance(node, list):
        return [_walk(r, v) for v in node]
    if isinstance(node, dict):
        out: dict[str, Any] = {}
        for k, v in node.items():
            new = _secret_value(v) if r.members and secret_member(k) else _walk(r, v)
            name, base, n = _string(r, k), _string(r, k), 2
            while name in out:
                name, n = f"{base}#{n}", n + 1
            out[name] = new
        return out
    return node


def reference_apply(r: Redactor, encoded: bytes) -> bytes:
    """The redacted event, or `encoded` itself when nothing changes."""
    doc = json.loads(encoded)
    new = _walk(r, doc)
    return encoded if new == doc else msgspec.json.encode(new)


def reference_hold_point(text: str) -> int:
    """hold_point without its shortcut: the tail's regex runs on every text."""
    from adapters.core.hold import _HOLD_TAIL, HOLD_KEY, HOLD_SCAN

    n = len(text)
    cut = n
    key = text.rfind("-----BEGIN", max(0, n - HOLD_KEY))
    if key >= 0 and text.find("-----END", key) < 0:
        cut = key
    floor = max(0, n - HOLD_SCAN)
    words = text[floor:].rsplit(maxsplit=3)
    start = floor + len(words[0]) if len(words) == 4 else floor
    m = _HOLD_TAIL.search(text, start)
    return min(cut, m.start()) if m is not None else cut
