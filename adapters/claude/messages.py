"""claude: `assistant` and `user` lines: content blocks as items.

A text or thinking block is an item whose id derives from its message id and block
index; a tool block starts a tool item (adapters.claude.tools); a user line's
tool_result blocks complete them and its text is a user_message item. The Msg of an
assistant message (State.msgs, kept until the turn ends) says which blocks are done,
so a block is never completed twice whether it came whole or streamed
(adapters.claude.stream)."""

from __future__ import annotations

from typing import Any, Final

from msgspec import UnsetType

from adapters.claude.session import _adopt_session, _at, _emit, _obj, _str, open_turn
from adapters.claude.state import Msg, State
from adapters.claude.tools import _block_tool_name, _finalize_tool, _start_tool, _tool_result
from adapters.core.contract import MalformedRecord, Message
from adapters.core.emitter import UNSET, Emitter
from adapters.core.emitter import replace as _replace
from adapters.core.lifecycle import complete_item, rest, start_item, taken
from topics.canonical import (
    Author,
    ContentDelta,
    ContentDeltaPayload,
    ItemPayload,
    RuntimeErrorEvent,
    RuntimeErrorPayload,
)

_BLOCK_ITEM = {"text": "assistant_message", "thinking": "reasoning"}


_BLOCK_STREAM: Final = {"text": "assistant_text", "thinking": "reasoning_text"}


_TEXT: Final = "text"  # the stream of a text or thinking block's deltas, on its item


_JSON: Final = "input_json"  # the stream of a tool block's input_json_delta parts, on the tool's item


_TOOL_BLOCKS: Final = frozenset({"tool_use", "server_tool_use", "mcp_tool_use"})


_TEXT_BLOCKS: Final = {"text": ("text", "text"), "thinking": ("thinking", "thinking"),
                "redacted_thinking": ("thinking", "")}  # block type -> (kind, text field)


def _blocks(message: dict[str, Any], kind: str) -> list[Any]:
    """A message's content blocks: a string is one text block."""
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, list):
        raise MalformedRecord(f"{kind}: message.content must be a list or a string")
    return content


def _on_assistant(state: State, msg: Message, out: Emitter) -> State:
    obj = msg.obj
    message = _obj(obj, "message")
    content = _blocks(message, "assistant")
    state = _adopt_session(state, msg, out)
    state = open_turn(state, out)
    parent = _str(obj.get("parent_tool_use_id"))
    state, m = _message_for(state, _str(message.get("id")), parent)
    blocks = [b for b in content if isinstance(b, dict)]
    if m.streamed and len(blocks) == 1 and m.cur >= 0:
        indices = [m.cur]  # the line of the block being streamed (arrives before its stop)
    elif len(blocks) == 1:
        indices = [m.next]
    else:  # a whole message: its blocks from index 0; completed ones are skipped below
        indices = list(range(len(blocks)))
    for index, block in zip(indices, blocks, strict=True):
        state = _assistant_block(state, out, m.key, index, block, parent, obj)
        m = state.msgs[m.native or m.key]
    if indices:
        state = _put_msg(state, _replace(m, next=max(m.next, indices[-1] + 1)))
    error = _str(obj.get("error"))
    if error is not None:  # the synthetic message Claude Code writes after an API error
        text = "".join(t for b in blocks
                       if b.get("type") == "text" and isinstance(t := b.get("text"), str))
        _emit(state, out, RuntimeErrorEvent,
              RuntimeErrorPayload(message=text or error,
                                  errorClass=_ERROR_CLASS.get(error, "unknown"), willRetry=False,
                                  detail={"error": error, "model": message.get("model")}),
              parent=parent)
    return state


_ERROR_CLASS: dict[str, Any] = {
    "authentication_failed": "permission_error", "oauth_org_not_allowed": "permission_error",
    "account_on_hold": "permission_error", "verification_required": "permission_error",
    "billing_error": "permission_error", "cloud_credential_error": "permission_error",
    "rate_limit": "provider_error", "overloaded": "provider_error",
    "server_error": "provider_error", "max_output_tokens": "provider_error",
    "invalid_request": "validation_error", "model_not_found": "validation_error",
}


