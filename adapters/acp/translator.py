"""acp: Agent Client Protocol v1 (JSON-RPC 2.0 over stdio, both directions) -> canonical events.

Reads ACP `protocolVersion` 1 as defined by agentclientprotocol/agent-client-protocol
`schema/v1/schema.json` (schema crate 1.21.0; the unstable `name` of tool calls too) and
spoken by Gemini CLI 0.30.0 (`--experimental-acp`) to 0.61.0 (`--acp`),
`@zed-industries/codex-acp` 0.9.5 to 0.16.0, `@zed-industries/claude-code-acp` 0.10.10
(shell commands through the client's `terminal/*`) to 0.16.2, and its successor
`@agentclientprotocol/claude-agent-acp` 0.24 to 0.85 (Claude Code's own tools, no client
methods; its later releases add `name`, `messageId`, `usage_update` with cost,
`session_info_update` and `_auth/status_update`), also Cursor and OpenCode `acp`. Every message is a JSON-RPC
request, notification or response; `origin` says who wrote it.

Releases (every recording of each is replayed against its oracle by
tests/adapters/test_drift.py, which also checks this table; docs/runtimes "Verified runtime
releases")

| runtime (recordings) | releases verified | written against |
| --- | --- | --- |
| `acp-gemini` (Gemini CLI) | 0.30.0, 0.61.0 | ACP `protocolVersion` 1, schema 1.21.0 |
| `acp-claude-code` (claude-code-acp) | 0.10.10, 0.16.2 | the same |
| `acp-codex` (codex-acp) | 0.9.5, 0.16.0 | the same |
| `acp-copilot` (`copilot --acp`) | 1.0.102 | the same |
| `acp-droid` (`droid exec --output-format acp`) | 0.225.2 | the same |
| `acp-kilo` (`kilo acp`) | 7.7.7 | the same |
| `acp-qwen` (`qwen --acp`) | 0.15.10 | the same |
| claude-agent-acp | none recorded (goldens: 0.85) | the same |

This module is the dispatch: which handler each method, response and session update
goes to. The handlers live by what the protocol talks about:

| module | what |
| --- | --- |
| `envelope` | where a message's events go (thread, turn, agent), JSON-RPC ids and errors |
| `session_setup` | initialize, authenticate, session/new, load, modes, close, session metadata |
| `prompt_turn` | session/prompt: the turn, its user message, its end, its plan |
| `usage` | the prompt result's `usage`, `usage_update` |
| `chunks` | agent message, thought and user chunks: message items |
| `tool_calls` | tool_call, tool_call_update: tool items and their payloads |
| `tool_content` | a tool call's announcements merged, its long content in spooled streams |
| `requests` | session/request_permission, elicitation/create |
| `client_methods` | fs/* and terminal/* the agent calls on the client |

Invariants
* Client and agent requests have separate id spaces (both start at 0 or 1 and
  collide), so the requests each side has in flight are kept apart, keyed by the
  JSON-RPC id *and its JSON type* (1 and "1" differ). A response is matched
  against the other side's requests first, then against its own side's (a
  producer that labels every line "agent"). A message without its origin gets the
  side `origin_of` reads from it: its method's, in the schema, or the side opposite
  the request its response answers.
* One ACP connection may hold several sessions; turns are tracked per connection
  (a canonflow session is one agent process), ids of the thread from the
  `sessionId` the message names.
* Other `_` extensions than those handled are ignored (ACP reserves the prefix).
"""

from __future__ import annotations

from typing import Any, Final

from adapters.acp.chunks import on_chunk
from adapters.acp.client_methods import (
    on_client_method_answered,
    on_fs_read,
    on_fs_write,
    on_terminal_call,
    on_terminal_create,
)
from adapters.acp.envelope import Ctx, as_object, as_str, id_key, native_agent, runtime_error
from adapters.acp.prompt_turn import on_plan, on_prompt, on_prompt_failed, on_prompt_result
from adapters.acp.requests import (
    on_elicitation,
    on_elicitation_answered,
    on_permission_answered,
    on_request_permission,
)
from adapters.acp.session_setup import (
    SESSION_OPENERS,
    on_auth_status,
    on_authenticated,
    on_closed,
    on_configuration,
    on_configured,
    on_initialized,
    on_session_info,
    on_session_ready,
    remember,
)
from adapters.acp.state import Pending, State
from adapters.acp.tool_calls import on_tool_call, on_tool_call_update
from adapters.acp.usage import acp_tokens, on_usage
from adapters.core.contract import MalformedRecord, Message
from adapters.core.emitter import Emitter
from adapters.core.emitter import replace as _replace
from adapters.core.ids import jsonrpc_message_id
from adapters.core.origin import jsonrpc_origin
from topics.canonical import (
    AuthStatus,
    AuthStatusPayload,
    SessionStateChanged,
    SessionStateChangedPayload,
)
from topics.records import Origin

