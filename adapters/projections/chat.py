"""The chat projection: canonical events -> the readable chat contract (topics.chat).

Sans-I/O like the adapters: a frozen state per session and one pure function,
canonical event in -> new state + chat records out. It knows no runtime: every
provider's canonical events give the same records (topics/chat.py).

What it remembers per session, and for how long (bounded by a constant, whatever the
session streams):
* per open assistant / reasoning item its length so far, its phase and, while it is at
  most ACCUMULATED_MAX characters, its text (for `accumulated`); dropped when the item
  completes;
* each open tool item's tool_use_id, normalised name and whether its tool_use was
  shown yet, dropped when the item completes;
* the latest completed assistant text of the turn (the `done` record's final text): in
  the state while it is at most LAST_KEPT characters, else spooled (adapters.core.spool.Spool,
  key "chat/last") in pieces of SPOOL_PIECE characters; dropped when the turn completes.
  While a message streams, a short one stands in for it (a turn cut off before its
  message completed ends with what it said).

Rules: text records carry only new text (`content`) and, while the message is at most
ACCUMULATED_MAX characters, the message so far (`accumulated`); past that `accumulated`
is "" and `accumulated_length` says how long the message is: a consumer joins the
`content` of the item's records (gapless `seq`), and `done` carries the final answer
whole. So the chat grows linearly with the text, where repeating the text so far in
every record grew with its square. A tool_use is shown once, as soon as its input is
known (a tool that starts with an empty input, like a streaming Claude tool_use or a
pending OpenCode part, is shown when an update brings the input, or at the latest right
before its result); a tool_result carries the whole output once; a turn's end is one
`done`. The user's prompt is one `user` record when its user_message item completes,
only when the canonical item's `author` is "user" (never a runtime's, a hook's or a
parent agent's text). A resolved approval or answered question carries the `outcome`
every runtime shares next to the runtime's own `decision`.
"""

from __future__ import annotations

from typing import Any, Final

from msgspec import UNSET
from msgspec.structs import replace

from adapters.core.contract import Session, Stored
from adapters.core.spool import MemorySpool, Spool
from topics.canonical import TOOL_ITEM_TYPES, SessionExited
from topics.chat import (
    ChatApproval,
    ChatDone,
    ChatError,
    ChatQuestion,
    ChatReasoning,
    ChatRecord,
    ChatText,
    ChatToolResult,
    ChatToolUse,
    ChatUser,
)

#: The longest message whose text so far each chat text record repeats in `accumulated`.
ACCUMULATED_MAX = 2048
#: The longest final text the state keeps itself; a longer one is spooled.
LAST_KEPT = 256
#: Characters per spooled piece of a long final text (one table entry each: at most
#: 64 KiB of UTF-8, the bound on every table value).
SPOOL_PIECE = 16 * 1024
#: The prefix of the chat projection's spool keys (the core's are "itm_.../<stream>").
SPOOL_PREFIX: Final = "chat/"
_LAST = SPOOL_PREFIX + "last"  # spool key of the turn's latest assistant text, when long


class OpenText(Stored, frozen=True):
    text: str = ""  # the text so far, while at most ACCUMULATED_MAX characters
    phase: str | None = None
    length: int = 0  # characters so far


class OpenTool(Stored, frozen=True):
    tool_use_id: str
    name: str
    shown: bool = False


class ChatState(Stored, frozen=True, kw_only=True):
    texts: dict[str, OpenText] = {}
    tools: dict[str, OpenTool] = {}
    last_text: str | None = None  # the turn's latest assistant text, when short
    last_pieces: int = 0  # else: its pieces in the spool


def initial() -> ChatState:
    return ChatState()


_SUBTYPES = {"completed": "success", "failed": "error", "interrupted": "interrupted",
             "cancelled": "cancelled"}
_QUESTION_REQUESTS = {"tool_user_input"}  # shown as a question, not as an approval too


def _v(value: Any) -> Any:
    """UNSET -> None, for the always-present chat fields."""
    return None if value is UNSET else value


