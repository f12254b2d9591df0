"""acp: initialization and session setup, and what a session says of itself between turns.

An agent states its name and release in the initialize response's `agentInfo`
(Implementation: name, title, version): session.configured `runtimeName` and
`runtimeVersion`. Gemini CLI 0.30.0 sends no agentInfo. session/new, load, resume and
fork: session.started (once), thread.started, ready; a load replays the conversation
as session/update before it answers. Modes, models and config options are
session.configured; `session_info_update` is thread.metadata.updated (its title the
name; a null title, cleared, stays in the metadata); claude-agent-acp's
`_auth/status_update` extension (connection-wide: the identity the agent runs as, kind
`none` when logged out) is auth.status and account.updated.
"""

from __future__ import annotations

from typing import Any

from adapters.acp.envelope import Ctx, as_object, as_str, native_agent, update_fields
from adapters.acp.prompt_turn import close_open_items
from adapters.acp.state import Pending, State
from adapters.core.contract import MalformedRecord
from adapters.core.emitter import UNSET, Emitter
from adapters.core.emitter import replace as _replace
from topics.canonical import (
    AccountUpdated,
    AccountUpdatedPayload,
    AuthStatus,
    AuthStatusPayload,
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
)


def remember(state: State, obj: dict[str, Any], params: dict[str, Any], key: str,
             out: Emitter) -> State:
    """A client request that only matters once answered: keep what the answer needs."""
    method = obj["method"]
    sid = as_str(params.get("sessionId"))
    arg = as_str(params.get("modeId")) or as_str(params.get("modelId"))
    pending = Pending(method=method, session=sid, arg=arg)
    if method in SESSION_OPENERS:  # the replay that follows belongs to it
        if sid is not None:
            state = _replace(state, session=sid)
        cwd = as_str(params.get("cwd"))  # where the session's commands run
        if cwd:
            state = _replace(state, cwd=cwd)
    return _replace(state, client={**state.client, key: pending})


def on_initialized(state: State, result: dict[str, Any], pending: Pending,
                   out: Emitter) -> State:
    c = Ctx(state, out)
    agent = result.get("agentInfo")  # Implementation {name, title?, version}: not every agent
    agent = agent if isinstance(agent, dict) else {}
    out.emit(SessionConfigured,
             SessionConfiguredPayload(config=result,
                                      runtimeVersion=as_str(agent.get("version")) or UNSET,
                                      runtimeName=as_str(agent.get("name")) or UNSET),
             thread=c.thread, refs=c.refs())
    return state


def on_authenticated(state: State, result: dict[str, Any], pending: Pending,
                     out: Emitter) -> State:
    c = Ctx(state, out)
    out.emit(AuthStatus, AuthStatusPayload(isAuthenticating=False), thread=c.thread, refs=c.refs())
    return state


def on_session_ready(state: State, result: dict[str, Any], pending: Pending,
                     out: Emitter) -> State:
    """session/new, load, resume, fork: the session exists and can take prompts."""
    sid = as_str(result.get("sessionId")) or pending.session
    if sid is None:
        raise MalformedRecord(f"{pending.method} result without a sessionId")
    # a load replays the conversation as session/update before answering: close it
    state = close_open_items(state, out, "the session was (re)loaded before the item completed")
    state = _replace(state, session=sid)
    c = Ctx(state, out, sid)
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


def on_configured(state: State, result: dict[str, Any], pending: Pending,
                  out: Emitter) -> State:
    """set_mode / set_model / set_config_option: the new setting is in force."""
    config: dict[str, Any] = dict(result)
    config.pop("_meta", None)
    if pending.method == "session/set_mode" and pending.arg is not None:
        config["currentModeId"] = pending.arg
    elif pending.method == "session/set_model" and pending.arg is not None:
        config["currentModelId"] = pending.arg
    c = Ctx(state, out, pending.session)
    out.emit(SessionConfigured, SessionConfiguredPayload(config=config), thread=c.thread,
             refs=c.refs())
    return state


def on_closed(state: State, result: dict[str, Any], pending: Pending, out: Emitter) -> State:
    c = Ctx(state, out, pending.session)
    out.emit(ThreadStateChanged, ThreadStateChangedPayload(state="closed"), thread=c.thread,
             refs=c.refs())
    return state


def on_configuration(state: State, upd: dict[str, Any], sid: str | None, out: Emitter) -> State:
    """available_commands_update, current_mode_update, config_option_update."""
    c = Ctx(state, out, sid, native_agent(upd))
    out.emit(SessionConfigured, SessionConfiguredPayload(config=update_fields(upd)),
             thread=c.thread, turn=c.turn, refs=c.refs())
    return state


def on_session_info(state: State, upd: dict[str, Any], sid: str | None, out: Emitter) -> State:
    fields = update_fields(upd)
    title = fields.get("title")
    if isinstance(title, str):
        del fields["title"]
    # (a null title clears it: kept in the metadata, as the name cannot say so)
    c = Ctx(state, out, sid, native_agent(upd))
    out.emit(ThreadMetadataUpdated,
             ThreadMetadataUpdatedPayload(name=title if isinstance(title, str) else UNSET,
                                          metadata=fields or UNSET),
             thread=c.thread, refs=c.refs())
    return state


def on_auth_status(state: State, obj: dict[str, Any], params: dict[str, Any], key: str | None,
                   out: Emitter) -> State:
    """`_auth/status_update` (claude-agent-acp's extension, connection-wide): the
    identity the agent runs as; kind `none` is a known logged-out state."""
    status = as_object(params.get("authStatus"), "authStatus")
    lines = [t for t in (as_str(status.get("label")), as_str(status.get("detail"))) if t]
    c = Ctx(state, out)
    out.emit(AuthStatus, AuthStatusPayload(
        isAuthenticating=False, output=lines or UNSET,
        error=(lines[0] if lines else "not logged in") if status.get("kind") == "none" else UNSET),
        thread=c.thread, refs=c.refs())
    out.emit(AccountUpdated, AccountUpdatedPayload(account=status), thread=c.thread, refs=c.refs())
    return state


SESSION_OPENERS = frozenset({"session/new", "session/load", "session/resume", "session/fork"})
