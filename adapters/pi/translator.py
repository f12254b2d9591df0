"""pi: pi (`@mariozechner/pi-coding-agent`) `--mode json` and `--mode rpc` -> canonical events.

Both modes print pi's agent-session events, one JSON object per line. The json mode
opens with a `session` header (`id`, `cwd`); the rpc mode has none, and interleaves
`response` lines answering the client's commands (`prompt`, `abort`, ... on stdin,
origin `client` in a capture).

| runtime (recordings) | releases verified | written against |
| --- | --- | --- |
| `pi-json` (`pi --mode json -p`) | 0.73.1 | the recordings and pi's docs/json.md |
| `pi-rpc` (`pi --mode rpc`, both directions) | 0.73.1 | the same |

Turns. pi's `turn_start` / `turn_end` wrap one model call. A canonical turn is one
prompt: its agent loop, `agent_start` to `agent_end`. A loop whose last model call
failed (`stopReason: "error"`) is retried by pi as a whole new loop after
`auto_retry_start`: those loops are the same turn, which ends when a loop succeeds, at
`auto_retry_end {success: false}` (failed), or at the next prompt. An aborted model call
(`stopReason: "aborted"`, rpc's `abort`) ends its turn interrupted.

Items
* An assistant message's blocks stream as `message_update` events
  (`text_start/_delta/_end`, `thinking_start/_delta/_end`, `toolcall_start/_delta/_end`,
  by `contentIndex`). Text is taken from the deltas only: the `partial` and `message`
  snapshots each update carries run ahead of the delta. `text_end` / `thinking_end`
  and `message_end` carry the whole text: only what the deltas did not carry is added.
  Messages have no id: a per-session ordinal names their items.
* A tool item starts at `toolcall_end` (its whole arguments) or `tool_execution_start`,
  its output so far comes as `tool_execution_update`, and `tool_execution_end`
  completes it (`result.content` text blocks, `isError`).
* The user's message (`message_start` role user) is a user_message item; a toolResult
  message repeats `tool_execution_end` and is not an item.
* Usage: each assistant message's `usage` (`input`, `output`, `cacheRead`, `cacheWrite`,
  `cost.total`), summed over the turn's model calls.

What the format cannot say
* No approvals: pi has no permission system. No request is invented.
* A json-mode run killed by a signal just stops: its turn stays open until the worker's
  idle close. rpc's `abort` is said, and ends the turn interrupted.
"""

from __future__ import annotations

from typing import Any, Final

from msgspec import UnsetType

from adapters.core.contract import MalformedRecord, Message
from adapters.core.emitter import UNSET, Emitter
from adapters.core.emitter import replace as _replace
from adapters.core.lifecycle import (
    At,
    close_item,
    complete_item,
    delta,
    end_turn,
    rest,
    snapshot,
    start_item,
    taken,
)
from adapters.core.shape import native_count
from adapters.core.tools import normalize_tool_name, tool_item
from adapters.pi.state import State, Tool
from topics.canonical import (
    ItemPayload,
    ProviderRefs,
    RuntimeErrorEvent,
    RuntimeErrorPayload,
    SessionConfigured,
    SessionConfiguredPayload,
    SessionStarted,
    SessionStartedPayload,
    ThreadStarted,
    ThreadStartedPayload,
    ThreadTokenUsageUpdated,
    ThreadTokenUsageUpdatedPayload,
    TurnCompletedPayload,
    TurnStarted,
    TurnStartedPayload,
)
from topics.usage import Cost, TokenUsage, add, running, tokens

provider = "pi"
raw_source = "pi.json"

#: no event carries an id (adapters.core.ids, "Native message ids")
message_id = None

state_type = State

_STREAMS: Final = {"text": ("assistant_message", "assistant_text"),
                   "thinking": ("reasoning", "reasoning_text")}


def initial() -> State:
    return State()


