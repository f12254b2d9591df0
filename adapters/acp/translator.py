"""acp: Agent Client Protocol v1 (JSON-RPC 2.0 over stdio, both directions) -> canonical events.

Reads ACP `protocolVersion` 1 as defined by agentclientprotocol/agent-client-protocol
`schema/v1/schema.json` (schema crate 1.21.0; the unstable `name` of tool calls too) and
spoken by Gemini CLI 0.30.0 (`--experimental-acp`) to 0.61.0 (`--acp`),
`@zed-industries/codex-acp` 0.9.5 to 0.16.0, `@zed-industries/claude-code-acp` 0.10.10
(shell commands through the client's `terminal/*`) to 0.16.2, and its successor
`@agentclientprotocol/claude-agent-acp` 0.24 to 0.85 (Claude Code's own tools, no client
methods; its later releases add `name`, `messageId`, `usage_update` with cost,
`session_info_update` and `_auth/status_update`), also Cursor and OpenCode `acp`. Every message is a JSON-RPC
request, notification or response; `origin` says who wrote it. Mapping: seed 002 §5.

Releases (every recording of each is replayed against its oracle by
tests/adapters/test_drift.py, which also checks this table; README.md "Verified runtime
releases")

| runtime (recordings) | releases verified | written against |
| --- | --- | --- |
| `acp-gemini` (Gemini CLI) | 0.30.0, 0.61.0 | ACP `protocolVersion` 1, schema 1.21.0 |
| `acp-claude-code` (claude-code-acp) | 0.10.10, 0.16.2 | the same |
| `acp-codex` (codex-acp) | 0.9.5, 0.16.0 | the same |
| claude-agent-acp | none recorded (goldens: 0.85) | the same |

An agent states its name and release in the initialize response's `agentInfo`
(Implementation: name, title, version): session.configured `runtimeName` and
`runtimeVersion`. Gemini CLI 0.30.0 sends no agentInfo.

Invariants
* Client and agent requests have separate id spaces (both start at 0 or 1 and
  collide), so the requests each side has in flight are kept apart, keyed by the
  JSON-RPC id *and its JSON type* (1 and "1" differ). A response is matched
  against the other side's requests first, then against its own side's (a
  `--format native` replay labels every line "agent").
* A turn is one `session/prompt`: its request opens the turn (and a user_message
  item with the prompt), its response closes it with the stop reason; a prompt
  sent while one is open supersedes it (turn.completed cancelled, seed §5.4), and
  the superseded prompt's own response is then dropped.
* Text has no item ids: one assistant_message (reasoning, user_message) item per
  contiguous run of `agent_message_chunk` (thought, user) chunks with the same
  `messageId` ("a change in messageId indicates a new message": absent -> present
  too, so claude-agent-acp's notes without one, "Compacting...", a permission-mode
  warning, are not merged into the answer after them; agents that send none get one
  item per run), numbered by a session-wide ordinal; a chunk of another kind, a tool
  start, the end of the turn or the end of a `session/load` replay closes it with its
  whole text. Chunks are native deltas, forwarded 1:1; empty chunks are skipped.
* Every item opened is completed: items still open when the turn ends are closed
  (a tool whose permission was rejected and never reported again as `declined`,
  others as `failed`). Tool items keep only what their completion needs and are
  dropped when they complete.

Tricky parts
* One tool call can be announced several times: claude-code-acp sends two
  `tool_call`s per id (the first with `rawInput: {}`), codex-acp sends
  `session/request_permission` *before* its `tool_call`, and gemini sends no
  `tool_call` at all before the permission request (whose `toolCall` then starts
  the item) and nothing after a rejection. Every later announcement is a merge:
  `tool_call_update` fields are all optional, and an absent or null field keeps
  the earlier value (`content` and `locations` replace the whole list).
* Tool names: the runtime's name when it gives one (`name`, or claude-code-acp's
  `_meta.claudeCode.toolName` `mcp__acp__Bash`; normalised: claude-agent-acp's `Agent`
  is Task), then gemini's tool-call id prefix
  (`run_shell_command__…`), then the tool `kind` (execute -> Bash, edit -> Edit
  or Write, read -> Read, search -> Grep, fetch -> WebFetch).
* A tool's output is its text content, else the output of the client terminal
  embedded in it, else `rawOutput` (a string, text blocks, or a codex exec record
  whose `aggregated_output` is the output) or claude's `_meta.claudeCode.toolResponse`
  (the PostToolUse hook's result: text, or a Bash record's stdout and stderr), else a
  summary of its diffs; the exit code is rawOutput's or `_meta.terminal_exit`'s.
* What a call is, never its output: text content that only describes it goes to the
  items' `detail`. That is the text of a `tool_call` that does not finish the call
  (claude-code-acp sends the command's description so), and the text of a
  `tool_call_update` that does not finish it when the text is one of the input's own
  strings (claude-agent-acp sends the full input with the command's `description`, a
  sub-agent's or a fetch's `prompt`, as content before the call runs, and a command
  with no output then gets no new content: its output is the empty rawOutput).
* Client-side methods the agent calls (`fs/read_text_file`, `fs/write_text_file`,
  `terminal/*`) belong to the tool call that needs them when one is open (same
  file path; the latest shell tool without a terminal): they update that item.
  Otherwise they become tool items of their own (Read, Write, Bash) that their
  responses complete; those have no tool-call id, only `providerRequestId`.
* Errors (§5.4): -32600/-32601/-32602/-32700 are validation errors, -32000
  (auth required) a permission error, -32603, gemini's 500 and any other code a
  provider error; an error answering `session/prompt` also fails the turn, and
  -32800 (request cancelled) cancels it.
* Session state beyond turns: `usage_update` (context used and size, the session's
  cumulative cost) and the prompt result's `usage` are thread.token-usage.updated;
  `session_info_update` is thread.metadata.updated (its title the name; a null title,
  cleared, stays in the metadata); claude-agent-acp's `_auth/status_update` extension
  (connection-wide: the identity the agent runs as, kind `none` when logged out) is
  auth.status and account.updated. Other `_` extensions are ignored.
* One ACP connection may hold several sessions; turns are tracked per connection
  (a canonflow session is one agent process), ids of the thread from the
  `sessionId` the message names.

Streams (the conversation core's, adapters.core.emitter.Emitter; the state keeps none of the text)
* `text` of each message and reasoning item, spooled: ACP sends chunks only, never a
  message whole, and the item's completion carries its whole text.
* A tool item's long content, spooled because the payloads read it back (the
  completion's output above all) while the runtime sends it once, or as snapshots
  that replace each other (never deltas): each announcement's value re-bases its
  stream (reset; appended to when it only extends it), an absent value closes it.
  `text` (text content: the output), `terminal` (the client terminal's output),
  `raw_text` (the output read from rawOutput or toolResponse), `raw_output` (rawOutput when it is a
  record, as JSON: the completion's data.rawOutput), `description` (every payload's
  detail), `diff_old` and `diff_new` (the first diff's texts: the input of an Edit or
  Write without rawInput), `diff` (every diff block as one unified diff: the payloads'
  normalised `diff`, computed once per content list received).
"""

from __future__ import annotations

import shlex
from typing import Any

import msgspec
from msgspec import UnsetType

