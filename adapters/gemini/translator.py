"""gemini: Gemini CLI `--output-format stream-json` lines -> canonical events.

Reads the JSONL `JsonStreamEvent` stream declared in google-gemini/gemini-cli
`packages/core/src/output/types.ts` and emitted by `@google/gemini-cli` 0.30.0 to 0.61.0
(`nonInteractiveCli`): init, message, tool_use, tool_result, error, result. One
process answers one prompt: `init` opens the session and the turn, `result` ends
the turn. Gemini CLI in ACP mode (`--acp`) is read by the `acp` adapter instead.

Releases (every recording of each is replayed against its oracle by
tests/adapters/test_drift.py, which also checks this table; docs/runtimes "Verified runtime
releases")

| runtime (recordings) | releases verified | written against |
| --- | --- | --- |
| `gemini-stream-json` | 0.30.0, 0.61.0 | `output/types.ts` of gemini-cli 0.56.0-nightly |

The stream never states its release (`init` has session_id and model only), so nothing
records it.

Invariants
* The stream has no session or turn events of its own: `init` gives a synthetic
  session.started, thread.started (its `session_id`) and turn.started; a line that
  needs a turn when none is open (a stream cut before `init`) opens one
  synthetically; `result` closes the turn, and a second `init` first closes a turn
  left open as interrupted.
* Assistant text comes as `message` lines with `delta: true`, forwarded 1:1 as
  `assistant_text` deltas of one assistant_message item per contiguous run; a
  tool_use (or the user's message, or the turn's end) closes the item with its
  whole text. An assistant message without `delta` is a whole message: one
  synthetic full-text delta (never text twice). The user's prompt, echoed
  first, is a user_message item and never assistant text.
* tool_use / tool_result pair by `tool_id` (the runtime's tool-call id); a tool
  still open when the turn ends is completed as failed.

Tricky parts
* `tool_result` carries no tool name: the name and input of its `tool_use` are
  kept until then. A tool_result without its tool_use is started synthetically,
  its name read from the id (`<tool>__<tool>_<epoch ms>_<n>`).
* `error` lines have a severity: "warning" (loop detected, execution blocked, a
  retryable API error) never ends the run, so it is a runtime.error with
  `willRetry: true` (not a runtime.warning: that means an unknown message);
  "error" (an invalid stream, RESOURCE_EXHAUSTED) gets `willRetry: false`, and
  only the `result` says whether the run ended.
* `result` with status error may have no `error` object (after an INVALID_STREAM
  error line): the error line already said why, so no second runtime.error; a 500
  from the API gives only the result (no error line). A cancelled run
  (FatalCancellationError) ends the turn as cancelled.
* No thought events: stream-json does not emit `thought` parts.

Streams (the conversation core's, adapters.core.emitter.Emitter; the state keeps none of the text)
* `assistant_text` of each assistant_message item, spooled: Gemini sends only delta
  chunks, never the whole reply, and the item's completion must carry its whole text.
"""

from __future__ import annotations

from typing import Any, Final

from msgspec import UnsetType

