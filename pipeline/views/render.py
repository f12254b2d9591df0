"""Readable renderings of canonical events and chat records for terminals (`tail`, `demo`).

Everything printed comes from records: agent output, commands, session ids, and
anything else a producer of the topics wrote. A terminal obeys the control characters
in it (OSC 52 writes the clipboard, OSC 0 the window title, CSI 2J clears the screen,
and C1 controls do the same in one character), so every string leaves here with its
C0 and C1 controls, DEL and lone surrogates shown as visible escapes (`\\x1b`,
`\\x9b`, `\\ud800`); newline and tab stay where a rendering keeps lines, and one-line
fields (a session id) escape them too, so no record can forge a line of another. The
JSON views print the record's text with the same characters as JSON escapes
(`\\u001b`), so that valid JSON stays valid. A record that is not the JSON object it
should be is printed escaped, never raised.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from adapters.core.tools import command_text
from topics.catalog import PROVIDERS

#: C0 controls, DEL, C1 controls, and surrogates (json.loads makes lone ones from
#: "\ud800"; they cannot even be written to a UTF-8 stream); and the same but tab and
#: newline.
_CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
_CONTROLS_BUT_LINES = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")


_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(m: re.Match[str]) -> str:
    char = m.group()
    if char in _NAMED:
        return _NAMED[char]
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def _json_escape(m: re.Match[str]) -> str:
    return f"\\u{ord(m.group()):04x}"


def visible(text: str, *, lines: bool = True) -> str:
    """`text` with its control characters shown as escapes: C0 (but newline and tab
    when `lines`), DEL, C1 and surrogates."""
    return (_CONTROLS_BUT_LINES if lines else _CONTROLS).sub(_escape, text)


def one_line(value: Any) -> str:
    """A field for one line: any JSON value as text, every control escaped."""
    return visible(_text(value), lines=False)


def json_text(value: bytes | None) -> str:
    """A record's value for the JSON views (`tail --json`, `--deadletters`): its UTF-8
    text (undecodable bytes replaced) with controls but newline and tab as JSON escapes."""
    if value is None:
        return "null"  # a tombstone
    return _CONTROLS_BUT_LINES.sub(_json_escape, value.decode("utf-8", "replace"))


def decode_record(value: bytes | None) -> dict[str, Any] | None:
    """A record's value as the JSON object it should be, or None."""
    if value is None:
        return None
    try:
        record = json.loads(value)
    except ValueError:  # UnicodeDecodeError too
        return None
    return record if isinstance(record, dict) else None


def unreadable(value: bytes | None) -> str:
    """One line for a record that is no JSON object (written by something else)."""
    shown = "(tombstone)" if value is None else repr(value[:300])[2:-1]
    return visible(f"(not a canonflow record) {shown}", lines=False)


