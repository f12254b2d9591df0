"""opencode: OpenCode server event bus (`GET /event` server-sent events) -> canonical events.

Reads the JSON object of each `data:` line of OpenCode's event stream, in both shapes:
* 1.1.x (`@opencode-ai/sdk` v1 types, OpenAPI of 2026-01, the public 1.1.49 recording,
  1.1.65 recordings; session/processor.ts, retry.ts, status.ts and prompt.ts read for the
  order of its retry and abort events):
  `{type, properties}`; text parts stream as growing `message.part.updated` snapshots
  (with an optional `delta`); approvals are `permission.updated` (v1) or
  `permission.asked`, answered by `permission.replied`.
* v2 (`@opencode-ai/sdk` 1.19.3 `Event` union, `opencode-ai` 1.18.33 captures): a top-level
  event `id` (`evt_...`), text/reasoning increments as separate `message.part.delta
  {partID, field: "text", delta}`, `sessionID` beside every payload, `question.*`,
  `permission.v2.*`, `question.v2.*`.
The `/global/event` wrapper `{directory, project?, workspace?, payload: {type, properties}}`
is unwrapped; its `sync` payloads (durable copies of bus events) are ignored. `data` is read
where `properties` is absent (the durable `/api/event` shape).

Releases (every recording of each is replayed against its oracle by
tests/adapters/test_drift.py, which also checks this table; README.md "Verified runtime
releases")

| runtime (recordings) | releases verified | written against |
| --- | --- | --- |
| `opencode-serve` | 1.1.65 (1.1 bus), 1.18.33 (v2) | `@opencode-ai/sdk` 1.19.3 v1 and v2 `Event` |

A session's record states the release that created it (`info.version` of
session.created / session.updated): thread.metadata.updated `runtimeVersion`, beside the
rest of the record in `metadata`. There is no session.configured: the bus announces no
configuration.

Mapping (OpenCode column of seed 000; seed 002 vocabulary)
* One bus carries many OpenCode sessions: each native `sessionID` is a canonical thread
  (`threadId` derived from it, `providerRefs.providerSessionId`), with its own turns. The
  canonical `sessionId` is the fleet key of the whole stream.
* Turns: OpenCode has no turn events. A turn opens (synthetic `turn.started`) at the first
  of: a new user message (`message.updated`, role user, an id not seen as a prompt before),
  `session.status` busy/retry, or assistant part activity; repeated busy statuses add
  nothing. `session.status` idle / `session.idle` complete it once (the second idle emits
  nothing). `session.error` gives `runtime.error` at once and decides how the running turn
  ends: failed (`MessageAbortedError`: interrupted). The turn still ends at idle, because
  OpenCode reports the error first, then marks the aborted tool parts and completes the
  message, and only then goes idle: the tools' own errors stay inside their turn (1.1.x
  goes idle first: a part still streaming at idle then marks the turn interrupted). A retry
  (`session.status` retry, retry part) is `runtime.error` with willRetry, once per attempt.
  Per-step `step-finish` usage becomes `thread.token-usage.updated` and is summed into
  `turn.completed` usage and cost.
* Aborted while waiting to retry (status retry, no busy since): 1.1.x's cancel() sets idle
  at once; the retry's sleep is cut, the next call fails aborted, and only then come
  `session.error` (MessageAbortedError) and the message completed with that error. No part
  is streaming, so nothing at that idle tells the cut: the turn is held open (Sess.held)
  and ends at the report, interrupted (failed for another error) with the error inside
  it. The message completed without a report ends it too, interrupted unless it finished
  a step without error (v2 completes it so when the retry is aborted, without
  session.error, and goes idle after); a busy status releases the hold (the work went
  on); the next prompt ends a turn still held.
* Items are parts, not messages: a text part is one `assistant_message` item (or a
  `user_message` item when its message is the user's), a reasoning part a `reasoning`
  item, a tool part a tool item whose `providerRefs.providerItemId` is the tool `callID`
  (the message id is `providerParentItemId`). `step-start`, `snapshot`, `patch`, `file`,
  `agent` and `subtask` parts carry no chat content (see _IGNORED_PARTS).

Invariants
* Never text twice: while a part is open the adapter knows what it emitted (see Streams)
  and only what is new is emitted, whether it comes as a v2 delta or as a 1.1.x snapshot. A repeated
  or shorter snapshot emits nothing. A snapshot that disagrees with text already sent
  cannot retract it: the part's text is re-based on the snapshot and its tail from the
  first differing character is emitted (`_advance`), so no new text is lost; the item's
  `text` on completion is always OpenCode's final text.
* OpenCode trims the end of a text/reasoning part when it closes (`text-end`: trimEnd),
  so the final snapshot can be shorter than the deltas sent. On the v2 delta path
  (`message.part.delta`) trailing whitespace is therefore held back until more text
  follows or the part closes: deltas are forwarded as they come except that a delta's
  trailing whitespace moves to the next one, and for every part that closes normally the
  deltas add up exactly to its final text. Snapshots (`message.part.updated`, the 1.1.x
  path) emit all their new text at once, trailing whitespace included, as seed 001's
  saved translation does ("Fixture " then "complete."). A part cut off (turn ended,
  message completed without time.end) flushes all it has.
* The user's prompt is never assistant text: user text parts become a `user_message`
  item (started and completed at once, no deltas: seed 001).
* Every item is started once and completed once. A closed part's id stays in a short
  ring (`closed`) so that late or repeated updates (OpenCode re-sends finished parts;
  1.1.x marks aborted tool parts only after it went idle) emit nothing.
  Parts still open when their turn ends are completed then (text/reasoning as completed,
  tools as failed); requests still open are resolved as cancelled. A turn whose session
  errored and never went idle is closed when the next prompt arrives.

Tricky parts
* Roles come only from `message.updated` (the message's `role`). OpenCode publishes a
  message before its parts, so a text part of an unannounced message that arrives after
  the turn's user message was seen is an assistant reply: it gets a synthetic
  `item.started` stub and streams at once (seed 000). With no prompt seen yet (a stream
  joined mid-way) the role cannot be inferred: the part's text is buffered (`held`) and
  emitted when its `message.updated` arrives (user -> user_message, assistant -> stub +
  deltas); still unknown at the turn's end, it is taken as assistant text, because by then
  OpenCode has re-sent the user message.
* A text part's closing snapshot (time.end) may arrive after the same step's tool parts
  went pending/running; a text part without time.end completes with its message
  (`message.updated` with time.completed) or its turn.
* Tool parts: pending (input unknown: nothing emitted) -> running (item.started once,
  then item.updated per update, with the new suffix of `metadata.output`, the output so
  far, streamed as `command_output`; one that does not extend what was streamed adds
  nothing) -> completed (whole output, title, exit code) | error (isError; a
  tool refused by a rejected permission or dismissed question is `declined`).
* `permission.replied` is `{requestID, reply}` in v2 and `{permissionID, response}` in v1.
* Assistant message errors are reported by `session.error`, which OpenCode publishes for
  the same error; `message.updated` does not repeat them.

Streams (adapters.core.emitter.Emitter, "Streams"): the state keeps lengths and digests, and text
only while short (`_KEPT` characters: Part.said, Part.held, Sess.error; most parts never
reach the spool); longer, it is spooled. Per part item:
* `text`, what a text/reasoning part emitted: spooled, because a part cut off (turn
  ended, message completed without time.end) completes with the text it streamed, and a
  diverging snapshot re-bases on its common prefix with it.
* `held`, a part's text not emitted yet (whitespace held back on the delta path, text
  buffered while its role is unknown): spooled, it is emitted later.
* `command_output`: length and digest only, not spooled: a completed tool part carries its
  whole output, and one cut off completes without output.
And per turn, `error`: session.error's message, spooled until turn.completed carries it.
"""

from __future__ import annotations

import difflib
import hashlib
import os
from typing import Any

from msgspec import UnsetType

