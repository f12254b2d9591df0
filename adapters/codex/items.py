"""codex: item notifications: item/started, item/completed, the text and output deltas
of an item's streams, and its in-progress updates. An item first seen through a delta or
its completion is started synthetically."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from adapters.codex.agents import announced, spawned
from adapters.codex.common import Place, get_int, get_str, item_at, need_dict, need_str, or_unset
from adapters.codex.payloads import ITEM_TYPES, TOOL_KINDS, final_texts, indices, item_payload
from adapters.codex.state import OpenItem, State
from adapters.codex.tools import tool_output
from adapters.codex.turns import ensure_turn
from adapters.core.emitter import Emitter
from adapters.core.emitter import replace as _replace
from adapters.core.lifecycle import complete_item, delta, rest, start_item
from adapters.core.tools import change_fields
from topics.canonical import ItemPayload, ItemUpdated, ToolProgress, ToolProgressPayload


def _item_of(p: dict[str, Any], method: str) -> tuple[dict[str, Any], str, str, str, str]:
    item = need_dict(p.get("item"), f"{method} item")
    return (item, need_str(item, "id", f"{method} item"), get_str(item, "type") or "unknown",
            need_str(p, "threadId", method), need_str(p, "turnId", method))


def _open_item(state: State, out: Emitter, thread: str, turn: str, native_id: str, kind: str,
               payload: ItemPayload, synthetic: bool) -> State:
    state = ensure_turn(state, out, thread, turn)
    start_item(out, item_at(out, thread, turn, native_id), payload, synthetic)
    item = OpenItem(kind=kind, thread=thread, turn=turn,
                    tool=payload.toolName if isinstance(payload.toolName, str) else None,
                    phase=payload.phase if isinstance(payload.phase, str) else None)
    return _replace(state, items={**state.items, native_id: item})


def on_item_started(state: State, p: dict[str, Any], out: Emitter) -> State:
    item, native_id, kind, thread, turn = _item_of(p, "item/started")
    if native_id in state.items:  # a repeated start adds nothing
        return state
    state = _open_item(state, out, thread, turn, native_id, kind,
                       item_payload(kind, item, False, out.cap), synthetic=False)
    return _agents(state, out, item, kind, thread, out.id("itm", turn, native_id))


def on_item_completed(state: State, p: dict[str, Any], out: Emitter) -> State:
    item, native_id, kind, thread, turn = _item_of(p, "item/completed")
    if native_id not in state.items:
        state = _open_item(state, out, thread, turn, native_id, kind,
                           item_payload(kind, item, False, out.cap), synthetic=True)
    at = item_at(out, thread, state.items[native_id].turn, native_id)
    # the final text, less what the deltas already carried (never text twice)
    for key, final, stream, index in final_texts(kind, item):
        content, summary = indices(stream, index)
        rest(out, at, stream, final, key, content, summary)
    output = tool_output(kind, item, out, at.item_id) if kind in TOOL_KINDS else None
    complete_item(out, at, item_payload(kind, item, True, out.cap, output=output))
    state = _agents(state, out, item, kind, thread, at.item_id)
    items = dict(state.items)
    del items[native_id]
    return _replace(state, items=items)


def _agents(state: State, out: Emitter, item: dict[str, Any], kind: str, thread: str,
            cid: str) -> State:
    """The subagent threads an item names (adapters.codex.agents): a collab call's
    receivers, a sub-agent's start."""
    if kind == "collabAgentToolCall":
        return spawned(state, item, thread, cid)
    if kind == "subAgentActivity" and item.get("kind") == "started":
        child = get_str(item, "agentThreadId")
        if child is not None:
            return announced(state, out, child, thread)
    return state


# ---- deltas and item updates ---------------------------------------------------------


def _ensure_item(state: State, out: Emitter, p: dict[str, Any], method: str, kind: str
                 ) -> tuple[State, str, OpenItem]:
    """The open item a delta or update names, started synthetically when the delta
    came first (a part before its message gets a stub item.started)."""
    native_id = need_str(p, "itemId", method)
    if native_id not in state.items:
        thread, turn = need_str(p, "threadId", method), need_str(p, "turnId", method)
        state = _open_item(state, out, thread, turn, native_id, kind,
                           item_payload(kind, {"id": native_id, "type": kind}, False, out.cap),
                           synthetic=True)
    return state, native_id, state.items[native_id]


def on_delta(kind: str, stream: str, index_field: str | None = None
           ) -> Callable[[State, dict[str, Any], Emitter], State]:
    def handler(state: State, p: dict[str, Any], out: Emitter) -> State:
        method = f"{kind} delta"
        text = need_str(p, "delta", method)
        index = get_int(p, index_field) if index_field else None
        state, native_id, item = _ensure_item(state, out, p, method, kind)
        content, summary = indices(stream, index)
        # spooled, every stream (see the module docstring); "" opens it
        delta(out, item_at(out, item.thread, item.turn, native_id), stream,
              text, stream if index_field is None else f"{stream}:{index}", content, summary)
        return state
    return handler


def on_item_update(kind: str, *keys: str) -> Callable[[State, dict[str, Any], Emitter], State]:
    """item.updated carrying `keys` of the params (the changes, a terminal input, ...)."""
    def handler(state: State, p: dict[str, Any], out: Emitter) -> State:
        state, native_id, item = _ensure_item(state, out, p, f"{kind} update", kind)
        data = {k: p.get(k) for k in keys}
        fields: dict[str, Any] = {"toolName": or_unset(item.tool)}
        if kind == "fileChange":
            fields["input"] = {"changes": p.get("changes")}
            # the patch as the model writes it, every half second: its files, no diff yet
            fields.update(change_fields(p.get("changes"), out.cap, diff=False))
        out.emit(ItemUpdated, ItemPayload(itemType=ITEM_TYPES[kind], status="inProgress",  # type: ignore[arg-type]
                                          data=data, **fields),
                 **Place(out, thread=item.thread, turn=item.turn, item=native_id).kw)
        return state
    return handler


def on_mcp_progress(state: State, p: dict[str, Any], out: Emitter) -> State:
    native_id = get_str(p, "itemId")
    item = state.items.get(native_id) if native_id is not None else None
    out.emit(ToolProgress, ToolProgressPayload(toolUseId=or_unset(native_id),
                                               toolName=or_unset(item.tool if item else None),
                                               summary=or_unset(get_str(p, "message"))),
             **Place(out, thread=get_str(p, "threadId"), turn=get_str(p, "turnId"), item=native_id).kw)
    return state


