"""claude-transcript: Claude Code's session files -> canonical events.

Reads the rows of `~/.claude/projects/<munged cwd>/<session>.jsonl` one at a time, as
Claude Code appends them (one native message = one line of the file): the transcript
of an interactive session, of `claude -p` and of the SDK, as written by Claude Code
2.1.332 (rows with attachments, `api-request*` bookkeeping, `cost-state`) and by 2.1.44,
the core of claude-code-acp 0.16.2 (the older lean file: `queue-operation`, `user`,
`assistant` rows only). The session id is the file's stem, the rows' `sessionId`.

The rows are stream-json's messages written down: an `assistant` row is a stream-json
`assistant` line (one content block each, sharing `message.id`), a `user` row a `user`
line. So this adapter is adapters.claude fed each row as the line it stands for: the
same state inside its own, the same blocks, tools, items and ids. A transcript gives
whole messages, never deltas: each text block is one item with one synthetic
content.delta carrying its whole text (the live adapter's unstreamed path), so a
consumer sees the lifecycle a print-mode stream gives.

Releases (the pairs of tests/fixtures/ondisk: the files and the live stream of one run)

| runtime (recordings) | releases verified | written against |
| --- | --- | --- |
| `claude-code-stream-json`, `-partial`, `claude-code-sdk-stdio` | 2.1.332 | their files |
| `acp-claude-code` (claude-code-acp 0.16.2) | 2.1.44 | its files |

What the rows say that the wire does not, mapped: the prompt (print mode never echoes
it: a user_message item, author "user"), the final `stop_reason` and usage of each
message (turn.completed `stopReason`, and `usage` summed over the turn's messages),
`cost-state` (the session's cost, thread.token-usage.updated, and on the turn it ends
`totalCostUsd`/`modelUsage`, as the live `result` carries them), a permission decision
(`permissionDecision` on the tool result row: a person's answer is the request it
implies, request.opened and request.resolved, synthetic and said to be inferred; a rule's
decision is no request; a refusal declines the tool item), the API errors retried
(`system/api_error`: runtime.error, willRetry), the message Claude Code writes in the
model's place after an API error (`isApiErrorMessage`: the turn's runtime.error with its
status and error type, never assistant text). What they never say: see "Not in the
file" below; nothing of it is invented.

Turns. A file has no `result`: nothing says where a turn ends but these, in order of
certainty:
* a prompt row (`user` with text, not a tool result and not written by Claude Code
  itself) starts a turn, and ends the one before it (completed: it ended before the
  next prompt could start);
* "[Request interrupted by user…]" (a `user` row Claude Code writes) ends it as
  interrupted;
* the synthetic message Claude Code writes after an API error (`isApiErrorMessage`)
  ends it as failed, with the message's text;
* `system/turn_duration` (interactive sessions) ends it, with `durationMs`;
* a message whose `stop_reason` ends a turn (end_turn, stop_sequence, max_tokens,
  refusal: 2.1.332 writes each row once its message is whole) makes the turn end at
  the next row that cannot belong to it: a `user` row, a `queue-operation`, the
  `cost-state` written at exit. Rows Claude Code writes after the last message of a
  turn and before its end (attachments, stop-hook summaries, `last-prompt`) do not
  end it; an `assistant` row of another message means the turn went on (a stop hook
  that blocked): it stays open;
* `cost-state`, written as Claude Code exits, ends a turn whose last message did not
  end it as failed (cut short: max turns, a budget).
2.1.44 writes every row while it streams (`stop_reason` null): its turns end at the
next prompt, an interrupt or an error, and the last turn of a file stays open until
one comes (the worker closes it after idle_timeout).

Not in the file (tests/adapters/test_transcript_claude.py, LOSSES, asserts exactly these
against the live stream of the same run):
* 2.1.332: the runtime.error the live `result` adds to a turn that did not complete
  (and a permission request never answered: no decision is written);
* 2.1.44: the permission requests, and the end of the last turn (no stop_reason, and
  nothing after its answer).
Nor, where the comparison does not look: stream events (deltas), `system/init`, the
result's text and duration, `system/thinking_tokens`; 2.1.44 keeps no partial message
of an interrupted turn.

Rewritten files. A file rewritten (compacted, its history edited, truncated and
written again) is sent again from its start; its rows already translated are dropped,
however far back, by a high-water mark of the rows' times (State.mark,
adapters.core.resent): a row stamped more than SKEW_MS before the latest row translated
is old, one within SKEW_MS of it is old if its `uuid` (its content, for a row without
one) is among the 32 kept there, a later one is new; a row without a time
has the time of the row before it. The state keeps at most 66 integers for it, whatever
the file's length. It relies on Claude Code writing its rows in time order, to SKEW_MS
(2.1.332 writes a prompt's attachments, stamped up to 16 ms before the prompt's row,
after it; every other row is in order), and on a rewritten file keeping each row's
uuid and time. A row changed under its uuid emits nothing: what was published stays.

Rows ignored on purpose are IGNORED_REASONS; sidechain rows (`isSidechain`, a
subagent's conversation in older releases) are skipped: the Task tool's result carries
what the subagent answered, and no row names the tool call they belong to.
"""