from adapters.core.contract import MalformedRecord, Message
from adapters.core.diff import diff_fields, hunks_diff, text_diff
from adapters.core.emitter import UNSET, Emitter
from adapters.core.emitter import replace as _replace
from adapters.core.lifecycle import At, complete_item, delta, end_turn, start_item
from adapters.core.shape import native_count, native_list
from adapters.core.spool import Whole, whole_fields
from adapters.core.tools import item_type_for_tool, normalize_tool_name, tool_fields
from adapters.opencode.state import Part, Request, Sess, State, Usage
from topics.canonical import (
    Author,
    ContentDelta,
    ContentDeltaPayload,
    Decision,
    InputOutcome,
    ItemCompleted,
    ItemPayload,
    ItemStarted,
    ItemUpdated,
    McpStatusUpdated,
    McpStatusUpdatedPayload,
    PlanStep,
    ProviderRefs,
    RequestOpened,
    RequestOpenedPayload,
    RequestResolved,
    RequestResolvedPayload,
    RuntimeErrorEvent,
    RuntimeErrorPayload,
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
    TurnDiffUpdated,
    TurnDiffUpdatedPayload,
    TurnPlanUpdated,
    TurnPlanUpdatedPayload,
    TurnStarted,
    TurnStartedPayload,
    UserInputRequested,
    UserInputRequestedPayload,
    UserInputResolved,
    UserInputResolvedPayload,
)
from topics.usage import Cost, TokenUsage, tokens

provider = "opencode"
raw_source = "opencode.event"


def message_id(obj: dict[str, Any], origin: str) -> str | None:
    """A native message's id (adapters.core.ids, "Native message ids"): the bus
    event's `id` (`evt_...`, OpenCode 1.2 and later; the 1.1 bus has none)."""
    eid = obj.get("id")
    return eid if isinstance(eid, str) else None

_RING = 64  # closed part/request ids remembered, to swallow late re-sends
_MAX_NUM = 2.0**53  # token counts, costs, times and attempts beyond this are not real
# characters of a part's text (emitted, Part.said, or not yet, Part.held) kept in the
# state; a longer text is spooled (_add)
_KEPT = 256


state_type = State


def initial() -> State:
    return State()


# ---- ids and small helpers ----------------------------------------------------------


def _thread(out: Emitter, sid: str) -> str:
    return out.id("thr", sid)


def _turn(state: State, out: Emitter, sid: str) -> str | UnsetType:
    s = state.sessions.get(sid)
    return out.id("trn", sid, str(s.turns)) if s is not None and s.turnOpen else UNSET


def _srefs(sid: str) -> ProviderRefs:
    return ProviderRefs(providerSessionId=sid)


def _prefs(pid: str, p: Part) -> ProviderRefs:
    return ProviderRefs(providerSessionId=p.sid, providerItemId=p.call or pid,
                        providerParentItemId=p.msg)


def _at(state: State, out: Emitter, pid: str, part: Part) -> At:
    """Where the events of part `pid`'s item go (the conversation core's At)."""
    return At(_thread(out, part.sid), _turn(state, out, part.sid), out.id("itm", pid),
              refs=_prefs(pid, part))


def _str(obj: dict[str, Any], key: str) -> str:
    value = obj.get(key)
    return value if isinstance(value, str) else ""


def _dict(obj: dict[str, Any], key: str) -> dict[str, Any]:
    value = obj.get(key)
    return value if isinstance(value, dict) else {}


