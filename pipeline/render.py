"""Readable one-line renderings of canonical events for terminals (`tail`, `demo`)."""

from __future__ import annotations

import json
from typing import Any


def _short(value: Any, width: int = 70) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = text.replace("\n", "\\n")
    return text if len(text) <= width else text[: width - 1] + "…"


def describe(event: dict[str, Any]) -> str:
    """What an event says, in a few words."""
    t, p = event.get("type", "?"), event.get("payload") or {}
    if t == "content.delta":
        return f"{p.get('streamKind')}: {_short(p.get('delta', ''))}"
    if t.startswith("item."):
        bits = [p.get("itemType", "?"), p.get("status", "")]
        if p.get("toolName"):
            bits.append(p["toolName"])
        if t == "item.started" and p.get("input") is not None:
            bits.append(_short(p["input"], 50))
        if t == "item.completed" and p.get("output") is not None:
            bits.append("-> " + _short(p["output"], 50))
        return " ".join(b for b in bits if b)
    if t == "turn.completed":
        return str(p.get("state"))
    if t in ("request.opened", "request.resolved"):
        return f"{p.get('requestType')} {p.get('decision', '')}".strip()
    if t in ("runtime.error", "runtime.warning"):
        return _short(p.get("message", ""))
    return _short(p, 60) if p else ""


def render(event: dict[str, Any]) -> str:
    """One line: provider, session, seq, type, and what the event says."""
    mark = "*" if event.get("synthetic") else " "
    return (f"{event.get('provider', '?'):<10} {event.get('sessionId', '?')[:24]:<24} "
            f"#{event.get('seq', 0):<4}{mark}{event.get('type', '?'):<27} {describe(event)}")