from __future__ import annotations

import json
import re
from typing import Any, Final

from msgspec import UnsetType

from adapters.claude.messages import _ERROR_CLASS
from adapters.claude.messages import _on_assistant as live_assistant
from adapters.claude.messages import _on_user as live_user
from adapters.claude.session import (
    _adopt_session,
    _emit,
    _start_session,
    _thread,
    _turn,
    open_turn,
    restated,
)
from adapters.claude.state import State as LiveState
from adapters.claude.system import _on_compact_boundary
from adapters.claude.tools import _set_tool
from adapters.claude.turns import end_turn
from adapters.claude.usage import claude_tokens, count_turn
from adapters.claude_transcript.state import State
from adapters.core.contract import MalformedRecord, Message
from adapters.core.emitter import UNSET, Emitter
from adapters.core.emitter import replace as _replace
from adapters.core.ids import iso_to_ms
from adapters.core.resent import resent
from topics.canonical import (
    Decision,
    RequestOpened,
    RequestOpenedPayload,
    RequestResolved,
    RequestResolvedPayload,
    RuntimeErrorEvent,
    RuntimeErrorPayload,
    SessionConfigured,
    SessionConfiguredPayload,
    ThreadMetadataUpdated,
    ThreadMetadataUpdatedPayload,
    ThreadTokenUsageUpdated,
    ThreadTokenUsageUpdatedPayload,
    TurnCompletedPayload,
    TurnState,
)

provider = "claude-transcript"
raw_source = "claude.transcript"


#: How much earlier than a row it wrote already Claude Code may stamp a row it writes
#: later, in ms ("Rewritten files").
SKEW_MS: Final = 2_000


def message_id(obj: dict[str, Any], origin: str) -> str | None:
    """A row's `uuid` (conversation rows and attachments have one; bookkeeping rows,
    which repeat nothing, have none)."""
    uuid = obj.get("uuid")
    return uuid if isinstance(uuid, str) else None


state_type = State


def initial() -> State:
    return State()


