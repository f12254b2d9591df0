"""OpenCode: session-level events: created, updated (renamed), deleted, compacted, its
diff and todo list, and the server's own lifecycle.
"""

from __future__ import annotations

import difflib
from typing import Any

from adapters.core.contract import MalformedRecord
from adapters.core.emitter import UNSET, Emitter
from adapters.core.emitter import replace as _replace
from adapters.core.shape import native_list
from adapters.opencode.agents import _link_child, _unlink
from adapters.opencode.common import (
    _digest,
    _ensure_thread,
    _require_sid,
    _set_sess,
    _srefs,
    _str,
    _thread,
    _turn,
)
from adapters.opencode.state import State
from adapters.opencode.turns import _end_turn
from topics.canonical import (
    PlanStep,
    SessionStateChanged,
    SessionStateChangedPayload,
    ThreadMetadataUpdated,
    ThreadMetadataUpdatedPayload,
    ThreadStateChanged,
    ThreadStateChangedPayload,
    TurnDiffUpdated,
    TurnDiffUpdatedPayload,
    TurnPlanUpdated,
    TurnPlanUpdatedPayload,
)


def _on_server_connected(state: State, props: dict[str, Any], out: Emitter) -> State:
    return state  # session.started was emitted for the stream's first message


def _on_disposed(state: State, props: dict[str, Any], out: Emitter) -> State:
    detail = props.get("directory")
    out.emit(SessionStateChanged,
             SessionStateChangedPayload(state="stopped", reason=str(out.native_type),
                                        detail=detail if isinstance(detail, str) else UNSET))
    return state


def _session_info(props: dict[str, Any], kind: str) -> tuple[str, dict[str, Any]]:
    info = props.get("info")
    if not isinstance(info, dict) or not isinstance(info.get("id"), str):
        raise MalformedRecord(f"opencode {kind}: 'info' must be a Session with a string id")
    return info["id"], info


def _session_metadata(info: dict[str, Any]) -> dict[str, Any]:
    keys = ("slug", "version", "projectID", "directory", "parentID", "share")
    return {k: info[k] for k in keys if k in info}


def _on_session_created(state: State, props: dict[str, Any], out: Emitter) -> State:
    sid, info = _session_info(props, "session.created")
    state = _link_child(state, out, sid, info.get("parentID"))  # a task's child session
    state = _ensure_thread(state, out, sid, native=True)
    return _title(state, out, sid, info, force=True)


def _on_session_updated(state: State, props: dict[str, Any], out: Emitter) -> State:
    sid, info = _session_info(props, "session.updated")
    state = _link_child(state, out, sid, info.get("parentID"))
    state = _ensure_thread(state, out, sid)
    return _title(state, out, sid, info, force=False)


def _title(state: State, out: Emitter, sid: str, info: dict[str, Any], force: bool) -> State:
    """thread.metadata.updated when the session is created or renamed (OpenCode re-sends
    session.updated for every usage and summary change; those add nothing)."""
    title = info.get("title")
    title = title if isinstance(title, str) else None
    key = _digest(title) if title is not None else None
    sess = state.sessions[sid]
    if not force and key == sess.title:
        return state
    version = info.get("version")  # the release that created the session (kept in its record)
    out.emit(ThreadMetadataUpdated,
             ThreadMetadataUpdatedPayload(name=title if title is not None else UNSET,
                                          metadata=_session_metadata(info),
                                          runtimeVersion=version if isinstance(version, str)
                                          and version else UNSET),
             thread=_thread(out, sid), turn=_turn(state, out, sid), refs=_srefs(sid))
    return _set_sess(state, sid, _replace(sess, title=key))


def _on_session_deleted(state: State, props: dict[str, Any], out: Emitter) -> State:
    sid, _info = _session_info(props, "session.deleted")
    state = _ensure_thread(state, out, sid)
    state = _end_turn(state, out, sid, "cancelled", synthetic=True, report_error=False)
    out.emit(ThreadStateChanged, ThreadStateChangedPayload(state="closed"),
             thread=_thread(out, sid), refs=_srefs(sid))
    sessions = dict(state.sessions)
    sessions.pop(sid, None)
    # parts still waiting for a role when the session goes: nothing more will come for them
    parts = {}
    for pid, p in state.parts.items():
        if p.sid != sid:
            parts[pid] = p
        else:
            out.drop_item(out.id("itm", pid))  # never started: no completion drops them
    if state.agents:  # the session as a subagent, and the subagents its parts started
        state = _unlink(state, {pid for pid in state.parts if pid not in parts}, sid)
    return _replace(state, sessions=sessions, parts=parts)


def _on_session_compacted(state: State, props: dict[str, Any], out: Emitter) -> State:
    sid = _require_sid(props, "session.compacted")
    state = _ensure_thread(state, out, sid)
    out.emit(ThreadStateChanged, ThreadStateChangedPayload(state="compacted"),
             thread=_thread(out, sid), turn=_turn(state, out, sid), refs=_srefs(sid))
    return state


def _on_session_diff(state: State, props: dict[str, Any], out: Emitter) -> State:
    sid = _require_sid(props, "session.diff")
    state = _ensure_thread(state, out, sid)
    diff = _unified_diff(props.get("diff"))
    if diff:  # OpenCode sends an empty diff after every step of a turn that edits nothing
        out.emit(TurnDiffUpdated, TurnDiffUpdatedPayload(unifiedDiff=diff),
                 thread=_thread(out, sid), turn=_turn(state, out, sid), refs=_srefs(sid))
    return state


def _unified_diff(files: Any) -> str:
    """One unified diff from OpenCode's file diffs: v2 carries `patch`, 1.1.x the file
    contents `before` / `after` (diffed here, deterministically)."""
    chunks: list[str] = []
    for f in files if isinstance(files, list) else []:
        if not isinstance(f, dict):
            continue
        patch = f.get("patch")
        if isinstance(patch, str) and patch:
            chunks.append(patch if patch.endswith("\n") else patch + "\n")
            continue
        before, after = f.get("before"), f.get("after")
        name = _str(f, "file") or _str(f, "path")
        if isinstance(before, str) and isinstance(after, str):
            lines = difflib.unified_diff(before.splitlines(keepends=True),
                                         after.splitlines(keepends=True),
                                         fromfile=f"a/{name}", tofile=f"b/{name}")
            chunks.extend(ln if ln.endswith("\n") else ln + "\n" for ln in lines)
    return "".join(chunks)


def _on_todo_updated(state: State, props: dict[str, Any], out: Emitter) -> State:
    sid = _require_sid(props, "todo.updated")
    state = _ensure_thread(state, out, sid)
    steps = []
    for todo in native_list(props.get("todos"), "todo.updated todos"):
        if isinstance(todo, dict):
            native = todo.get("status")
            # a cancelled todo will not be worked on: it is no longer pending
            status = {"in_progress": "inProgress", "completed": "completed",
                      "cancelled": "completed"}.get(str(native), "pending")
            steps.append(PlanStep(step=str(todo.get("content", "")),
                                  status=status))  # type: ignore[arg-type]
    out.emit(TurnPlanUpdated, TurnPlanUpdatedPayload(plan=steps), thread=_thread(out, sid),
             turn=_turn(state, out, sid), refs=_srefs(sid))
    return state