from adapters.acp.state import Diff, Pending, State, Stream, Tool
from adapters.core.contract import MalformedRecord, Message
from adapters.core.decisions import elicitation_outcome
from adapters.core.diff import text_diff
from adapters.core.emitter import UNSET, Emitter
from adapters.core.emitter import replace as _replace
from adapters.core.ids import jsonrpc_message_id
from adapters.core.lifecycle import At, complete_item, delta, end_turn, start_item, taken
from adapters.core.shape import native_count, native_list
from adapters.core.spool import Whole, whole_fields
from adapters.core.tools import item_type_for_tool, normalize_tool_name, tool_fields
from topics.canonical import (
    AccountUpdated,
    AccountUpdatedPayload,
    AuthStatus,
    AuthStatusPayload,
    Decision,
    ItemPayload,
    ItemUpdated,
    PlanStep,
    ProviderRefs,
    RequestOpened,
    RequestOpenedPayload,
    RequestResolved,
    RequestResolvedPayload,
    RuntimeErrorEvent,
    RuntimeErrorPayload,
    SessionConfigured,
    SessionConfiguredPayload,
    SessionStarted,
    SessionStartedPayload,
    SessionStateChanged,
    SessionStateChangedPayload,
    ThreadMetadataUpdated,
    ThreadMetadataUpdatedPayload,
    ThreadStarted,
    ThreadStartedPayload,
    ThreadStateChanged,
    ThreadStateChangedPayload,
    ThreadTokenUsageUpdated,
    ThreadTokenUsageUpdatedPayload,
    TurnCompletedPayload,
    TurnPlanUpdated,
    TurnPlanUpdatedPayload,
    TurnStarted,
    TurnStartedPayload,
    UserInputRequested,
    UserInputRequestedPayload,
    UserInputResolved,
    UserInputResolvedPayload,
)
from topics.usage import TokenUsage, tokens

provider = "acp"
raw_source = "acp.jsonrpc"

#: JSON-RPC requests and responses carry ids (adapters.core.ids, "Native message ids")
message_id = jsonrpc_message_id


# ---- state --------------------------------------------------------------------


state_type = State


def initial() -> State:
    return State()


# ---- envelope helpers ---------------------------------------------------------


class _Ctx:
    """Canonical ids of the thread and turn a message belongs to."""

    __slots__ = ("sid", "thread", "turn")

    def __init__(self, state: State, out: Emitter, sid: str | None = None):
        self.sid = sid if sid is not None else state.session
        self.thread: str | UnsetType = out.id("thr", self.sid) if self.sid else UNSET
        self.turn: str | UnsetType = out.id("trn", str(state.turns)) if state.turnOpen else UNSET

    def refs(self, **ids: str | UnsetType) -> ProviderRefs | UnsetType:
        if not self.sid and all(v is UNSET for v in ids.values()):
            return UNSET
        return ProviderRefs(providerSessionId=self.sid or UNSET, **ids)  # type: ignore[arg-type]

    def at(self, item: str | UnsetType = UNSET,
           refs: ProviderRefs | UnsetType = UNSET) -> At:
        """Where an event of the turn goes, for the conversation core."""
        return At(self.thread, self.turn, item, refs=refs)


def _id_key(rid: Any) -> str:
    """A dict key for a JSON-RPC id that keeps 1 and "1" apart."""
    if isinstance(rid, bool) or not isinstance(rid, (int, str)):
        if rid is None:
            return "null"
        raise MalformedRecord("a JSON-RPC id must be a string, an integer or null")
    return f"n{rid}" if isinstance(rid, int) else f"s{rid}"