def translate(state: State, msg: Message, out: Emitter) -> State:
    """Apply one row. Raises MalformedRecord for a row without a string `type` or a
    known row of the wrong shape."""
    obj = msg.obj
    kind = obj.get("type")
    if not isinstance(kind, str):
        raise MalformedRecord("claude transcript row without a string 'type'")
    out.native_type = kind
    when = iso_to_ms(obj.get("timestamp"))
    uuid = obj.get("uuid")
    old, mark = resent(state.mark, when if when is not None else
                       state.mark.last if state.mark.last >= 0 else None,
                       uuid if isinstance(uuid, str) else None, obj, SKEW_MS)
    if mark is not state.mark:
        state = _replace(state, mark=mark)
    if old:
        return state  # translated already: the file was rewritten ("Rewritten files")
    if obj.get("isSidechain") is True:
        return state  # a subagent's row (module docstring)
    if state.lastMs:
        out.set_clock(state.lastMs)  # a turn this row ends, ended at the last row's time
    if state.ending is not None and kind in _ENDS_PENDING:
        # the row after a turn's last message: the turn ended at that message's time
        cost = _cost_fields(obj) if kind == "cost-state" else {}
        state = _end(state, out, "completed", **cost)
    elif kind == "cost-state" and state.live.turnOpen:
        # written as Claude Code exits: a turn still open was cut short (max turns, a
        # budget), and nothing more of it will come
        state = _end(state, out, "failed", errorMessage=_EXITED, **_cost_fields(obj))
    if when is not None:
        out.set_clock(when)
        state = _replace(state, lastMs=when)
    state = _session(state, msg, out)
    handler = _HANDLERS.get(kind)
    if handler is None:
        if kind not in IGNORED:
            live = state.live
            out.unknown(kind, thread=_thread(live, out), turn=_turn(live, out))
        return state
    return handler(state, msg, out)


# ---- session and turns ----------------------------------------------------------



def _session(state: State, msg: Message, out: Emitter) -> State:
    """Start the session at the first row (its `sessionId` the thread), follow a new
    session id, and state the runtime's release once a row gives it."""
    obj = msg.obj
    sid = obj.get("sessionId")
    wire = restated(msg, {"session_id": sid} if isinstance(sid, str) else {}, "agent")
    live = state.live
    if not live.started:
        live = _start_session(live, wire, out)
    else:
        live = _adopt_session(live, wire, out)
    cwd = obj.get("cwd")
    if isinstance(cwd, str) and cwd and cwd != live.cwd:
        live = _replace(live, cwd=cwd)  # a command's working directory (tool input)
    if live is not state.live:
        state = _replace(state, live=live)
    version = obj.get("version")
    if not state.configured and isinstance(version, str) and version:
        config = {k: obj[k] for k in _CONFIG if k in obj}
        _emit(live, out, SessionConfigured,
                     SessionConfiguredPayload(config=config, runtimeVersion=version))
        state = _replace(state, configured=True)
    return state


_CONFIG = ("cwd", "gitBranch", "entrypoint", "userType", "version", "permissionMode")


def _end(state: State, out: Emitter, turn_state: TurnState, **fields: Any) -> State:
    """End the open turn (what is still open in it closes as the live adapter closes it),
    with the usage and stop reason its messages gave."""
    live = state.live
    if live.turnOpen:
        if state.usage:
            fields["usage"] = dict(state.usage)
            turn = claude_tokens(state.usage)  # the live adapter's rule
            fields["tokens"] = turn
            if turn is not None:  # the thread's total so far, as the live `result` says it
                live = count_turn(live, out, fields["usage"], turn)
        if state.stop is not None:
            fields["stopReason"] = state.stop
        live = end_turn(live, out, TurnCompletedPayload(state=turn_state, **fields))
    return _replace(state, live=live, ending=None, stop=None, counted=None, usage={})


_EXITED = "Claude Code exited before the turn ended (its file says no more of it)"


def _cost_fields(obj: dict[str, Any]) -> dict[str, Any]:
    """The live `result`'s cost fields, from a `cost-state` row (the session so far)."""
    fields: dict[str, Any] = {}
    cost = obj.get("totalCostUSD")
    if isinstance(cost, int | float) and not isinstance(cost, bool):
        fields["totalCostUsd"] = float(cost)
    if isinstance(obj.get("modelUsage"), dict):
        fields["modelUsage"] = obj["modelUsage"]
    return fields


# ---- user rows -------------------------------------------------------------------

_INTERRUPTED = "[Request interrupted by user"  # Claude Code's own row, with or without
# " for tool use]"


