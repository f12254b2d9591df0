"""codex-exec: Codex SDK thread events (`codex exec --json`) -> canonical events.

Reads the JSONL ThreadEvent stream of `codex exec --json` / `--experimental-json`
as declared by `@openai/codex-sdk` 0.163.0 (`events.ts`, `items.ts`) and emitted by
codex-cli 0.46.0 through 0.171.0: thread.started, turn.started, turn.completed,
turn.failed, item.started, item.updated, item.completed, error.

Releases (every recording of each is replayed against its oracle by
tests/adapters/test_drift.py, which also checks this table; docs/runtimes "Verified runtime
releases")

| runtime (recordings) | releases verified | written against |
| --- | --- | --- |
| `codex-exec` | 0.130.0, 0.171.0 | `@openai/codex-sdk` 0.163.0 `events.ts`, `items.ts` |

The stream never states its release (thread.started carries only the thread id), so
nothing records it.

Invariants
* Every item the stream mentions is started once and completed once, in that
  order: items that only arrive as `item.completed` (agent_message, reasoning, and
  file_change before 0.171) get a synthetic `item.started` first.
* Codex exec sends no text deltas, so a message's text becomes one synthetic
  `content.delta` right before its `item.completed` (the delta policy: a delta, then the final text less what it carried);
  command output that grows across `item.updated` is streamed as
  `command_output` deltas of the new suffix only, and `item.completed` carries the
  whole `aggregated_output`.
* Turns have no native id: turn ids are derived from the thread id and the turn's
  ordinal. A `turn.started` while a turn is open closes that turn as interrupted;
  an item still open when its turn ends is completed as failed, so no consumer
  waits on it forever.

Tricky parts: `file_change.changes[].kind` is a string ("add") here, unlike the
app-server's object; `turn.failed` becomes `runtime.error` + `turn.completed
(failed)`; the stream-level `error` event ("Reconnecting... 1/1") is a retry
notice when it says so, otherwise fatal.

Token usage: `turn.completed.usage` is the turn's (exec_tokens). The stream states no
running total of its own, so the thread's is kept (State.total: the sum of the turns'
tokens, each turn counted once) and goes out as `tokens` on the thread.token-usage.updated
that precedes each turn.completed carrying usage.

Collab agents: recent releases add `collab_tool_call` items (spawn_agent, send_input, wait,
close_agent, with sender_thread_id and receiver_thread_ids), but the stream carries the
main thread's events only: no message of a subagent's thread is in it, so no event is a
subagent's (the items stay `unknown` items with their native data).

Streams (the conversation core's, adapters.core.emitter.Emitter; the state keeps none of the output)
* `command_output` of each command_execution item, spooled: `item.completed` carries
  the whole `aggregated_output`, but a command whose turn ends first is completed
  (failed) with the output streamed so far, which no later message repeats. A snapshot
  that does not extend what was streamed re-bases the stream on it (reset), as the
  stored snapshot used to be replaced.
* Message and reasoning text needs none: it comes whole, once, in `item.completed`.
"""

from __future__ import annotations

from typing import Any, Final

from msgspec import UnsetType

from adapters.codex_exec.state import OpenItem, State
from adapters.core.contract import MalformedRecord, Message
from adapters.core.emitter import UNSET, Emitter
from adapters.core.emitter import replace as _replace
from adapters.core.lifecycle import (
    At,
    close_item,
    complete_item,
    end_turn,
    rest,
    snapshot,
    start_item,
)
from adapters.core.shape import native_count, native_list
from adapters.core.tools import change_fields, command_text
from topics.canonical import (
    ItemPayload,
    ItemUpdated,
    PlanStep,
    ProviderRefs,
    RuntimeErrorEvent,
    RuntimeErrorPayload,
    SessionStarted,
    SessionStartedPayload,
    ThreadStarted,
    ThreadStartedPayload,
    ThreadTokenUsageUpdated,
    ThreadTokenUsageUpdatedPayload,
    TurnCompletedPayload,
    TurnPlanUpdated,
    TurnPlanUpdatedPayload,
    TurnStarted,
    TurnStartedPayload,
)
from topics.usage import TokenUsage, running, tokens

provider = "codex-exec"
raw_source = "codex.sdk.thread-event"

#: no native message carries an id (adapters.core.ids, "Native message ids")
message_id = None


state_type = State


def initial() -> State:
    return State()


_ITEM_TYPES = {
    "agent_message": "assistant_message",
    "reasoning": "reasoning",
    "command_execution": "command_execution",
    "file_change": "file_change",
    "mcp_tool_call": "mcp_tool_call",
    "web_search": "web_search",
    "todo_list": "plan",
    "error": "error",
}
_TEXT_STREAMS = {"agent_message": "assistant_text", "reasoning": "reasoning_text"}


