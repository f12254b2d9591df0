"""OpenCode: text and reasoning parts (translator, "Never text twice", "Tricky parts"):
1.1.x snapshots and v2 deltas become content.delta, the user's prompt a user_message.
"""

from __future__ import annotations

from typing import Any

from adapters.core.contract import MalformedRecord
from adapters.core.emitter import UNSET, Emitter
from adapters.core.emitter import replace as _replace
from adapters.core.lifecycle import At, complete_item, emit_delta, start_item
from adapters.core.spool import whole_fields
from adapters.opencode.common import (
    _at,
    _dict,
    _drop_part,
    _ensure_thread,
    _is_closed,
    _open_turn,
    _require_sid,
    _set_part,
    _str,
)
from adapters.opencode.state import Part, State
from adapters.opencode.streams import (
    _add,
    _common_prefix,
    _extends,
    _hold,
    _len,
    _read,
    _rebuffer,
    _unsent,
)
from topics.canonical import (
    Author,
    ItemPayload,
)

# ---- deltas --------------------------------------------------------------------------


def _on_message_part_delta(state: State, props: dict[str, Any], out: Emitter) -> State:
    pid, delta, field = props.get("partID"), props.get("delta"), props.get("field")
    if not (isinstance(pid, str) and isinstance(delta, str)):
        raise MalformedRecord("opencode message.part.delta: needs string partID and delta")
    sid = _require_sid(props, "message.part.delta")
    if field not in ("text", None):
        return state  # only the text field streams; other fields arrive in part snapshots
    part = state.parts.get(pid)  # an open part is not closed: no key to compute
    if part is None and _is_closed(state, pid):
        return state  # a finished part's delta sent again
    if part is None:
        # no snapshot seen (stream joined mid-part): text or reasoning is not known yet,
        # so hold the text until the part's snapshot or message says what it is
        state = _ensure_thread(state, out, sid)
        part = Part(sid=sid, msg=_str(props, "messageID"), kind="", busy=True)
    if part.kind == "tool":
        return state
    if part.role != "assistant" or part.kind == "":
        return _set_part(state, pid, _hold(out, pid, part, delta))
    state = _open_turn(state, out, sid)
    if not delta.strip():
        # only whitespace: held back, nothing to emit (the unsent text of a started part
        # is whitespace, so whitespace added to it is still all trailing)
        return _set_part(state, pid, _hold(out, pid, part, delta))
    return _advance(state, out, pid, part, delta=delta)


# ---- text and reasoning parts --------------------------------------------------------


def _on_text_part(state: State, out: Emitter, sid: str, mid: str, pid: str,
                  part: dict[str, Any]) -> State:
    kind = part["type"]
    text = part.get("text")
    text = text if isinstance(text, str) else ""
    final = _dict(part, "time").get("end") is not None
    current = state.parts.get(pid) or Part(sid=sid, msg=mid, kind=kind)
    timed = "start" in _dict(part, "time")  # model output; a prompt part has no time
    if current.kind != kind or (timed and not current.busy):
        current = _replace(current, kind=kind, busy=current.busy or timed)
    role = current.role or _role_of(state, sid, mid, kind)
    flags = {k: True for k in ("synthetic", "ignored") if part.get(k) is True}
    if role == "user":
        return _user_text(state, out, pid, _replace(current, role=role), text, flags)
    if not role:
        # buffered until the message's role is known; the snapshot is the whole text so far
        if final or len(text) >= _len(out, out.id("itm", pid), "held", current.held):
            current = _rebuffer(out, pid, current, text)
        return _set_part(state, pid, _replace(current, ended=final))
    state = _open_turn(state, out, sid)
    current = _replace(current, role=role)
    if not current.started:
        # a part of an unannounced message is a stub so its deltas have a parent
        state, current = _start_text(state, out, pid, current, mid not in state.roles, flags)
    return _advance(state, out, pid, current, snapshot=text, final=final)


def _role_of(state: State, sid: str, mid: str, kind: str) -> str:
    """The role of a part's message: announced, implied, or "" (not knowable yet)."""
    if kind == "reasoning":
        return "assistant"
    role = state.roles.get(mid)
    if role is not None:
        return role
    sess = state.sessions.get(sid)
    # OpenCode announces a user message before its parts: once this turn's prompt is
    # known, an unannounced message is the assistant's
    if sess is not None and sess.prompt and mid != sess.prompt:
        return "assistant"
    return ""


def _start_text(state: State, out: Emitter, pid: str, part: Part, synthetic: bool,
                flags: dict[str, bool] | None = None) -> tuple[State, Part]:
    item_type = "reasoning" if part.kind == "reasoning" else "assistant_message"
    start_item(out, _at(state, out, pid, part),
               ItemPayload(itemType=item_type, status="inProgress",  # type: ignore[arg-type]
                           role="assistant" if item_type == "assistant_message" else UNSET,
                           data=flags or UNSET), synthetic)
    part = _replace(part, started=True)
    return _set_part(state, pid, part), part


