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


class ChatRenderer:
    """Renders chat records as a readable conversation: streamed text flows on one
    line, tool calls show their command, results are folded to a few lines."""

    FOLD = 4

    def __init__(self, write) -> None:  # noqa: ANN001
        self.write = write
        self.streaming: tuple[str, str] | None = None  # (session, item) of the open text

    def _end_stream(self) -> None:
        if self.streaming is not None:
            self.write("\n")
            self.streaming = None

    def __call__(self, r: dict[str, Any]) -> None:
        who = f"[{r.get('provider')} {str(r.get('session_id'))[:20]}]"
        t = r.get("type")
        if t in ("text", "reasoning"):
            key = (r.get("session_id"), f"{t}:{r.get('item_id')}")
            if self.streaming != key:
                self._end_stream()
                label = "assistant" if t == "text" else "thinking"
                self.write(f"{who} {label}: ")
                self.streaming = key
            self.write(r.get("content", ""))
            return
        self._end_stream()
        if t == "tool_use":
            inp = r.get("input") or {}
            shown = inp.get("command") if isinstance(inp, dict) and "command" in inp else inp
            self.write(f"{who} tool {r.get('name')}: {_short(shown, 100)}\n")
        elif t == "tool_result":
            lines = (r.get("content") or "").splitlines() or [""]
            mark = "error" if r.get("is_error") else "result"
            self.write(f"{who} {mark}: {lines[0][:100]}\n")
            for extra in lines[1:self.FOLD]:
                self.write(f"{' ' * len(who)}   {extra[:100]}\n")
            if len(lines) > self.FOLD:
                self.write(f"{' ' * len(who)}   … {len(lines) - self.FOLD} more line(s)\n")
        elif t == "approval":
            if r.get("state") == "opened":
                self.write(f"{who} APPROVAL NEEDED ({r.get('request_type')}): "
                           f"{r.get('tool_name') or ''} {r.get('detail') or ''}\n")
            else:
                self.write(f"{who} approval {r.get('decision')}\n")
        elif t == "question":
            what = r.get("questions") if r.get("state") == "asked" else r.get("answers")
            self.write(f"{who} question {r.get('state')}: {_short(what, 100)}\n")
        elif t == "error":
            retry = " (retrying)" if r.get("will_retry") else ""
            self.write(f"{who} ERROR{retry}: {r.get('message')}\n")
        elif t == "done":
            state = "FAILED" if r.get("is_error") else "done"
            self.write(f"{who} {state} ({r.get('subtype')}): {_short(r.get('result') or '', 100)}\n")