def _obj(value: Any, what: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise MalformedRecord(f"{what} must be an object")
    return value


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


# ---- entry point --------------------------------------------------------------


def translate(state: State, msg: Message, out: Emitter) -> State:
    """Apply one JSON-RPC message (either direction). Raises MalformedRecord when it is
    not a JSON-RPC request, notification or response of the expected shape."""
    obj = msg.obj
    method = obj.get("method")
    if method is None:
        if "id" in obj and ("result" in obj or "error" in obj):
            return _on_response(state, obj, msg.origin, out)
        raise MalformedRecord("not a JSON-RPC request, notification or response")
    if not isinstance(method, str):
        raise MalformedRecord("a JSON-RPC 'method' must be a string")
    out.native_type = method
    key = _id_key(obj["id"]) if "id" in obj else None
    params = _obj(obj.get("params"), f"{method} params")
    handler = _HANDLERS.get(method)
    if handler is not None and (key is None) == (method in _NOTIFICATIONS):
        return handler(state, obj, params, key, out)
    if key is not None:  # remember it, so that its response is not unknown too
        # the method says who asks; for methods unknown here, the origin does
        side = "agent" if method in _AGENT_REQUESTS or (
            method not in _CLIENT_REQUESTS and msg.origin == "agent") else "client"
        table = {**(state.agent if side == "agent" else state.client), key: Pending(method=method)}
        state = _replace(state, **{side: table})
    if method in IGNORED or method.startswith("_"):  # `_`: extensions (IGNORED)
        return state
    out.unknown(method, thread=_Ctx(state, out).thread)
    return state


def _on_response(state: State, obj: dict[str, Any], origin: str, out: Emitter) -> State:
    key = _id_key(obj["id"])
    # a response answers the other side's request; the fallback serves unlabelled replays
    first, second = (state.agent, state.client) if origin == "client" else (state.client, state.agent)
    for table in (first, second):
        pending = table.get(key)
        if pending is None:
            continue
        if table is state.agent:
            state = _replace(state, agent={k: v for k, v in state.agent.items() if k != key})
            out.native_type = f"{pending.method} (response)"
            return _on_agent_request_answered(state, obj, key, pending, out)
        state = _replace(state, client={k: v for k, v in state.client.items() if k != key})
        out.native_type = f"{pending.method} (response)"
        return _on_client_request_answered(state, obj, pending, out)
    out.native_type = "response"
    if "error" in obj:  # an error is reported even when its request is unknown
        _runtime_error(state, out, _obj(obj["error"], "error"), None)
        return state
    out.unknown("response to an unknown request", thread=_Ctx(state, out).thread)
    return state


# ---- errors -------------------------------------------------------------------

_VALIDATION_CODES = frozenset({-32700, -32600, -32601, -32602})


def _error_class(code: Any) -> str:
    if isinstance(code, list | dict):
        raise MalformedRecord("a JSON-RPC error's code must be a number")
    if code in _VALIDATION_CODES:
        return "validation_error"
    if code == -32000:  # authentication required
        return "permission_error"
    return "provider_error"  # -32603, gemini's 500, and anything else


def _error_message(error: dict[str, Any]) -> str:
    message = error.get("message")
    return message if isinstance(message, str) and message else f"error {error.get('code')}"


def _runtime_error(state: State, out: Emitter, error: dict[str, Any], method: str | None,
                   sid: str | None = None) -> str:
    c = _Ctx(state, out, sid)
    detail = {"code": error.get("code"), "method": method, **({"data": error["data"]}
                                                             if "data" in error else {})}
    message = _error_message(error)
    out.emit(RuntimeErrorEvent,
             RuntimeErrorPayload(message=message, errorClass=_error_class(error.get("code")),  # type: ignore[arg-type]
                                 willRetry=False, detail=detail),
             thread=c.thread, turn=c.turn, refs=c.refs())
    return message


# ---- client requests and the agent's responses --------------------------------


def _remember(state: State, obj: dict[str, Any], params: dict[str, Any], key: str,
              out: Emitter) -> State:
    """A client request that only matters once answered: keep what the answer needs."""
    method = obj["method"]
    sid = _str(params.get("sessionId"))
    arg = _str(params.get("modeId")) or _str(params.get("modelId"))
    pending = Pending(method=method, session=sid, arg=arg)
    if method in _SESSION_OPENERS and sid is not None:  # the replay that follows belongs to it
        state = _replace(state, session=sid)
    return _replace(state, client={**state.client, key: pending})


def _on_prompt(state: State, obj: dict[str, Any], params: dict[str, Any], key: str,
               out: Emitter) -> State:
    sid = _str(params.get("sessionId"))
    if state.turnOpen:  # a new prompt supersedes the open one (seed 002 §5.4)
        state = _end_turn(state, out, TurnCompletedPayload(
            state="cancelled", stopReason="cancelled",
            errorMessage="superseded by a new session/prompt"), synthetic=True)
    state = _replace(state, turns=state.turns + 1, turnOpen=True, done=[],
                     session=state.session or sid)
    c = _Ctx(state, out, sid)
    out.emit(TurnStarted, TurnStartedPayload(), thread=c.thread, turn=c.turn, refs=c.refs())
    prompt = params.get("prompt")
    blocks = [b for b in prompt if isinstance(b, dict)] if isinstance(prompt, list) else []
    text = "".join(b["text"] for b in blocks if b.get("type") == "text" and isinstance(b.get("text"), str))
    others = [b for b in blocks if b.get("type") != "text"]
    n = state.items + 1
    at = c.at(out.id("itm", "msg", str(n)), c.refs())
    start_item(out, at, ItemPayload(itemType="user_message", status="inProgress", role="user",
                                    author="user"), True)
    complete_item(out, at, ItemPayload(itemType="user_message", status="completed", role="user",
                                       text=text, data={"content": others} if others else UNSET,
                                       author="user"), True)
    pending = Pending(method="session/prompt", turn=state.turns, session=sid)
    return _replace(state, items=n, client={**state.client, key: pending})


def _on_client_request_answered(state: State, obj: dict[str, Any], pending: Pending,
                                out: Emitter) -> State:
    if "error" in obj:
        error = _obj(obj["error"], "error")
        if pending.method == "session/prompt":
            return _on_prompt_failed(state, error, pending, out)
        message = _runtime_error(state, out, error, pending.method, pending.session)
        c = _Ctx(state, out, pending.session)
        if pending.method == "authenticate":
            out.emit(AuthStatus, AuthStatusPayload(isAuthenticating=False, error=message),
                     thread=c.thread, refs=c.refs())
        elif pending.method in _SESSION_OPENERS:
            out.emit(SessionStateChanged, SessionStateChangedPayload(state="error", reason=message),
                     thread=c.thread, refs=c.refs())
        return state
    handler = _RESULTS.get(pending.method)
    if handler is None:  # extension and unknown methods, list/delete/logout: nothing to say
        return state
    result = obj["result"]
    return handler(state, result if isinstance(result, dict) else {}, pending, out)


def _on_initialized(state: State, result: dict[str, Any], pending: Pending,
                    out: Emitter) -> State:
    c = _Ctx(state, out)
    agent = result.get("agentInfo")  # Implementation {name, title?, version}: not every agent
    agent = agent if isinstance(agent, dict) else {}
    out.emit(SessionConfigured,
             SessionConfiguredPayload(config=result,
                                      runtimeVersion=_str(agent.get("version")) or UNSET,
                                      runtimeName=_str(agent.get("name")) or UNSET),
             thread=c.thread, refs=c.refs())
    return state


def _on_authenticated(state: State, result: dict[str, Any], pending: Pending,
                      out: Emitter) -> State:
    c = _Ctx(state, out)
    out.emit(AuthStatus, AuthStatusPayload(isAuthenticating=False), thread=c.thread, refs=c.refs())
    return state


def _on_session_ready(state: State, result: dict[str, Any], pending: Pending,
                      out: Emitter) -> State:
    """session/new, load, resume, fork: the session exists and can take prompts."""
    sid = _str(result.get("sessionId")) or pending.session
    if sid is None:
        raise MalformedRecord(f"{pending.method} result without a sessionId")
    # a load replays the conversation as session/update before answering: close it
    state = _close_open_items(state, out, "the session was (re)loaded before the item completed")
    state = _replace(state, session=sid)
    c = _Ctx(state, out, sid)
    refs = c.refs()
    if not state.started:
        resume = {"method": pending.method} if pending.method != "session/new" else UNSET
        out.emit(SessionStarted, SessionStartedPayload(resume=resume), thread=c.thread, refs=refs)
    out.emit(ThreadStarted, ThreadStartedPayload(providerThreadId=sid), thread=c.thread, refs=refs)
    out.emit(SessionStateChanged, SessionStateChangedPayload(state="ready"), thread=c.thread,
             refs=refs)
    config = {k: v for k, v in result.items() if k in ("modes", "models", "configOptions")}
    if config:
        out.emit(SessionConfigured, SessionConfiguredPayload(config=config), thread=c.thread,
                 refs=refs)
    return _replace(state, started=True)


def _on_configured(state: State, result: dict[str, Any], pending: Pending,
                   out: Emitter) -> State:
    """set_mode / set_model / set_config_option: the new setting is in force."""
    config: dict[str, Any] = dict(result)
    config.pop("_meta", None)
    if pending.method == "session/set_mode" and pending.arg is not None:
        config["currentModeId"] = pending.arg
    elif pending.method == "session/set_model" and pending.arg is not None:
        config["currentModelId"] = pending.arg
    c = _Ctx(state, out, pending.session)
    out.emit(SessionConfigured, SessionConfiguredPayload(config=config), thread=c.thread,
             refs=c.refs())
    return state


def _on_closed(state: State, result: dict[str, Any], pending: Pending, out: Emitter) -> State:
    c = _Ctx(state, out, pending.session)
    out.emit(ThreadStateChanged, ThreadStateChangedPayload(state="closed"), thread=c.thread,
             refs=c.refs())
    return state


_STOP_STATES = {"cancelled": "cancelled"}  # end_turn, max_tokens, max_turn_requests, refusal


def acp_tokens(result: dict[str, Any]) -> TokenUsage | None:
    """TokenUsage of a session/prompt result (the turn's), None when it has no counts.
    ACP's `usage` ({inputTokens, outputTokens, thoughtTokens, cachedReadTokens,
    cachedWriteTokens, totalTokens}) counts each kind apart (its total is their sum), so
    the cache reads and writes are added to the input and the thoughts to the output.
    Gemini's agent sends `_meta.quota.token_count` instead ({input_tokens,
    output_tokens}: Gemini's prompt count, which includes what the cache served).
    `usage_update` notifications say how full the context window is, not what a turn
    spent: they give no TokenUsage."""
    usage = result.get("usage")
    if isinstance(usage, dict):
        read = native_count(usage, "cachedReadTokens")
        write = native_count(usage, "cachedWriteTokens")
        thought = native_count(usage, "thoughtTokens")
        return tokens(input=native_count(usage, "inputTokens") + read + write,
                      cachedInput=read, cacheWrite=write,
                      output=native_count(usage, "outputTokens") + thought,
                      reasoningOutput=thought)
    meta = result.get("_meta")
    quota = meta.get("quota") if isinstance(meta, dict) else None
    count = quota.get("token_count") if isinstance(quota, dict) else None
    if isinstance(count, dict):
        return tokens(input=native_count(count, "input_tokens"),
                      output=native_count(count, "output_tokens"))
    return None


def _on_prompt_result(state: State, result: dict[str, Any], pending: Pending,
                      out: Emitter) -> State:
    if not (state.turnOpen and pending.turn == state.turns):
        return state  # a superseded prompt: its turn was already closed as cancelled
    state = _close_stream(state, out)
    stop = _str(result.get("stopReason"))
    usage = result.get("usage")
    if usage is None:  # gemini reports token counts in `_meta.quota`
        meta = result.get("_meta")
        usage = meta.get("quota") if isinstance(meta, dict) else None
    if usage is not None:
        c = _Ctx(state, out, pending.session)
        out.emit(ThreadTokenUsageUpdated, ThreadTokenUsageUpdatedPayload(usage=usage),
                 thread=c.thread, turn=c.turn, refs=c.refs())
    turn_state = _STOP_STATES.get(stop or "", "completed")
    return _end_turn(state, out, TurnCompletedPayload(
        state=turn_state, stopReason=stop, usage=usage if usage is not None else UNSET,  # type: ignore[arg-type]
        tokens=acp_tokens(result) or UNSET), sid=pending.session)


def _on_prompt_failed(state: State, error: dict[str, Any], pending: Pending,
                      out: Emitter) -> State:
    current = state.turnOpen and pending.turn == state.turns
    if error.get("code") == -32800:  # the request was cancelled: not an error
        if not current:
            return state
        return _end_turn(state, out, TurnCompletedPayload(
            state="cancelled", stopReason="cancelled", errorMessage=_error_message(error)),
            sid=pending.session)
    if not current:  # a superseded prompt failed: report it outside any turn
        _runtime_error(_replace(state, turnOpen=False), out, error, pending.method, pending.session)
        return state
    state = _close_open_items(state, out, "the turn failed before the tool call completed")
    message = _runtime_error(state, out, error, pending.method, pending.session)
    return _end_turn(state, out, TurnCompletedPayload(state="failed", errorMessage=message),
                     sid=pending.session)


def _end_turn(state: State, out: Emitter, payload: TurnCompletedPayload,
              synthetic: bool = False, sid: str | None = None) -> State:
    state = _close_open_items(state, out, "the turn ended before the tool call completed")
    c = _Ctx(state, out, sid)
    end_turn(out, c.at(refs=c.refs()), payload, synthetic)
    return _replace(state, turnOpen=False, done=[])


def _close_open_items(state: State, out: Emitter, why: str) -> State:
    state = _close_stream(state, out)
    for key, tool in list(state.tools.items()):
        status = "declined" if tool.declined else "failed"
        state = _complete_tool(state, out, key, tool, status, synthetic=True,
                               detail="the permission was rejected" if tool.declined else why)
    return state


# ---- text chunks --------------------------------------------------------------

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
_TEXT = "text"  # a message item's stream (spooled: see the module docstring)


def _stream_refs(c: _Ctx, stream: Stream) -> ProviderRefs | UnsetType:
    return c.refs(providerItemId=stream.messageId or UNSET)


def _open_stream(state: State, out: Emitter, kind: str, message_id: str | None) -> State:
    stream = Stream(kind=kind, n=state.items + 1, messageId=message_id)
    c = _Ctx(state, out)
    # its stream opened (spooled): an item without text completes with ""
    start_item(out, c.at(out.id("itm", "msg", str(stream.n)), _stream_refs(c, stream)),
               ItemPayload(itemType=_ITEM_OF[kind], status="inProgress",  # type: ignore[arg-type]
                           role=_ROLE_OF.get(kind, UNSET),  # type: ignore[arg-type]
                           author=_AUTHOR_OF.get(kind, UNSET)),  # type: ignore[arg-type]
               True, (_TEXT,))
    return _replace(state, items=stream.n, stream=stream)


def _close_stream(state: State, out: Emitter) -> State:
    stream = state.stream
    if stream is None:
        return state
    c = _Ctx(state, out)
    at = c.at(out.id("itm", "msg", str(stream.n)), _stream_refs(c, stream))
    complete_item(out, at, ItemPayload(
        itemType=_ITEM_OF[stream.kind], status="completed",  # type: ignore[arg-type]
        role=_ROLE_OF.get(stream.kind, UNSET),  # type: ignore[arg-type]
        author=_AUTHOR_OF.get(stream.kind, UNSET),  # type: ignore[arg-type]
        **taken(out, at.item_id, _TEXT, "text")), True)
    return _replace(state, stream=None)


def _on_chunk(state: State, upd: dict[str, Any], sid: str | None, out: Emitter) -> State:
    kind, _, stream_kind = _STREAMS[upd["sessionUpdate"]]
    content = _obj(upd.get("content"), "chunk content")
    text = content.get("text") if content.get("type") == "text" else None
    if content.get("type") == "text" and not isinstance(text, str):
        raise MalformedRecord("a text chunk needs a string 'text'")
    if text == "":
        return state  # claude-code-acp opens every block with an empty chunk
    message_id = _str(upd.get("messageId"))
    cur = state.stream
    # "A change in messageId indicates a new message" (ContentChunk): from an id to none
    # too (claude-agent-acp's notes between answers carry none); never ids: one run
    if cur is None or cur.kind != kind or message_id != cur.messageId:
        state = _open_stream(_close_stream(state, out), out, kind, message_id)
    stream = state.stream
    assert stream is not None
    c = _Ctx(state, out, sid)
    at = c.at(out.id("itm", "msg", str(stream.n)), _stream_refs(c, stream))
    if text is None:  # an image, audio or resource block: carried as item detail
        at.emit(out, ItemUpdated, ItemPayload(itemType=_ITEM_OF[kind], status="inProgress",  # type: ignore[arg-type]
                                              data={"content": content}))
    elif stream_kind is not None:
        delta(out, at, stream_kind, text, _TEXT)
    else:  # the user's text: no delta (never assistant text), but the item carries it
        out.append(at.item_id, _TEXT, text)
    return state


# ---- tool calls ---------------------------------------------------------------

_KIND_TOOLS = {
    "execute": "Bash", "edit": "Edit", "read": "Read", "search": "Grep", "fetch": "WebFetch",
    "delete": "Delete", "move": "Move", "think": "Think", "switch_mode": "SwitchMode",
}
_FILE_KINDS = frozenset({"edit", "delete", "move"})
_PATH_KEYS = ("file_path", "path", "absolute_path", "filePath", "notebook_path")
_STATUS = {"pending": "inProgress", "in_progress": "inProgress", "completed": "completed",
           "failed": "failed"}


def _tool_name(key: str, tool: Tool) -> str:
    if tool.name:
        return normalize_tool_name(tool.name)
    # gemini --acp ids are `<tool>__<tool>_<epoch ms>_<n>`: a known tool name is a good guess
    prefix = key.split("__", 1)[0] if "__" in key and not tool.own else ""
    if prefix and normalize_tool_name(prefix) != prefix:
        return normalize_tool_name(prefix)
    base = _KIND_TOOLS.get(tool.kind or "")
    if base == "Edit" and _writes_whole_file(tool):
        return "Write"
    return base or tool.title or "unknown"


def _writes_whole_file(tool: Tool) -> bool:
    raw = tool.rawInput
    if isinstance(raw, dict) and raw:
        return "content" in raw and "old_string" not in raw and "new_string" not in raw
    return bool(tool.diffs) and all(d.old is None for d in tool.diffs)


def _item_type(tool: Tool, name: str) -> str:
    item_type = item_type_for_tool(name)
    if item_type == "dynamic_tool_call" and tool.kind in _FILE_KINDS:
        return "file_change"
    return item_type


def _command(value: Any, args: Any = None) -> str | None:
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        # codex: ["/bin/bash", "-lc", "touch x"] -> the script itself
        if len(value) == 3 and value[1] in ("-c", "-lc") and value[0].rsplit("/", 1)[-1] in (
                "sh", "bash", "zsh"):
            return value[2]
        return shlex.join(value)
    if not isinstance(value, str):
        return None
    if isinstance(args, list) and args:
        return shlex.join([value, *(str(a) for a in args)])
    return value


def _tool_input(tool: Tool, name: str, content: _Content) -> tuple[dict[str, Any], Any]:
    """The normalised input, and the raw input when the normalised one leaves parts out."""
    raw = tool.rawInput
    given: dict[str, Any] = dict(raw) if isinstance(raw, dict) else (
        {} if raw is None else {"input": raw})
    if name == "Bash":
        command = _command(given.get("command"), given.get("args"))
        if command is None and raw is None and tool.title:  # gemini: no rawInput, the title is it
            command = tool.title.strip("`")
        inp: dict[str, Any] = {"command": command or ""}
        cwd = _str(given.get("cwd")) or _str(given.get("dir_path")) or _str(given.get("directory"))
        if cwd:
            inp["cwd"] = cwd
        for k in ("description", "timeout"):
            if k in given:
                inp[k] = given[k]
        # keep the runtime's own record too when the normalised input leaves parts of it out
        kept = {"command", "cwd", "dir_path", "directory", "description", "timeout"}
        lossy = bool(set(given) - kept) or not isinstance(given.get("command"), str)
        return inp, (raw if raw and lossy else UNSET)
    if "file_path" not in given:
        path = next((given[k] for k in _PATH_KEYS if isinstance(given.get(k), str)), None)
        if path is None and tool.paths and item_type_for_tool(name) in ("file_change",
                                                                        "dynamic_tool_call"):
            path = tool.paths[0]
        if path is not None:
            given["file_path"] = path
            if not raw and tool.diffs and name in ("Edit", "Write"):  # the first diff's texts
                old = content.get("diff_old") if name == "Edit" else None
                if old is not None:
                    given["old_string"] = old.text
                new = content.get("diff_new")
                given["new_string" if name == "Edit" else "content"] = (
                    new.text if new is not None else None)
    return given, UNSET


class _Content:
    """A tool call's long content (module docstring, "Streams") as its payloads read it:
    the item's spooled streams, or `given` ones (an announcement not stored)."""

    __slots__ = ("out", "item", "given")

    def __init__(self, out: Emitter, key: str, given: dict[str, str | None] | None = None):
        self.out = out
        self.item = out.id("itm", key)
        self.given = given

    def get(self, stream: str) -> Whole | None:
        if self.given is None:
            return self.out.whole(self.item, stream)
        text = self.given.get(stream)
        return None if text is None else Whole(text, len(text), False)

    def has(self, stream: str) -> bool:
        if self.given is None:
            return self.out.streamed(self.item, stream) >= 0
        return self.given.get(stream) is not None


def _save(out: Emitter, key: str, streams: dict[str, str | None]) -> None:
    """Keep an announcement's content in the tool item's streams. Each value replaces the
    last (ACP re-sends a tool's content whole, never as deltas): appended when it only
    extends what the stream holds (a growing terminal output), re-based otherwise; None
    (absent) closes the stream."""
    item = out.id("itm", key)
    for stream, text in streams.items():
        if text is None:
            out.drop(item, stream)
        elif out.extends(item, stream, text):
            out.append(item, stream, text[max(out.streamed(item, stream), 0):])
        else:
            out.reset(item, stream, text)


_encode_json = msgspec.json.Encoder().encode
_decode_json = msgspec.json.Decoder().decode


def _raw_output_text(raw: Any) -> str | None:
    if raw is None:
        return None
    if isinstance(raw, str):
        return raw
    if isinstance(raw, list):
        texts = [b.get("text") for b in raw if isinstance(b, dict) and isinstance(b.get("text"), str)]
        return "".join(texts) if texts else None  # type: ignore[arg-type]
    if isinstance(raw, dict):
        # codex-acp: the exec record; aggregated_output is stdout and stderr, whole
        for k in ("aggregated_output", "formatted_output", "output", "stdout", "content", "text",
                  "result"):
            if isinstance(raw.get(k), str):
                return raw[k]  # type: ignore[no-any-return]
    return None


def _raw_exit_code(raw: Any) -> int | None:
    if isinstance(raw, dict):
        for k in ("exit_code", "exitCode"):
            if isinstance(raw.get(k), int) and not isinstance(raw.get(k), bool):
                return raw[k]  # type: ignore[no-any-return]
    return None


def _tool_output(tool: Tool, status: str, content: _Content) -> dict[str, Any]:
    """The output fields: text content, else the terminal's output, else rawOutput's."""
    for stream in ("text", "terminal", "raw_text"):
        whole = content.get(stream)
        if whole is not None:
            return whole_fields(whole)
    if status != "completed":  # the diffs were proposed, not made
        return {"output": ""}
    return {"output": "\n".join(f"{d.path}: {'new file, ' if d.old is None else ''}"
                                f"{d.old or 0} -> {d.new} lines" for d in tool.diffs)}


def _tool_payload(key: str, tool: Tool, status: str, done: bool, content: _Content,
                  detail: str | None = None, output: dict[str, Any] | None = None
                  ) -> ItemPayload:
    """`output`: the output fields when the caller has them (else _tool_output)."""
    name = _tool_name(key, tool)
    inp, raw_input = _tool_input(tool, name, content)
    data: dict[str, Any] = {}
    if tool.kind:
        data["kind"] = tool.kind
    if raw_input is not UNSET:
        data["rawInput"] = raw_input
    fields: dict[str, Any] = {}
    if done:
        fields.update(output if output is not None else _tool_output(tool, status, content))
        fields["isError"] = status == "failed"
        if name == "Bash" or tool.exitCode is not None:
            fields["exitCode"] = tool.exitCode if tool.exitCode is not None else tool.rawExit
        if output is None and not content.has("text"):
            raw = content.get("raw_output")
            if raw is not None and not raw.truncated:  # past the cap, no longer JSON
                data["rawOutput"] = _decode_json(raw.text)
    if not detail:
        description = content.get("description")
        detail = description.text if description is not None else None
    item_type = _item_type(tool, name)
    fields.update(_normalised(tool, name, item_type, inp, content))
    return ItemPayload(itemType=item_type, status=status,  # type: ignore[arg-type]
                       title=tool.title or UNSET, detail=detail or UNSET,
                       toolName=name, input=inp,
                       data=data or UNSET, **fields)


def _normalised(tool: Tool, name: str, item_type: str, inp: dict[str, Any], content: _Content
                ) -> dict[str, Any]:
    """The normalised tool fields (adapters.core.tools) from the normalised input; a
    file change's paths are every file the call names, its diff the one computed from
    its diff blocks when it has them (the `diff` stream). A diff block's oldText may be
    the whole file or only the replaced excerpt (claude-agent-acp, codex-acp send
    excerpts), and a null one means a new file or one claude-agent-acp's Write
    overwrites: `excerpt` and `empty` say so."""
    fields = tool_fields(name, inp, content.out.cap, diff=not tool.diffs)
    if item_type != "file_change":
        return fields
    if tool.paths:
        fields["paths"] = list(dict.fromkeys([*fields.get("paths", ()), *tool.paths]))
    whole = content.get("diff") if tool.diffs else None
    if whole is not None and whole.text:
        fields.update(whole_fields(whole, "diff"))
        fields["diffBase"] = "empty" if any(d.old is None for d in tool.diffs) else "excerpt"
    return fields


def _diff_text(blocks: list[tuple[str, Any, Any]]) -> str | None:
    """One unified diff of a content list's diff blocks (path, oldText, newText)."""
    text = "".join(text_diff(path, old if isinstance(old, str) else None,
                             new if isinstance(new, str) else "", excerpt=isinstance(old, str))
                   for path, old, new in blocks)
    return text or None


def _merge(tool: Tool, fields: dict[str, Any], text_as: str | None = "text"
           ) -> tuple[Tool, dict[str, str | None]]:
    """Apply a ToolCall / ToolCallUpdate: absent or null fields keep their value. Returns
    the tool and the new values of its content streams (for _save; None closes one).

    `text_as` says what text content is: the output ("text": an announcement that
    finishes the call), a description of the call ("description": a `tool_call` that
    does not finish it, like claude-code-acp's command description), either ("update":
    a `tool_call_update` that does not finish the call says what it is running, as
    claude-agent-acp's description of a command, when its text is one of the input's
    own strings, and its output so far otherwise), or nothing to keep (None: a
    permission request's text describes the request, e.g. codex-acp's "Proposed
    Amendment: ...").
    """
    changes: dict[str, Any] = {}
    streams: dict[str, str | None] = {}
    meta = fields.get("_meta")
    claude = meta.get("claudeCode") if isinstance(meta, dict) else None
    name = _str(fields.get("name")) or (_str(claude.get("toolName")) if isinstance(claude, dict) else None)
    if name:
        changes["name"] = name
    for k in ("kind", "title", "status"):
        if isinstance(fields.get(k), str):
            changes[k] = fields[k]
    raw = fields.get("rawInput")
    if raw is not None and (raw != {} or tool.rawInput is None):  # `{}` is claude's placeholder
        changes["rawInput"] = raw
    raw_output = fields.get("rawOutput")
    if raw_output is not None:
        changes["rawExit"] = _raw_exit_code(raw_output)
        streams["raw_text"] = _raw_output_text(raw_output)
        streams["raw_output"] = (_encode_json(raw_output).decode()
                                 if isinstance(raw_output, dict) else None)
    elif isinstance(claude, dict):  # claude's PostToolUse hook: the tool's own result
        response = _response_text(claude.get("toolResponse"))
        if response is not None:
            streams["raw_text"] = response
    exit_code = _terminal_exit_code(meta)
    if exit_code is not None:
        changes["exitCode"] = exit_code
    paths = list(tool.paths)
    if isinstance(fields.get("locations"), list):
        paths = [loc["path"] for loc in fields["locations"]
                 if isinstance(loc, dict) and isinstance(loc.get("path"), str)]
    content = fields.get("content")
    if isinstance(content, list):
        texts: list[str] = []
        diffs: list[Diff] = []
        blocks: list[tuple[str, Any, Any]] = []  # every diff's path and texts
        first: tuple[Any, Any] = (None, None)  # the first diff's texts
        for c in content:
            if not isinstance(c, dict):
                continue
            if c.get("type") == "content":
                block = c.get("content")
                if isinstance(block, dict) and isinstance(block.get("text"), str):
                    texts.append(block["text"])
            elif c.get("type") == "diff" and isinstance(c.get("path"), str):
                old, new = c.get("oldText"), c.get("newText")
                if not diffs:
                    first = (old, new)
                diffs.append(Diff(path=c["path"],
                                  old=len(old.splitlines()) if isinstance(old, str) else None,
                                  new=len(new.splitlines()) if isinstance(new, str) else 0))
                blocks.append((c["path"], old, new))
                paths.append(c["path"])
        text = "\n".join(texts) if texts else None
        if text_as == "update":
            given_input = changes.get("rawInput", tool.rawInput)
            text_as = "description" if text is not None and _echoes(text, given_input) else "text"
            if text_as == "description":
                streams["text"] = None  # the content list was replaced: no output in it
        if text_as is not None:
            streams[text_as] = text
        changes["diffs"] = diffs
        # (a text that is not a string, against the schema, counts as absent)
        streams["diff_old"], streams["diff_new"] = _str(first[0]), _str(first[1])
        # computed once per content list the agent sends, read back by every payload
        streams["diff"] = _diff_text(blocks)
    given = changes.get("rawInput", tool.rawInput)
    if isinstance(given, dict):
        paths.extend(given[k] for k in _PATH_KEYS if isinstance(given.get(k), str))
    changes["paths"] = list(dict.fromkeys(paths))
    return _replace(tool, **changes), streams


def _echoes(text: str, raw_input: Any) -> bool:
    """Is `text` one of the call's input strings (a description or prompt shown as the
    call's content, never its output)?"""
    return isinstance(raw_input, dict) and any(v == text for v in raw_input.values())


def _response_text(response: Any) -> str | None:
    """The output in claude's `_meta.claudeCode.toolResponse`: text, text blocks, or a
    Bash result's stdout and stderr (nothing of the other tools' records, which hold
    whole files)."""
    if isinstance(response, (str, list)):
        return _raw_output_text(response)
    if isinstance(response, dict) and isinstance(response.get("stdout"), str):
        err = _str(response.get("stderr")) or ""
        return "\n".join(s for s in (response["stdout"], err) if s)
    return None


def _terminal_exit_code(meta: Any) -> int | None:
    """The exit code in the `_meta.terminal_exit` extension (claude-agent-acp and
    codex-acp, to clients that display terminal output themselves)."""
    end = meta.get("terminal_exit") if isinstance(meta, dict) else None
    code = end.get("exit_code") if isinstance(end, dict) else None
    return code if isinstance(code, int) and not isinstance(code, bool) else None


def _terminal_ids(fields: dict[str, Any]) -> list[str]:
    content = fields.get("content")
    if not isinstance(content, list):
        return []
    return [c["terminalId"] for c in content if isinstance(c, dict) and c.get("type") == "terminal"
            and isinstance(c.get("terminalId"), str)]


def _tool_refs(c: _Ctx, key: str, tool: Tool, rid: str | None = None) -> ProviderRefs | UnsetType:
    return c.refs(providerItemId=UNSET if tool.own else key, providerRequestId=rid or UNSET)


def _start_tool(state: State, out: Emitter, key: str, tool: Tool, synthetic: bool,
                rid: str | None = None) -> State:
    """Open the item of a tool whose content is already in its streams (_save)."""
    state = _close_stream(state, out)  # a tool call ends the text run before it
    c = _Ctx(state, out)
    content = _Content(out, key)
    start_item(out, c.at(content.item, _tool_refs(c, key, tool, rid)),
               _tool_payload(key, tool, "inProgress", False, content), synthetic)
    return _replace(state, tools={**state.tools, key: tool})


def _complete_tool(state: State, out: Emitter, key: str, tool: Tool, status: str,
                   synthetic: bool = False, detail: str | None = None,
                   rid: str | None = None, output: dict[str, Any] | None = None) -> State:
    c = _Ctx(state, out)
    content = _Content(out, key)
    # read: its streams close (their chunks dropped)
    complete_item(out, c.at(content.item, _tool_refs(c, key, tool, rid)),
                  _tool_payload(key, tool, status, True, content, detail, output), synthetic)
    tools = {k: v for k, v in state.tools.items() if k != key}
    terminals = {t: k for t, k in state.terminals.items() if k != key}
    done = state.done if tool.own else [*state.done, key]
    return _replace(state, tools=tools, terminals=terminals, done=done)


def _announce(state: State, fields: dict[str, Any], out: Emitter, initial: bool) -> State:
    """A tool_call (`initial`) or a tool_call_update."""
    key = fields.get("toolCallId")
    if not isinstance(key, str):
        raise MalformedRecord("a tool call needs a string toolCallId")
    if key in state.done:
        return state  # a late update of a tool call already completed
    terminals = dict(state.terminals, **{t: key for t in _terminal_ids(fields)})
    state = _replace(state, terminals=terminals)
    old = state.tools.get(key)
    done = fields.get("status") in ("completed", "failed")
    tool, streams = _merge(old or Tool(), fields,
                           "text" if done else "description" if initial else "update")
    _save(out, key, streams)
    if old is None:
        state = _start_tool(state, out, key, tool, synthetic=not initial)
        tool = state.tools[key]
        if tool.status not in ("completed", "failed"):
            return state
    elif tool.status not in ("completed", "failed"):
        c = _Ctx(state, out)
        content = _Content(out, key)
        out.emit(ItemUpdated,
                 _tool_payload(key, tool, _STATUS.get(tool.status, "inProgress"), False, content),
                 thread=c.thread, turn=c.turn, item=content.item, refs=_tool_refs(c, key, tool))
        return _replace(state, tools={**state.tools, key: tool})
    return _complete_tool(state, out, key, tool, tool.status)


def _on_tool_call(state: State, upd: dict[str, Any], sid: str | None, out: Emitter) -> State:
    return _announce(state, upd, out, initial=True)


def _on_tool_call_update(state: State, upd: dict[str, Any], sid: str | None, out: Emitter) -> State:
    return _announce(state, upd, out, initial=False)


# ---- other session updates ----------------------------------------------------

_PLAN_STATUS = {"pending": "pending", "in_progress": "inProgress", "completed": "completed"}


def _on_plan(state: State, upd: dict[str, Any], sid: str | None, out: Emitter) -> State:
    entries = upd.get("entries")
    steps = [PlanStep(step=str(e.get("content", "")),
                      status=_PLAN_STATUS.get(e.get("status"), "pending"))  # type: ignore[arg-type]
             for e in entries if isinstance(e, dict)] if isinstance(entries, list) else []
    c = _Ctx(state, out, sid)
    out.emit(TurnPlanUpdated, TurnPlanUpdatedPayload(plan=steps), thread=c.thread, turn=c.turn,
             refs=c.refs())
    return state


def _update_fields(upd: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in upd.items() if k not in ("sessionUpdate", "_meta")}


def _on_configuration(state: State, upd: dict[str, Any], sid: str | None, out: Emitter) -> State:
    """available_commands_update, current_mode_update, config_option_update."""
    c = _Ctx(state, out, sid)
    out.emit(SessionConfigured, SessionConfiguredPayload(config=_update_fields(upd)),
             thread=c.thread, turn=c.turn, refs=c.refs())
    return state


def _on_usage(state: State, upd: dict[str, Any], sid: str | None, out: Emitter) -> State:
    c = _Ctx(state, out, sid)
    out.emit(ThreadTokenUsageUpdated, ThreadTokenUsageUpdatedPayload(usage=_update_fields(upd)),
             thread=c.thread, turn=c.turn, refs=c.refs())
    return state


def _on_session_info(state: State, upd: dict[str, Any], sid: str | None, out: Emitter) -> State:
    fields = _update_fields(upd)
    title = fields.get("title")
    if isinstance(title, str):
        del fields["title"]
    # (a null title clears it: kept in the metadata, as the name cannot say so)
    c = _Ctx(state, out, sid)
    out.emit(ThreadMetadataUpdated,
             ThreadMetadataUpdatedPayload(name=title if isinstance(title, str) else UNSET,
                                          metadata=fields or UNSET),
             thread=c.thread, refs=c.refs())
    return state


def _on_auth_status(state: State, obj: dict[str, Any], params: dict[str, Any], key: str | None,
                    out: Emitter) -> State:
    """`_auth/status_update` (claude-agent-acp's extension, connection-wide): the
    identity the agent runs as; kind `none` is a known logged-out state."""
    status = _obj(params.get("authStatus"), "authStatus")
    lines = [t for t in (_str(status.get("label")), _str(status.get("detail"))) if t]
    c = _Ctx(state, out)
    out.emit(AuthStatus, AuthStatusPayload(
        isAuthenticating=False, output=lines or UNSET,
        error=(lines[0] if lines else "not logged in") if status.get("kind") == "none" else UNSET),
        thread=c.thread, refs=c.refs())
    out.emit(AccountUpdated, AccountUpdatedPayload(account=status), thread=c.thread, refs=c.refs())
    return state


def _on_session_update(state: State, obj: dict[str, Any], params: dict[str, Any], key: str | None,
                       out: Emitter) -> State:
    upd = _obj(params.get("update"), "session/update update")
    kind = upd.get("sessionUpdate")
    if not isinstance(kind, str):
        raise MalformedRecord("session/update without a string 'sessionUpdate'")
    out.native_type = kind
    sid = _str(params.get("sessionId"))
    handler = _UPDATES.get(kind)
    if handler is None:
        c = _Ctx(state, out, sid)
        out.unknown(kind, thread=c.thread, turn=c.turn)
        return state
    return handler(state, upd, sid, out)


# ---- agent requests and the client's answers ----------------------------------

_REQUEST_TYPES = {"execute": "command_execution_approval", "edit": "file_change_approval",
                  "delete": "file_change_approval", "move": "file_change_approval"}


def _on_request_permission(state: State, obj: dict[str, Any], params: dict[str, Any], key: str,
                           out: Emitter) -> State:
    call = _obj(params.get("toolCall"), "session/request_permission toolCall")
    tcid = call.get("toolCallId")
    if not isinstance(tcid, str):
        raise MalformedRecord("session/request_permission toolCall needs a toolCallId")
    rid = str(obj["id"])
    tool, streams = _merge(state.tools.get(tcid, Tool()), call, None)
    content = _Content(out, tcid)
    if tcid in state.tools:  # the request may carry a richer view of the call
        _save(out, tcid, streams)
        state = _replace(state, tools={**state.tools, tcid: tool})
    elif tcid not in state.done:  # gemini, codex-acp: the request comes first
        _save(out, tcid, streams)
        state = _start_tool(state, out, tcid, tool, synthetic=True, rid=rid)
    else:  # a call already completed: its item has no streams any more
        content = _Content(out, tcid, streams)
    name = _tool_name(tcid, tool)
    request_type = _REQUEST_TYPES.get(tool.kind or "")
    if request_type is None:
        item_type = _item_type(tool, name)
        request_type = {"command_execution": "command_execution_approval",
                        "file_change": "file_change_approval"}.get(item_type, "unknown")
    options = [o for o in native_list(params.get("options"), "request_permission options")
               if isinstance(o, dict)]
    c = _Ctx(state, out, _str(params.get("sessionId")))
    out.emit(RequestOpened,
             RequestOpenedPayload(requestType=request_type, detail=tool.title or UNSET,  # type: ignore[arg-type]
                                  toolName=name, options=options,
                                  args=_tool_input(tool, name, content)[0]),
             thread=c.thread, turn=c.turn, item=content.item,
             request=out.id("req", "agent", key),
             refs=c.refs(providerRequestId=rid, providerItemId=tcid))
    pending = Pending(method="session/request_permission", tool=tcid, requestType=request_type,
                      session=c.sid, options={str(o.get("optionId")): str(o.get("kind"))
                                              for o in options})
    return _replace(state, agent={**state.agent, key: pending})


#: PermissionOptionKind in the shared words ("cancelled": the prompt turn was cancelled
#: before the user chose); an option without a kind says nothing.
_OUTCOMES: dict[str, Decision] = {"allow_once": "accept", "allow_always": "accept_for_session",
                                  "reject_once": "decline", "reject_always": "decline",
                                  "cancelled": "cancel"}


def _on_permission_answered(state: State, obj: dict[str, Any], key: str, pending: Pending,
                            out: Emitter) -> State:
    resolution: dict[str, Any]
    if "error" in obj:
        error = _obj(obj["error"], "error")
        decision, resolution = "error", {"error": error}
    else:
        outcome = _obj(_obj(obj["result"], "result").get("outcome"), "outcome")
        if outcome.get("outcome") == "selected":
            option = str(outcome.get("optionId"))
            kind = pending.options.get(option)
            decision = kind or option
            resolution = {"outcome": "selected", "optionId": option,
                          **({"kind": kind} if kind else {})}
        else:
            decision, resolution = "cancelled", {"outcome": "cancelled"}
    tcid = pending.tool or ""
    tool = state.tools.get(tcid)
    if tool is not None and decision.startswith("reject"):
        state = _replace(state, tools={**state.tools, tcid: _replace(tool, declined=True)})
    c = _Ctx(state, out, pending.session)
    out.emit(RequestResolved,
             RequestResolvedPayload(requestType=pending.requestType or "unknown",  # type: ignore[arg-type]
                                    decision=decision, resolution=resolution,
                                    outcome=_OUTCOMES.get(decision, UNSET)),
             thread=c.thread, turn=c.turn, item=out.id("itm", tcid) if tcid else UNSET,
             request=out.id("req", "agent", key),
             refs=c.refs(providerRequestId=str(obj["id"]), providerItemId=tcid or UNSET))
    return state


def _on_elicitation(state: State, obj: dict[str, Any], params: dict[str, Any], key: str,
                    out: Emitter) -> State:
    sid = _str(params.get("sessionId"))
    c = _Ctx(state, out, sid)
    questions = {k: v for k, v in params.items() if k not in ("sessionId", "_meta")}
    out.emit(UserInputRequested, UserInputRequestedPayload(questions=questions),
             thread=c.thread, turn=c.turn, request=out.id("req", "agent", key),
             refs=c.refs(providerRequestId=str(obj["id"])))
    return _replace(state, agent={**state.agent, key: Pending(method=obj["method"], session=sid)})


def _on_elicitation_answered(state: State, obj: dict[str, Any], key: str, pending: Pending,
                             out: Emitter) -> State:
    answers = obj["result"] if "result" in obj else {"error": obj["error"]}
    c = _Ctx(state, out, pending.session)
    out.emit(UserInputResolved, UserInputResolvedPayload(
        answers=answers, outcome=elicitation_outcome(answers)), thread=c.thread,
             turn=c.turn, request=out.id("req", "agent", key),
             refs=c.refs(providerRequestId=str(obj["id"])))
    return state


# Client-side methods: fs/* and terminal/* serve a tool call, or are tool calls themselves.


def _tool_for_path(state: State, path: str | None) -> str | None:
    for key, tool in reversed(state.tools.items()):
        if not tool.own and path is not None and path in tool.paths:
            return key
    return None


def _tool_for_terminal(state: State) -> str | None:
    bound = set(state.terminals.values())
    for key, tool in reversed(state.tools.items()):
        if not tool.own and key not in bound and (
                tool.kind == "execute" or _tool_name(key, tool) == "Bash"):
            return key
    return None


def _client_op(state: State, obj: dict[str, Any], key: str, out: Emitter, related: str | None,
               own_tool: Tool, detail: dict[str, Any], arg: str | None = None) -> State:
    """Attach a client-side method call to its tool item, or open an item for it."""
    method, rid = obj["method"], str(obj["id"])
    if related is not None:
        tool = state.tools[related]
        c = _Ctx(state, out)
        payload = _tool_payload(related, tool, _STATUS.get(tool.status, "inProgress"), False,
                                _Content(out, related))
        out.emit(ItemUpdated, _replace(payload, data={**(payload.data or {}), "clientRequest": detail}),  # type: ignore[dict-item]
                 thread=c.thread, turn=c.turn, item=out.id("itm", related),
                 refs=_tool_refs(c, related, tool, rid))
        pending = Pending(method=method, tool=related, arg=arg)
    else:
        own = f"{method}#{rid}"
        state = _start_tool(state, out, own, _replace(own_tool, own=True, status="in_progress"),
                            synthetic=True, rid=rid)
        pending = Pending(method=method, tool=own, own=True, arg=arg)
    return _replace(state, agent={**state.agent, key: pending})


def _on_fs_read(state: State, obj: dict[str, Any], params: dict[str, Any], key: str,
                out: Emitter) -> State:
    path = _str(params.get("path"))
    raw: dict[str, Any] = {"file_path": path, **{k: params[k] for k in ("line", "limit")
                                                 if k in params}}
    return _client_op(state, obj, key, out, _tool_for_path(state, path),
                      Tool(name="Read", title=path, rawInput=raw, paths=[path] if path else []),
                      {"method": obj["method"], "path": path})


def _on_fs_write(state: State, obj: dict[str, Any], params: dict[str, Any], key: str,
                 out: Emitter) -> State:
    path = _str(params.get("path"))
    raw = {"file_path": path, "content": params.get("content")}
    return _client_op(state, obj, key, out, _tool_for_path(state, path),
                      Tool(name="Write", title=path, rawInput=raw, paths=[path] if path else []),
                      {"method": obj["method"], "path": path})


def _on_terminal_create(state: State, obj: dict[str, Any], params: dict[str, Any], key: str,
                        out: Emitter) -> State:
    raw: dict[str, Any] = {k: params[k] for k in ("command", "args", "cwd") if k in params}
    return _client_op(state, obj, key, out, _tool_for_terminal(state),
                      Tool(name="Bash", kind="execute", rawInput=raw),
                      {"method": obj["method"], **raw})


def _on_terminal_call(state: State, obj: dict[str, Any], params: dict[str, Any], key: str,
                      out: Emitter) -> State:
    """terminal/output, wait_for_exit, release, kill: answered about a known terminal."""
    terminal = _str(params.get("terminalId"))
    pending = Pending(method=obj["method"], arg=terminal,
                      tool=state.terminals.get(terminal or ""))
    return _replace(state, agent={**state.agent, key: pending})


def _on_agent_request_answered(state: State, obj: dict[str, Any], key: str, pending: Pending,
                               out: Emitter) -> State:
    if pending.method == "session/request_permission":
        return _on_permission_answered(state, obj, key, pending, out)
    if pending.method == "elicitation/create":
        return _on_elicitation_answered(state, obj, key, pending, out)
    tool_key = pending.tool
    tool = state.tools.get(tool_key or "")
    if tool_key is None or tool is None:
        return state  # extension or unknown method, or a terminal whose tool call is over
    rid = str(obj["id"])
    c = _Ctx(state, out)
    if "error" in obj:
        message = _error_message(_obj(obj["error"], "error"))
        if pending.own:
            _save(out, tool_key, {"text": message})
            return _complete_tool(state, out, tool_key, tool, "failed", rid=rid)
        payload = _tool_payload(tool_key, tool, _STATUS.get(tool.status, "inProgress"), False,
                                _Content(out, tool_key))
        out.emit(ItemUpdated, _replace(payload, data={
            **(payload.data or {}), "clientError": {"method": pending.method, "message": message}}),  # type: ignore[dict-item]
            thread=c.thread, turn=c.turn, item=out.id("itm", tool_key),
            refs=_tool_refs(c, tool_key, tool, rid))
        return state
    result = obj["result"] if isinstance(obj["result"], dict) else {}
    method = pending.method
    if method == "terminal/create" and isinstance(result.get("terminalId"), str):
        return _replace(state, terminals={**state.terminals, result["terminalId"]: tool_key})
    if method == "terminal/output":
        status = result.get("exitStatus")
        code = status.get("exitCode") if isinstance(status, dict) else None
        _save(out, tool_key, {"terminal": _str(result.get("output")) or ""})  # all so far
        tool = _replace(tool, exitCode=code if isinstance(code, int) else tool.exitCode)
    elif method == "terminal/wait_for_exit":
        code = result.get("exitCode")
        tool = _replace(tool, exitCode=code if isinstance(code, int) else tool.exitCode)
    state = _replace(state, tools={**state.tools, tool_key: tool})
    if not tool.own:
        return state  # the tool call's own updates report its progress and its end
    if method == "fs/read_text_file":
        _save(out, tool_key, {"text": _str(result.get("content"))})
        return _complete_tool(state, out, tool_key, tool, "completed", rid=rid)
    if method == "fs/write_text_file":
        _save(out, tool_key, {"text": ""})
        return _complete_tool(state, out, tool_key, tool, "completed", rid=rid)
    if method in ("terminal/release", "terminal/kill"):
        failed = tool.exitCode not in (0, None) or method == "terminal/kill"
        terminal = _Content(out, tool_key).get("terminal")  # the output, "" when none was read
        return _complete_tool(state, out, tool_key, tool, "failed" if failed else "completed",
                              rid=rid, output=whole_fields(terminal) if terminal else {"output": ""})
    return state


# ---- dispatch tables ----------------------------------------------------------

_AGENT_REQUESTS = {
    "session/request_permission": _on_request_permission,
    "fs/read_text_file": _on_fs_read,
    "fs/write_text_file": _on_fs_write,
    "terminal/create": _on_terminal_create,
    "terminal/output": _on_terminal_call,
    "terminal/wait_for_exit": _on_terminal_call,
    "terminal/release": _on_terminal_call,
    "terminal/kill": _on_terminal_call,
    "elicitation/create": _on_elicitation,
}

_CLIENT_REQUESTS = {
    "session/prompt": _on_prompt,
    **{m: _remember for m in (
        "initialize", "authenticate", "logout", "session/new", "session/load", "session/resume",
        "session/fork", "session/list", "session/delete", "session/close", "session/set_mode",
        "session/set_model", "session/set_config_option")},
}

_NOTIFICATIONS = {"session/update": _on_session_update, "_auth/status_update": _on_auth_status}

#: Every method handled, by name: requests (agent's and client's) and notifications.
_HANDLERS: dict[str, Any] = {**_AGENT_REQUESTS, **_CLIENT_REQUESTS, **_NOTIFICATIONS}

_SESSION_OPENERS = frozenset({"session/new", "session/load", "session/resume", "session/fork"})

#: What the agent's answer to each client request becomes.
_RESULTS = {
    "initialize": _on_initialized,
    "authenticate": _on_authenticated,
    **{m: _on_session_ready for m in _SESSION_OPENERS},
    "session/prompt": _on_prompt_result,
    "session/set_mode": _on_configured,
    "session/set_model": _on_configured,
    "session/set_config_option": _on_configured,
    "session/close": _on_closed,
}

_UPDATES = {
    "agent_message_chunk": _on_chunk,
    "agent_thought_chunk": _on_chunk,
    "user_message_chunk": _on_chunk,
    "tool_call": _on_tool_call,
    "tool_call_update": _on_tool_call_update,
    "plan": _on_plan,
    "available_commands_update": _on_configuration,
    "current_mode_update": _on_configuration,
    "config_option_update": _on_configuration,
    "session_info_update": _on_session_info,
    "usage_update": _on_usage,
}

_IGNORED_REASONS = {
    "session/cancel": "the prompt's response reports the cancellation (stopReason cancelled)",
    "$/cancel_request": "the cancelled request's own response says how it ended",
    "elicitation/complete": "a URL elicitation's end; its elicitation/create response resolves it",
    "session/list (response)": "listing stored sessions changes nothing in this one",
    "session/delete (response)": "deleting a stored session changes nothing in this one",
    "logout (response)": "no canonical event for a logout",
    "_* (extension methods)": "implementation-specific extensions (ACP reserves the `_` prefix)",
}

#: Native types read on purpose and mapped to nothing, each with its reason above.
IGNORED: frozenset[str] = frozenset(_IGNORED_REASONS)