def _num(value: Any) -> float:
    """A JSON number as a float; anything else (or a non-finite or absurd value) is 0."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return 0.0
    return float(value) if abs(value) < _MAX_NUM else 0.0


def _int(value: Any) -> int:
    # bounded: the state is msgpack-encoded (64-bit integers) and sums must stay finite
    return int(_num(value))


def _require_sid(props: dict[str, Any], kind: str, *nested: str) -> str:
    """The native session id of an event: `properties.sessionID`, else inside `nested`."""
    sid = props.get("sessionID")
    for key in nested:
        if not isinstance(sid, str):
            sid = _dict(props, key).get("sessionID")
    if not isinstance(sid, str) or not sid:
        raise MalformedRecord(f"opencode {kind}: no string sessionID")
    return sid


def _close_ids(state: State, *ids: str) -> tuple[str, ...]:
    return (state.closed + ids)[-_RING:]


def _set_part(state: State, pid: str, part: Part) -> State:
    parts = dict(state.parts)
    parts[pid] = part
    return _replace(state, parts=parts)


def _drop_part(state: State, pid: str) -> State:
    parts = dict(state.parts)
    parts.pop(pid, None)
    return _replace(state, parts=parts, closed=_close_ids(state, pid))


def _set_sess(state: State, sid: str, sess: Sess) -> State:
    sessions = dict(state.sessions)
    sessions[sid] = sess
    return _replace(state, sessions=sessions)


# ---- entry point ------------------------------------------------------------------------


def translate(state: State, msg: Message, out: Emitter) -> State:
    obj = msg.obj
    # /global/event: {directory, project?, workspace?, payload: {type, properties}}
    if "type" not in obj and isinstance(obj.get("payload"), dict):
        obj = obj["payload"]
    kind = obj.get("type")
    if not isinstance(kind, str):
        raise MalformedRecord("opencode event without a string 'type'")
    props = obj.get("properties", obj.get("data", {}))
    if props is None:
        props = {}
    if not isinstance(props, dict):
        raise MalformedRecord(f"opencode {kind}: 'properties' must be an object")
    out.native_type = kind
    if not state.started:
        # the first message opens the canonical session; server.connected is its native start
        out.emit(SessionStarted, SessionStartedPayload(), synthetic=kind != "server.connected")
        state = _replace(state, started=True)
    handler = _HANDLERS.get(kind)
    if handler is not None:
        return handler(state, props, out)
    if kind in IGNORED or kind.startswith("session.next."):
        return state
    sid = props.get("sessionID")
    if isinstance(sid, str) and sid:
        state = _ensure_thread(state, out, sid)
        out.unknown(kind, thread=_thread(out, sid), turn=_turn(state, out, sid))
    else:
        out.unknown(kind)
    return state


# ---- threads and turns --------------------------------------------------------------


def _ensure_thread(state: State, out: Emitter, sid: str, native: bool = False) -> State:
    if sid in state.sessions:
        return state
    out.emit(ThreadStarted, ThreadStartedPayload(providerThreadId=sid), synthetic=not native,
             thread=_thread(out, sid), refs=_srefs(sid))
    return _set_sess(state, sid, Sess())


def _open_turn(state: State, out: Emitter, sid: str,
               model: str | UnsetType = UNSET) -> State:
    state = _ensure_thread(state, out, sid)
    sess = state.sessions[sid]
    if sess.turnOpen:
        return state
    state = _set_sess(state, sid, _replace(sess, turns=sess.turns + 1, turnOpen=True, finish="",
                                           retry=0, usage=None, ending="", error="",
                                           waiting=False, held=False))
    # OpenCode has no turn-start event: the turn is inferred from status or activity
    out.emit(TurnStarted, TurnStartedPayload(model=model), synthetic=True,
             thread=_thread(out, sid), turn=_turn(state, out, sid), refs=_srefs(sid))
    return state


def _end_turn(state: State, out: Emitter, sid: str, end: str, *, synthetic: bool = False,
              report_error: bool = True) -> State:
    """Complete the session's open turn, with the message session.error gave it unless
    `report_error` is False."""
    sess = state.sessions.get(sid)
    if sess is None or not sess.turnOpen:
        return state
    message = _read(out, out.id("trn", sid, str(sess.turns)), "error", sess.error, take=True)
    error = message.text if message.text and report_error else UNSET
    # close what the turn leaves open, in the order it was opened
    for pid, part in list(state.parts.items()):
        if part.sid == sid:
            state = _force_close(state, out, pid, part)
    for rid, req in list(state.requests.items()):
        if req.sid == sid:
            state = _resolve(state, out, rid, req, "cancelled", None, synthetic=True)
    u = sess.usage
    usage: Any = UNSET
    cost: float | UnsetType = UNSET
    turn_tokens: TokenUsage | UnsetType = UNSET
    turn_cost: Cost | UnsetType = UNSET
    if u is not None:
        usage = {"input": u.input, "output": u.output, "reasoning": u.reasoning,
                 "cacheRead": u.cacheRead, "cacheWrite": u.cacheWrite}
        cost = u.cost
        turn_tokens = opencode_tokens({"input": u.input, "output": u.output,
                                       "reasoning": u.reasoning,
                                       "cache": {"read": u.cacheRead, "write": u.cacheWrite}})
        if u.cost > 0:  # OpenCode writes 0 for a model it has no price for: not a price
            turn_cost = Cost(source="provider", usd=u.cost, priceSource="step-finish.cost")
    end_turn(out, At(_thread(out, sid), _turn(state, out, sid), refs=_srefs(sid)),
             TurnCompletedPayload(state=end,  # type: ignore[arg-type]
                                  stopReason=sess.finish or UNSET, usage=usage,
                                  totalCostUsd=cost, errorMessage=error, tokens=turn_tokens,
                                  cost=turn_cost), synthetic)
    state = _set_sess(state, sid, _replace(sess, turnOpen=False, finish="", retry=0, usage=None,
                                           ending="", error="", waiting=False, held=False))
    # roles are only needed while a turn's parts stream
    stale = [m for m, s in state.msgSession.items() if s == sid]
    if stale:
        roles = {m: r for m, r in state.roles.items() if m not in stale}
        owners = {m: s for m, s in state.msgSession.items() if m not in stale}
        state = _replace(state, roles=roles, msgSession=owners)
    return state


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
    state = _ensure_thread(state, out, sid, native=True)
    return _title(state, out, sid, info, force=True)


def _on_session_updated(state: State, props: dict[str, Any], out: Emitter) -> State:
    sid, info = _session_info(props, "session.updated")
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


def _digest(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


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
    return _replace(state, sessions=sessions, parts=parts)


def _on_session_status(state: State, props: dict[str, Any], out: Emitter) -> State:
    sid = _require_sid(props, "session.status")
    status = props.get("status")
    kind = status.get("type") if isinstance(status, dict) else None
    if not isinstance(status, dict) or not isinstance(kind, str):
        raise MalformedRecord("opencode session.status: 'status' must be an object with a type")
    if kind == "busy":
        return _busy(state, out, sid)
    if kind == "idle":
        return _idle(state, out, sid)
    if kind == "retry":
        state = _retry(state, out, sid, status.get("attempt"), _str(status, "message"),
                       {k: v for k, v in status.items() if k != "type"})
        sess = state.sessions[sid]
        return state if sess.waiting else _set_sess(state, sid, _replace(sess, waiting=True))
    state = _ensure_thread(state, out, sid)
    out.unknown(f"session.status:{kind}", thread=_thread(out, sid), turn=_turn(state, out, sid))
    return state


def _busy(state: State, out: Emitter, sid: str) -> State:
    """Work goes on: the turn opens (once: busy is repeated 3-4 times per turn); a retry
    is under way, and a held turn was not cut short after all (1.1.x reports an abort
    before its prompt loop could go busy again)."""
    sess = state.sessions.get(sid)
    if sess is not None and sess.turnOpen and (sess.waiting or sess.held):
        state = _set_sess(state, sid, _replace(sess, waiting=False, held=False))
    return _open_turn(state, out, sid)


def _retry(state: State, out: Emitter, sid: str, attempt: Any, message: str,
           detail: Any) -> State:
    """A provider retry: runtime.error with willRetry, once per attempt (a retry status and
    a retry part may report the same attempt)."""
    state = _open_turn(state, out, sid)
    sess = state.sessions[sid]
    n = _int(attempt)
    if n and n <= sess.retry:
        return state
    out.emit(RuntimeErrorEvent,
             RuntimeErrorPayload(message=message or "provider request failed; retrying",
                                 errorClass="provider_error", willRetry=True, detail=detail),
             thread=_thread(out, sid), turn=_turn(state, out, sid), refs=_srefs(sid))
    return _set_sess(state, sid, _replace(sess, retry=max(n, sess.retry)))


def _on_session_idle(state: State, props: dict[str, Any], out: Emitter) -> State:
    sid = _require_sid(props, "session.idle")
    return _idle(state, out, sid)  # after a status idle: the turn is already closed


def _idle(state: State, out: Emitter, sid: str) -> State:
    """The session went idle: its turn ends, as session.error said, or completed. OpenCode
    1.1.x goes idle *before* reporting an interrupt (cancel() sets idle, then the aborted
    call errors). While it waits to retry a failed call, nothing shows the cut: the turn
    is held open for the report that follows (session.error, the message completed),
    which ends it with the error inside. A text part still streaming or a tool still
    running shows it: the turn ends interrupted at once (no report may follow: the tool
    parts' own abort is all some runs send)."""
    sess = state.sessions.get(sid)
    if sess is None or not sess.turnOpen:
        return state
    if sess.ending:
        return _end_turn(state, out, sid, sess.ending)
    if sess.held:
        return state  # the idle repeated (status idle, then session.idle): still held
    if sess.waiting:
        return _set_sess(state, sid, _replace(sess, held=True))
    end = "interrupted" if any(p.sid == sid and p.busy for p in state.parts.values()) \
        else "completed"
    return _end_turn(state, out, sid, end)


_ERROR_CLASSES = {
    "ProviderAuthError": "permission_error",
    "StructuredOutputError": "validation_error",
    "MessageAbortedError": "unknown",
}


def _on_session_error(state: State, props: dict[str, Any], out: Emitter) -> State:
    sid = props.get("sessionID")
    error = _dict(props, "error")
    name = _str(error, "name")
    message = _str(_dict(error, "data"), "message") or name or "session error"
    thread: str | UnsetType = UNSET
    turn: str | UnsetType = UNSET
    refs: ProviderRefs | UnsetType = UNSET
    if isinstance(sid, str) and sid:
        state = _ensure_thread(state, out, sid)
        thread, turn, refs = _thread(out, sid), _turn(state, out, sid), _srefs(sid)
    out.emit(RuntimeErrorEvent,
             RuntimeErrorPayload(message=message,
                                 errorClass=_ERROR_CLASSES.get(name, "provider_error"),  # type: ignore[arg-type]
                                 willRetry=False, detail=error or UNSET),
             thread=thread, turn=turn, refs=refs)
    sess = state.sessions.get(sid) if isinstance(sid, str) else None
    if isinstance(sid, str) and sess is not None and sess.turnOpen and not sess.ending:
        # the turn ends at idle, which OpenCode sends after it has marked the aborted tool
        # parts ("Tool execution aborted") and completed the message: those stay in the turn
        end = "interrupted" if name == "MessageAbortedError" else "failed"
        # kept for turn.completed; spooled when long (the turn stays open until idle or,
        # never idle, until the next prompt)
        short = _add(out, out.id("trn", sid, str(sess.turns)), "error", "", message)
        state = _set_sess(state, sid, _replace(sess, ending=end, error=short))
        if sess.held:
            # 1.1.x went idle first, and this is the report it held back: the turn ends now
            state = _end_turn(state, out, sid, end)
    return state


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


# ---- messages -------------------------------------------------------------------------


def _on_message_updated(state: State, props: dict[str, Any], out: Emitter) -> State:
    info = props.get("info")
    if not isinstance(info, dict) or not isinstance(info.get("id"), str):
        raise MalformedRecord("opencode message.updated: 'info' must be a Message with an id")
    sid = _require_sid(props, "message.updated", "info")
    mid, role = info["id"], info.get("role")
    state = _ensure_thread(state, out, sid)
    sess = state.sessions[sid]
    created = _num(_dict(info, "time").get("created"))
    if role == "user" and mid != sess.prompt and created >= sess.promptAt:
        # a new prompt (OpenCode re-sends the user message after every step: same id)
        if sess.turnOpen and (sess.ending or sess.held):  # it never went idle, or was held
            state = _end_turn(state, out, sid, sess.ending or "interrupted", synthetic=True)
        model = _dict(info, "model")
        name = "/".join(x for x in (_str(model, "providerID"), _str(model, "modelID")) if x)
        state = _open_turn(state, out, sid, model=name or UNSET)
        state = _set_sess(state, sid, _replace(state.sessions[sid], prompt=mid,
                                               promptAt=_int(created)))
    elif role == "assistant":
        cwd = _str(_dict(info, "path"), "cwd")
        finish = _str(info, "finish")
        sess = state.sessions[sid]
        if (cwd and cwd != sess.cwd) or (finish and finish != sess.finish):
            state = _set_sess(state, sid, _replace(sess, cwd=cwd or sess.cwd,
                                                   finish=finish or sess.finish))
    if role not in ("user", "assistant"):
        return state
    if state.roles.get(mid) != role:
        roles, owners = dict(state.roles), dict(state.msgSession)
        roles[mid], owners[mid] = role, sid
        state = _replace(state, roles=roles, msgSession=owners)
    # parts that waited for their message's role; once the prompt is known, parts of other
    # unannounced messages of the session are the assistant's (see _role_of)
    prompt = state.sessions[sid].prompt if role == "user" else ""
    for pid, part in list(state.parts.items()):
        if not part.role and part.kind == "text":
            if part.msg == mid:
                state = _release(state, out, pid, part, role)
            elif prompt and part.sid == sid and part.msg not in state.roles:
                state = _release(state, out, pid, part, "assistant")
    if role == "assistant" and _dict(info, "time").get("completed") is not None:
        # the message is done: its text/reasoning parts without time.end are done too
        for pid, part in list(state.parts.items()):
            if part.msg == mid and part.kind != "tool":
                state = _force_close(state, out, pid, part)
        state = _message_done(state, out, sid, info)
    return state


def _message_done(state: State, out: Emitter, sid: str, info: dict[str, Any]) -> State:
    """An assistant message completed while its turn was held, or while OpenCode was to
    retry the call (v2 completes it so when the retry is aborted, without session.error,
    then goes idle): the turn was cut short. A message that finished a step (`finish`)
    and has no error is an ordinary end."""
    sess = state.sessions[sid]
    if not sess.turnOpen or sess.ending or not (sess.held or sess.waiting):
        return state
    normal = bool(_str(info, "finish")) and not info.get("error")
    if sess.held:
        return _end_turn(state, out, sid, "completed" if normal else "interrupted")
    if normal:
        return state
    return _set_sess(state, sid, _replace(sess, ending="interrupted"))


def _on_message_part_updated(state: State, props: dict[str, Any], out: Emitter) -> State:
    part = props.get("part")
    if not isinstance(part, dict):
        raise MalformedRecord("opencode message.part.updated: 'part' must be an object")
    pid, mid, ptype = part.get("id"), part.get("messageID"), part.get("type")
    if not (isinstance(pid, str) and isinstance(mid, str) and isinstance(ptype, str)):
        raise MalformedRecord("opencode message.part.updated: part needs string id, "
                              "messageID and type")
    sid = _require_sid(props, "message.part.updated", "part")
    if pid in state.closed:
        return state  # a finished part sent again (or updated after its turn ended)
    state = _ensure_thread(state, out, sid)
    handler = _PART_HANDLERS.get(ptype)
    if handler is not None:
        return handler(state, out, sid, mid, pid, part)
    if ptype not in _IGNORED_PARTS:
        out.unknown(f"message.part.updated:{ptype}", thread=_thread(out, sid),
                    turn=_turn(state, out, sid))
    return state


def _on_message_part_delta(state: State, props: dict[str, Any], out: Emitter) -> State:
    pid, delta, field = props.get("partID"), props.get("delta"), props.get("field")
    if not (isinstance(pid, str) and isinstance(delta, str)):
        raise MalformedRecord("opencode message.part.delta: needs string partID and delta")
    sid = _require_sid(props, "message.part.delta")
    if pid in state.closed or field not in ("text", None):
        return state  # only the text field streams; other fields arrive in part snapshots
    part = state.parts.get(pid)
    if part is None:
        # no snapshot seen (stream joined mid-part): text or reasoning is not known yet,
        # so hold the text until the part's snapshot or message says what it is
        state = _ensure_thread(state, out, sid)
        part = Part(sid=sid, msg=_str(props, "messageID"), kind="", busy=True)
    if part.kind == "tool":
        return state
    if part.role != "assistant" or part.kind == "":
        return _set_part(state, pid, _hold(out, pid, part, delta))
    state = _open_turn(state, out, sid)
    if not delta.strip():
        # only whitespace: held back, nothing to emit (the unsent text of a started part
        # is whitespace, so whitespace added to it is still all trailing)
        return _set_part(state, pid, _hold(out, pid, part, delta))
    return _advance(state, out, pid, part, delta=delta)


# ---- text and reasoning parts ----------------------------------------------------------


def _on_text_part(state: State, out: Emitter, sid: str, mid: str, pid: str,
                  part: dict[str, Any]) -> State:
    kind = part["type"]
    text = part.get("text")
    text = text if isinstance(text, str) else ""
    final = _dict(part, "time").get("end") is not None
    current = state.parts.get(pid) or Part(sid=sid, msg=mid, kind=kind)
    timed = "start" in _dict(part, "time")  # model output; a prompt part has no time
    if current.kind != kind or (timed and not current.busy):
        current = _replace(current, kind=kind, busy=current.busy or timed)
    role = current.role or _role_of(state, sid, mid, kind)
    flags = {k: True for k in ("synthetic", "ignored") if part.get(k) is True}
    if role == "user":
        return _user_text(state, out, pid, _replace(current, role=role), text, flags)
    if not role:
        # buffered until the message's role is known; the snapshot is the whole text so far
        if final or len(text) >= _len(out, out.id("itm", pid), "held", current.held):
            current = _rebuffer(out, pid, current, text)
        return _set_part(state, pid, _replace(current, ended=final))
    state = _open_turn(state, out, sid)
    current = _replace(current, role=role)
    if not current.started:
        # a part of an unannounced message is a stub so its deltas have a parent (seed 000)
        state, current = _start_text(state, out, pid, current, mid not in state.roles, flags)
    return _advance(state, out, pid, current, snapshot=text, final=final)


def _role_of(state: State, sid: str, mid: str, kind: str) -> str:
    """The role of a part's message: announced, implied, or "" (not knowable yet)."""
    if kind == "reasoning":
        return "assistant"
    role = state.roles.get(mid)
    if role is not None:
        return role
    sess = state.sessions.get(sid)
    # OpenCode announces a user message before its parts: once this turn's prompt is
    # known, an unannounced message is the assistant's
    if sess is not None and sess.prompt and mid != sess.prompt:
        return "assistant"
    return ""


def _start_text(state: State, out: Emitter, pid: str, part: Part, synthetic: bool,
                flags: dict[str, bool] | None = None) -> tuple[State, Part]:
    item_type = "reasoning" if part.kind == "reasoning" else "assistant_message"
    start_item(out, _at(state, out, pid, part),
               ItemPayload(itemType=item_type, status="inProgress",  # type: ignore[arg-type]
                           role="assistant" if item_type == "assistant_message" else UNSET,
                           data=flags or UNSET), synthetic)
    part = _replace(part, started=True)
    return _set_part(state, pid, part), part


def _advance(state: State, out: Emitter, pid: str, part: Part, *, snapshot: str | None = None,
             delta: str = "", final: bool = False, forced: bool = False) -> State:
    """Apply a snapshot or a delta to an open assistant text/reasoning part and emit what
    is new; complete the part when `final` (its closing snapshot) or `forced`.

    The part's text so far is what was emitted (`sent` characters: Part.said or stream
    "text") then what was not (`unsent`: whitespace held back, or text buffered while
    the role was unknown: Part.held or stream "held"). A snapshot is compared with the
    emitted text through the stream's digest; only a snapshot that does not begin with
    it (stale, trimmed below it, or diverged: rare) reads it back from the spool."""
    item = out.id("itm", pid)
    sent = _len(out, item, "text", part.said)
    unsent, part = _unsent(out, pid, part)
    rebase: str | None = None  # the snapshot the emitted text is re-based on (diverged)
    if snapshot is not None:
        if _extends(out, item, "text", part.said, snapshot):
            tail = snapshot[sent:]
            # a shorter, stale snapshot (the text so far begins with it) adds nothing but
            # flushes what was held back; a closing one is the part's final text
            new = unsent if (not final and unsent.startswith(tail)
                             and not tail.startswith(unsent)) else tail
        else:
            emitted = _read(out, item, "text", part.said, take=False).text
            if emitted.startswith(snapshot):  # stale or trimmed below what was emitted
                new = "" if final else unsent
            else:
                # diverged: emitted text cannot be retracted; re-base on the snapshot and
                # emit its tail from the first differing character, so no new text is
                # lost (past the spool's cap only the head of the emitted text is known:
                # what followed it may be emitted again)
                new = snapshot[len(_common_prefix(emitted, snapshot)):]
                rebase = snapshot
    elif final or forced:
        new = unsent + delta
    else:
        # on the delta path, hold trailing whitespace back: OpenCode trims it when the
        # part closes; a snapshot's new text is emitted whole (seed 001)
        pending = unsent + delta
        new = pending.rstrip()
        part = _hold(out, pid, part, pending[len(new):])
    stream = "reasoning_text" if part.kind == "reasoning" else "assistant_text"
    at = _at(state, out, pid, part)
    if new:  # counted below, in the part's own short form or its stream (_add)
        at.emit(out, ContentDelta,
                ContentDeltaPayload(streamKind=stream, delta=new), forced)  # type: ignore[arg-type]
    if not (final or forced):
        if rebase is not None:
            out.drop(item, "text")
            said = _add(out, item, "text", "", rebase)
        else:
            said = _add(out, item, "text", part.said, new)
        return _set_part(state, pid, _replace(part, said=said))
    # the item's text is OpenCode's closing snapshot, or else all the part said
    if snapshot is not None:
        fields: dict[str, Any] = {"text": snapshot}
    else:
        emitted_all = _read(out, item, "text", part.said, take=True)
        fields = whole_fields(Whole(emitted_all.text + new, emitted_all.length + len(new),
                                    emitted_all.truncated), "text")
    item_type = "reasoning" if part.kind == "reasoning" else "assistant_message"
    complete_item(out, at, ItemPayload(
        itemType=item_type, status="completed",  # type: ignore[arg-type]
        role="assistant" if item_type == "assistant_message" else UNSET, **fields), forced)
    return _drop_part(state, pid)


# A part's emitted text and its unsent text are each kept in the state while short (up to
# _KEPT characters: Part.said, Part.held) and spooled once longer (streams "text" and
# "held" of its item; the state's copy is then ""): most parts never reach the spool,
# and the state stays small however long a part.

def _add(out: Emitter, item: str, stream: str, kept: str, text: str) -> str:
    """Add `text` to the stream whose short form is `kept`; the new short form."""
    if not text:
        return kept
    if len(kept) + len(text) <= _KEPT and out.streamed(item, stream) < 0:
        return kept + text
    out.append(item, stream, kept + text)
    return ""


def _len(out: Emitter, item: str, stream: str, kept: str) -> int:
    return max(out.streamed(item, stream), 0) + len(kept)


def _extends(out: Emitter, item: str, stream: str, kept: str, text: str) -> bool:
    """Does `text` begin with all the stream holds?"""
    if out.streamed(item, stream) < 0:
        return text.startswith(kept)
    return out.extends(item, stream, text)


def _read(out: Emitter, item: str, stream: str, kept: str, take: bool) -> Whole:
    """All the stream holds; `take` closes it."""
    got = out.take(item, stream) if take else out.whole(item, stream)
    return got if got is not None else Whole(kept, len(kept), False)


def _hold(out: Emitter, pid: str, part: Part, text: str) -> Part:
    """Add `text` to the part's unsent text."""
    held = _add(out, out.id("itm", pid), "held", part.held, text)
    return _replace(part, held=held) if held != part.held else part


def _unsent(out: Emitter, pid: str, part: Part) -> tuple[str, Part]:
    """The part's unsent text, taken out of the state and the spool."""
    text = _read(out, out.id("itm", pid), "held", part.held, take=True).text
    return text, _replace(part, held="") if part.held else part


def _rebuffer(out: Emitter, pid: str, part: Part, text: str) -> Part:
    """Make `text` (a snapshot of a part whose role is unknown) its buffered text; only
    what a growing snapshot adds is spooled."""
    item = out.id("itm", pid)
    if _extends(out, item, "held", part.held, text):
        return _hold(out, pid, part, text[_len(out, item, "held", part.held):])
    out.drop(item, "held")
    return _hold(out, pid, _replace(part, held=""), text)


def _common_prefix(a: str, b: str) -> str:
    return os.path.commonprefix([a, b])  # character-wise; pure, no file system access


def _user_text(state: State, out: Emitter, pid: str, part: Part, text: str,
               flags: dict[str, bool] | None = None) -> State:
    """The user's own prompt: one user_message item with its whole text, never streamed.
    A part OpenCode flags `synthetic` is text it added itself (a file's content, a mode
    reminder): the runtime's, not the user's."""
    state = _open_turn(state, out, part.sid)
    synthetic = part.msg not in state.roles
    author: Author = "runtime" if flags and flags.get("synthetic") else "user"
    at = _at(state, out, pid, part)
    start_item(out, at, ItemPayload(itemType="user_message", status="inProgress", role="user",
                                    data=flags or UNSET, author=author), synthetic)
    complete_item(out, at, ItemPayload(itemType="user_message", status="completed", role="user",
                                       text=text, data=flags or UNSET, author=author), synthetic)
    return _drop_part(state, pid)


def _release(state: State, out: Emitter, pid: str, part: Part, role: str) -> State:
    """A buffered part whose message's role is now known."""
    if role == "user":
        text, part = _unsent(out, pid, part)
        return _user_text(state, out, pid, _replace(part, role=role, kind="text"), text)
    state = _open_turn(state, out, part.sid)
    part = _replace(part, role=role, kind=part.kind or "text")
    state, part = _start_text(state, out, pid, part, synthetic=True)
    return _advance(state, out, pid, part, final=part.ended)


def _force_close(state: State, out: Emitter, pid: str, part: Part) -> State:
    """Complete a part its turn or message leaves open."""
    if part.kind == "tool":
        if not part.started:  # never ran (still pending): still a tool call the model made
            state, part = _start_tool(state, out, pid, part, {}, synthetic=True)
        return _close_tool(state, out, pid, part, {}, "failed", synthetic=True,
                           detail="the turn ended before the tool call completed")
    if part.role == "user":
        text, part = _unsent(out, pid, part)
        return _user_text(state, out, pid, part, text)
    # role still unknown at the end: OpenCode has re-sent the user message by now, so an
    # unclaimed part is the assistant's
    part = _replace(part, role="assistant", kind=part.kind or "text")
    if not part.started:
        state, part = _start_text(state, out, pid, part, synthetic=True)
    return _advance(state, out, pid, part, forced=True)


# ---- tool parts --------------------------------------------------------------------------


def _tool_input(tool: str, raw: Any, cwd: str) -> Any:
    """The tool's input; a command always has `command`, and `cwd` when known."""
    if not isinstance(raw, dict):
        return raw
    if tool != "Bash":
        return raw
    inp: dict[str, Any] = {"command": raw.get("command", "")}
    inp.update((k, v) for k, v in raw.items() if k not in ("command", "workdir"))
    where = raw.get("workdir") if isinstance(raw.get("workdir"), str) else cwd
    if where:
        inp["cwd"] = where
    return inp


def _tool_payload(state: State, part: Part, tstate: dict[str, Any], status: str, cap: int,
                  **fields: Any) -> ItemPayload:
    """`cap`: the per-item cap (a diff's). The normalised fields (adapters.core.tools) go
    with the input; a completed file change's diff is the one its metadata gives."""
    name = normalize_tool_name(part.tool)
    sess = state.sessions.get(part.sid)
    raw_input = tstate.get("input")
    if raw_input is not None:
        fields.setdefault("input", _tool_input(name, raw_input, sess.cwd if sess else ""))
    if not isinstance(fields.get("input", UNSET), UnsetType):
        diff = _metadata_diff(tstate, cap) if status == "completed" else None
        norm = tool_fields(name, fields["input"], cap, diff=diff is None)
        if diff is not None:
            norm["paths"] = list(dict.fromkeys([*norm.get("paths", ()), *diff.pop("paths")]))
            norm.update(diff)
        fields.update(norm)
    title = tstate.get("title")
    if isinstance(title, str) and title:
        fields.setdefault("title", title)
    return ItemPayload(itemType=item_type_for_tool(name),  # type: ignore[arg-type]
                       status=status, toolName=name, **fields)  # type: ignore[arg-type]


def _metadata_diff(tstate: dict[str, Any], cap: int) -> dict[str, Any] | None:
    """`paths` and the diff fields of a completed file change from its metadata: edit's
    `filediff` (the file before and after; its `diff` is trimmed for display), a
    write's content when it says the file did not exist, apply_patch's `files` (each
    with its own patch). None when the metadata tells none of these (a shape it does
    not expect included: these fields are optional, never a reason to fail the line)."""
    meta = _dict(tstate, "metadata")
    results = meta.get("results")  # multiedit: one edit's metadata per edit
    filediffs = [meta.get("filediff"), *(r.get("filediff") for r in (
        results if isinstance(results, list) else []) if isinstance(r, dict))]
    parts: list[tuple[str, str]] = []
    paths: list[str] = []
    for f in filediffs:
        if isinstance(f, dict) and _str(f, "file") and isinstance(f.get("after"), str):
            paths.append(f["file"])
            parts.append((text_diff(f["file"], _str(f, "before"), f["after"]), "file"))
    content = _dict(tstate, "input").get("content")
    if meta.get("exists") is False and _str(meta, "filepath") and isinstance(content, str):
        paths.append(meta["filepath"])
        parts.append((text_diff(meta["filepath"], None, content), "file"))
    files = meta.get("files")
    for f in files if isinstance(files, list) else []:
        patch = f.get("patch", f.get("diff")) if isinstance(f, dict) else None
        if isinstance(patch, str) and _str(f, "filePath"):
            move = _str(f, "movePath") or None
            paths.extend(p for p in (f["filePath"], move) if p)
            parts.append((hunks_diff(f["filePath"], patch, old_missing=f.get("type") == "add",
                                     new_missing=f.get("type") == "delete", new_path=move),
                          "file"))
    if not paths:
        return None
    return {"paths": paths, **diff_fields(parts, cap)}


def _on_tool_part(state: State, out: Emitter, sid: str, mid: str, pid: str,
                  part: dict[str, Any]) -> State:
    tstate = part.get("state")
    if not isinstance(tstate, dict):
        raise MalformedRecord("opencode tool part without a 'state' object")
    status = tstate.get("status")
    current = state.parts.get(pid) or Part(sid=sid, msg=mid, kind="tool", role="assistant",
                                           busy=True)
    current = _replace(current, kind="tool", call=_str(part, "callID") or current.call,
                       tool=_str(part, "tool") or current.tool)
    state = _open_turn(state, out, sid)
    if status == "pending":  # the input is still streaming: nothing to show yet
        return _set_part(state, pid, current)
    if status == "running":
        if not current.started:
            state, current = _start_tool(state, out, pid, current, tstate, synthetic=False)
        else:
            # progress: the title may appear; the input is the one already started with
            out.emit(ItemUpdated, _tool_payload(state, current, tstate, "inProgress", out.cap,
                                                input=UNSET),
                     thread=_thread(out, sid), turn=_turn(state, out, sid),
                     item=out.id("itm", pid), refs=_prefs(pid, current))
        return _stream_output(state, out, pid, current, tstate)
    if status in ("completed", "error"):
        if not current.started:
            state, current = _start_tool(state, out, pid, current, tstate, synthetic=True)
        if status == "completed":
            return _close_tool(state, out, pid, current, tstate, "completed")
        return _close_tool(state, out, pid, current, tstate,
                           "declined" if current.declined or _refused(tstate) else "failed")
    out.unknown(f"tool state {status!r}", thread=_thread(out, sid), turn=_turn(state, out, sid))
    return _set_part(state, pid, current)


def _refused(tstate: dict[str, Any]) -> bool:
    # OpenCode's texts for a rejected permission / a dismissed question
    error = _str(tstate, "error")
    return error.startswith(("The user rejected permission", "The user dismissed"))


def _start_tool(state: State, out: Emitter, pid: str, part: Part, tstate: dict[str, Any],
                synthetic: bool) -> tuple[State, Part]:
    start_item(out, _at(state, out, pid, part),
               _tool_payload(state, part, tstate, "inProgress", out.cap), synthetic)
    part = _replace(part, started=True)
    return _set_part(state, pid, part), part


def _stream_output(state: State, out: Emitter, pid: str, part: Part,
                   tstate: dict[str, Any]) -> State:
    """Stream the new suffix of a running command's live output (`metadata.output`: the
    output so far, a snapshot, capped by newer OpenCode at 30,000 characters and "..."; a
    snapshot that does not begin with what was streamed adds nothing: never twice)."""
    output = _dict(tstate, "metadata").get("output")
    item = out.id("itm", pid)
    new = out.rest(item, "command_output", output) if isinstance(output, str) else ""
    if new:  # not spooled: the completed tool part carries its whole output
        delta(out, _at(state, out, pid, part), "command_output", new, spool=False)
    return _set_part(state, pid, part)


def _close_tool(state: State, out: Emitter, pid: str, part: Part, tstate: dict[str, Any],
                status: str, synthetic: bool = False, detail: str | UnsetType = UNSET) -> State:
    fields: dict[str, Any] = {"isError": status != "completed"}
    metadata = _dict(tstate, "metadata")
    if status == "completed":
        output = tstate.get("output")
        fields["output"] = output if isinstance(output, str) else ""
        if type(metadata.get("exit")) is int:  # not a bool
            fields["exitCode"] = metadata["exit"]
    elif "error" in tstate:
        fields["output"] = fields["detail"] = str(tstate["error"])
    if detail is not UNSET:
        fields["detail"] = detail
    # runtime detail (task child session id, file path, diagnostics...), output not repeated
    data = {k: v for k, v in metadata.items() if k != "output"}
    if isinstance(tstate.get("attachments"), list):
        data["attachments"] = tstate["attachments"]
    if data:
        fields["data"] = data
    complete_item(out, _at(state, out, pid, part),
                  _tool_payload(state, part, tstate, status, out.cap, **fields), synthetic)
    return _drop_part(state, pid)


# ---- other parts -------------------------------------------------------------------------


def opencode_tokens(native: dict[str, Any]) -> TokenUsage:
    """TokenUsage of an OpenCode `tokens` object ({input, output, reasoning, cache: {read,
    write}}: a step-finish part's or an assistant message's). OpenCode's rule: `input`
    leaves the cache reads and writes out and `output` leaves the reasoning out (its own
    cost prices each part apart), so both are added back."""
    cache = native.get("cache")
    read = native_count(cache, "read")
    write = native_count(cache, "write")
    reasoning = native_count(native, "reasoning")
    return tokens(input=native_count(native, "input") + read + write, cachedInput=read,
                  cacheWrite=write, output=native_count(native, "output") + reasoning,
                  reasoningOutput=reasoning)


def _on_step_finish(state: State, out: Emitter, sid: str, mid: str, pid: str,
                    part: dict[str, Any]) -> State:
    state = _open_turn(state, out, sid)
    tokens = _dict(part, "tokens")
    cache = _dict(tokens, "cache")
    cost = _num(part.get("cost"))
    sess = state.sessions[sid]
    u = sess.usage or Usage()
    u = Usage(input=u.input + _int(tokens.get("input")),
              output=u.output + _int(tokens.get("output")),
              reasoning=u.reasoning + _int(tokens.get("reasoning")),
              cacheRead=u.cacheRead + _int(cache.get("read")),
              cacheWrite=u.cacheWrite + _int(cache.get("write")),
              cost=u.cost + cost)
    reason = _str(part, "reason")
    state = _set_sess(state, sid, _replace(sess, usage=u, finish=reason or sess.finish))
    out.emit(ThreadTokenUsageUpdated,
             ThreadTokenUsageUpdatedPayload(usage={
                 "step": {"tokens": tokens, "cost": cost, "reason": reason or None},
                 "turn": {"input": u.input, "output": u.output, "reasoning": u.reasoning,
                          "cacheRead": u.cacheRead, "cacheWrite": u.cacheWrite,
                          "cost": u.cost}}),
             thread=_thread(out, sid), turn=_turn(state, out, sid), refs=_srefs(sid))
    return _replace(state, closed=_close_ids(state, pid))


def _on_retry_part(state: State, out: Emitter, sid: str, mid: str, pid: str,
                   part: dict[str, Any]) -> State:
    error = _dict(part, "error")
    message = _str(_dict(error, "data"), "message") or _str(error, "message")
    state = _retry(state, out, sid, part.get("attempt"), message, error or UNSET)
    return _replace(state, closed=_close_ids(state, pid))


def _on_compaction_part(state: State, out: Emitter, sid: str, mid: str, pid: str,
                        part: dict[str, Any]) -> State:
    state = _open_turn(state, out, sid)
    data = {k: part[k] for k in ("auto", "overflow") if k in part}
    p = Part(sid=sid, msg=mid, kind="compaction")
    for cls, status in ((ItemStarted, "inProgress"), (ItemCompleted, "completed")):
        out.emit(cls, ItemPayload(itemType="context_compaction", status=status,  # type: ignore[arg-type]
                                  data=data or UNSET),
                 thread=_thread(out, sid), turn=_turn(state, out, sid), item=out.id("itm", pid),
                 refs=_prefs(pid, p))
    return _replace(state, closed=_close_ids(state, pid))


_PART_HANDLERS = {
    "text": _on_text_part,
    "reasoning": _on_text_part,
    "tool": _on_tool_part,
    "step-finish": _on_step_finish,
    "retry": _on_retry_part,
    "compaction": _on_compaction_part,
}

#: Part types read on purpose and mapped to nothing.
_IGNORED_PARTS: dict[str, str] = {
    "step-start": "marks the start of a model call (a snapshot hash only); its usage comes "
                  "with step-finish",
    "snapshot": "a git snapshot hash of the worktree, no conversation content",
    "patch": "the hash and file list of a step's changes; session.diff carries the diff",
    "file": "an attachment or file reference; its content reaches the model as synthetic "
            "text parts, which are mapped",
    "agent": "an @agent mention inside the prompt text, which is already the prompt's text",
    "subtask": "a queued subagent request; the subagent runs as a task tool part and a child "
               "session, both mapped",
}


# ---- permissions and questions ----------------------------------------------------------


_PERMISSION_TYPES = {
    "bash": "command_execution_approval",
    "edit": "file_change_approval",
    "write": "file_change_approval",
    "multiedit": "file_change_approval",
    "patch": "apply_patch_approval",
    "apply_patch": "apply_patch_approval",
}


def _tool_item_for(state: State, out: Emitter, call: str) -> str | UnsetType:
    for pid, part in state.parts.items():
        if call and part.call == call:
            return out.id("itm", pid)
    return UNSET


def _open_request(state: State, out: Emitter, rid: str, req: Request,
                  payload: RequestOpenedPayload | UserInputRequestedPayload) -> State:
    if rid in state.requests or rid in state.closed:
        return state  # the same request announced again (v1 and v2 names)
    state = _open_turn(state, out, req.sid)
    cls = RequestOpened if req.kind == "permission" else UserInputRequested
    out.emit(cls, payload, thread=_thread(out, req.sid), turn=_turn(state, out, req.sid),
             request=out.id("req", rid), parent=_tool_item_for(state, out, req.call),
             refs=ProviderRefs(providerSessionId=req.sid, providerRequestId=rid,
                               providerItemId=req.call or UNSET))
    requests = dict(state.requests)
    requests[rid] = req
    return _replace(state, requests=requests)


def _on_permission_asked(state: State, props: dict[str, Any], out: Emitter) -> State:
    """permission.asked (PermissionRequest), permission.updated (1.1.x Permission) and
    permission.v2.asked share one mapping."""
    rid = props.get("id")
    if not isinstance(rid, str) or not rid:
        raise MalformedRecord(f"opencode {out.native_type}: no string id")
    sid = _require_sid(props, str(out.native_type))
    state = _ensure_thread(state, out, sid)
    permission = _str(props, "permission") or _str(props, "type") or _str(props, "action")
    tool = _dict(props, "tool") or _dict(props, "source")
    call = _str(tool, "callID") or _str(props, "callID")
    patterns = props.get("patterns", props.get("resources", props.get("pattern")))
    if isinstance(patterns, str):
        patterns = [patterns]
    patterns = native_list(patterns, "permission patterns")
    title = _str(props, "title") or ", ".join(p for p in patterns if isinstance(p, str))
    args: dict[str, Any] = {k: props[k] for k in ("patterns", "resources", "pattern", "always", "save",
                                  "metadata") if k in props}
    args["permission"] = permission
    rtype = _PERMISSION_TYPES.get(permission, "unknown")
    payload = RequestOpenedPayload(requestType=rtype,  # type: ignore[arg-type]
                                   detail=title or UNSET,
                                   toolName=normalize_tool_name(permission) if permission else UNSET,
                                   options=["once", "always", "reject"], args=args)
    return _open_request(state, out, rid,
                         Request(sid=sid, kind="permission", requestType=rtype, call=call),
                         payload)


def _on_permission_replied(state: State, props: dict[str, Any], out: Emitter) -> State:
    rid = props.get("requestID", props.get("permissionID"))
    reply = props.get("reply", props.get("response"))
    if not isinstance(rid, str) or not isinstance(reply, str):
        raise MalformedRecord(f"opencode {out.native_type}: needs requestID/permissionID and "
                              "reply/response strings")
    sid = _require_sid(props, str(out.native_type))
    return _answer(state, out, rid, sid, "permission", reply, {"reply": reply})


def _on_question_asked(state: State, props: dict[str, Any], out: Emitter) -> State:
    rid = props.get("id")
    if not isinstance(rid, str) or not rid:
        raise MalformedRecord(f"opencode {out.native_type}: no string id")
    sid = _require_sid(props, str(out.native_type))
    state = _ensure_thread(state, out, sid)
    call = _str(_dict(props, "tool"), "callID")
    return _open_request(state, out, rid,
                         Request(sid=sid, kind="question", requestType="tool_user_input",
                                 call=call),
                         UserInputRequestedPayload(questions=props.get("questions")))


def _on_question_replied(state: State, props: dict[str, Any], out: Emitter) -> State:
    rid = props.get("requestID")
    if not isinstance(rid, str):
        raise MalformedRecord(f"opencode {out.native_type}: no string requestID")
    sid = _require_sid(props, str(out.native_type))
    return _answer(state, out, rid, sid, "question", "answered", props.get("answers"))


def _on_question_rejected(state: State, props: dict[str, Any], out: Emitter) -> State:
    rid = props.get("requestID")
    if not isinstance(rid, str):
        raise MalformedRecord(f"opencode {out.native_type}: no string requestID")
    sid = _require_sid(props, str(out.native_type))
    # answers null: the user dismissed the question
    return _answer(state, out, rid, sid, "question", "reject", None)


def _answer(state: State, out: Emitter, rid: str, sid: str, kind: str, decision: str,
            resolution: Any) -> State:
    if rid in state.closed:
        return state  # already resolved (v1 and v2 names for the same reply)
    req = state.requests.get(rid)
    if req is None:  # never saw it opened: still report the answer, never lose it
        state = _ensure_thread(state, out, sid)
        req = Request(sid=sid, kind=kind,
                      requestType="unknown" if kind == "permission" else "tool_user_input")
    if decision == "reject" and req.call:
        # the gated tool part will end in error: that is a refusal, not a failure
        for pid, part in state.parts.items():
            if part.call == req.call:
                state = _set_part(state, pid, _replace(part, declined=True))
                break
    return _resolve(state, out, rid, req, decision, resolution)


#: OpenCode's permission replies and question endings in the shared words ("cancelled":
#: still open when its turn ended): `always` allows the call's patterns for the rest of
#: the session.
_OUTCOMES: dict[str, Decision] = {"once": "accept", "always": "accept_for_session",
                                  "reject": "decline", "cancelled": "cancel"}
_ANSWERED: dict[str, InputOutcome] = {"answered": "answered", "reject": "declined",
                                      "cancelled": "cancelled"}


def _resolve(state: State, out: Emitter, rid: str, req: Request, decision: str,
             resolution: Any, synthetic: bool = False) -> State:
    refs = ProviderRefs(providerSessionId=req.sid, providerRequestId=rid,
                        providerItemId=req.call or UNSET)
    thread, turn, request = _thread(out, req.sid), _turn(state, out, req.sid), out.id("req", rid)
    if req.kind == "permission":
        out.emit(RequestResolved,
                 RequestResolvedPayload(requestType=req.requestType,  # type: ignore[arg-type]
                                        decision=decision,
                                        resolution=resolution if resolution is not None
                                        else UNSET,
                                        outcome=_OUTCOMES.get(decision, UNSET)),
                 synthetic=synthetic, thread=thread, turn=turn, request=request, refs=refs)
    else:
        out.emit(UserInputResolved,
                 UserInputResolvedPayload(answers=resolution,
                                          outcome=_ANSWERED.get(decision, UNSET)),
                 synthetic=synthetic, thread=thread, turn=turn, request=request, refs=refs)
    requests = dict(state.requests)
    requests.pop(rid, None)
    return _replace(state, requests=requests, closed=_close_ids(state, rid))


# ---- runtime-level events --------------------------------------------------------------


def _on_mcp(state: State, props: dict[str, Any], out: Emitter) -> State:
    out.emit(McpStatusUpdated,
             McpStatusUpdatedPayload(status={"event": out.native_type, **props}))
    return state


def _on_failed(state: State, props: dict[str, Any], out: Emitter) -> State:
    message = _str(props, "message") or f"{out.native_type}"
    out.emit(RuntimeErrorEvent,
             RuntimeErrorPayload(message=message, errorClass="unknown", willRetry=False,
                                 detail={"nativeType": out.native_type}))
    return state


_HANDLERS = {
    "server.connected": _on_server_connected,
    "server.instance.disposed": _on_disposed,
    "global.disposed": _on_disposed,
    "session.created": _on_session_created,
    "session.updated": _on_session_updated,
    "session.deleted": _on_session_deleted,
    "session.status": _on_session_status,
    "session.idle": _on_session_idle,
    "session.error": _on_session_error,
    "session.compacted": _on_session_compacted,
    "session.diff": _on_session_diff,
    "todo.updated": _on_todo_updated,
    "message.updated": _on_message_updated,
    "message.part.updated": _on_message_part_updated,
    "message.part.delta": _on_message_part_delta,
    "permission.updated": _on_permission_asked,
    "permission.asked": _on_permission_asked,
    "permission.v2.asked": _on_permission_asked,
    "permission.replied": _on_permission_replied,
    "permission.v2.replied": _on_permission_replied,
    "question.asked": _on_question_asked,
    "question.v2.asked": _on_question_asked,
    "question.replied": _on_question_replied,
    "question.v2.replied": _on_question_replied,
    "question.rejected": _on_question_rejected,
    "question.v2.rejected": _on_question_rejected,
    "mcp.tools.changed": _on_mcp,
    "mcp.browser.open.failed": _on_mcp,
    "worktree.failed": _on_failed,
    "workspace.failed": _on_failed,
}

_SESSION_NEXT = (
    "agent.switched", "model.switched", "moved", "prompted", "prompt.admitted",
    "context.updated", "synthetic", "shell.started", "shell.ended", "step.started",
    "step.ended", "step.failed", "text.started", "text.delta", "text.ended",
    "reasoning.started", "reasoning.delta", "reasoning.ended", "tool.input.started",
    "tool.input.delta", "tool.input.ended", "tool.called", "tool.progress", "tool.success",
    "tool.failed", "retried", "compaction.started", "compaction.delta", "compaction.ended",
    "revert.staged", "revert.cleared", "revert.committed",
)

#: Native types read on purpose and mapped to nothing, with the reason.
IGNORED_REASONS: dict[str, str] = {
    "server.heartbeat": "keep-alive of the SSE connection",
    "installation.updated": "the OpenCode binary was upgraded; not part of a conversation",
    "installation.update-available": "an OpenCode upgrade notice; not part of a conversation",
    "project.updated": "project registry metadata (name, icon, worktree), no session",
    "project.directories.updated": "project registry metadata, no session",
    "vcs.branch.updated": "the project's git branch changed; no session or turn",
    "lsp.client.diagnostics": "language-server diagnostics for a file; the edit/write tool "
                              "output that matters already carries them",
    "lsp.updated": "language-server registry change",
    "file.edited": "a file was written; the tool item that wrote it carries the change",
    "file.watcher.updated": "file-system watcher noise (add/change/unlink), no session",
    "message.removed": "a message deleted by revert/undo; canonical events are history and "
                       "are not retracted",
    "message.part.removed": "a part deleted by revert/undo; canonical events are history and "
                            "are not retracted",
    "command.executed": "a slash command ran; its expanded prompt arrives as a user message "
                        "and its work as parts",
    "pty.created": "an interactive terminal opened by a client, not an agent tool call",
    "pty.updated": "an interactive terminal opened by a client, not an agent tool call",
    "pty.exited": "an interactive terminal opened by a client, not an agent tool call",
    "pty.deleted": "an interactive terminal opened by a client, not an agent tool call",
    "tui.prompt.append": "remote control of the terminal UI",
    "tui.command.execute": "remote control of the terminal UI",
    "tui.toast.show": "remote control of the terminal UI",
    "tui.session.select": "remote control of the terminal UI",
    "worktree.ready": "a git worktree was created for a workspace; no session",
    "workspace.ready": "workspace lifecycle, no session",
    "workspace.status": "workspace connection status, no session",
    "models-dev.refreshed": "the models.dev catalog was refreshed",
    "catalog.updated": "provider/model catalog churn (sent during the first prompt)",
    "integration.updated": "integration registry churn (sent during the first prompt)",
    "integration.connection.updated": "integration registry churn",
    "reference.updated": "reference registry churn (sent during the first prompt)",
    "plugin.added": "plugin registry churn (about 45 at the first prompt)",
    "sync": "a /global/event durable copy (syncEvent) of a bus event delivered on its own",
    **{f"session.next.{name}": "the v2 durable session log mirrors the message/part events "
                               "this adapter reads; translating both would repeat every text "
                               "and tool" for name in _SESSION_NEXT},
}

IGNORED: frozenset[str] = frozenset(IGNORED_REASONS)
