"""claude: `stream_event` (partial messages, `--include-partial-messages`): a
message's blocks as they stream. Text and thinking deltas become content.delta on the
block's item; a tool block's input_json_delta parts are spooled until the block stops
(adapters.core.emitter, "Streams"). The `assistant` line of each block usually arrives
before its `content_block_stop` (adapters.claude.messages completes it)."""

from __future__ import annotations

from typing import Any, Final

import msgspec

from adapters.claude.messages import (
    _ANON,
    _BLOCK_STREAM,
    _JSON,
    _TEXT,
    _TEXT_BLOCKS,
    _TOOL_BLOCKS,
    _assistant_block,
    _block_type,
    _close_blocks,
    _complete_text,
    _drop_block,
    _is_done,
    _mark_done,
    _message_for,
    _msg_ref,
    _put_msg,
    _start_text,
)
from adapters.claude.session import (
    _adopt_session,
    _at,
    _dict,
    _emit,
    _obj,
    _str,
    _thread,
    _turn,
    open_turn,
)
from adapters.claude.state import Block, Msg, State
from adapters.claude.tools import _block_tool_name, _finalize_tool, _start_tool
from adapters.core.contract import MalformedRecord, Message
from adapters.core.emitter import Emitter
from adapters.core.emitter import replace as _replace
from adapters.core.lifecycle import delta as stream_delta
from topics.canonical import (
    RuntimeErrorEvent,
    RuntimeErrorPayload,
)


def _on_stream_event(state: State, msg: Message, out: Emitter) -> State:
    obj = msg.obj
    event = _obj(obj, "event")
    etype = event.get("type")
    if not isinstance(etype, str):
        raise MalformedRecord("stream_event: event without a string 'type'")
    out.native_type = f"stream_event/{etype}"
    state = _adopt_session(state, msg, out)
    if etype in ("ping", "message_delta"):
        # ping is a keep-alive; message_delta's stop reason and usage come whole in
        # `result` (and in the next `assistant` line)
        return state
    if etype == "error":
        err = _dict(event.get("error"))
        _emit(state, out, RuntimeErrorEvent,
              RuntimeErrorPayload(message=str(err.get("message") or "stream error"),
                                  errorClass="provider_error", detail=err))
        return state
    if etype not in _STREAM_EVENTS:
        out.unknown(out.native_type, thread=_thread(state, out), turn=_turn(state, out))
        return state
    state = open_turn(state, out)
    parent = _str(obj.get("parent_tool_use_id"))
    if etype == "message_start":
        return _message_start(state, out, obj, event, parent)
    native = _str(obj.get("api_message_id")) or state.streams.get(parent or "")
    if etype == "message_stop" and (native is None or native not in state.msgs):
        return state
    state, m = _streamed_message(state, native, parent)
    if etype == "message_stop":
        return _message_stop(state, out, m, parent or "")
    index = event.get("index")
    if not isinstance(index, int) or isinstance(index, bool):
        raise MalformedRecord(f"stream_event {etype} without an integer index")
    key = f"{m.key}#{index}"
    if m.cur != index:
        state = _put_msg(state, _replace(m, cur=index, streamed=True))
    if etype == "content_block_start":
        return _block_start(state, out, m.key, index, _dict(event.get("content_block")), parent,
                            obj)
    if etype == "content_block_delta":
        return _block_delta(state, out, m.key, key, _dict(event.get("delta")), parent)
    return _block_stop(state, out, m.key, index, parent)


def _message_start(state: State, out: Emitter, obj: dict[str, Any], event: dict[str, Any],
                   parent: str | None) -> State:
    """A message starts streaming for the agent `parent` names: the one it streamed
    before, if not finished, broke off."""
    pkey = parent or ""
    native = _str(_dict(event.get("message")).get("id")) or _str(obj.get("api_message_id"))
    previous = state.streams.get(pkey)
    if previous is not None and previous in state.msgs and previous != native:
        # a stream that broke off (Claude Code retries, or falls back to a
        # non-streaming request): its unfinished text ends here, as streamed
        state = _close_blocks(state, out, state.msgs[previous], "failed")
    state, m = _message_for(state, native, parent, streamed=True)
    return _replace(state, streams={**state.streams, pkey: m.native or m.key})


def _streamed_message(state: State, native: str | None, parent: str | None
                      ) -> tuple[State, Msg]:
    """The Msg a block event streams into (`native`: its message id as known), created
    for events that came without message_start."""
    pkey = parent or ""
    if native is None or native not in state.msgs:
        if native is None:  # events without message_start: a message with a synthesised id
            m = Msg(key=f"{_ANON}stream{state.anon}", parent=parent, streamed=True)
            state = _replace(state, anon=state.anon + 1)
        else:
            m = Msg(key=native, native=native, parent=parent, streamed=True)
        state = _put_msg(state, m)
        state = _replace(state, streams={**state.streams, pkey: m.native or m.key})
    return state, state.msgs[native or state.streams[pkey]]