def _message_for(state: State, native: str | None, parent: str | None,
                 streamed: bool = False) -> tuple[State, Msg]:
    """The Msg of an assistant line or stream event, created on first sight."""
    if native is not None and native in state.msgs:
        m = state.msgs[native]
        if streamed and not m.streamed:
            m = _replace(m, streamed=True)
            state = _put_msg(state, m)
        return state, m
    current = state.streams.get(parent or "")
    if current is not None and current in state.msgs and state.msgs[current].native is None:
        # stream events without message_start (the SDK's StreamEvent alone): this line
        # is the message they streamed, whatever id it brings
        m = _replace(state.msgs[current], native=native)
        msgs = dict(state.msgs)
        del msgs[current]
        msgs[native or m.key] = m
        streams = dict(state.streams)
        if native:
            streams[parent or ""] = native
        return _replace(state, msgs=msgs, streams=streams), m
    key = native or f"{_ANON}msg{state.anon}"
    m = Msg(key=key, native=native, parent=parent, streamed=streamed)
    state = _replace(state, anon=state.anon + (native is None))
    return _put_msg(state, m), m


def _put_msg(state: State, m: Msg) -> State:
    msgs = dict(state.msgs)
    msgs[m.native or m.key] = m
    return _replace(state, msgs=msgs)


def _mark_done(state: State, m_key: str, index: int) -> State:
    m = next((v for v in state.msgs.values() if v.key == m_key), None)
    if m is None or index in m.done:
        return state
    return _put_msg(state, _replace(m, done=(*m.done, index)))


def _block_type(block: dict[str, Any]) -> Any:
    """A content block's `type`: any JSON value but a list or an object (an unknown
    type is an unknown block). Raises MalformedRecord for those."""
    btype = block.get("type")
    if isinstance(btype, list | dict):
        raise MalformedRecord("a content block's type must be a string")
    return btype


def _is_done(state: State, m_key: str, index: int) -> bool:
    return any(v.key == m_key and index in v.done for v in state.msgs.values())


def _assistant_block(state: State, out: Emitter, m_key: str, index: int, block: dict[str, Any],
                     parent: str | None, obj: dict[str, Any]) -> State:
    btype = _block_type(block)
    key = f"{m_key}#{index}"
    if btype in _TEXT_BLOCKS:
        if _is_done(state, m_key, index):
            return state
        kind, field = _TEXT_BLOCKS[str(btype)]
        full = block.get(field, "") if field else ""
        full = full if isinstance(full, str) else ""
        open_block = state.blocks.get(key)
        streamed = open_block is not None and open_block.kind == kind
        if not streamed:
            _start_text(state, out, kind, key, parent, synthetic=True)
        at = _at(state, out, key, _msg_ref(m_key), parent=parent)
        if streamed:  # the line's text less what the deltas carried
            rest(out, at, _BLOCK_STREAM[kind], full, _TEXT)
        elif full:  # all of it, as one delta
            at.emit(out, ContentDelta, ContentDeltaPayload(
                streamKind=_BLOCK_STREAM[kind], delta=full), True)  # type: ignore[arg-type]
        # the line's text, or (a line without it) what the deltas carried
        state = _complete_text(state, out, kind, key, full if full or not streamed else None,
                               parent, redacted=btype == "redacted_thinking")
        return _mark_done(state, m_key, index)
    if btype in _TOOL_BLOCKS:
        tid = _str(block.get("id"))
        if tid is None:
            raise MalformedRecord(f"assistant: {btype} block without an id")
        state = _drop_block(state, out, key)  # the line has the whole input
        if tid in state.tools:
            state = _finalize_tool(state, out, tid, block.get("input"))
        elif not _is_done(state, m_key, index):
            state = _start_tool(state, out, tid, _block_tool_name(block), block.get("input"),
                                parent, final=True)
        return _mark_done(state, m_key, index)
    if isinstance(btype, str) and btype.endswith("_tool_result"):
        if not _is_done(state, m_key, index):
            state = _tool_result(state, out, block, parent, obj)
        return _mark_done(state, m_key, index)
    if _is_done(state, m_key, index):
        return state
    # a block type this adapter does not know (image, document, container_upload...)
    at = _at(state, out, key, _msg_ref(m_key), parent=parent)
    start_item(out, at, ItemPayload(itemType="unknown", status="inProgress"), True)
    complete_item(out, at, ItemPayload(itemType="unknown", status="completed", data=block))
    return _mark_done(state, m_key, index)


_ANON = "anon:"  # prefix of synthesised message keys (never a provider id)


def _msg_ref(m_key: str) -> str | None:
    """The provider's message id behind a message key (none for synthesised keys)."""
    return None if m_key.startswith(_ANON) else m_key


def _start_text(state: State, out: Emitter, kind: str, key: str, parent: str | None,
                synthetic: bool) -> None:
    start_item(out, _at(state, out, key, _msg_ref(key.rsplit("#", 1)[0]), parent=parent),
               ItemPayload(itemType=_BLOCK_ITEM[kind], status="inProgress",  # type: ignore[arg-type]
                           role="assistant" if kind == "text" else UNSET), synthetic)