def translate(state: State, msg: Message, out: Emitter) -> State:
    """Apply one line. Raises MalformedRecord when it has no string `type`, or a known
    type with the wrong shape."""
    obj = msg.obj
    kind = obj.get("type")
    if not isinstance(kind, str):
        raise MalformedRecord("pi event without a string 'type'")
    out.native_type = kind
    if msg.origin == "client":  # rpc commands: pi answers them on its own stream
        return _on_command(state, obj, out) if kind == "abort" else state
    if not state.started and kind != "session":
        out.emit(SessionStarted, SessionStartedPayload(), synthetic=True)
        state = _replace(state, started=True)
    handler = _HANDLERS.get(kind)
    if handler is None:
        if kind not in IGNORED:
            out.unknown(kind, thread=_thread(state, out), turn=_turn(state, out))
        return state
    return handler(state, obj, out)


# ---- where events go ----------------------------------------------------------


def _thread(state: State, out: Emitter) -> str | UnsetType:
    return out.id("thr", state.session) if state.session else UNSET


def _turn(state: State, out: Emitter) -> str | UnsetType:
    return out.id("trn", str(state.turns)) if state.turnOpen else UNSET


def _refs(state: State, item: str | None = None) -> ProviderRefs | UnsetType:
    if state.session is None and item is None:
        return UNSET
    return ProviderRefs(providerSessionId=state.session or UNSET, providerItemId=item or UNSET)


def _at(state: State, out: Emitter, item: str | None = None, native: str | None = None) -> At:
    return At(_thread(state, out), _turn(state, out),
              out.id("itm", item) if item is not None else UNSET, refs=_refs(state, native))


def _block_item(state: State, index: str) -> str:
    return f"msg:{state.messages}#{index}"


def _dict(obj: dict[str, Any], key: str) -> dict[str, Any]:
    value = obj.get(key)
    return value if isinstance(value, dict) else {}