def _on_user(state: State, msg: Message, out: Emitter) -> State:
    obj = msg.obj
    message = obj.get("message")
    if not isinstance(message, dict):
        raise MalformedRecord("user: 'message' must be an object")
    content = message.get("content")
    if isinstance(content, str):
        content = [{"type": "text", "text": content}]
    if not isinstance(content, list):
        raise MalformedRecord("user: message.content must be a list or a string")
    blocks = [b for b in content if isinstance(b, dict)]
    texts = [b["text"] for b in blocks
             if b.get("type") == "text" and isinstance(b.get("text"), str)]
    wire: dict[str, Any] = {"type": "user", "message": message, "uuid": obj.get("uuid")}
    live = state.live
    if any(b.get("type") == "tool_result" for b in blocks):
        if "toolUseResult" in obj:
            wire["tool_use_result"] = obj["toolUseResult"]
        decision = obj.get("permissionDecision")
        if isinstance(decision, dict):
            for b in blocks:
                tid = b.get("tool_use_id")
                if b.get("type") == "tool_result" and isinstance(tid, str) \
                        and tid in live.tools:
                    live = _decided(live, out, tid, decision)
        return _replace(state, live=live_user(live, restated(msg, wire, "agent"), out))
    if any(t.startswith(_INTERRUPTED) for t in texts):
        if not live.turnOpen:
            return state  # the turn it interrupted has ended already
        state = _replace(state, live=live_user(live, restated(msg, wire, "agent"), out))
        return _end(state, out, "interrupted")
    # any other row ends a turn whose last message is written ("Turns")
    if state.ending is not None:
        state = _end(state, out, "completed")
    if texts and not any(obj.get(k) is True for k in _RUNTIME_ROWS):
        # a prompt: the turn before it has ended; the prompt opens the next one, the
        # user's own words (as the SDK client's line is on the wire)
        state = _end(state, out, "completed")
        return _replace(state, live=live_user(state.live, restated(msg, wire, "client"),
                                                    out))
    # text Claude Code writes on the user's side (author "runtime"): in the open turn,
    # or outside any (a local command's output) without opening one
    if not state.live.turnOpen:
        wire.update(isSynthetic=True, shouldQuery=False)
        return _replace(state, live=live_user(state.live, restated(msg, wire, "client"),
                                                    out))
    return _replace(state, live=live_user(state.live, restated(msg, wire, "agent"), out))


def _decided(live: LiveState, out: Emitter, tid: str, decision: dict[str, Any]) -> LiveState:
    """A tool call's `permissionDecision`, the one trace the file keeps of a permission
    dialogue. A person asked (`source` user_*) is a request the file does not hold but
    implies: request.opened and request.resolved, both synthetic and said to be inferred,
    with the decision in the shared words. A rule (`source` config) decided without
    asking: no request. A refusal, whoever made it, declines the tool (as the live
    stream's permission_denied / control_response say it)."""
    verdict = decision.get("decision")
    if verdict == "reject":
        live = _set_tool(live, tid, denied=True)
    source = decision.get("source")
    if not (isinstance(source, str) and source.startswith("user")) \
            or verdict not in ("accept", "reject"):
        return live
    tool = live.tools[tid]
    kind = _APPROVAL.get(tool.itemType, "unknown")
    scope = decision.get("grantScope")
    outcome: Decision = "decline" if verdict == "reject" else (
        "accept" if scope in (None, "once") and source != "user_permanent"
        else "accept_for_session")
    request = f"permission:{tid}"
    _emit(live, out, RequestOpened, RequestOpenedPayload(
        requestType=kind, detail=_INFERRED, toolName=tool.toolName,  # type: ignore[arg-type]
        args={"input": tool.input} if tool.input is not None else UNSET),
        synthetic=True, request=request, item=tid, item_ref=tid, parent=tool.parent)
    _emit(live, out, RequestResolved, RequestResolvedPayload(
        requestType=kind, decision=verdict, resolution=decision,  # type: ignore[arg-type]
        outcome=outcome),
        synthetic=True, request=request, item=tid, item_ref=tid, parent=tool.parent)
    return live