def _message_stop(state: State, out: Emitter, m: Msg, pkey: str) -> State:
    """The message is whole: its text blocks still open complete with what they streamed;
    the agent `pkey` names streams none."""
    state = _close_blocks(state, out, m, "completed")
    streams = dict(state.streams)
    if streams.get(pkey) == (m.native or m.key):
        del streams[pkey]
    return _replace(state, streams=streams)


_STREAM_EVENTS: Final = frozenset({"message_start", "message_stop", "content_block_start",
                            "content_block_delta", "content_block_stop"})


def _block_start(state: State, out: Emitter, m_key: str, index: int, block: dict[str, Any],
                 parent: str | None, obj: dict[str, Any]) -> State:
    btype = _block_type(block)
    key = f"{m_key}#{index}"
    if _is_done(state, m_key, index) or key in state.blocks:
        return state
    if btype in _TEXT_BLOCKS:
        kind, field = _TEXT_BLOCKS[str(btype)]
        _start_text(state, out, kind, key, parent, synthetic=False)
        state = _replace(state, blocks={**state.blocks, key: Block(kind=kind)})
        first = block.get(field) if field else None
        if isinstance(first, str) and first:
            state = _block_delta(state, out, m_key, key, {"type": f"{kind}_delta", kind: first},
                                 parent)
        return state
    if btype in _TOOL_BLOCKS:
        tid = _str(block.get("id"))
        if tid is None:
            raise MalformedRecord(f"content_block_start: {btype} block without an id")
        state = _replace(state, blocks={**state.blocks, key: Block(kind="tool", tool=tid)})
        if tid in state.tools:
            return state
        streamed_input = block.get("input")
        return _start_tool(state, out, tid, _block_tool_name(block), streamed_input, parent,
                           final=False)
    # server tool results and unknown blocks arrive whole: treat them as the full line
    return _assistant_block(state, out, m_key, index, block, parent, obj)


def _block_delta(state: State, out: Emitter, m_key: str, key: str, delta: dict[str, Any],
                 parent: str | None) -> State:
    dtype = delta.get("type")
    kind = {"text_delta": "text", "thinking_delta": "thinking"}.get(str(dtype))
    if kind is not None:
        text = delta.get("text" if kind == "text" else "thinking")
        if not isinstance(text, str):
            raise MalformedRecord(f"{dtype} without a string {kind!r}")
        if key not in state.blocks:
            if _is_done(state, m_key, int(key.rsplit("#", 1)[1])):
                return state  # late delta of a completed block: its text is already out
            # a delta before any content_block_start (a stub item is started first)
            _start_text(state, out, kind, key, parent, synthetic=True)
            state = _replace(state, blocks={**state.blocks, key: Block(kind=kind)})
        if text:
            stream_delta(out, _at(state, out, key, _msg_ref(m_key), parent=parent),
                         _BLOCK_STREAM[kind], text, _TEXT)
        return state
    if dtype == "input_json_delta":
        block = state.blocks.get(key)
        part = delta.get("partial_json")
        if block is not None and block.kind == "tool" and block.tool and isinstance(part, str):
            out.append(out.id("itm", block.tool), _JSON, part, whole=True)
        return state
    # signature_delta (thinking signature), citations_delta: nothing a reader shows
    return state


def _block_stop(state: State, out: Emitter, m_key: str, index: int, parent: str | None) -> State:
    key = f"{m_key}#{index}"
    block = state.blocks.get(key)
    if block is None:
        return state  # the `assistant` line completed it already (the usual order)
    if block.kind == "tool":
        tid = block.tool
        if tid and tid in state.tools and not state.tools[tid].final:
            # the input as streamed, never cut at the per-item cap (Stream.whole): a
            # cut would not parse; one message's output (its max output tokens) bounds it
            whole = out.whole(out.id("itm", tid), _JSON)
            state = _drop_block(state, out, key)
            state = _finalize_tool(state, out, tid,
                                   _parse_json(whole.text if whole is not None else ""))
        else:
            state = _drop_block(state, out, key)
        return _mark_done(state, m_key, index)
    state = _complete_text(state, out, block.kind, key, None, parent)
    return _mark_done(state, m_key, index)


def _parse_json(text: str) -> Any:
    if not text:
        return {}
    try:
        return msgspec.json.decode(text)
    except msgspec.DecodeError:
        return {"partial_json": text}