class _Out:
    """Stamps chat records with the session's envelope."""

    __slots__ = ("session_id", "provider", "seq", "source", "turn", "records", "_k", "spool")

    def __init__(self, ev: Any, seq: int, spool: Spool):
        self.spool = spool
        self.session_id, self.provider, self.seq = ev.sessionId, ev.provider, seq
        self.source, self.turn = ev.eventId, _v(ev.turnId)
        self.records: list[ChatRecord] = []
        self._k = 0

    def add(self, cls: type[Any], **fields: Any) -> None:
        # the id names the canonical event the record came from (unique, deterministic)
        self.seq += 1
        self._k += 1
        self.records.append(cls(
            session_id=self.session_id, provider=self.provider, seq=self.seq,
            event_id=f"{self.source}.{self._k}",
            source_event_id=self.source, turn_id=self.turn, **fields))


def _tool_use_id(ev: Any) -> str:
    refs = ev.providerRefs
    native = refs.providerItemId if refs is not UNSET else UNSET
    return native if isinstance(native, str) else str(ev.itemId)


def _parent(state: ChatState, ev: Any) -> str | None:
    parent = ev.parentItemId
    if parent is UNSET:
        return None
    tool = state.tools.get(parent)
    return tool.tool_use_id if tool else parent


def _has_input(value: Any) -> bool:
    """Is a tool's input known yet? (Runtimes announce some tools with an empty input,
    or with empty fields, before the real one: ACP's first tool_call, a pending
    OpenCode part.)"""
    if isinstance(value, dict):
        return any(v not in (None, "", {}, []) for v in value.values())
    return value is not UNSET and value not in (None, [], "")


def project(state: ChatState, ev: Any, out: _Out) -> ChatState:
    """Apply one canonical event (a topics.canonical struct)."""
    handler = _HANDLERS.get(ev.__struct_config__.tag)
    return handler(state, ev, out) if handler else state


def _change(p: Any) -> dict[str, Any]:
    """A tool item's normalised file change (`paths`, `diff`), as the chat shows it."""
    return {"paths": _v(p.paths), "diff": _v(p.diff)}


def _on_item_started(state: ChatState, ev: Any, out: _Out) -> ChatState:
    p, item = ev.payload, ev.itemId
    if p.itemType in ("assistant_message", "reasoning"):
        texts = dict(state.texts)
        old = texts.get(item, OpenText())
        texts[item] = OpenText(old.text, _v(p.phase) or old.phase, old.length)
        return replace(state, texts=texts)
    if p.itemType in TOOL_ITEM_TYPES and item not in state.tools:
        tool = OpenTool(_tool_use_id(ev), _v(p.toolName) or p.itemType)
        if _has_input(p.input):
            out.add(ChatToolUse, tool_use_id=tool.tool_use_id, name=tool.name, input=p.input,
                    parent_tool_use_id=_parent(state, ev), **_change(p))
            tool = replace(tool, shown=True)
        return replace(state, tools={**state.tools, item: tool})
    return state


def _on_item_updated(state: ChatState, ev: Any, out: _Out) -> ChatState:
    p, item = ev.payload, ev.itemId
    if p.itemType in TOOL_ITEM_TYPES:
        if item not in state.tools:
            return _on_item_started(state, ev, out)
        tool = state.tools[item]
        if not tool.shown and _has_input(p.input):
            name = _v(p.toolName) or tool.name
            out.add(ChatToolUse, tool_use_id=tool.tool_use_id, name=name, input=p.input,
                    parent_tool_use_id=_parent(state, ev), **_change(p))
            return replace(state, tools={**state.tools, item: OpenTool(tool.tool_use_id, name,
                                                                       True)})
        return state
    if p.itemType == "assistant_message" and _v(p.phase) and item in state.texts:
        texts = dict(state.texts)
        texts[item] = replace(texts[item], phase=p.phase)
        return replace(state, texts=texts)
    return state