_INFERRED = "inferred from the session file's permissionDecision (the file keeps no request)"
_APPROVAL = {"command_execution": "command_execution_approval",
             "file_change": "file_change_approval"}


#: flags of the user rows Claude Code writes itself (caveats, command output, summaries)
_RUNTIME_ROWS = ("isMeta", "isCompactSummary", "isVisibleInTranscriptOnly")


# ---- assistant rows --------------------------------------------------------------

#: stop reasons after which the model says nothing more in the turn
_STOPS = frozenset({"end_turn", "stop_sequence", "max_tokens", "refusal",
                    "model_context_window_exceeded"})
_USAGE = ("input_tokens", "output_tokens", "cache_read_input_tokens",
          "cache_creation_input_tokens")


def _on_assistant(state: State, msg: Message, out: Emitter) -> State:
    obj = msg.obj
    message = obj.get("message")
    if not isinstance(message, dict):
        raise MalformedRecord("assistant: 'message' must be an object")
    mid = message.get("id")
    mid = mid if isinstance(mid, str) else None
    if state.ending is not None and mid != state.ending:
        state = _replace(state, ending=None, stop=None)  # the turn went on
    if obj.get("isApiErrorMessage") is True:
        return _api_error(state, obj, message, out)
    wire: dict[str, Any] = {"type": "assistant", "message": message, "uuid": obj.get("uuid")}
    live = live_assistant(state.live, restated(msg, wire, "agent"), out)
    model = message.get("model")
    if isinstance(model, str) and model and model != "<synthetic>" and model != live.model:
        live = _replace(live, model=model)  # the next turns' turn.started says it
    state = _counted(_replace(state, live=live), mid, message)
    stop = message.get("stop_reason")
    if isinstance(stop, str) and stop in _STOPS:
        return _replace(state, ending=mid or "", stop=stop)
    return state


def _counted(state: State, mid: str | None, message: dict[str, Any]) -> State:
    """The message's usage added to the turn's: every block's row repeats it, so it is
    counted once per message."""
    usage = message.get("usage")
    if mid == state.counted or not isinstance(usage, dict):
        return state
    sums = dict(state.usage)
    for key in _USAGE:
        n = usage.get(key)
        if isinstance(n, int) and not isinstance(n, bool):
            sums[key] = sums.get(key, 0) + n
    return _replace(state, counted=mid, usage=sums)


_API_ERROR: Final = re.compile(r"API Error: (\d{3})\b\s*(.*)", re.DOTALL)


def _api_error(state: State, obj: dict[str, Any], message: dict[str, Any],
               out: Emitter) -> State:
    """The message Claude Code writes in the model's place after an API error
    (`isApiErrorMessage`, model `<synthetic>`): not the assistant's answer but the
    failure of its turn. Its text is the error ("API Error: 500 {...}"), whose status and
    provider error type go in the detail when the row or the text carries them."""
    content = message.get("content")
    texts = [b["text"] for b in content if isinstance(b, dict) and isinstance(b.get("text"), str)] \
        if isinstance(content, list) else [content] if isinstance(content, str) else []
    text = "".join(texts)
    error = obj.get("error")
    kind = error if isinstance(error, str) and error else "unknown"
    detail: dict[str, Any] = {"error": kind, "model": message.get("model")}
    status = obj.get("apiErrorStatus")
    said = _API_ERROR.match(text)
    if isinstance(status, int) and not isinstance(status, bool):
        detail["status"] = status
    elif said:
        detail["status"] = int(said.group(1))
    if said:
        try:
            body = json.loads(said.group(2))
        except ValueError:
            body = None
        inner = body.get("error") if isinstance(body, dict) else None
        if isinstance(inner, dict) and isinstance(inner.get("type"), str):
            detail["providerErrorType"] = inner["type"]
    mid = message.get("id")
    state = _counted(state, mid if isinstance(mid, str) else None, message)
    live = open_turn(state.live, out)
    _emit(live, out, RuntimeErrorEvent, RuntimeErrorPayload(
        message=text or kind, errorClass=_ERROR_CLASS.get(kind, "provider_error"),
        willRetry=False, detail=detail))
    return _end(_replace(state, live=live), out, "failed", errorMessage=text or kind)