def _advance(state: State, out: Emitter, pid: str, part: Part, *, snapshot: str | None = None,
             delta: str = "", final: bool = False, forced: bool = False) -> State:
    """Apply a snapshot or a delta to an open assistant text/reasoning part and emit what
    is new; complete the part when `final` (its closing snapshot) or `forced`.

    The part's text so far is what was emitted (`sent` characters: Part.said or stream
    "text") then what was not (`unsent`: whitespace held back, or text buffered while
    the role was unknown: Part.held or stream "held"). A snapshot is compared with the
    emitted text through the stream's digest; only a snapshot that does not begin with
    it (stale, trimmed below it, or diverged: rare) reads it back from the spool."""
    item = out.id("itm", pid)
    sent = _len(out, item, "text", part.said)
    unsent, part = _unsent(out, pid, part)
    rebase: str | None = None  # the snapshot the emitted text is re-based on (diverged)
    if snapshot is not None:
        new, rebase = _from_snapshot(out, item, part, sent, unsent, snapshot, final)
    elif final or forced:
        new = unsent + delta
    else:
        # on the delta path, hold trailing whitespace back: OpenCode trims it when the
        # part closes; a snapshot's new text is emitted whole
        pending = unsent + delta
        new = pending.rstrip()
        part = _hold(out, pid, part, pending[len(new):])
    stream = "reasoning_text" if part.kind == "reasoning" else "assistant_text"
    at = _at(state, out, pid, part)
    if new:  # counted below, in the part's own short form or its stream (_add)
        emit_delta(out, at, stream, new, forced)
    if not (final or forced):
        if rebase is not None:
            out.drop(item, "text")
            said = _add(out, item, "text", "", rebase)
        else:
            said = _add(out, item, "text", part.said, new)
        return _set_part(state, pid, _replace(part, said=said))
    _complete_text(out, at, item, part, snapshot, new, forced)
    return _drop_part(state, pid)


def _from_snapshot(out: Emitter, item: str, part: Part, sent: int, unsent: str,
                   snapshot: str, final: bool) -> tuple[str, str | None]:
    """What a snapshot adds to a part that emitted `sent` characters and holds `unsent`
    back, and the snapshot to re-base the emitted text on when it diverged (else None)."""
    if _extends(out, item, "text", part.said, snapshot):
        tail = snapshot[sent:]
        # a shorter, stale snapshot (the text so far begins with it) adds nothing but
        # flushes what was held back; a closing one is the part's final text
        if not final and unsent.startswith(tail) and not tail.startswith(unsent):
            return unsent, None
        return tail, None
    emitted = _read(out, item, "text", part.said, take=False).text
    if emitted.startswith(snapshot):  # stale or trimmed below what was emitted
        return ("" if final else unsent), None
    # diverged: emitted text cannot be retracted; re-base on the snapshot and emit its
    # tail from the first differing character, so no new text is lost (past the spool's
    # cap only the head of the emitted text is known: what followed it may be emitted
    # again)
    return snapshot[len(_common_prefix(emitted, snapshot)):], snapshot


def _complete_text(out: Emitter, at: At, item: str, part: Part, snapshot: str | None,
                   new: str, forced: bool) -> None:
    """item.completed of a text/reasoning part: its text is OpenCode's closing snapshot,
    or else all the part said (`new` its last words, just emitted)."""
    if snapshot is not None:
        fields: dict[str, Any] = {"text": snapshot}
    else:
        emitted_all = _read(out, item, "text", part.said, take=True)
        fields = whole_fields(emitted_all.plus(new), "text")
    item_type = "reasoning" if part.kind == "reasoning" else "assistant_message"
    complete_item(out, at, ItemPayload(
        itemType=item_type, status="completed",  # type: ignore[arg-type]
        role="assistant" if item_type == "assistant_message" else UNSET, **fields), forced)


def _user_text(state: State, out: Emitter, pid: str, part: Part, text: str,
               flags: dict[str, bool] | None = None) -> State:
    """The user's own prompt: one user_message item with its whole text, never streamed.
    A part OpenCode flags `synthetic` is text it added itself (a file's content, a mode
    reminder): the runtime's, not the user's."""
    state = _open_turn(state, out, part.sid)
    synthetic = part.msg not in state.roles
    author: Author = "runtime" if flags and flags.get("synthetic") else "user"
    at = _at(state, out, pid, part)
    start_item(out, at, ItemPayload(itemType="user_message", status="inProgress", role="user",
                                    data=flags or UNSET, author=author), synthetic)
    complete_item(out, at, ItemPayload(itemType="user_message", status="completed", role="user",
                                       text=text, data=flags or UNSET, author=author), synthetic)
    return _drop_part(state, pid)


def _release(state: State, out: Emitter, pid: str, part: Part, role: str) -> State:
    """A buffered part whose message's role is now known."""
    if role == "user":
        text, part = _unsent(out, pid, part)
        return _user_text(state, out, pid, _replace(part, role=role, kind="text"), text)
    state = _open_turn(state, out, part.sid)
    part = _replace(part, role=role, kind=part.kind or "text")
    state, part = _start_text(state, out, pid, part, synthetic=True)
    return _advance(state, out, pid, part, final=part.ended)