def _on_item_completed(state: ChatState, ev: Any, out: _Out) -> ChatState:
    p, item = ev.payload, ev.itemId
    if p.itemType == "user_message":
        # the person's own prompt only: the adapters mark what a runtime, a hook or a
        # parent agent wrote on the user's side (`author`)
        if p.author == "user" and _v(p.text):
            out.add(ChatUser, content=p.text, item_id=_v(item))
        return state
    if p.itemType in TOOL_ITEM_TYPES:
        tool = state.tools.get(item) or OpenTool(_tool_use_id(ev), _v(p.toolName) or p.itemType)
        parent = _parent(state, ev)
        if not tool.shown:
            out.add(ChatToolUse, tool_use_id=tool.tool_use_id, name=_v(p.toolName) or tool.name,
                    input=_v(p.input) if _has_input(p.input) else {}, parent_tool_use_id=parent,
                    **_change(p))
        is_error = p.isError if p.isError is not UNSET else p.status in ("failed", "declined")
        out.add(ChatToolResult, tool_use_id=tool.tool_use_id, content=_v(p.output) or "",
                is_error=bool(is_error), parent_tool_use_id=parent, **_change(p))
        tools = dict(state.tools)
        tools.pop(item, None)
        return replace(state, tools=tools)
    if item in state.texts:
        texts = dict(state.texts)
        done = texts.pop(item)
        state = replace(state, texts=texts)
        if p.itemType == "assistant_message":
            # the text its deltas carried, when the state still has it whole
            whole = done.text if _length(done) <= ACCUMULATED_MAX else ""
            if whole or _v(p.text):
                return _set_last(state, whole or p.text, out)
        return state
    if p.itemType == "assistant_message" and _v(p.text):
        return _set_last(state, p.text, out)
    return state


def _length(text: OpenText) -> int:
    return max(text.length, len(text.text))  # a state stored before `length` has 0