class _Ctx:
    """Canonical ids of the current thread/turn, computed once per message."""

    __slots__ = ("thread", "turn", "refs")

    def __init__(self, state: State, out: Emitter):
        self.thread: str | UnsetType = out.id("thr", state.thread) if state.thread else UNSET
        self.turn: str | UnsetType = (
            out.id("trn", state.thread or "", str(state.turns)) if state.turnOpen else UNSET
        )
        self.refs = ProviderRefs(providerThreadId=state.thread) if state.thread else UNSET

    def at(self) -> At:
        return At(self.thread, self.turn, refs=self.refs)

    def item_at(self, state: State, out: Emitter, native_id: str) -> At:
        return At(self.thread, self.turn, out.id("itm", native_id),
                  refs=_item_refs(state, native_id))


def translate(state: State, msg: Message, out: Emitter) -> State:
    obj = msg.obj
    kind = obj.get("type")
    if not isinstance(kind, str):
        raise MalformedRecord("codex-exec event without a string 'type'")
    out.native_type = kind
    handler = _HANDLERS.get(kind)
    if handler is None:
        out.unknown(kind, thread=_Ctx(state, out).thread)
        return state
    return handler(state, obj, out)


# ---- thread and turn ----------------------------------------------------------


def _on_thread_started(state: State, obj: dict[str, Any], out: Emitter) -> State:
    tid = obj.get("thread_id")
    if not isinstance(tid, str):
        raise MalformedRecord("thread.started.thread_id must be a string")
    thread = out.id("thr", tid)
    refs = ProviderRefs(providerThreadId=tid)
    if not state.started:
        out.emit(SessionStarted, SessionStartedPayload(), synthetic=True, thread=thread, refs=refs)
    out.emit(ThreadStarted, ThreadStartedPayload(providerThreadId=tid), thread=thread, refs=refs)
    return _replace(state, thread=tid, started=True)


def _on_turn_started(state: State, obj: dict[str, Any], out: Emitter) -> State:
    if state.turnOpen:
        state = _end_turn(state, out, TurnCompletedPayload(state="interrupted"), synthetic=True)
    state = _replace(state, turns=state.turns + 1, turnOpen=True)
    c = _Ctx(state, out)
    out.emit(TurnStarted, TurnStartedPayload(), thread=c.thread, turn=c.turn, refs=c.refs)
    return state


def exec_tokens(usage: Any) -> TokenUsage | None:
    """TokenUsage of a `turn.completed` usage, None when it is no dict. OpenAI's rule:
    `input_tokens` includes `cached_input_tokens` (and the cache writes), `output_tokens`
    includes `reasoning_output_tokens`. Codex exec counts the thread so far, and one
    `codex exec` run is one turn: its count is the turn's (a resumed thread's first run
    counts the history too; the stream does not say how much)."""
    if not isinstance(usage, dict):
        return None
    return tokens(input=native_count(usage, "input_tokens"),
                  cachedInput=native_count(usage, "cached_input_tokens"),
                  cacheWrite=native_count(usage, "cache_write_input_tokens"),
                  output=native_count(usage, "output_tokens"),
                  reasoningOutput=native_count(usage, "reasoning_output_tokens"))


def _on_turn_completed(state: State, obj: dict[str, Any], out: Emitter) -> State:
    usage = obj.get("usage", UNSET)
    turn_tokens = exec_tokens(usage)
    if usage is not UNSET:
        state = _count(state, turn_tokens)
        c = _Ctx(state, out)
        total = state.total if turn_tokens is not None and state.total is not None else UNSET
        out.emit(ThreadTokenUsageUpdated, ThreadTokenUsageUpdatedPayload(usage=usage, tokens=total),
                 thread=c.thread, turn=c.turn, refs=c.refs)
    return _end_turn(state, out, TurnCompletedPayload(
        state="completed", usage=usage, tokens=turn_tokens or UNSET))


def _count(state: State, turn_tokens: TokenUsage | None) -> State:
    """The thread's running total with the turn's tokens added, once per turn: a
    turn.completed repeated for the same turn (no turn.started between) adds nothing."""
    if turn_tokens is None or (state.total is not None and state.totalTurn == state.turns):
        return state
    total = running(state.total, turn_tokens)
    return _replace(state, total=total, totalTurn=state.turns)