from adapters.core.contract import MalformedRecord, Message
from adapters.core.emitter import UNSET, Emitter
from adapters.core.emitter import replace as _replace
from adapters.core.lifecycle import At, complete_item, delta, end_turn, start_item, taken
from adapters.core.shape import native_count
from adapters.core.tools import normalize_tool_name, tool_item
from adapters.gemini.state import Reply, State, Tool
from topics.canonical import (
    ContentDelta,
    ContentDeltaPayload,
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
from topics.usage import TokenUsage, running, tokens

provider = "gemini"
raw_source = "gemini.stream-json"

#: no native message carries an id (adapters.core.ids, "Native message ids")
message_id = None


state_type = State


def initial() -> State:
    return State()


class _Ctx:
    """Canonical ids of the current thread/turn, computed once per message."""

    __slots__ = ("thread", "turn", "refs")

    def __init__(self, state: State, out: Emitter):
        self.thread: str | UnsetType = out.id("thr", state.session) if state.session else UNSET
        self.turn: str | UnsetType = out.id("trn", str(state.turns)) if state.turnOpen else UNSET
        self.refs = ProviderRefs(providerSessionId=state.session) if state.session else UNSET

    def at(self, item: str | UnsetType = UNSET) -> At:
        """Where the turn's events go (an item's, with `item`)."""
        return At(self.thread, self.turn, item, refs=self.refs)

    def tool_at(self, state: State, out: Emitter, tool_id: str) -> At:
        """Where a tool item's events go (its refs name the tool call)."""
        return At(self.thread, self.turn, out.id("itm", tool_id),
                  refs=ProviderRefs(providerSessionId=state.session or UNSET,
                                    providerItemId=tool_id or UNSET))


def translate(state: State, msg: Message, out: Emitter) -> State:
    """Apply one stream-json line. Raises MalformedRecord when it has no string `type`
    or a known type with the wrong shape."""
    obj = msg.obj
    kind = obj.get("type")
    if not isinstance(kind, str):
        raise MalformedRecord("gemini stream-json event without a string 'type'")
    out.native_type = kind
    handler = _HANDLERS.get(kind)
    if handler is None:
        out.unknown(kind, thread=_Ctx(state, out).thread, turn=_Ctx(state, out).turn)
        return state
    return handler(state, obj, out)


# ---- session and turn ---------------------------------------------------------


def _start_turn(state: State, out: Emitter, obj: dict[str, Any], synthetic: bool) -> State:
    state = _replace(state, turns=state.turns + 1, turnOpen=True, errorLine=None)
    c = _Ctx(state, out)
    model = obj.get("model")
    out.emit(TurnStarted, TurnStartedPayload(model=model if isinstance(model, str) else UNSET),
             synthetic=synthetic, thread=c.thread, turn=c.turn, refs=c.refs)
    return state


def _ensure_turn(state: State, out: Emitter) -> State:
    return state if state.turnOpen else _start_turn(state, out, {}, synthetic=True)


def _on_init(state: State, obj: dict[str, Any], out: Emitter) -> State:
    sid = obj.get("session_id")
    if sid is not None and not isinstance(sid, str):
        raise MalformedRecord("init.session_id must be a string")
    if state.turnOpen:  # a new run while the last one never sent its result
        state = _end_turn(state, out, TurnCompletedPayload(state="interrupted"), synthetic=True)
    new_thread = sid is not None and sid != state.session
    state = _replace(state, session=sid or state.session,
                     total=None if new_thread else state.total)  # a thread's own total
    c = _Ctx(state, out)
    if not state.started:
        out.emit(SessionStarted, SessionStartedPayload(), synthetic=True, thread=c.thread,
                 refs=c.refs)
    if sid is not None and new_thread:
        out.emit(ThreadStarted, ThreadStartedPayload(providerThreadId=sid), synthetic=True,
                 thread=c.thread, refs=c.refs)
    config = {k: v for k, v in obj.items() if k not in ("type", "timestamp")}
    out.emit(SessionConfigured, SessionConfiguredPayload(config=config), thread=c.thread,
             refs=c.refs)
    return _start_turn(_replace(state, started=True), out, obj, synthetic=True)


def gemini_tokens(stats: Any) -> TokenUsage | None:
    """TokenUsage of a `result` line's `stats` (the run's, and one run is one turn), None
    when it is no dict. Gemini's rule: `input_tokens` (the prompt count) includes the
    `cached` tokens (`input` is the rest); `output_tokens` (the candidates) leaves the
    thoughts out, so thoughts, where stated (`thoughts`), are added to it."""
    if not isinstance(stats, dict):
        return None
    thoughts = native_count(stats, "thoughts", "thoughts_tokens")
    return tokens(input=native_count(stats, "input_tokens"),
                  cachedInput=native_count(stats, "cached"),
                  output=native_count(stats, "output_tokens") + thoughts,
                  reasoningOutput=thoughts)


def _on_result(state: State, obj: dict[str, Any], out: Emitter) -> State:
    # a fatal error before init still ends "the" turn
    state = _close_reply(_ensure_turn(state, out), out)
    stats = obj.get("stats")
    c = _Ctx(state, out)
    usage: dict[str, Any] = {}
    if isinstance(stats, dict):
        turn = gemini_tokens(stats) or tokens()  # a dict: never None
        # the run is the turn: the thread's total so far goes with the run's stats
        total = running(state.total, turn)
        out.emit(ThreadTokenUsageUpdated, ThreadTokenUsageUpdatedPayload(usage=stats,
                                                                         tokens=total),
                 thread=c.thread, turn=c.turn, refs=c.refs)
        state = _replace(state, total=total)
        usage["usage"] = stats
        if isinstance(stats.get("models"), dict):
            usage["modelUsage"] = stats["models"]
        if isinstance(stats.get("duration_ms"), int):
            usage["durationMs"] = stats["duration_ms"]
        usage["tokens"] = turn
    if obj.get("status") != "error":
        return _end_turn(state, out, TurnCompletedPayload(state="completed", **usage))
    error = obj.get("error")
    error = error if isinstance(error, dict) else None
    message = error.get("message") if error else None
    message = message if isinstance(message, str) and message else (
        state.errorLine or "gemini run failed")
    if error is not None or state.errorLine is None:  # else the error line said it already
        out.emit(RuntimeErrorEvent,
                 RuntimeErrorPayload(message=message, errorClass="provider_error", willRetry=False,
                                     detail=error if error is not None else UNSET),
                 thread=c.thread, turn=c.turn, refs=c.refs)
    cancelled = error is not None and error.get("type") == "FatalCancellationError"
    return _end_turn(state, out, TurnCompletedPayload(
        state="cancelled" if cancelled else "failed", errorMessage=message, **usage))


def _on_error(state: State, obj: dict[str, Any], out: Emitter) -> State:
    message = obj.get("message")
    message = message if isinstance(message, str) and message else "gemini error"
    severe = obj.get("severity") != "warning"
    c = _Ctx(state, out)
    out.emit(RuntimeErrorEvent,
             RuntimeErrorPayload(message=message, errorClass="provider_error", willRetry=not severe,
                                 detail={"severity": obj.get("severity")}),
             thread=c.thread, turn=c.turn, refs=c.refs)
    return _replace(state, errorLine=state.errorLine or (message if severe else None))


def _end_turn(state: State, out: Emitter, payload: TurnCompletedPayload,
              synthetic: bool = False) -> State:
    state = _close_reply(state, out)
    c = _Ctx(state, out)
    for tool_id, tool in state.tools.items():
        complete_item(out, c.tool_at(state, out, tool_id),
                      tool_item(tool.name, tool.input, "failed", out.cap, output="",
                                    detail="the turn ended before the tool returned"), True)
    end_turn(out, c.at(), payload, synthetic)
    return _replace(state, turnOpen=False, tools={}, errorLine=None)


# ---- messages -----------------------------------------------------------------


def _msg_item(out: Emitter, n: int) -> str:
    return out.id("itm", "msg", str(n))


_TEXT: Final = "assistant_text"  # the reply's stream (spooled: see the module docstring)


def _close_reply(state: State, out: Emitter) -> State:
    reply = state.reply
    if reply is None:
        return state
    at = _Ctx(state, out).at(_msg_item(out, reply.n))
    complete_item(out, at, ItemPayload(itemType="assistant_message", status="completed",
                                       role="assistant", **taken(out, at.item_id, _TEXT, "text")),
                  True)
    return _replace(state, reply=None)


def _open_reply(state: State, out: Emitter) -> State:
    reply = Reply(n=state.items + 1)
    start_item(out, _Ctx(state, out).at(_msg_item(out, reply.n)),
               ItemPayload(itemType="assistant_message", status="inProgress", role="assistant"),
               True, (_TEXT,))
    return _replace(state, items=reply.n, reply=reply)


def _on_message(state: State, obj: dict[str, Any], out: Emitter) -> State:
    content = obj.get("content")
    if not isinstance(content, str):
        raise MalformedRecord("message.content must be a string")
    role = obj.get("role")
    state = _ensure_turn(state, out)
    if role == "user":
        return _user_message(_close_reply(state, out), content, out)
    if role != "assistant":
        raise MalformedRecord(f"message.role must be user or assistant, got {role!r}")
    whole = obj.get("delta") is not True
    if whole:  # a complete message: an item of its own
        state = _close_reply(state, out)
    if not content and not whole:
        return state
    if state.reply is None:
        state = _open_reply(state, out)
    reply = state.reply
    assert reply is not None
    at = _Ctx(state, out).at(_msg_item(out, reply.n))
    if not content:  # a whole message that is empty: its one (empty) delta all the same
        at.emit(out, ContentDelta, ContentDeltaPayload(streamKind="assistant_text", delta=""), True)
    delta(out, at, _TEXT, content, synthetic=whole)
    return _close_reply(state, out) if whole else state


def _user_message(state: State, text: str, out: Emitter) -> State:
    n = state.items + 1
    at = _Ctx(state, out).at(_msg_item(out, n))
    # the CLI echoes the prompt it was given: the user's own
    start_item(out, at, ItemPayload(itemType="user_message", status="inProgress", role="user",
                                    author="user"), True)
    complete_item(out, at, ItemPayload(itemType="user_message", status="completed", role="user",
                                       text=text, author="user"))
    return _replace(state, items=n)


# ---- tools --------------------------------------------------------------------


def _tool_input(name: str, params: Any) -> Any:
    """The tool's parameters, with the path and working directory under the
    names every runtime shares (file_path, cwd)."""
    if not isinstance(params, dict):
        return params
    inp = dict(params)
    if "file_path" not in inp and isinstance(inp.get("absolute_path"), str):  # before 0.5
        inp["file_path"] = inp.pop("absolute_path")
    if name == "Bash":
        inp.setdefault("command", "")
        cwd = inp.pop("dir_path", None) or inp.pop("directory", None)
        if isinstance(cwd, str) and "cwd" not in inp:
            inp["cwd"] = cwd
    return inp


def _start_tool(state: State, out: Emitter, tool_id: str, tool: Tool, synthetic: bool) -> State:
    state = _close_reply(_ensure_turn(state, out), out)  # a tool call ends the text before it
    start_item(out, _Ctx(state, out).tool_at(state, out, tool_id),
               tool_item(tool.name, tool.input, "inProgress", out.cap), synthetic)
    return _replace(state, tools={**state.tools, tool_id: tool})


def _tool_id(obj: dict[str, Any]) -> str:
    tool_id = obj.get("tool_id")
    if not isinstance(tool_id, str):
        raise MalformedRecord(f"{obj.get('type')}.tool_id must be a string")
    return tool_id


def _on_tool_use(state: State, obj: dict[str, Any], out: Emitter) -> State:
    tool_id = _tool_id(obj)
    native = obj.get("tool_name")
    name = normalize_tool_name(native) if isinstance(native, str) else "unknown"
    if tool_id in state.tools:
        return state  # a repeated tool_use adds nothing
    tool = Tool(name=name, input=_tool_input(name, obj.get("parameters")))
    return _start_tool(state, out, tool_id, tool, synthetic=False)


def _on_tool_result(state: State, obj: dict[str, Any], out: Emitter) -> State:
    tool_id = _tool_id(obj)
    if tool_id not in state.tools:  # ids are `<tool>__<tool>_<epoch ms>_<n>`
        name = normalize_tool_name(tool_id.split("__", 1)[0]) if "__" in tool_id else "unknown"
        state = _start_tool(state, out, tool_id, Tool(name=name, input={}), synthetic=True)
    tool = state.tools[tool_id]
    error = obj.get("error")
    failed = obj.get("status") == "error"
    output = obj.get("output")
    if not isinstance(output, str):
        message = error.get("message") if isinstance(error, dict) else None
        output = message if failed and isinstance(message, str) else ""
    complete_item(out, _Ctx(state, out).tool_at(state, out, tool_id),
                  tool_item(tool.name, tool.input, "failed" if failed else "completed", out.cap, output=output,
                                data={"error": error} if isinstance(error, dict) else UNSET))
    return _replace(state, tools={k: v for k, v in state.tools.items() if k != tool_id})


_HANDLERS: Final = {
    "init": _on_init,
    "message": _on_message,
    "tool_use": _on_tool_use,
    "tool_result": _on_tool_result,
    "error": _on_error,
    "result": _on_result,
}

#: Native types read on purpose and mapped to nothing (none: the stream has six).
IGNORED: Final[frozenset[str]] = frozenset()
