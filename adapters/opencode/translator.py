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
tests/adapters/test_drift.py, which also checks this table; docs/runtimes "Verified runtime
releases")

| runtime (recordings) | releases verified | written against |
| --- | --- | --- |
| `opencode-serve` | 1.1.65 (1.1 bus), 1.18.33 (v2) | `@opencode-ai/sdk` 1.19.3 v1 and v2 `Event` |

A session's record states the release that created it (`info.version` of
session.created / session.updated): thread.metadata.updated `runtimeVersion`, beside the
rest of the record in `metadata`. There is no session.configured: the bus announces no
configuration.

Mapping
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
  path) emit all their new text at once, trailing whitespace included, as the
  reference chat translation does ("Fixture " then "complete."). A part cut off (turn ended,
  message completed without time.end) flushes all it has.
* The user's prompt is never assistant text: user text parts become a `user_message`
  item (started and completed at once, no deltas).
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
  `item.started` stub and streams at once. With no prompt seen yet (a stream
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

Modules (this one dispatches on the native type; each handler lives with what it is about)
* common: canonical ids, field readers, the state's setters, a thread and turn opened;
* session: session.created/updated/deleted/compacted/diff, todo.updated, server lifecycle;
* turns: session status (busy, idle, retry) and session.error: how a turn ends;
* messages: message.updated and message.part.updated, dispatched by part type;
* text, streams: text and reasoning parts, and their text kept short or spooled;
* tools: tool parts; requests: permissions and questions; usage: tokens and cost.
"""

from __future__ import annotations

from typing import Any, Final

from adapters.core.contract import MalformedRecord, Message
from adapters.core.emitter import Emitter
from adapters.core.emitter import replace as _replace
from adapters.opencode.agents import _enter
from adapters.opencode.common import _ensure_thread, _str, _thread, _turn
from adapters.opencode.messages import _on_message_part_updated, _on_message_updated
from adapters.opencode.requests import (
    _on_permission_asked,
    _on_permission_replied,
    _on_question_asked,
    _on_question_rejected,
    _on_question_replied,
)
from adapters.opencode.run import RUN_HANDLERS
from adapters.opencode.session import (
    _on_disposed,
    _on_server_connected,
    _on_session_compacted,
    _on_session_created,
    _on_session_deleted,
    _on_session_diff,
    _on_session_updated,
    _on_todo_updated,
)
from adapters.opencode.state import State
from adapters.opencode.text import _on_message_part_delta
from adapters.opencode.turns import _on_session_error, _on_session_idle, _on_session_status

# re-exported: tests/adapters/test_token_usage.py reads every runtime's usage rule here
from adapters.opencode.usage import opencode_tokens as opencode_tokens
from topics.canonical import (
    McpStatusUpdated,
    McpStatusUpdatedPayload,
    RuntimeErrorEvent,
    RuntimeErrorPayload,
    SessionStarted,
    SessionStartedPayload,
)

provider = "opencode"


raw_source = "opencode.event"


def message_id(obj: dict[str, Any], origin: str) -> str | None:
    """A native message's id (adapters.core.ids, "Native message ids"): the bus
    event's `id` (`evt_...`, OpenCode 1.2 and later; the 1.1 bus has none)."""
    eid = obj.get("id")
    return eid if isinstance(eid, str) else None


state_type = State


def initial() -> State:
    return State()


# ---- entry point ---------------------------------------------------------------------


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
    if state.agents:  # else the root's, as the record's driver starts each message
        _enter(state, kind, props, out)  # a child session's message is its subagent's
    handler = _HANDLERS.get(kind)
    if handler is not None:
        return handler(state, props, out)
    run = RUN_HANDLERS.get(kind)
    if run is not None:  # `opencode run --format json`: the line is the event (no properties)
        return run(state, obj, out)
    if kind in IGNORED or kind.startswith("session.next."):
        return state
    sid = props.get("sessionID")
    if isinstance(sid, str) and sid:
        state = _ensure_thread(state, out, sid)
        out.unknown(kind, thread=_thread(out, sid), turn=_turn(state, out, sid))
    else:
        out.unknown(kind)
    return state


# ---- runtime-level events ------------------------------------------------------------


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


# ---- the handler table ---------------------------------------------------------------


_HANDLERS: Final = {
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


IGNORED: Final[frozenset[str]] = frozenset(IGNORED_REASONS)