def _text(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _detail(value: Any) -> str:
    """An approval's detail: the command it asks to run, unwrapped, or its text."""
    return (command_text(value) if isinstance(value, str) else None) or _text(value)


def _short(value: Any, width: int = 70) -> str:
    text = one_line(value)
    return text if len(text) <= width else text[: width - 1] + "…"


def shown_command(value: Any) -> str | None:
    """The command a tool input (or an approval's detail) runs, as a person reads it:
    without the shell wrapper a runtime put around it (`/bin/bash -lc 'ls'` is `ls`),
    an argv joined. None when `value` holds no command. The event keeps the command as
    the runtime sent it; only what is printed drops the wrapper."""
    if isinstance(value, dict):
        return command_text(value.get("command", value.get("cmd")), value.get("args"))
    return command_text(value) if isinstance(value, str) else None


def describe(event: dict[str, Any]) -> str:
    """What an event says, in a few words (escaped, one line)."""
    t, p = _text(event.get("type", "?")), event.get("payload") or {}
    if not isinstance(p, dict):
        return _short(p, 60)
    if t == "content.delta":
        return f"{one_line(p.get('streamKind'))}: {_short(p.get('delta', ''))}"
    if t.startswith("item."):
        bits = [_short(p.get("itemType", "?"), 40), _short(p.get("status", ""), 20)]
        if p.get("toolName"):
            bits.append(_short(p["toolName"], 60))
        if t == "item.started" and p.get("input") is not None:
            command = shown_command(p["input"])
            bits.append(_short(p["input"] if command is None else command, 50))
        if t == "item.completed" and p.get("output") is not None:
            bits.append("-> " + _short(p["output"], 50))
        return " ".join(b for b in bits if b)
    if t == "turn.completed":
        return _short(p.get("state"), 40)
    if t in ("request.opened", "request.resolved"):
        said = " ".join(_short(p[k], 40) for k in ("outcome", "decision") if p.get(k))
        return f"{_short(p.get('requestType'), 40)} {said}".strip()
    if t in ("runtime.error", "runtime.warning"):
        return _short(p.get("message", ""))
    return _short(p, 60) if p else ""


#: The provider column: wide enough for every registered provider id, so that a line
#: starts with the whole id ("opencode-transcript"), at least the old ten characters.
_PROVIDER_WIDTH = max(10, *(len(p) for p in PROVIDERS))


#: The session column's width: an id is padded to it, and never cut (a longer one
#: shifts the rest of its line).
SESSION_WIDTH = 24


def render(event: dict[str, Any], session_width: int = SESSION_WIDTH) -> str:
    """One line: provider, session (whole), seq, `*` when synthetic, type, and what the
    event says (escaped). `header` names the columns."""
    mark = "*" if event.get("synthetic") else " "
    return (f"{_short(event.get('provider', '?'), _PROVIDER_WIDTH):<{_PROVIDER_WIDTH}} "
            f"{one_line(event.get('sessionId', '?')):<{session_width}} "
            f"#{_short(event.get('seq', 0), 12):<4}{mark}{_short(event.get('type', '?'), 40):<27} "
            f"{describe(event)}")


def header(session_width: int = SESSION_WIDTH) -> str:
    """The names of `render`'s columns, aligned with them."""
    return (f"{'provider':<{_PROVIDER_WIDTH}} {'session':<{session_width}} "
            f"{'#seq':<5}*{'type':<27} what it says")


#: What a resolved approval's outcome (topics.canonical.Decision) means, for a reader.
_ALLOWED = {"accept": "ALLOWED", "accept_for_session": "ALLOWED", "decline": "DENIED",
            "cancel": "DENIED"}


class ChatRenderer:
    """Renders chat records as a readable conversation: streamed text flows on one
    line, tool calls show their command, results are folded to a few lines. Whatever
    it writes goes through `visible` (newlines and tabs kept)."""

    FOLD = 4

    def __init__(self, write: Callable[[str], Any]) -> None:
        self._out = write
        self.streaming: tuple[str, str] | None = None  # (session, item) of the open text

    def write(self, text: str) -> None:
        self._out(visible(text))

    def _end_stream(self) -> None:
        if self.streaming is not None:
            self.write("\n")
            self.streaming = None

    def __call__(self, r: dict[str, Any]) -> None:
        who = f"[{one_line(r.get('provider'))} {one_line(_text(r.get('session_id'))[:20])}]"
        t = r.get("type")
        if t in ("text", "reasoning"):
            key = (one_line(r.get("session_id")), f"{t}:{one_line(r.get('item_id'))}")
            if self.streaming != key:
                self._end_stream()
                label = "assistant" if t == "text" else "thinking"
                self.write(f"{who} {label}: ")
                self.streaming = key
            self.write(_text(r.get("content", "")))
            return
        self._end_stream()
        if t == "user":
            lines = _text(r.get("content")).splitlines() or [""]
            self.write(f"{who} user: {lines[0][:200]}\n")
            for extra in lines[1:self.FOLD]:
                self.write(f"{' ' * len(who)}   {extra[:200]}\n")
            if len(lines) > self.FOLD:
                self.write(f"{' ' * len(who)}   … {len(lines) - self.FOLD} more line(s)\n")
        elif t == "tool_use":
            inp = r.get("input") or {}
            command = shown_command(inp)
            shown = inp if command is None else command
            self.write(f"{who} tool {_short(r.get('name'), 60)}: {_short(shown, 100)}\n")
        elif t == "tool_result":
            lines = _text(r.get("content")).splitlines() or [""]
            mark = "error" if r.get("is_error") else "result"
            self.write(f"{who} {mark}: {lines[0][:100]}\n")
            for extra in lines[1:self.FOLD]:
                self.write(f"{' ' * len(who)}   {extra[:100]}\n")
            if len(lines) > self.FOLD:
                self.write(f"{' ' * len(who)}   … {len(lines) - self.FOLD} more line(s)\n")
        elif t == "approval":
            if r.get("state") == "opened":
                self.write(f"{who} APPROVAL NEEDED ({_short(r.get('request_type'), 40)}): "
                           f"{_short(r.get('tool_name'), 60)} {_detail(r.get('detail'))}\n")
            else:
                outcome = r.get("outcome")
                said = _ALLOWED.get(outcome, "resolved") if isinstance(outcome, str) else "resolved"
                words = [_short(r[k], 40) for k in ("outcome", "decision") if r.get(k)]
                self.write(f"{who} approval {said}: {' / '.join(words) or '?'}\n")
        elif t == "question":
            what = r.get("questions") if r.get("state") == "asked" else r.get("answers")
            self.write(f"{who} question {_short(r.get('state'), 20)}: {_short(what, 100)}\n")
        elif t == "error":
            retry = " (retrying)" if r.get("will_retry") else ""
            self.write(f"{who} ERROR{retry}: {_text(r.get('message'))}\n")
        elif t == "done":
            state = "FAILED" if r.get("is_error") else "done"
            self.write(f"{who} {state} ({_short(r.get('subtype'), 40)}): "
                       f"{_short(r.get('result') or '', 100)}\n")