def _set_last(state: ChatState, text: str, out: _Out) -> ChatState:
    """The turn's latest assistant text is `text`: in the state when short, else spooled."""
    pieces = 0
    if len(text) > LAST_KEPT:
        pieces = -(-len(text) // SPOOL_PIECE)
        for n in range(pieces):
            out.spool.put(out.session_id, _LAST, n, text[n * SPOOL_PIECE:(n + 1) * SPOOL_PIECE])
    for n in range(pieces, state.last_pieces):
        out.spool.put(out.session_id, _LAST, n, None)
    return replace(state, last_text=None if pieces else text, last_pieces=pieces)


def _take_last(state: ChatState, out: _Out) -> str | None:
    """The turn's latest assistant text; its spooled pieces are dropped."""
    if not state.last_pieces:
        return state.last_text
    sid, spool = out.session_id, out.spool
    text = "".join([spool.get(sid, _LAST, n) or "" for n in range(state.last_pieces)])
    for n in range(state.last_pieces):
        spool.put(sid, _LAST, n, None)
    return text


def _on_delta(state: ChatState, ev: Any, out: _Out) -> ChatState:
    p, item = ev.payload, ev.itemId
    kind = p.streamKind
    if kind not in ("assistant_text", "reasoning_text", "reasoning_summary_text") or not p.delta:
        return state  # tool output is shown whole in tool_result
    open_text = state.texts.get(item, OpenText())
    length = _length(open_text) + len(p.delta)
    whole = length <= ACCUMULATED_MAX
    acc = open_text.text + p.delta if whole else ""
    texts = {**state.texts, item: OpenText(acc, open_text.phase, length)}
    more: dict[str, Any] = {} if whole else {"accumulated_length": length}
    if kind == "assistant_text":
        out.add(ChatText, content=p.delta, accumulated=acc, phase=open_text.phase,
                item_id=_v(item), parent_tool_use_id=_parent(state, ev), **more)
        if length <= LAST_KEPT:  # should the turn end before the item completes
            return _set_last(replace(state, texts=texts), acc, out)
        if _length(open_text) <= LAST_KEPT and not state.last_pieces:
            return replace(state, texts=texts, last_text=None)  # no stale prefix
        return replace(state, texts=texts)
    out.add(ChatReasoning, content=p.delta, accumulated=acc, item_id=_v(item),
            parent_tool_use_id=_parent(state, ev), **more)
    return replace(state, texts=texts)


def _on_request_opened(state: ChatState, ev: Any, out: _Out) -> ChatState:
    p = ev.payload
    if p.requestType not in _QUESTION_REQUESTS:
        refs = ev.providerRefs
        tool = refs.providerItemId if refs is not UNSET else UNSET
        out.add(ChatApproval, state="opened", request_id=str(_v(ev.requestId)),
                request_type=p.requestType, tool_use_id=_v(tool), tool_name=_v(p.toolName),
                detail=_v(p.detail), options=_v(p.options))
    return state


def _on_request_resolved(state: ChatState, ev: Any, out: _Out) -> ChatState:
    p = ev.payload
    if p.requestType not in _QUESTION_REQUESTS:
        out.add(ChatApproval, state="resolved", request_id=str(_v(ev.requestId)),
                request_type=p.requestType, decision=_v(p.decision), outcome=_v(p.outcome))
    return state


def _on_question(state: ChatState, ev: Any, out: _Out) -> ChatState:
    if ev.__struct_config__.tag == "user-input.requested":
        out.add(ChatQuestion, state="asked", request_id=str(_v(ev.requestId)),
                questions=ev.payload.questions)
    else:
        out.add(ChatQuestion, state="answered", request_id=str(_v(ev.requestId)),
                answers=ev.payload.answers, outcome=_v(ev.payload.outcome))
    return state


def _on_error(state: ChatState, ev: Any, out: _Out) -> ChatState:
    p = ev.payload
    out.add(ChatError, message=p.message, error_class=_v(p.errorClass), will_retry=_v(p.willRetry))
    return state


def _on_turn_completed(state: ChatState, ev: Any, out: _Out) -> ChatState:
    p = ev.payload
    # the runtime's own final answer wins when it reports one (Claude's result)
    last = _take_last(state, out)
    final = _v(p.resultText) if p.resultText is not UNSET else last
    # the answer goes whole once: `final_text` repeats `result` only while it is short, as
    # `accumulated` does (a long answer in both was 2x its bytes in every turn's end)
    repeated = final if final is None or len(final) <= ACCUMULATED_MAX else ""
    out.add(ChatDone, result=final, final_text=repeated, is_error=p.state != "completed",
            subtype=_SUBTYPES.get(p.state, p.state))
    return ChatState()


_HANDLERS: Final = {
    "item.started": _on_item_started,
    "item.updated": _on_item_updated,
    "item.completed": _on_item_completed,
    "content.delta": _on_delta,
    "request.opened": _on_request_opened,
    "request.resolved": _on_request_resolved,
    "user-input.requested": _on_question,
    "user-input.resolved": _on_question,
    "runtime.error": _on_error,
    "turn.completed": _on_turn_completed,
}


def project_event(session: Session[ChatState], ev: Any, *, offset: int,
                  spool: Spool | None = None) -> tuple[Session[ChatState], list[ChatRecord]]:
    """Apply one canonical event at source position `offset` (watermarked like the
    adapters: an event at or below the watermark changes nothing). A long final text
    is kept in `spool` until its turn's `done` (a fresh MemorySpool when None: enough
    for a session projected in one call)."""
    if offset <= session.watermark:
        return session, []
    out = _Out(ev, session.seq, spool if spool is not None else MemorySpool())
    state = project(session.state, ev, out)
    return Session(seq=out.seq, watermark=offset, clockMs=session.clockMs, state=state), \
        out.records


def new_chat_session() -> Session[ChatState]:
    return Session(state=ChatState())


def project_next(session: Session[ChatState] | None, ev: Any, spool: Spool | None = None
                 ) -> tuple[Session[ChatState] | None, list[ChatRecord]]:
    """The chat view's step over a session's canonical events, as the worker and
    `replay --view chat` both run it: watermarked on the event's gapless `seq` (an event
    published again after a crash is projected once); after session.exited the state is
    gone (None, its spooled text dropped), so a session that resumes starts a new chat."""
    spool = spool if spool is not None else MemorySpool()
    new, records = project_event(session or new_chat_session(), ev, offset=ev.seq, spool=spool)
    if not isinstance(ev, SessionExited):
        return new, records
    for n in range(new.state.last_pieces):
        spool.put(ev.sessionId, _LAST, n, None)
    return None, records