def _complete_text(state: State, out: Emitter, kind: str, key: str, text: str | None,
                   parent: str | None, redacted: bool = False, status: str = "completed",
                   detail: str | UnsetType = UNSET, synthetic: bool = False) -> State:
    """Complete a text or thinking item with `text`, or (None) with what its block
    streamed, read back from the spool."""
    at = _at(state, out, key, _msg_ref(key.rsplit("#", 1)[0]), parent=parent)
    fields = taken(out, at.item_id, _TEXT, "text") if text is None else {"text": text}
    complete_item(out, at, ItemPayload(
        itemType=_BLOCK_ITEM[kind], status=status,  # type: ignore[arg-type]
        role="assistant" if kind == "text" else UNSET,
        detail="redacted thinking" if redacted else detail, **fields), synthetic)
    blocks = dict(state.blocks)
    blocks.pop(key, None)
    return _replace(state, blocks=blocks)


def _drop_block(state: State, out: Emitter, key: str) -> State:
    """Forget block `key` without completing anything: its stream is closed."""
    block = state.blocks.get(key)
    if block is None:
        return state
    if block.kind == "tool":
        if block.tool:
            out.drop(out.id("itm", block.tool), _JSON)
    else:
        out.drop(out.id("itm", key), _TEXT)
    blocks = dict(state.blocks)
    del blocks[key]
    return _replace(state, blocks=blocks)


def _close_blocks(state: State, out: Emitter, m: Msg, status: str,
                  why: str = "the stream ended before the block did") -> State:
    """Complete the text and thinking blocks of `m` still open, with what they streamed."""
    prefix = f"{m.key}#"
    for key, block in list(state.blocks.items()):
        if not key.startswith(prefix) or block.kind == "tool":
            continue
        index = int(key[len(prefix):])
        state = _complete_text(state, out, block.kind, key, None, m.parent, status=status,
                               detail=why if status == "failed" else UNSET, synthetic=True)
        state = _mark_done(state, m.key, index)
    return state


def _author(obj: dict[str, Any], origin: str, parent: str | None, echoes_prompt: bool
            ) -> Author:
    """Who wrote a user line's text. Claude Code never echoes the prompt on stdout but as
    an `isReplay` line (skipped: the client's line is the prompt), so the text of a user
    line it writes itself is its own ("[Request interrupted by user]", a compaction
    summary); Amp echoes the prompt (`echoes_prompt`)."""
    if parent is not None:
        return "agent"  # the Task tool's prompt to its subagent
    if obj.get("isSynthetic") is True:
        return "runtime"
    return "user" if origin == "client" or echoes_prompt else "runtime"


def _on_user(state: State, msg: Message, out: Emitter, echoes_prompt: bool = False) -> State:
    obj = msg.obj
    message = _obj(obj, "message")
    content = _blocks(message, "user")
    if msg.origin == "agent" and obj.get("isReplay") is True:
        # the CLI echoing a prompt the client sent: that client line is the user message
        return state
    state = _adopt_session(state, msg, out)
    if msg.origin == "agent" or obj.get("shouldQuery") is not False:
        state = open_turn(state, out)
    parent = _str(obj.get("parent_tool_use_id"))
    blocks = [b for b in content if isinstance(b, dict)]
    results = [b for b in blocks if b.get("type") == "tool_result"]
    for block in results:
        state = _tool_result(state, out, block, parent, obj, single=len(results) == 1)
    texts = [b["text"] for b in blocks if b.get("type") == "text" and isinstance(b.get("text"), str)]
    others = [b for b in blocks if b.get("type") not in ("text", "tool_result")]
    if not texts and not others:
        return state
    key = f"user-{_str(obj.get('uuid')) or state.anon}"
    state = _replace(state, anon=state.anon + (_str(obj.get("uuid")) is None))
    data: dict[str, Any] = {k: obj[k] for k in ("isSynthetic", "origin", "priority") if k in obj}
    if others:
        data["content"] = others
    author = _author(obj, msg.origin, parent, echoes_prompt)
    at = _at(state, out, key, _str(obj.get("uuid")), parent=parent)
    start_item(out, at, ItemPayload(itemType="user_message", status="inProgress", role="user",
                                    author=author), True)
    complete_item(out, at, ItemPayload(itemType="user_message", status="completed", role="user",
                                       text="\n".join(texts), data=data or UNSET, author=author))
    return state