__all__ = ["IGNORED", "acp_tokens", "initial", "message_id", "origin_of", "provider", "raw_source",
           "state_type", "translate"]

provider = "acp"
raw_source = "acp.jsonrpc"

#: JSON-RPC requests and responses carry ids (adapters.core.ids, "Native message ids")
message_id = jsonrpc_message_id


state_type = State


def initial() -> State:
    return State()


# ---- who sent it ---------------------------------------------------------------

#: The methods only the client sends: the schema's `agentMethods` (meta.json of v1, of
#: v1 unstable and of the v2 draft: the methods the agent answers), and
#: `session/set_model`, which earlier unstable releases defined and claude-code-acp
#: answers.
CLIENT_SENT: Final[frozenset[str]] = frozenset("""
initialize authenticate logout session/new session/load session/resume session/fork
session/list session/delete session/close session/set_mode session/set_config_option
session/set_model session/prompt session/cancel providers/list providers/set
providers/disable nes/start nes/suggest nes/accept nes/reject nes/close document/didOpen
document/didChange document/didClose document/didSave document/didFocus auth/login
auth/logout
""".split())

#: The methods only the agent sends: the schema's `clientMethods` (the methods the client
#: answers), and `_auth/status_update`, the extension claude-agent-acp sends. Both sides
#: send `mcp/message` (in both lists) and `$/cancel_request` (a protocol method).
AGENT_SENT: Final[frozenset[str]] = frozenset("""
session/update session/request_permission fs/read_text_file fs/write_text_file
terminal/create terminal/output terminal/release terminal/wait_for_exit terminal/kill
elicitation/create elicitation/complete mcp/connect mcp/disconnect _auth/status_update
""".split())


def origin_of(state: State, obj: dict[str, Any]) -> Origin:
    """Who sent a message that came without its origin (adapters.core.origin): a method's
    side is the schema's (CLIENT_SENT, AGENT_SENT); a response answers the other side's
    request in flight with its id (State.client, State.agent). Raises UnknownOrigin
    where that does not settle it."""
    return jsonrpc_origin(obj, "ACP", client_sends=CLIENT_SENT.__contains__,
                          agent_sends=AGENT_SENT.__contains__,
                          agent_asked=lambda rid: id_key(rid) in state.agent,
                          client_asked=lambda rid: id_key(rid) in state.client)


# ---- entry point --------------------------------------------------------------


def translate(state: State, msg: Message, out: Emitter) -> State:
    """Apply one JSON-RPC message (either direction). Raises MalformedRecord when it is
    not a JSON-RPC request, notification or response of the expected shape."""
    obj = msg.obj  # the root's, unless a handler says whose (envelope.Ctx)
    method = obj.get("method")
    if method is None:
        if "id" in obj and ("result" in obj or "error" in obj):
            return _on_response(state, obj, msg.origin, out)
        raise MalformedRecord("not a JSON-RPC request, notification or response")
    if not isinstance(method, str):
        raise MalformedRecord("a JSON-RPC 'method' must be a string")
    out.native_type = method
    key = id_key(obj["id"]) if "id" in obj else None
    params = as_object(obj.get("params"), f"{method} params")
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
    out.unknown(method, thread=Ctx(state, out).thread)
    return state


def _on_response(state: State, obj: dict[str, Any], origin: str, out: Emitter) -> State:
    key = id_key(obj["id"])
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
        runtime_error(state, out, as_object(obj["error"], "error"), None)
        return state
    out.unknown("response to an unknown request", thread=Ctx(state, out).thread)
    return state


