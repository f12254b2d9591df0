"""acp: agent_message_chunk, agent_thought_chunk and user_message_chunk -> message items.

Text has no item ids: one assistant_message (reasoning, user_message) item per
contiguous run of `agent_message_chunk` (thought, user) chunks with the same
`messageId` ("a change in messageId indicates a new message": absent -> present too, so
claude-agent-acp's notes without one, "Compacting...", a permission-mode warning, are
not merged into the answer after them; agents that send none get one item per run) and
from the same agent (a subagent's chunks are its own messages), numbered by a
session-wide ordinal; a chunk of another kind, a tool start, the end of the turn or the
end of a `session/load` replay closes it with its whole text. Chunks are native deltas,
forwarded 1:1; empty chunks are skipped.

The item's text is its spooled `text` stream (the conversation core's,
adapters.core.emitter.Emitter "Streams"): ACP sends chunks only, never a message whole,
and the item's completion carries its whole text. The state keeps none of it.
"""

from __future__ import annotations

from typing import Any, Final

from msgspec import UnsetType

from adapters.acp.envelope import Ctx, as_object, as_str, native_agent
from adapters.acp.state import State, Stream
from adapters.core.contract import MalformedRecord
from adapters.core.emitter import UNSET, Emitter
from adapters.core.emitter import replace as _replace
from adapters.core.lifecycle import complete_item, delta, start_item, taken
from topics.canonical import (
    ItemPayload,
    ItemUpdated,
    ProviderRefs,
)

_STREAMS = {
    "agent_message_chunk": ("assistant", "assistant_message", "assistant_text"),
    "agent_thought_chunk": ("reasoning", "reasoning", "reasoning_text"),
    "user_message_chunk": ("user", "user_message", None),
}
_ITEM_OF = {kind: item_type for kind, item_type, _ in _STREAMS.values()}
_ROLE_OF = {"assistant": "assistant", "user": "user"}
#: A user_message_chunk is the user's own text: the agent replays the user's prompts on
#: session/load (ACP has no chunk for text an agent or a hook wrote on the user's side).
_AUTHOR_OF = {"user": "user"}
_TEXT: Final = "text"  # a message item's stream (spooled: see the module docstring)


def _stream_refs(c: Ctx, stream: Stream) -> ProviderRefs | UnsetType:
    return c.refs(providerItemId=stream.messageId or UNSET)


def _open_stream(state: State, out: Emitter, kind: str, message_id: str | None,
                 agent: str | None) -> State:
    stream = Stream(kind=kind, n=state.items + 1, messageId=message_id, agent=agent)
    c = Ctx(state, out, agent=agent)
    # its stream opened (spooled): an item without text completes with ""
    start_item(out, c.at(out.id("itm", "msg", str(stream.n)), _stream_refs(c, stream)),
               ItemPayload(itemType=_ITEM_OF[kind], status="inProgress",  # type: ignore[arg-type]
                           role=_ROLE_OF.get(kind, UNSET),  # type: ignore[arg-type]
                           author=_AUTHOR_OF.get(kind, UNSET)),  # type: ignore[arg-type]
               True, (_TEXT,))
    return _replace(state, items=stream.n, stream=stream)


def close_stream(state: State, out: Emitter) -> State:
    stream = state.stream
    if stream is None:
        return state
    c = Ctx(state, out, agent=stream.agent)
    at = c.at(out.id("itm", "msg", str(stream.n)), _stream_refs(c, stream))
    complete_item(out, at, ItemPayload(
        itemType=_ITEM_OF[stream.kind], status="completed",  # type: ignore[arg-type]
        role=_ROLE_OF.get(stream.kind, UNSET),  # type: ignore[arg-type]
        author=_AUTHOR_OF.get(stream.kind, UNSET),  # type: ignore[arg-type]
        **taken(out, at.item_id, _TEXT, "text")), True)
    return _replace(state, stream=None)


def on_chunk(state: State, upd: dict[str, Any], sid: str | None, out: Emitter) -> State:
    kind, _, stream_kind = _STREAMS[upd["sessionUpdate"]]
    content = as_object(upd.get("content"), "chunk content")
    text = content.get("text") if content.get("type") == "text" else None
    if content.get("type") == "text" and not isinstance(text, str):
        raise MalformedRecord("a text chunk needs a string 'text'")
    if text == "":
        return state  # claude-code-acp opens every block with an empty chunk
    message_id = as_str(upd.get("messageId"))
    agent = native_agent(upd)
    cur = state.stream
    # "A change in messageId indicates a new message" (ContentChunk): from an id to none
    # too (claude-agent-acp's notes between answers carry none); never ids: one run. A
    # subagent's chunks are its own messages.
    if cur is None or cur.kind != kind or message_id != cur.messageId or agent != cur.agent:
        state = _open_stream(close_stream(state, out), out, kind, message_id, agent)
    stream = state.stream
    assert stream is not None
    c = Ctx(state, out, sid, agent)
    at = c.at(out.id("itm", "msg", str(stream.n)), _stream_refs(c, stream))
    if text is None:  # an image, audio or resource block: carried as item detail
        at.emit(out, ItemUpdated, ItemPayload(itemType=_ITEM_OF[kind], status="inProgress",  # type: ignore[arg-type]
                                              data={"content": content}))
    elif stream_kind is not None:
        delta(out, at, stream_kind, text, _TEXT)
    else:  # the user's text: no delta (never assistant text), but the item carries it
        out.append(at.item_id, _TEXT, text)
    return state