def _text_of(content: Any) -> str:
    """The text blocks of a content list, joined (a tool result's output)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return "".join(b["text"] for b in content
                   if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str))


# ---- session and turns ------------------------------------------------------------


def _on_session(state: State, obj: dict[str, Any], out: Emitter) -> State:
    sid = obj.get("id")
    if not isinstance(sid, str) or not sid:
        raise MalformedRecord("pi session: 'id' must be a string")
    new = sid != state.session
    state = _replace(state, session=sid, total=None if new else state.total)
    if not state.started:
        out.emit(SessionStarted, SessionStartedPayload(), thread=_thread(state, out),
                 refs=_refs(state))
        state = _replace(state, started=True)
    if new:
        out.emit(ThreadStarted, ThreadStartedPayload(providerThreadId=sid),
                 thread=_thread(state, out), refs=_refs(state))
    config = {k: v for k, v in obj.items() if k not in ("type", "id", "timestamp")}
    out.emit(SessionConfigured, SessionConfiguredPayload(config=config),
             thread=_thread(state, out), refs=_refs(state))
    return state


def _open_turn(state: State, out: Emitter, synthetic: bool) -> State:
    state = _replace(state, turns=state.turns + 1, turnOpen=True, error=None, aborted=False,
                     retrying=False, tokens=None, cost=None)
    out.emit(TurnStarted, TurnStartedPayload(model=state.model or UNSET), synthetic=synthetic,
             thread=_thread(state, out), turn=_turn(state, out), refs=_refs(state))
    return state


def _ensure_turn(state: State, out: Emitter) -> State:
    return state if state.turnOpen else _open_turn(state, out, synthetic=True)


def _end_turn(state: State, out: Emitter, payload: TurnCompletedPayload,
              synthetic: bool = False) -> State:
    if not state.turnOpen:
        return state
    why = "the turn ended before the item completed"
    state = _close_blocks(state, out, "failed", why)
    for call, tool in state.tools.items():
        complete_item(out, _at(state, out, call, call),
                      tool_item(tool.name, tool.input, "failed", out.cap, detail=why), True)
    fields: dict[str, Any] = {}
    if state.tokens is not None:
        fields["tokens"] = state.tokens
    if state.cost is not None:
        fields["cost"] = Cost(source="provider", usd=state.cost,
                              priceSource="message.usage.cost.total",
                              model=state.model or UNSET)
    end_turn(out, _at(state, out), _replace(payload, **fields), synthetic)
    return _replace(state, turnOpen=False, tools={}, error=None, aborted=False, retrying=False,
                    tokens=None, cost=None)


def _ending(state: State) -> TurnCompletedPayload:
    if state.aborted:
        return TurnCompletedPayload(state="interrupted", errorMessage=state.error or UNSET)
    if state.error is not None:
        return TurnCompletedPayload(state="failed", errorMessage=state.error)
    return TurnCompletedPayload(state="completed")


def _on_agent_start(state: State, obj: dict[str, Any], out: Emitter) -> State:
    return _ensure_turn(state, out)  # a retried loop goes on in its prompt's turn


def _on_agent_end(state: State, obj: dict[str, Any], out: Emitter) -> State:
    if state.error is not None and not state.aborted:
        return state  # pi may retry the loop (auto_retry_start): the turn waits for it
    return _end_turn(state, out, _ending(state))


def _on_retry_start(state: State, obj: dict[str, Any], out: Emitter) -> State:
    state = _ensure_turn(state, out)
    message = obj.get("errorMessage")
    detail = {k: obj[k] for k in ("attempt", "maxAttempts", "delayMs") if k in obj}
    out.emit(RuntimeErrorEvent,
             RuntimeErrorPayload(message=message if isinstance(message, str) and message
                                 else "pi retries a failed model call",
                                 errorClass="provider_error", willRetry=True,
                                 detail=detail or UNSET),
             thread=_thread(state, out), turn=_turn(state, out), refs=_refs(state))
    return _replace(state, retrying=True, error=None)


def _on_retry_end(state: State, obj: dict[str, Any], out: Emitter) -> State:
    if obj.get("success") is True or not state.turnOpen:
        return state
    final = obj.get("finalError")
    message = final if isinstance(final, str) and final else state.error or "pi gave up"
    return _end_turn(_replace(state, error=message), out,
                     TurnCompletedPayload(state="failed", errorMessage=message))


def _on_command(state: State, obj: dict[str, Any], out: Emitter) -> State:
    """A client's rpc command: only `abort` changes what the stream means (the model call
    it cuts ends with stopReason aborted, which says the rest)."""
    return _replace(state, aborted=True) if state.turnOpen else state


def _on_response(state: State, obj: dict[str, Any], out: Emitter) -> State:
    if obj.get("success") is not False:
        return state
    error = obj.get("error")
    out.emit(RuntimeErrorEvent,
             RuntimeErrorPayload(message=error if isinstance(error, str) and error else
                                 f"pi refused the {obj.get('command')} command",
                                 errorClass="validation_error", willRetry=False,
                                 detail={k: v for k, v in obj.items() if k != "type"}),
             thread=_thread(state, out), turn=_turn(state, out), refs=_refs(state))
    return state


# ---- messages ------------------------------------------------------------------------


def _on_message_start(state: State, obj: dict[str, Any], out: Emitter) -> State:
    message = _dict(obj, "message")
    role = message.get("role")
    if role == "user":
        if state.turnOpen and state.error is not None:  # a failed loop nobody retried
            state = _end_turn(state, out, _ending(state), synthetic=True)
        state = _replace(_ensure_turn(state, out), messages=state.messages + 1)
        at = _at(state, out, f"msg:{state.messages}")
        text = _text_of(message.get("content"))
        start_item(out, at, ItemPayload(itemType="user_message", status="inProgress",
                                        role="user", author="user"))
        complete_item(out, at, ItemPayload(itemType="user_message", status="completed",
                                           role="user", text=text, author="user"))
        return state
    if role == "assistant":
        state = _ensure_turn(state, out)
        return _replace(state, messages=state.messages + 1, blocks={})
    return state  # a toolResult message repeats tool_execution_end


def _on_message_update(state: State, obj: dict[str, Any], out: Emitter) -> State:
    event = _dict(obj, "assistantMessageEvent")
    kind = event.get("type")
    if not isinstance(kind, str):
        raise MalformedRecord("pi message_update: 'assistantMessageEvent.type' must be a string")
    index = str(event.get("contentIndex", 0))
    block, _, step = kind.rpartition("_")
    if block in _STREAMS:
        state = _ensure_turn(state, out)
        if index not in state.blocks:
            item_type, stream = _STREAMS[block]
            start_item(out, _at(state, out, _block_item(state, index)),
                       ItemPayload(itemType=item_type, status="inProgress", role="assistant"),  # type: ignore[arg-type]
                       streams=(stream,))
            state = _replace(state, blocks={**state.blocks, index: block})
        if step == "delta":
            text = event.get("delta")
            if isinstance(text, str):
                delta(out, _at(state, out, _block_item(state, index)), _STREAMS[block][1], text)
        elif step == "end":
            content = event.get("content")
            state = _end_block(state, out, index, content if isinstance(content, str) else None)
        return state
    if kind == "toolcall_end":
        call = _dict(event, "toolCall")
        if isinstance(call.get("id"), str):
            return _start_tool(state, out, call["id"], call.get("name"), call.get("arguments"))
    # start, toolcall_start/_delta (partial arguments), done, error: said elsewhere
    return state


def _end_block(state: State, out: Emitter, index: str, final: str | None) -> State:
    """A text or thinking block done: what its deltas did not carry of `final`, then
    the item completed with its whole text."""
    block = state.blocks.get(index)
    if not block:  # never started, or ended already
        return state
    item_type, stream = _STREAMS[block]
    at = _at(state, out, _block_item(state, index))
    if final is not None:
        rest(out, at, stream, final)
    complete_item(out, at, ItemPayload(itemType=item_type, status="completed",  # type: ignore[arg-type]
                                       role="assistant", **taken(out, at.item_id, stream, "text")))
    return _replace(state, blocks={**state.blocks, index: ""})


def _close_blocks(state: State, out: Emitter, status: str, why: str) -> State:
    for index, block in state.blocks.items():
        if not block:
            continue
        item_type, stream = _STREAMS[block]
        close_item(out, _at(state, out, _block_item(state, index)), item_type, status, why,
                   text_stream=stream)
    return _replace(state, blocks={})


def _on_message_end(state: State, obj: dict[str, Any], out: Emitter) -> State:
    message = _dict(obj, "message")
    if message.get("role") != "assistant":
        return state
    state = _ensure_turn(state, out)
    content = message.get("content")
    for i, block in enumerate(content if isinstance(content, list) else ()):
        if not isinstance(block, dict):
            continue
        kind, index = block.get("type"), str(i)
        if not isinstance(kind, str):
            continue
        final = block.get("text") if kind == "text" else block.get("thinking")
        if kind in _STREAMS and index not in state.blocks and isinstance(final, str) and final:
            # a block that never streamed (a provider without deltas): one whole delta
            state = _on_message_update(state, {"assistantMessageEvent": {
                "type": f"{kind}_start", "contentIndex": i}}, out)
        if index in state.blocks:
            state = _end_block(state, out, index, final if isinstance(final, str) else None)
        elif kind == "toolCall" and isinstance(block.get("id"), str):
            state = _start_tool(state, out, block["id"], block.get("name"), block.get("arguments"))
    model = message.get("model")
    if isinstance(model, str) and model:
        state = _replace(state, model=model)
    state = _count(state, out, message.get("usage"))
    stop = message.get("stopReason")
    error = message.get("errorMessage")
    if stop == "aborted":
        return _replace(state, aborted=True,
                        error=error if isinstance(error, str) and error else state.error)
    if stop == "error":
        text = error if isinstance(error, str) and error else "the model call failed"
        out.emit(RuntimeErrorEvent,
                 RuntimeErrorPayload(message=text, errorClass="provider_error", willRetry=False),
                 thread=_thread(state, out), turn=_turn(state, out), refs=_refs(state))
        return _replace(state, error=text)
    return _replace(state, error=None)


def pi_tokens(usage: Any) -> TokenUsage | None:
    """TokenUsage of an assistant message's `usage`, None when it is no dict. pi's
    `input` leaves out what was read from or written to the cache (`cacheRead`,
    `cacheWrite`), so the prompt is their sum."""
    if not isinstance(usage, dict):
        return None
    read, written = native_count(usage, "cacheRead"), native_count(usage, "cacheWrite")
    return tokens(input=native_count(usage, "input") + read + written, cachedInput=read,
                  cacheWrite=written, output=native_count(usage, "output"))


def _count(state: State, out: Emitter, usage: Any) -> State:
    call = pi_tokens(usage)
    if call is None:
        return state
    total = running(state.total, call)
    out.emit(ThreadTokenUsageUpdated, ThreadTokenUsageUpdatedPayload(usage=usage, tokens=total),
             thread=_thread(state, out), turn=_turn(state, out), refs=_refs(state))
    cost = _dict(usage, "cost").get("total")
    spent = float(cost) if isinstance(cost, int | float) and not isinstance(cost, bool) else None
    return _replace(state, total=total,
                    tokens=call if state.tokens is None else add(state.tokens, call),
                    cost=state.cost if spent is None else (state.cost or 0.0) + spent)


# ---- tools ---------------------------------------------------------------------------


def _start_tool(state: State, out: Emitter, call: str, name: Any, arguments: Any) -> State:
    if call in state.tools:
        return state
    state = _ensure_turn(state, out)
    tool = Tool(name=normalize_tool_name(name if isinstance(name, str) and name else "unknown"),
                input=arguments if isinstance(arguments, dict) else {})
    start_item(out, _at(state, out, call, call), tool_item(tool.name, tool.input, "inProgress", out.cap))
    return _replace(state, tools={**state.tools, call: tool})


def _call(obj: dict[str, Any]) -> str:
    call = obj.get("toolCallId")
    if not isinstance(call, str):
        raise MalformedRecord(f"pi {obj.get('type')}: 'toolCallId' must be a string")
    return call


def _on_execution_start(state: State, obj: dict[str, Any], out: Emitter) -> State:
    return _start_tool(state, out, _call(obj), obj.get("toolName"), obj.get("args"))


def _on_execution_update(state: State, obj: dict[str, Any], out: Emitter) -> State:
    call = _call(obj)
    if call not in state.tools:
        return state
    so_far = _text_of(_dict(obj, "partialResult").get("content"))
    if so_far:  # the output so far: only what is past what was streamed goes out
        snapshot(out, _at(state, out, call, call), "command_output", so_far)
    return state


def _on_execution_end(state: State, obj: dict[str, Any], out: Emitter) -> State:
    call = _call(obj)
    if call not in state.tools:
        state = _start_tool(state, out, call, obj.get("toolName"), obj.get("args"))
    failed = obj.get("isError") is True
    output = _text_of(_dict(obj, "result").get("content"))
    tool = state.tools[call]
    complete_item(out, _at(state, out, call, call),
                  tool_item(tool.name, tool.input, "failed" if failed else "completed", out.cap,
                                output=output))
    return _replace(state, tools={k: v for k, v in state.tools.items() if k != call})


_HANDLERS: Final = {
    "session": _on_session,
    "agent_start": _on_agent_start,
    "agent_end": _on_agent_end,
    "message_start": _on_message_start,
    "message_update": _on_message_update,
    "message_end": _on_message_end,
    "tool_execution_start": _on_execution_start,
    "tool_execution_update": _on_execution_update,
    "tool_execution_end": _on_execution_end,
    "auto_retry_start": _on_retry_start,
    "auto_retry_end": _on_retry_end,
    "response": _on_response,
}

#: Native types read on purpose and mapped to nothing, with the reason.
IGNORED_REASONS: dict[str, str] = {
    "turn_start": "one model call begins: the canonical turn is the prompt's agent loop",
    "turn_end": "one model call ends; its message and tool results came before it",
}
IGNORED: Final[frozenset[str]] = frozenset(IGNORED_REASONS)