def _on_client_request_answered(state: State, obj: dict[str, Any], pending: Pending,
                                out: Emitter) -> State:
    if "error" in obj:
        error = as_object(obj["error"], "error")
        if pending.method == "session/prompt":
            return on_prompt_failed(state, error, pending, out)
        message = runtime_error(state, out, error, pending.method, pending.session)
        c = Ctx(state, out, pending.session)
        if pending.method == "authenticate":
            out.emit(AuthStatus, AuthStatusPayload(isAuthenticating=False, error=message),
                     thread=c.thread, refs=c.refs())
        elif pending.method in SESSION_OPENERS:
            out.emit(SessionStateChanged, SessionStateChangedPayload(state="error", reason=message),
                     thread=c.thread, refs=c.refs())
        return state
    handler = _RESULTS.get(pending.method)
    if handler is None:  # extension and unknown methods, list/delete/logout: nothing to say
        return state
    result = obj["result"]
    return handler(state, result if isinstance(result, dict) else {}, pending, out)


def _on_agent_request_answered(state: State, obj: dict[str, Any], key: str, pending: Pending,
                               out: Emitter) -> State:
    if pending.method == "session/request_permission":
        return on_permission_answered(state, obj, key, pending, out)
    if pending.method == "elicitation/create":
        return on_elicitation_answered(state, obj, key, pending, out)
    return on_client_method_answered(state, obj, pending, out)


def _on_session_update(state: State, obj: dict[str, Any], params: dict[str, Any], key: str | None,
                       out: Emitter) -> State:
    upd = as_object(params.get("update"), "session/update update")
    kind = upd.get("sessionUpdate")
    if not isinstance(kind, str):
        raise MalformedRecord("session/update without a string 'sessionUpdate'")
    out.native_type = kind
    sid = as_str(params.get("sessionId"))
    handler = _UPDATES.get(kind)
    if handler is None:
        c = Ctx(state, out, sid, native_agent(upd))
        out.unknown(kind, thread=c.thread, turn=c.turn)
        return state
    return handler(state, upd, sid, out)


# ---- dispatch tables ----------------------------------------------------------

_AGENT_REQUESTS: Final = {
    "session/request_permission": on_request_permission,
    "fs/read_text_file": on_fs_read,
    "fs/write_text_file": on_fs_write,
    "terminal/create": on_terminal_create,
    "terminal/output": on_terminal_call,
    "terminal/wait_for_exit": on_terminal_call,
    "terminal/release": on_terminal_call,
    "terminal/kill": on_terminal_call,
    "elicitation/create": on_elicitation,
}

_CLIENT_REQUESTS: Final = {
    "session/prompt": on_prompt,
    **{m: remember for m in (
        "initialize", "authenticate", "logout", "session/new", "session/load", "session/resume",
        "session/fork", "session/list", "session/delete", "session/close", "session/set_mode",
        "session/set_model", "session/set_config_option")},
}

_NOTIFICATIONS: Final = {"session/update": _on_session_update, "_auth/status_update": on_auth_status}

#: Every method handled, by name: requests (agent's and client's) and notifications.
_HANDLERS: Final[dict[str, Any]] = {**_AGENT_REQUESTS, **_CLIENT_REQUESTS, **_NOTIFICATIONS}


#: What the agent's answer to each client request becomes.
_RESULTS = {
    "initialize": on_initialized,
    "authenticate": on_authenticated,
    **{m: on_session_ready for m in SESSION_OPENERS},
    "session/prompt": on_prompt_result,
    "session/set_mode": on_configured,
    "session/set_model": on_configured,
    "session/set_config_option": on_configured,
    "session/close": on_closed,
}

_UPDATES = {
    "agent_message_chunk": on_chunk,
    "agent_thought_chunk": on_chunk,
    "user_message_chunk": on_chunk,
    "tool_call": on_tool_call,
    "tool_call_update": on_tool_call_update,
    "plan": on_plan,
    "available_commands_update": on_configuration,
    "current_mode_update": on_configuration,
    "config_option_update": on_configuration,
    "session_info_update": on_session_info,
    "usage_update": on_usage,
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
IGNORED: Final[frozenset[str]] = frozenset(_IGNORED_REASONS)