def _on_turn_failed(state: State, obj: dict[str, Any], out: Emitter) -> State:
    error = obj.get("error")
    message = error.get("message") if isinstance(error, dict) else None
    message = message if isinstance(message, str) else "turn failed"
    c = _Ctx(state, out)
    out.emit(RuntimeErrorEvent, RuntimeErrorPayload(message=message, errorClass="provider_error",
                                                    willRetry=False, detail=error),
             thread=c.thread, turn=c.turn, refs=c.refs)
    return _end_turn(state, out, TurnCompletedPayload(state="failed", errorMessage=message))


def _on_error(state: State, obj: dict[str, Any], out: Emitter) -> State:
    message = obj.get("message")
    message = message if isinstance(message, str) else "stream error"
    c = _Ctx(state, out)
    out.emit(RuntimeErrorEvent,
             RuntimeErrorPayload(message=message, errorClass="provider_error",
                                 willRetry=message.startswith("Reconnecting")),
             thread=c.thread, turn=c.turn, refs=c.refs)
    return state


def _end_turn(state: State, out: Emitter, payload: TurnCompletedPayload,
              synthetic: bool = False) -> State:
    c = _Ctx(state, out)
    for native_id, open_item in state.items.items():
        at = c.item_at(state, out, native_id)
        why = "the turn ended before the item completed"
        if open_item.itemType == "command_execution":  # with what it printed so far
            close_item(out, at, open_item.itemType, "failed", why, output_stream=_OUTPUT, isError=True)
        else:
            close_item(out, at, open_item.itemType, "failed", why)
    if state.turnOpen or not synthetic:
        end_turn(out, c.at(), payload, synthetic)
    return _replace(state, turnOpen=False, items={})


# ---- items --------------------------------------------------------------------


def _item(obj: dict[str, Any]) -> tuple[dict[str, Any], str, str]:
    item = obj.get("item")
    if not isinstance(item, dict) or not isinstance(item.get("id"), str):
        raise MalformedRecord(f"{obj.get('type')}: 'item' must be an object with a string id")
    kind = item.get("type")
    return item, item["id"], kind if isinstance(kind, str) else "unknown"


def _item_refs(state: State, native_id: str) -> ProviderRefs:
    return ProviderRefs(providerThreadId=state.thread or UNSET, providerItemId=native_id)


def _tool_fields(kind: str, item: dict[str, Any], done: bool, cap: int) -> dict[str, Any]:
    """Normalised tool name, input, normalised fields (adapters.core.tools: command,
    paths, query, MCP names; exec's items carry no cwd and no diff) and (when done)
    output of a tool item; `cap`: the per-item cap."""
    if kind == "command_execution":
        fields: dict[str, Any] = {"toolName": "Bash", "input": {"command": item.get("command", "")}}
        command = command_text(item.get("command"))
        if command is not None:
            fields["command"] = command
        if done:
            fields["output"] = item.get("aggregated_output") or ""
            fields["exitCode"] = item.get("exit_code")
        return fields
    if kind == "file_change":
        changes = native_list(item.get("changes"), "file_change changes")
        return {"toolName": "Edit", "input": {"changes": changes},
                "title": ", ".join(f"{c.get('kind')} {c.get('path')}" for c in changes
                                   if isinstance(c, dict)),
                **change_fields(changes, cap)}
    if kind == "mcp_tool_call":
        fields = {"toolName": f"mcp__{item.get('server')}__{item.get('tool')}",
                  "input": item.get("arguments")}
        if isinstance(item.get("server"), str) and isinstance(item.get("tool"), str):
            fields.update(mcpServer=item["server"], mcpTool=item["tool"])
        if done:
            err = item.get("error")
            if isinstance(err, dict) and err.get("message"):
                fields["output"] = str(err["message"])
            else:
                fields["output"] = _mcp_text(item.get("result"))
        return fields
    if kind == "web_search":
        query = item.get("query")
        return {"toolName": "WebSearch", "input": {"query": item.get("query", "")},
                **({"query": query} if isinstance(query, str) and query else {})}
    return {}


def _mcp_text(result: Any) -> str:
    if not isinstance(result, dict):
        return ""
    parts = [b.get("text", "") for b in native_list(result.get("content"), "mcp result content")
             if isinstance(b, dict) and b.get("type") == "text"]
    return "".join(p for p in parts if isinstance(p, str))


def _status(kind: str, item: dict[str, Any], done: bool) -> str:
    native = item.get("status")
    if native == "failed":
        return "failed"
    if kind == "command_execution" and done and item.get("exit_code") not in (0, None):
        return "failed"
    return "completed" if done else "inProgress"


