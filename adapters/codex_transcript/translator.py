"""codex-transcript: Codex rollout files (`~/.codex/sessions/Y/M/D/rollout-*-<thread>.jsonl`)
-> canonical events.

Reads one rollout line per message, `{"timestamp", "ordinal"?, "type", "payload"}`, as
written by Codex 0.171.0 (codex app-server, codex exec: `ordinal`, `world_state`,
`token_usage_record`, `event_msg/item_completed` with the core's TurnItems) and by the
older core 0.137.0 embedded in codex-acp 0.16.0 (no ordinal; the legacy UI events
`event_msg/user_message`, `agent_message`, `agent_reasoning`, `patch_apply_end`, ...),
and the releases between, whose lines are a mix of the two. The record key (the
session id) is the thread uuid, `session_meta.payload.id`.

How: every line is said again as what the app-server would have sent for it, a v2
notification (items.py builds the v2 items), and handed to the app-server translator's
own handlers (adapters.codex `_HANDLERS`), so a rollout gives the events, ids and
payloads of the live stream of the same thread: canonical thread, turn and item ids
are derived from the same Codex ids (turn ids, `msg_`/`rs_`/`call_` item ids, the
user-message uuid) and equal the live stream's for the same session id.

Whole messages, not deltas: an item comes completed (`item_completed` or a legacy
event), so the app-server translator gives it a synthetic item.started, one synthetic
content.delta with its whole text, and item.completed. A tool call starts at the
model's call (`function_call`, `custom_tool_call`, `local_shell_call`: item.started with
the command, not synthetic) and completes with its item (0.171) or, when no item comes
(a declined or aborted call; every command before 0.171), with the call's
model-facing output (items.output_item reads the exit code and output from it).

What a rollout does not keep is not made up: no deltas, no approval requests or
decisions (a declined call is only its `Rejected("rejected by user")` output), no
`error` notifications or retries (a failed turn has `task_complete.error` in 0.171 and
nothing at all in 0.137), no partial text of an interrupted message, no rate limits
beyond token_count's. What it keeps that the wire lacks and that maps: the user's own
messages in codex exec, the turn settings (`thread_settings_applied`: session.configured;
`turn_context`: the model on turn.started). The model input (instructions, injected
context), `world_state` and reasoning's `encrypted_content` are not mapped.

Tricky parts
* turn.started waits for the turn's `turn_context` (the next line or so), which names
  the model; any other line of the turn starts it first.
* 0.171 writes an item twice, as `item_completed` and as the model-facing
  `response_item` (same id): the response items of messages and reasoning are ignored.
  A release that writes an `item_completed` type also writes no legacy event for it;
  one that wrote both would repeat the item, so a legacy event whose item type was
  already seen as `item_completed` is skipped (State.kinds).
* Items the legacy events carry no id for are named after their line (`ordinal`, else
  the count of lines read): the same file always gives the same ids.
* Repeated ids: Codex appends to a rollout (a resumed thread appends its new turns). A
  line sent again right after is dropped by its `ordinal` (message_id); an item
  completed again (its id among the last completed, State.done) emits nothing: what was
  published stays published, and no text is said twice.

Rewritten files. A rollout rewritten (compacted, edited, truncated and written again) is
sent again from its start; its lines already translated are dropped, however far back,
by a high-water mark (adapters.core.resent): a line whose `ordinal` is at or below the
greatest translated (State.ordinals) and whose time is not after the latest translated
is old. Lines without an ordinal (0.137) are placed by their times (State.times): older
than SKEW_MS before the latest line translated, old; within SKEW_MS, old if their
content is among the 32 kept there; later, new. Both marks together keep at most 68
integers, whatever the rollout's length. They rely on what the rollouts here show:
`ordinal` counts a rollout's lines from 0 and only grows, the timestamps never go back
(lines written in the same millisecond share one), and a rewritten rollout keeps each
line's ordinal and time. A line changed under its ordinal emits nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any, Final

from adapters.codex import translator as codex
from adapters.codex_transcript.items import (
    call_item,
    camel,
    camel_keys,
    legacy_item,
    output_item,
    output_text,
    plan_params,
    v2_item,
)
from adapters.codex_transcript.state import State
from adapters.core.contract import HighWater, MalformedRecord, Message
from adapters.core.emitter import UNSET, Emitter
from adapters.core.emitter import replace as _replace
from adapters.core.resent import raised, resent
from topics.canonical import (
    ProviderRefs,
    SessionConfigured,
    SessionConfiguredPayload,
    SessionStarted,
    SessionStartedPayload,
)

provider = "codex-transcript"
raw_source = "codex.rollout"
state_type = State


def message_id(obj: dict[str, Any], origin: str) -> str | None:
    """A rollout line's `ordinal` (0.171 numbers its lines; older rollouts do not, and
    their lines cannot be told from a legitimate repeat)."""
    n = obj.get("ordinal")
    return str(n) if isinstance(n, int) and not isinstance(n, bool) else None


def initial() -> State:
    return State()


_Handler = Callable[[State, dict[str, Any], int, Emitter], State]
_DONE_KEPT: Final = 32  # completed item ids remembered (State.done)
#: How much earlier than a line it wrote already Codex may stamp a line it writes later,
#: in ms, for the lines without an ordinal ("Rewritten files").
SKEW_MS: Final = 2_000


def translate(state: State, msg: Message, out: Emitter) -> State:
    """Apply one rollout line and return the new state.

    Raises MalformedRecord for a line that is not a rollout line (no string `type`, a
    timestamp no date can say) or whose payload lacks what its type needs (an object,
    a session_meta's id, a tool call's call id). A line of a type this adapter does not
    know is a runtime.warning.
    """
    obj = msg.obj
    kind = obj.get("type")
    payload = obj.get("payload")
    if not isinstance(kind, str):
        raise MalformedRecord("a rollout line needs a string 'type'")
    sub = payload.get("type") if isinstance(payload, dict) and kind in (
        "event_msg", "response_item") else None
    native = f"{kind}/{sub}" if isinstance(sub, str) else kind
    out.native_type = native
    handler = _HANDLERS.get(native)
    if handler is not None and not isinstance(payload, dict):
        raise MalformedRecord(f"rollout {native} line without an object 'payload'")
    stamp = obj.get("timestamp")
    when = _time_ms(stamp) if isinstance(stamp, str) else None
    ordinal = obj.get("ordinal")
    numbered: int | None = ordinal if isinstance(ordinal, int) \
        and not isinstance(ordinal, bool) else None
    old, state = _resent(state, numbered, when, obj)
    if old:
        return state  # translated already: the rollout was rewritten ("Rewritten files")
    if when is not None:
        out.set_clock(when)
    n = numbered if numbered is not None else state.lines
    state = _replace(state, lines=state.lines + 1)
    if handler is not None:
        assert isinstance(payload, dict)
        return handler(state, payload, n, out)
    if native not in IGNORED:
        out.unknown(native, thread=out.id("thr", _thread(state, out)))
    return state


def _resent(state: State, ordinal: int | None, when: int | None, obj: dict[str, Any]
            ) -> tuple[bool, State]:
    """(whether the line was translated already, the state with the marks after it):
    by its ordinal when it has one, else by its time ("Rewritten files")."""
    times = state.times
    if ordinal is not None:
        ordinals = state.ordinals
        # an ordinal at or below the mark is old if its time is too: a counter that
        # started again (lines written later) can never drop a new line
        old = ordinal <= ordinals.key and (when is None or when <= times.key)
        if not old:
            ordinals = HighWater(key=max(ordinal, ordinals.key), last=ordinal)
            if when is not None:
                times = raised(times, when, SKEW_MS)
            state = _replace(state, ordinals=ordinals, times=times)
        return old, state
    old, times = resent(times, when if when is not None else
                        times.last if times.last >= 0 else None, None, obj, SKEW_MS)
    return old, state if times is state.times else _replace(state, times=times)


def _time_ms(stamp: str) -> int:
    try:
        moment = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        raise MalformedRecord(f"rollout timestamp {stamp[:40]!r} is not an ISO 8601 time") from None
    if moment.tzinfo is None:
        raise MalformedRecord(f"rollout timestamp {stamp[:40]!r} names no time zone")
    return int(moment.timestamp() * 1000)


# ---- the app-server translator, fed v2 notifications ---------------------------------


def _thread(state: State, out: Emitter) -> str:
    """The thread's Codex id: session_meta's, else the session id (the file's uuid)."""
    return state.thread if state.thread is not None else out.session_id


def _notify(state: State, method: str, params: dict[str, Any], out: Emitter) -> State:
    live = codex._HANDLERS[method](state.live, params, out)
    return _replace(state, live=live)


def _start(state: State, out: Emitter) -> State:
    """The pending turn's turn.started, once."""
    if not state.pending or state.turn is None:
        return state
    state = _replace(state, pending=False)
    return _notify(state, "turn/started",
                   {"threadId": _thread(state, out), "turn": {"id": state.turn}}, out)


def _turn(state: State, n: int, out: Emitter, named: Any = None) -> tuple[State, str]:
    """The turn a line belongs to (`named` when the line says it), started; a line
    outside every turn (a file cut before its task_started) opens one named after it."""
    if isinstance(named, str) and named != state.turn:
        return state, named  # a turn the app-server translator knows, or will start
    if state.turn is None:
        state = _replace(state, turn=f"rollout-line-{n}", pending=True)
    state = _start(state, out)
    assert state.turn is not None
    return state, state.turn


def _item_completed(state: State, turn: str, item: dict[str, Any], out: Emitter,
                    output: str = "") -> State:
    """`item/completed` of a v2 item; `output`, a file change's tool output (the
    `patch_apply_end` stdout that releases before 0.171 showed, as codex-acp does), reaches
    its completion through the item's output stream, as the app-server streamed it."""
    iid = item.get("id")
    if not isinstance(iid, str):
        raise MalformedRecord(f"codex {item.get('type')} item without a string id")
    if iid in state.done:
        return state  # completed already: what was published stays, nothing is added
    if output:
        out.append(out.id("itm", turn, iid), "file_change_output", output)
    calls = state.calls
    if iid in calls:
        calls = {k: v for k, v in calls.items() if k != iid}
    state = _replace(state, calls=calls, done=(*state.done, iid)[-_DONE_KEPT:])
    return _notify(state, "item/completed",
                   {"threadId": _thread(state, out), "turnId": turn, "item": item}, out)


# ---- session and turns ---------------------------------------------------------------


def _on_session_meta(state: State, p: dict[str, Any], n: int, out: Emitter) -> State:
    tid = p.get("id")
    if not isinstance(tid, str) or not tid:
        raise MalformedRecord("session_meta without a string id")
    if state.thread is not None:
        return state  # a fork's copied history, or the same thread resumed: known already
    version = p.get("cli_version")
    version = version if isinstance(version, str) else None
    out.emit(SessionStarted, SessionStartedPayload())
    # the instructions are the model's input, tens of kilobytes: not configuration
    config = {k: v for k, v in p.items() if k != "base_instructions"}
    out.emit(SessionConfigured,
             SessionConfiguredPayload(config=config, runtimeVersion=version or UNSET),
             thread=out.id("thr", tid), refs=ProviderRefs(providerThreadId=tid))
    cwd = p.get("cwd")
    state = _replace(state, thread=tid, cwd=cwd if isinstance(cwd, str) else None,
                     live=_replace(state.live, started=True, runtimeVersion=version))
    return _notify(state, "thread/started", {"thread": {"id": tid}}, out)


def _on_task_started(state: State, p: dict[str, Any], n: int, out: Emitter) -> State:
    tid = p.get("turn_id")
    if not isinstance(tid, str) or not tid:
        raise MalformedRecord("task_started without a string turn_id")
    if state.turn == tid:
        return state
    # a turn left open that never said anything is forgotten; one that did is ended by
    # the app-server translator when this one starts (one turn at a time in a thread)
    return _replace(state, turn=tid, pending=True, calls={})


def _on_turn_context(state: State, p: dict[str, Any], n: int, out: Emitter) -> State:
    model, cwd = p.get("model"), p.get("cwd")
    live = state.live
    if isinstance(model, str) and model:
        live = _replace(live, model=model)
    state = _replace(state, live=live, cwd=cwd if isinstance(cwd, str) else state.cwd)
    named = p.get("turn_id")
    if isinstance(named, str) and named != state.turn:
        return state  # the settings of a turn other than the open one
    return _start(state, out)


def _end(state: State, p: dict[str, Any], n: int, out: Emitter, status: str,
         error: dict[str, Any] | None) -> State:
    state, turn = _turn(state, n, out, p.get("turn_id"))
    body: dict[str, Any] = {"id": turn, "status": status, "error": error}
    duration = p.get("duration_ms")
    if isinstance(duration, int) and not isinstance(duration, bool):
        body["durationMs"] = duration
    state = _notify(state, "turn/completed", {"threadId": _thread(state, out), "turn": body},
                    out)
    if turn == state.turn:
        state = _replace(state, turn=None, pending=False, calls={})
    return state


def _on_task_complete(state: State, p: dict[str, Any], n: int, out: Emitter) -> State:
    error = p.get("error")
    if not isinstance(error, dict):
        return _end(state, p, n, out, "completed", None)
    info = error.get("codex_error_info")
    v2 = {"message": error.get("message"),
          "codexErrorInfo": camel(info) if isinstance(info, str) else camel_keys(info)}
    return _end(state, p, n, out, "failed", v2)


def _on_turn_aborted(state: State, p: dict[str, Any], n: int, out: Emitter) -> State:
    return _end(state, p, n, out, "interrupted", None)


def _on_token_count(state: State, p: dict[str, Any], n: int, out: Emitter) -> State:
    info, limits = p.get("info"), p.get("rate_limits")
    if isinstance(info, dict):  # null after a failed attempt
        usage = {"total": camel_keys(info.get("total_token_usage")),
                 "last": camel_keys(info.get("last_token_usage")),
                 "modelContextWindow": info.get("model_context_window")}
        params: dict[str, Any] = {"threadId": _thread(state, out), "tokenUsage": usage}
        if state.turn is not None:
            state = _start(state, out)
            params["turnId"] = state.turn
        state = _notify(state, "thread/tokenUsage/updated", params, out)
    if isinstance(limits, dict):
        state = _notify(state, "account/rateLimits/updated", {"rateLimits": camel_keys(limits)},
                        out)
    return state


def _on_settings(state: State, p: dict[str, Any], n: int, out: Emitter) -> State:
    settings = p.get("thread_settings")
    if not isinstance(settings, dict):
        raise MalformedRecord("thread_settings_applied without thread_settings")
    return _notify(state, "thread/settings/updated",
                   {"threadId": _thread(state, out), "threadSettings": camel_keys(settings)}, out)


def _on_compacted(state: State, p: dict[str, Any], n: int, out: Emitter) -> State:
    return _notify(state, "thread/compacted",
                   {"threadId": _thread(state, out), "turnId": state.turn}, out)


def _on_goal(state: State, p: dict[str, Any], n: int, out: Emitter) -> State:
    return _notify(state, "thread/goal/updated",
                   {"threadId": _thread(state, out), "goal": camel_keys(p.get("goal"))}, out)


# ---- items ---------------------------------------------------------------------------


def _on_item_completed(state: State, p: dict[str, Any], n: int, out: Emitter) -> State:
    item = p.get("item")
    if not isinstance(item, dict):
        raise MalformedRecord("item_completed without an item object")
    kind = item.get("type")
    if isinstance(kind, str) and kind not in state.kinds:
        state = _replace(state, kinds=(*state.kinds, kind))
    state, turn = _turn(state, n, out, p.get("turn_id"))
    # a FileChange's stdout is not part of its v2 item: the app-server shows none either
    return _item_completed(state, turn, v2_item(item), out)


#: legacy item events, and the item_completed type (0.171) that replaces each
_LEGACY: Final[dict[str, str]] = {
    "user_message": "UserMessage", "agent_message": "AgentMessage",
    "agent_reasoning": "Reasoning", "agent_reasoning_raw_content": "Reasoning",
    "patch_apply_end": "FileChange", "exec_command_end": "CommandExecution",
    "mcp_tool_call_end": "McpToolCall", "web_search_end": "WebSearch",
    "image_generation_end": "ImageGeneration", "entered_review_mode": "EnteredReviewMode",
    "exited_review_mode": "ExitedReviewMode", "sub_agent_activity": "SubAgentActivity",
}


def _on_legacy(state: State, p: dict[str, Any], n: int, out: Emitter) -> State:
    kind = str(out.native_type).removeprefix("event_msg/")
    if _LEGACY[kind] in state.kinds:
        return state  # the item_completed of the same item said it
    call = p.get("call_id")
    iid = call if isinstance(call, str) and call else f"{kind}-{n}"
    item = legacy_item(kind, p, iid)
    if item is None:
        return state
    state, turn = _turn(state, n, out, p.get("turn_id"))
    output = ""
    if kind == "patch_apply_end":
        output = "".join(s for s in (p.get("stdout"), p.get("stderr")) if isinstance(s, str))
    return _item_completed(state, turn, item, out, output)


def _on_call(state: State, p: dict[str, Any], n: int, out: Emitter) -> State:
    """The model calls a tool: its item starts (update_plan updates the plan instead)."""
    state, turn = _turn(state, n, out)
    thread = _thread(state, out)
    if p.get("name") == "update_plan":
        return _notify(state, "turn/plan/updated",
                       {"threadId": thread, "turnId": turn, **plan_params(p)}, out)
    if p.get("type") == "custom_tool_call" and not isinstance(p.get("input"), str):
        raise MalformedRecord("custom_tool_call without a string input")
    item = call_item(p, state.cwd)
    if item is None:
        return state
    cid = item.get("id")
    if not isinstance(cid, str) or not cid:
        raise MalformedRecord(f"{out.native_type} without a string call_id")
    if cid in state.calls or cid in state.live.items:
        return state  # the same call again
    state = _replace(state, calls={**state.calls, cid: item})
    return _notify(state, "item/started", {"threadId": thread, "turnId": turn, "item": item},
                   out)


def _on_call_output(state: State, p: dict[str, Any], n: int, out: Emitter) -> State:
    """A tool's model-facing output: the completion of a call no item completed."""
    cid = p.get("call_id")
    started = state.calls.get(cid) if isinstance(cid, str) else None
    if started is None:
        return state  # its item completed it, or the call was no item (update_plan)
    state, turn = _turn(state, n, out)
    return _item_completed(state, turn, output_item(started, output_text(p.get("output"))),
                           out)


_HANDLERS: Final[dict[str, _Handler]] = {
    "session_meta": _on_session_meta,
    "turn_context": _on_turn_context,
    "compacted": _on_compacted,
    "event_msg/task_started": _on_task_started,
    "event_msg/turn_started": _on_task_started,
    "event_msg/task_complete": _on_task_complete,
    "event_msg/turn_complete": _on_task_complete,
    "event_msg/turn_aborted": _on_turn_aborted,
    "event_msg/token_count": _on_token_count,
    "event_msg/thread_settings_applied": _on_settings,
    "event_msg/thread_goal_updated": _on_goal,
    "event_msg/item_completed": _on_item_completed,
    **{f"event_msg/{kind}": _on_legacy for kind in _LEGACY},
    "response_item/function_call": _on_call,
    "response_item/custom_tool_call": _on_call,
    "response_item/local_shell_call": _on_call,
    "response_item/function_call_output": _on_call_output,
    "response_item/custom_tool_call_output": _on_call_output,
}

#: Native types read on purpose and mapped to nothing, with the reason.
IGNORED_REASONS: dict[str, str] = {
    "world_state": "the context the model is given (instructions, environment): its input, "
                   "not the conversation",
    "token_usage_record": "per-response usage; the token_count that follows carries the "
                          "thread's totals",
    "response_item/message": "the model-facing copy of a message: the user's and the "
                             "agent's come as items (item_completed, user_message, "
                             "agent_message), the rest is injected context",
    "response_item/reasoning": "the model-facing copy of reasoning (the item carries its "
                               "summary; encrypted_content is opaque)",
    "response_item/web_search_call": "web_search_end (or its item) carries the search",
    "response_item/image_generation_call": "image_generation_end (or its item) carries it",
    "response_item/tool_search_call": "the model looking up tools it may call",
    "response_item/tool_search_output": "the tools found for the model",
    "response_item/additional_tools": "tools offered to the model",
    "response_item/compaction": "the model-facing summary of a compaction (`compacted` "
                                "says it)",
    "response_item/context_compaction": "the model-facing summary of a compaction "
                                        "(`compacted` says it)",
    "event_msg/context_compacted": "the `compacted` line of the same compaction says it",
    "event_msg/thread_rolled_back": "turns dropped from the model's history; canonical "
                                    "events are history and are not retracted",
}
IGNORED: Final[frozenset[str]] = frozenset(IGNORED_REASONS)
