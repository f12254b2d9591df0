"""codex: threads and the client's requests, as the server's responses and thread
notifications tell them: initialize (the server's release), thread/start|resume|fork
(session.configured, thread.started), thread status, metadata and settings."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from adapters.codex.agents import announced, parent_thread, speak_for
from adapters.codex.common import (
    Place,
    ensure_session,
    get_int,
    get_str,
    need_dict,
    need_str,
    or_unset,
    rpc_id,
)
from adapters.codex.state import State
from adapters.core.emitter import UNSET, Emitter
from adapters.core.emitter import replace as _replace
from topics.canonical import (
    RuntimeErrorEvent,
    RuntimeErrorPayload,
    SessionConfigured,
    SessionConfiguredPayload,
    SessionStarted,
    SessionStartedPayload,
    ThreadMetadataUpdated,
    ThreadMetadataUpdatedPayload,
    ThreadStarted,
    ThreadStartedPayload,
    ThreadStateChanged,
    ThreadStateChangedPayload,
)


def _release(user_agent: str | None) -> str | None:
    """The app-server's release in its initialize `userAgent`,
    `<originator>/<release> (<os> <os version>; <arch>) <terminal> (<client>; <version>)`
    (codex-rs default_client; the originator is the client's name, so the agent goes
    unnamed). None when the first word carries no release number."""
    if user_agent is None:
        return None
    _, slash, release = user_agent.split(" ", 1)[0].rpartition("/")
    return release if slash and release[:1].isdigit() else None


# ---- server -> client responses -----------------------------------------------------


def on_server_response(state: State, obj: dict[str, Any], out: Emitter) -> State:
    key = rpc_id(obj["id"])
    method = state.pending.get(key)
    pending = dict(state.pending)
    pending.pop(key, None)
    state = _replace(state, pending=pending)
    out.native_type = f"{method or 'unknown'} response"
    result = obj.get("result")
    if method == "initialize" and isinstance(result, dict):
        # kept for the session.configured of the threads this server opens
        state = _replace(state, runtimeVersion=_release(get_str(result, "userAgent"))
                         or state.runtimeVersion)
        if not state.started:
            out.emit(SessionStarted,
                     SessionStartedPayload(message=or_unset(get_str(result, "userAgent"))))
            return _replace(state, started=True)
    state = ensure_session(state, out)
    if "error" in obj:
        error = obj["error"]
        error = error if isinstance(error, dict) else {}
        code = get_int(error, "code")
        message = get_str(error, "message") or "request failed"
        out.emit(RuntimeErrorEvent, RuntimeErrorPayload(
            message=f"{method}: {message}" if method else message,
            errorClass="validation_error" if code in (-32600, -32601, -32602) else "provider_error",
            willRetry=code == -32001,  # "Server overloaded; retry later."
            detail={"method": method, "error": error}))
        return state
    if method in ("thread/start", "thread/resume", "thread/fork") and isinstance(result, dict):
        return on_thread_opened(state, result, out)
    return state


def on_thread_opened(state: State, result: dict[str, Any], out: Emitter) -> State:
    """The response to thread/start|resume|fork: the thread's settings, and the thread
    itself (thread/started comes later, and not at all on resume)."""
    thread = result.get("thread")
    tid = get_str(thread, "id") if isinstance(thread, dict) else None
    config = {k: v for k, v in result.items() if k != "thread"}
    at = Place(out, thread=tid)
    out.emit(SessionConfigured,
             SessionConfiguredPayload(config=config, runtimeVersion=or_unset(state.runtimeVersion)),
             **at.kw)
    model = get_str(result, "model") or state.model
    state = _replace(state, model=model)
    if tid is not None:
        state = announce_thread(state, out, tid)
    return state


def announce_thread(state: State, out: Emitter, tid: str, synthetic: bool = False) -> State:
    if tid in state.threads:
        return state
    out.emit(ThreadStarted, ThreadStartedPayload(providerThreadId=tid), synthetic=synthetic,
             **Place(out, thread=tid).kw)
    return _replace(state, threads=(*state.threads, tid))


# ---- threads ----------------------------------------------------------------------


def on_thread_started(state: State, p: dict[str, Any], out: Emitter) -> State:
    thread = need_dict(p.get("thread"), "thread/started thread")
    tid = need_str(thread, "id", "thread")
    parent = parent_thread(thread)
    if parent is not None:  # a collab agent's thread, maybe not bound yet
        state = announced(state, out, tid, parent)
    speak_for(state, out, tid)  # the notification names the thread in `thread`, not `threadId`
    return announce_thread(state, out, tid)


_THREAD_STATES = {"active": "active", "idle": "idle", "systemError": "error",
                  "notLoaded": "closed"}


def on_thread_status_changed(state: State, p: dict[str, Any], out: Emitter) -> State:
    status = need_dict(p.get("status"), "thread/status/changed status")
    ts = _THREAD_STATES.get(get_str(status, "type") or "", "idle")
    out.emit(ThreadStateChanged, ThreadStateChangedPayload(state=ts, detail=status),  # type: ignore[arg-type]
             **Place(out, thread=get_str(p, "threadId")).kw)
    return state


def on_thread_state(ts: str, detail: Any = UNSET) -> Callable[[State, dict[str, Any], Emitter], State]:
    def handler(state: State, p: dict[str, Any], out: Emitter) -> State:
        out.emit(ThreadStateChanged, ThreadStateChangedPayload(state=ts, detail=detail),  # type: ignore[arg-type]
                 **Place(out, thread=get_str(p, "threadId"), turn=get_str(p, "turnId")).kw)
        return state
    return handler


def on_thread_metadata(*keys: str, const: dict[str, Any] | None = None
                     ) -> Callable[[State, dict[str, Any], Emitter], State]:
    """thread.metadata.updated carrying `keys` of the params (or `const`), for the
    many small thread facts Codex announces."""
    def handler(state: State, p: dict[str, Any], out: Emitter) -> State:
        meta = dict(const) if const is not None else {k: p.get(k) for k in keys}
        out.emit(ThreadMetadataUpdated, ThreadMetadataUpdatedPayload(metadata=meta),
                 **Place(out, thread=get_str(p, "threadId"), turn=get_str(p, "turnId")).kw)
        return state
    return handler


def on_thread_name_updated(state: State, p: dict[str, Any], out: Emitter) -> State:
    name = get_str(p, "threadName")
    payload = (ThreadMetadataUpdatedPayload(name=name) if name is not None
               else ThreadMetadataUpdatedPayload(metadata={"threadName": None}))
    out.emit(ThreadMetadataUpdated, payload, **Place(out, thread=get_str(p, "threadId")).kw)
    return state


def on_thread_environment(connected: bool) -> Callable[[State, dict[str, Any], Emitter], State]:
    def handler(state: State, p: dict[str, Any], out: Emitter) -> State:
        meta = {"environment": {"environmentId": p.get("environmentId"), "connected": connected}}
        out.emit(ThreadMetadataUpdated, ThreadMetadataUpdatedPayload(metadata=meta),
                 **Place(out, thread=get_str(p, "threadId")).kw)
        return state
    return handler


def on_thread_settings_updated(state: State, p: dict[str, Any], out: Emitter) -> State:
    settings = need_dict(p.get("threadSettings"), "thread/settings/updated threadSettings")
    out.emit(SessionConfigured, SessionConfiguredPayload(config=settings),
             **Place(out, thread=get_str(p, "threadId")).kw)
    return _replace(state, model=get_str(settings, "model") or state.model)