def _payload(kind: str, item: dict[str, Any], done: bool, cap: int) -> ItemPayload:
    status = _status(kind, item, done)
    fields = _tool_fields(kind, item, done, cap)
    if kind in _TEXT_STREAMS and done:
        fields["text"] = item.get("text") or ""
        if kind == "agent_message":
            fields["role"] = "assistant"
    if kind == "error":
        fields["detail"] = str(item.get("message", ""))
    if kind in ("command_execution", "file_change", "mcp_tool_call", "web_search") and done:
        fields["isError"] = status == "failed"
    # a message's text travels in deltas and in `text` on completion, never in `data` too
    data = UNSET if kind in _TEXT_STREAMS else item
    return ItemPayload(itemType=_ITEM_TYPES.get(kind, "unknown"),  # type: ignore[arg-type]
                       status=status, data=data, **fields)  # type: ignore[arg-type]


def _start(state: State, out: Emitter, item: dict[str, Any], native_id: str, kind: str,
           synthetic: bool) -> State:
    start_item(out, _Ctx(state, out).item_at(state, out, native_id),
               _payload(kind, item, False, out.cap), synthetic)
    items = dict(state.items)
    items[native_id] = OpenItem(_ITEM_TYPES.get(kind, "unknown"))
    return _replace(state, items=items)


def _on_item_started(state: State, obj: dict[str, Any], out: Emitter) -> State:
    item, native_id, kind = _item(obj)
    if native_id in state.items:  # a repeated start adds nothing
        return state
    state = _start(state, out, item, native_id, kind, synthetic=False)
    _stream_output(state, out, item, native_id, kind)
    return _plan(state, out, item, kind)


def _on_item_updated(state: State, obj: dict[str, Any], out: Emitter) -> State:
    item, native_id, kind = _item(obj)
    if native_id not in state.items:
        state = _start(state, out, item, native_id, kind, synthetic=True)
    c = _Ctx(state, out)
    out.emit(ItemUpdated, _payload(kind, item, False, out.cap), thread=c.thread, turn=c.turn,
             item=out.id("itm", native_id), refs=_item_refs(state, native_id))
    _stream_output(state, out, item, native_id, kind)
    return _plan(state, out, item, kind)


def _on_item_completed(state: State, obj: dict[str, Any], out: Emitter) -> State:
    item, native_id, kind = _item(obj)
    if native_id not in state.items:
        state = _start(state, out, item, native_id, kind, synthetic=True)
    at = _Ctx(state, out).item_at(state, out, native_id)
    stream = _TEXT_STREAMS.get(kind)
    text = item.get("text")
    if stream is not None and text:  # its text, whole, as its one delta
        if not isinstance(text, str):
            raise MalformedRecord(f"item.completed: {kind} 'text' must be a string")
        rest(out, at, stream, text)
    _stream_output(state, out, item, native_id, kind)
    state = _plan(state, out, item, kind)
    # its streams close: the item carries its native aggregated_output instead
    complete_item(out, at, _payload(kind, item, True, out.cap))
    items = dict(state.items)
    items.pop(native_id, None)
    return _replace(state, items=items)


_OUTPUT = "command_output"  # a command's stream (spooled: see the module docstring)


def _stream_output(state: State, out: Emitter, item: dict[str, Any], native_id: str,
                   kind: str) -> None:
    """Stream the part of a command's aggregated output past what was streamed (by
    length: a snapshot that does not extend the last one still streams only its
    characters past that length, and becomes the output kept)."""
    if kind != "command_execution":
        return
    output = item.get("aggregated_output")
    if not isinstance(output, str) or native_id not in state.items:
        return
    snapshot(out, _Ctx(state, out).item_at(state, out, native_id), _OUTPUT, output)


def _plan(state: State, out: Emitter, item: dict[str, Any], kind: str) -> State:
    if kind != "todo_list":
        return state
    steps = [
        PlanStep(step=str(t.get("text", "")), status="completed" if t.get("completed") else "pending")
        for t in native_list(item.get("items"), "todo_list items")
        if isinstance(t, dict)
    ]
    c = _Ctx(state, out)
    out.emit(TurnPlanUpdated, TurnPlanUpdatedPayload(plan=steps), thread=c.thread, turn=c.turn,
             refs=c.refs)
    return state


_HANDLERS: Final = {
    "thread.started": _on_thread_started,
    "turn.started": _on_turn_started,
    "turn.completed": _on_turn_completed,
    "turn.failed": _on_turn_failed,
    "item.started": _on_item_started,
    "item.updated": _on_item_updated,
    "item.completed": _on_item_completed,
    "error": _on_error,
}

#: Native types read on purpose and mapped to nothing (none for codex exec).
IGNORED: Final[frozenset[str]] = frozenset()