# ---- other rows ------------------------------------------------------------------


def _on_system(state: State, msg: Message, out: Emitter) -> State:
    obj = msg.obj
    subtype = obj.get("subtype")
    if not isinstance(subtype, str):
        raise MalformedRecord("system row without a string 'subtype'")
    native = out.native_type = f"system/{subtype}"
    live = state.live
    if subtype == "api_error":
        live = open_turn(live, out)
        error = obj.get("error")
        error = error if isinstance(error, dict) else {}
        status = error.get("status")
        text = error.get("message") or error.get("formatted")
        detail = {k: obj[k] for k in ("error", "retryInMs", "retryAttempt", "maxRetries")
                  if k in obj}
        _emit(live, out, RuntimeErrorEvent, RuntimeErrorPayload(
            message=text if isinstance(text, str) and text else "API error",
            errorClass="provider_error" if isinstance(status, int) else "transport_error",
            willRetry=True, detail=detail))
        return _replace(state, live=live)
    if subtype == "turn_duration":
        duration = obj.get("durationMs")
        fields = {"durationMs": duration} if isinstance(duration, int) \
            and not isinstance(duration, bool) else {}
        return _end(state, out, "completed", **fields)
    if subtype == "compact_boundary":
        wire = {"compact_metadata": obj["compactMetadata"]} if "compactMetadata" in obj else {}
        return _replace(state, live=_on_compact_boundary(live, restated(msg, wire, "agent"), out))
    if native not in IGNORED:
        out.unknown(native, thread=_thread(live, out), turn=_turn(live, out))
    return state


def _on_cost_state(state: State, msg: Message, out: Emitter) -> State:
    usage = {k: v for k, v in msg.obj.items() if k not in ("type", "sessionId")}
    _emit(state.live, out, ThreadTokenUsageUpdated,
                 ThreadTokenUsageUpdatedPayload(usage=usage))
    return state


def _on_summary(state: State, msg: Message, out: Emitter) -> State:
    summary = msg.obj.get("summary")
    name: str | UnsetType = summary if isinstance(summary, str) and summary else UNSET
    _emit(state.live, out, ThreadMetadataUpdated, ThreadMetadataUpdatedPayload(name=name))
    return state


# ---- tables ----------------------------------------------------------------------

_HANDLERS: Final = {
    "user": _on_user,
    "assistant": _on_assistant,
    "system": _on_system,
    "cost-state": _on_cost_state,
    "summary": _on_summary,
}

#: rows that cannot belong to a turn whose last message is written (module docstring,
#: "Turns"): they end it first (`user` rows: _on_user)
_ENDS_PENDING = frozenset({"queue-operation", "cost-state"})

#: Native types read on purpose and mapped to nothing, with the reason.
IGNORED_REASONS: dict[str, str] = {
    "queue-operation": "a prompt queued or taken from the queue; the prompt is its own "
                       "user row",
    "attachment": "context Claude Code gives the model (system prompt, environment, tool "
                  "and skill listings, hook output), not the conversation",
    "api-request-shape": "the API request's system blocks and tool schemas",
    "api-request-blob": "a message as sent to the API, content-addressed; the rows carry "
                        "the conversation",
    "api-request": "an API request's parameters; the assistant rows carry its answer",
    "tools-used": "the names of the tools used so far",
    "last-prompt": "the last prompt, for resuming; its user row carries it",
    "atis-latch": "bookkeeping with no content",
    "file-history-snapshot": "checkpoints of edited files, for rewinding",
    "progress": "progress of a hook or a running tool, for the terminal",
    "system/stop_hook_summary": "the Stop hooks run at a turn's end; their output is an "
                                "attachment",
    "system/away_summary": "a recap shown to a user back at the terminal, not the "
                           "conversation",
}
IGNORED: Final[frozenset[str]] = frozenset(IGNORED_REASONS)
