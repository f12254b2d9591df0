"""gemini-transcript: Gemini CLI's chat files -> canonical events.

Reads the records of `~/.gemini/tmp/<project>/chats/session-*.jsonl` one at a time, as
Gemini CLI appends them (one native message = one line): the JSON-lines conversation
record written by `@google/gemini-cli` 0.61.0 in every mode (interactive, stream-json,
`--acp`). Lines are a header (`sessionId`, `projectHash`, `startTime`, `kind`), message
records (`id`, `timestamp`, `type` user | gemini | info | warning | error, `content`;
a gemini message adds `thoughts`, `tokens`, `model`, `toolCalls`), `{"$set": {...}}`
patches of the record (`lastUpdated`; `messages`: the whole message list replaced) and
`{"$rewindTo": id}` (later releases: the messages from `id` on dropped). The session id
is the header's `sessionId`; `--acp` writes a second header and context for the same id.

Releases (the pairs of tests/fixtures/ondisk: the files and the live stream of one run)

| runtime (recordings) | releases verified | written against |
| --- | --- | --- |
| `gemini-stream-json`, `acp-gemini` | 0.61.0 | their files; gemini-cli `chatRecordingService.ts` |

Mapping. A message is whole when it is written, never deltas: a gemini message's text is
one assistant_message item (item.started, one synthetic content.delta with the whole
text, item.completed), its `thoughts` one reasoning item before it (the thought text
stream-json drops: each entry is a streamed chunk whose description the CLI trimmed, so
they are joined with a space, a subject as `**subject**`), its `tokens` a
thread.token-usage.updated and, summed over the turn, turn.completed `usage`; each tool
call one tool item, with the same tool and ids as the live adapter (adapters.gemini:
`_tool_input`; the payload is adapters.core.tools.tool_item), completed once its status is final (success: completed,
error: failed, cancelled: declined) with `resultDisplay` as its output when it is text
(what stream-json prints) and else (a diff, a terminal screen, nothing) the
functionResponse the model got. A user message
with text is a prompt: it ends the open turn and opens the next (item ids are the
records' ids, the turn's is its prompt's). A user message of functionResponses completes
the tool calls no gemini message completed (`--acp` writes a refused call only so:
declined, its error saying the user cancelled it).
The first `$set` of messages before any prompt is the context the CLI injects
(`<session_context>`): user_message items, author "runtime".

Rewrites. The CLI writes a message again under its id when its tool calls finish or
its tokens arrive, and `$set` replaces the whole history (after a failed or cancelled
turn, a compression, a masking). Events already published stay published, and no text
is sent twice: a message written again adds only what its earlier write lacked
(thoughts, text or tokens it had none of; tool calls not completed yet); a changed
text, and every message a `$set` or `$rewindTo` restates or rewrites, emit nothing. A
`$set` of messages that drops the open turn's prompt is the CLI rolling that turn back
(its only trace of an error or a cancellation): the turn ends as failed, saying so.

Rewritten files. A file rewritten (compacted, truncated and written again) is sent
again from its start; its records already translated are dropped, however far back, by
a high-water mark of the records' own times (State.mark, adapters.core.resent: a
message's `timestamp`, a `$set`'s `lastUpdated`, a header's `startTime`; a record
without one has the time of the record before it): older than SKEW_MS before the latest
record translated, old; within SKEW_MS, old if its id (its content, for a record
without one) is among the 32 kept there; later, new. A message of the open turn
passes either way: it is the one record the CLI writes again under its old time (its
tool calls finished, its tokens came), and `_on_gemini` keeps only what a write adds.
The mark is at most 66 integers, whatever the file's length. It relies on what the
files here show: the CLI writes its records in time order (a message written again
aside), and a rewritten file keeps each record's id and time.

Turns. Nothing in the file says a turn ended: a message with text and no tool calls is
written before its tool calls are (then written again with them), so no record shows
the last. A turn ends at the next prompt (completed), at a roll-back (failed), at a
`$rewindTo` (completed: the user rewinds between turns) or when a CLI starts on the
file again (a header, or the `$set` of `sessionId` that `--resume` writes: completed);
the last turn of a file stays open until one comes (the worker closes it after
idle_timeout).

Not in the file (tests/adapters/test_transcript_gemini.py, LOSSES, asserts exactly these
against the live stream of the same run): any error (no runtime.error); what a failed or
cancelled turn said, and which of the two it was (rolled back: it ends as failed); the
end of the last turn; `--acp`'s permission requests and their answers. Nor, where the
comparison does not look: deltas (each text is one delta), `init` and `result` (stats,
duration, the model alias the run was started with).
"""

from __future__ import annotations

from typing import Any, Final

from msgspec import Struct, UnsetType

from adapters.core.contract import MalformedRecord, Message
from adapters.core.emitter import UNSET, Emitter
from adapters.core.emitter import replace as _replace
from adapters.core.ids import iso_to_ms
from adapters.core.resent import resent
from adapters.core.shape import native_list
from adapters.core.tools import normalize_tool_name, tool_item
from adapters.gemini import translator as gemini
from adapters.gemini.state import Tool
from adapters.gemini_transcript.state import State
from topics.canonical import (
    ContentDelta,
    ContentDeltaPayload,
    ItemCompleted,
    ItemPayload,
    ItemStarted,
    ProviderRefs,
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
    ThreadTokenUsageUpdated,
    ThreadTokenUsageUpdatedPayload,
    TurnCompleted,
    TurnCompletedPayload,
    TurnStarted,
    TurnStartedPayload,
    TurnState,
    _Event,
)
from topics.usage import TokenUsage, tokens

provider = "gemini-transcript"
raw_source = "gemini.chat"


#: How much earlier than a record it wrote already Gemini CLI may stamp a record it
#: writes later, in ms ("Rewritten files").
SKEW_MS: Final = 2_000


def message_id(obj: dict[str, Any], origin: str) -> str | None:
    """A message record's `id` (a rewrite repeats it with other bytes: the driver drops
    only a line whose id and bytes were both seen)."""
    mid = obj.get("id")
    return mid if isinstance(mid, str) else None


state_type = State


def initial() -> State:
    return State()


def translate(state: State, msg: Message, out: Emitter) -> State:
    """Apply one record. Raises MalformedRecord for a line that is no chat record or a
    known record of the wrong shape."""
    obj = msg.obj
    old, state = _resent(state, obj)
    if old:
        kind = obj.get("type")
        out.native_type = kind if isinstance(kind, str) else next(
            (k for k in obj if k.startswith("$")), "header")
        return state  # translated already: the file was rewritten ("Rewritten files")
    if "$set" in obj:
        out.native_type = "$set"
        return _on_set(state, obj, out)
    if "$rewindTo" in obj:
        out.native_type = "$rewindTo"
        state = _start(state, out, state.session)
        return _end(state, out, "completed")
    kind = obj.get("type")
    if isinstance(kind, str):
        out.native_type = kind
        handler = _HANDLERS.get(kind)
        if handler is not None and not isinstance(obj.get("id"), str):
            raise MalformedRecord(f"gemini chat {kind!r} message without a string 'id'")
        when = iso_to_ms(obj.get("timestamp"))
        if when is not None:
            out.set_clock(when)
        state = _start(state, out, state.session)
        if handler is None:
            if kind not in IGNORED:
                out.unknown(kind, thread=_thread(state, out), turn=_turn(state, out))
            return state
        return handler(state, obj, out)
    if isinstance(obj.get("sessionId"), str):
        out.native_type = "header"
        return _on_header(state, obj, out)
    key = next((k for k in obj if k.startswith("$")), None)
    if key is not None:  # a record operation of a later release
        out.native_type = key
        out.unknown(key, thread=_thread(state, out), turn=_turn(state, out))
        return state
    raise MalformedRecord("not a Gemini CLI chat record: no header, message, $set or $rewindTo")


def _resent(state: State, obj: dict[str, Any]) -> tuple[bool, State]:
    """(whether the record was translated already, the state with the mark after it):
    placed by its own time, a message's id telling it from the records near it
    ("Rewritten files"). A message of the open turn is never old here: its writes are
    told apart by `_on_gemini`, which keeps what each one added."""
    patch = obj.get("$set")
    stamp = obj.get("timestamp") if "type" in obj else \
        patch.get("lastUpdated") if isinstance(patch, dict) else obj.get("startTime")
    when = iso_to_ms(stamp)
    mark = state.mark
    mid = obj.get("id")
    ident = mid if isinstance(mid, str) and "type" in obj else None
    old, mark = resent(mark, when if when is not None else
                       mark.last if mark.last >= 0 else None, ident, obj, SKEW_MS)
    if old and isinstance(mid, str) and (mid == state.turn or mid in state.seen):
        old = False
    return old, state if mark is state.mark else _replace(state, mark=mark)


# ---- envelope helpers ------------------------------------------------------------


def _thread(state: State, out: Emitter) -> str | UnsetType:
    return out.id("thr", state.session) if state.session else UNSET


def _turn(state: State, out: Emitter) -> str | UnsetType:
    return out.id("trn", state.turn) if state.turn is not None else UNSET


def _emit(state: State, out: Emitter, cls: type[_Event], payload: Struct, *,
          item: str | None = None, part: str | None = None, synthetic: bool = False) -> None:
    """Emit in the current thread and turn; `item` (with `part`) is the native id the
    item's id derives from, and its providerItemId."""
    refs: ProviderRefs | UnsetType = UNSET
    if state.session or item:
        refs = ProviderRefs(providerSessionId=state.session or UNSET,
                            providerItemId=item or UNSET)
    out.emit(cls, payload, synthetic=synthetic, thread=_thread(state, out),
             turn=_turn(state, out), item=out.id("itm", item, part) if item else UNSET,
             refs=refs)


def _text(content: Any) -> str:
    """A message's text: its `content` string, or its text parts joined (as the CLI
    joins them)."""
    if isinstance(content, str):
        return content
    parts = content if isinstance(content, list) else []
    return "".join(p["text"] for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str))


# ---- session and turns -----------------------------------------------------------


def _start(state: State, out: Emitter, sid: str | None) -> State:
    """Start the session at its first record; a new session id starts a thread."""
    if state.started and sid == state.session:
        return state
    if not state.started:
        state = _replace(state, started=True, session=sid)
        _emit(state, out, SessionStarted, SessionStartedPayload(), synthetic=True)
    elif sid is None:
        return state
    else:
        state = _replace(state, session=sid)
    if sid is not None:
        _emit(state, out, ThreadStarted, ThreadStartedPayload(providerThreadId=sid),
              synthetic=True)
    return state


def _on_header(state: State, obj: dict[str, Any], out: Emitter) -> State:
    when = iso_to_ms(obj.get("startTime"))
    if when is not None:
        out.set_clock(when)
    state = _end(_start(state, out, obj["sessionId"]), out, "completed")  # a new start
    if state.configured:
        return state  # `--acp` writes the header twice
    config = {k: v for k, v in obj.items() if k != "sessionId"}
    _emit(state, out, SessionConfigured, SessionConfiguredPayload(config=config))
    return _replace(state, configured=True)


def _open(state: State, out: Emitter, key: str | None) -> State:
    """Open a turn: its prompt's id, or (None) one the file shows no prompt of."""
    n = state.turns + 1
    state = _replace(state, turns=n, turn=key if key is not None else f"#{n}",
                     prompt=key is not None)
    _emit(state, out, TurnStarted, TurnStartedPayload(model=state.model or UNSET),
          synthetic=True)
    return state


def chat_tokens(counts: dict[str, int]) -> TokenUsage:
    """TokenUsage of a chat's summed message `tokens` ({input, output, cached, thoughts,
    tool, total}: Gemini's own counts, as `gemini_tokens` reads the stream's stats):
    `input` (the prompt count) includes `cached`, and the tool-use prompt is input too;
    `output` (the candidates) leaves the thoughts out, so they are added to it."""
    thoughts = counts.get("thoughts", 0)
    return tokens(input=counts.get("input", 0) + counts.get("tool", 0),
                  cachedInput=counts.get("cached", 0),
                  output=counts.get("output", 0) + thoughts, reasoningOutput=thoughts)


def _end(state: State, out: Emitter, turn_state: TurnState, **fields: Any) -> State:
    """End the open turn: its tool calls still running fail, then turn.completed with
    the turn's summed tokens."""
    if state.turn is None:
        return state
    for tool_id, tool in state.tools.items():
        _emit(state, out, ItemCompleted,
              tool_item(tool.name, tool.input, "failed", out.cap, output="",
                                   detail="the turn ended before the tool returned"),
              item=tool_id, synthetic=True)
    if state.usage:
        fields["usage"] = dict(state.usage)
        fields["tokens"] = chat_tokens(state.usage)
    _emit(state, out, TurnCompleted, TurnCompletedPayload(state=turn_state, **fields))
    return _replace(state, turn=None, prompt=False, seen=(), texted=False, thought=False,
                    tokened=False, tools={}, done=(), usage={})


_ROLLED_BACK = ("Gemini CLI rolled this turn back from its chat file (an error or a "
                "cancellation; the file keeps no reason)")


def _on_set(state: State, obj: dict[str, Any], out: Emitter) -> State:
    patch = obj["$set"]
    if not isinstance(patch, dict):
        raise MalformedRecord("$set must be an object")
    when = iso_to_ms(patch.get("lastUpdated"))
    if when is not None:
        out.set_clock(when)
    sid = patch.get("sessionId")
    if isinstance(sid, str):
        # a CLI resuming the session (`--resume` states its id): the turn before has ended
        state = _end(_start(state, out, sid), out, "completed")
    else:
        state = _start(state, out, state.session)
    if "messages" in patch:
        messages = native_list(patch["messages"], "$set.messages")
        ids = {m["id"] for m in messages if isinstance(m, dict) and isinstance(m.get("id"), str)}
        if state.prompt and state.turn not in ids:
            state = _end(state, out, "failed", errorMessage=_ROLLED_BACK)
        elif not state.context and state.turns == 0:
            state = _context(state, messages, out)
    summary = patch.get("summary")
    if isinstance(summary, str) and summary:
        _emit(state, out, ThreadMetadataUpdated, ThreadMetadataUpdatedPayload(name=summary))
    return state


def _context(state: State, messages: list[Any], out: Emitter) -> State:
    """The messages the CLI puts before the first prompt (`<session_context>`)."""
    for m in messages:
        text = _text(m.get("content")) if isinstance(m, dict) else ""
        mid = m.get("id") if isinstance(m, dict) else None
        if not text or not isinstance(mid, str) or m.get("type") != "user":
            continue
        _emit(state, out, ItemStarted, ItemPayload(itemType="user_message", status="inProgress",
                                                   role="user", author="runtime"),
              item=mid, synthetic=True)
        _emit(state, out, ItemCompleted,
              ItemPayload(itemType="user_message", status="completed", role="user", text=text,
                          author="runtime"),
              item=mid)
    return _replace(state, context=True)


# ---- messages --------------------------------------------------------------------


def _on_user(state: State, obj: dict[str, Any], out: Emitter) -> State:
    content = obj.get("content")
    parts = [{"text": content}] if isinstance(content, str) else \
        native_list(content, "user.content")
    for part in parts:
        response = part.get("functionResponse") if isinstance(part, dict) else None
        if isinstance(response, dict):
            state = _response(state, response, out)
    text = _text(parts)
    mid = obj["id"]
    if not text or mid == state.turn:
        return state  # tool results only, or the prompt written again
    state = _open(_end(state, out, "completed"), out, mid)
    _emit(state, out, ItemStarted, ItemPayload(itemType="user_message", status="inProgress",
                                               role="user", author="user"),
          item=mid, synthetic=True)
    _emit(state, out, ItemCompleted,
          ItemPayload(itemType="user_message", status="completed", role="user", text=text,
                      author="user"),
          item=mid)
    return state


def _on_gemini(state: State, obj: dict[str, Any], out: Emitter) -> State:
    mid = obj["id"]
    if state.turn is None:
        state = _open(state, out, None)
    model = obj.get("model")
    if isinstance(model, str) and model and model != state.model:
        state = _replace(state, model=model)
    if not state.seen or state.seen[-1] != mid:
        # a message of this turn written again after others: what it said is out
        again = mid in state.seen
        state = _replace(state, seen=state.seen if again else (*state.seen, mid),
                         texted=again, thought=again, tokened=again)
    thoughts = _thoughts(native_list(obj.get("thoughts"), "gemini.thoughts"))
    if thoughts and not state.thought:
        _whole(state, out, mid, "thoughts", "reasoning", "reasoning_text", thoughts)
        state = _replace(state, thought=True)
    text = _text(obj.get("content"))
    if text and not state.texted:
        _whole(state, out, mid, None, "assistant_message", "assistant_text", text)
        state = _replace(state, texted=True)
    tokens = obj.get("tokens")
    if isinstance(tokens, dict) and not state.tokened:
        usage = dict(state.usage)
        for key, n in tokens.items():
            if isinstance(n, int) and not isinstance(n, bool):
                usage[key] = usage.get(key, 0) + n
        _emit(state, out, ThreadTokenUsageUpdated, ThreadTokenUsageUpdatedPayload(usage=tokens),
              item=mid)
        state = _replace(state, tokened=True, usage=usage)
    for call in native_list(obj.get("toolCalls"), "gemini.toolCalls"):
        if isinstance(call, dict) and isinstance(call.get("id"), str):
            state = _call(state, call, out)
    return state


def _thoughts(entries: list[Any]) -> str:
    pieces = []
    for entry in entries:
        if not isinstance(entry, dict):
            continue
        subject, description = entry.get("subject"), entry.get("description")
        piece = f"**{subject}**" if isinstance(subject, str) and subject else ""
        if isinstance(description, str) and description:
            piece = f"{piece} {description}" if piece else description
        if piece:
            pieces.append(piece)
    return " ".join(pieces)


def _whole(state: State, out: Emitter, mid: str, part: str | None, item_type: str,
           kind: str, text: str) -> None:
    """A whole text as a live stream gives it: started, one delta, completed."""
    role: Any = "assistant" if item_type == "assistant_message" else UNSET
    _emit(state, out, ItemStarted,
          ItemPayload(itemType=item_type, status="inProgress", role=role),  # type: ignore[arg-type]
          item=mid, part=part, synthetic=True)
    _emit(state, out, ContentDelta, ContentDeltaPayload(streamKind=kind, delta=text),  # type: ignore[arg-type]
          item=mid, part=part, synthetic=True)
    _emit(state, out, ItemCompleted,
          ItemPayload(itemType=item_type, status="completed", role=role, text=text),  # type: ignore[arg-type]
          item=mid, part=part)


# ---- tools -----------------------------------------------------------------------

#: a tool call's final statuses, and its item's status
_FINAL = {"success": "completed", "error": "failed", "cancelled": "declined"}


def _started(state: State, out: Emitter, tool_id: str, name: str, args: Any,
             synthetic: bool) -> State:
    if tool_id in state.tools:
        return state
    tool = Tool(name=name, input=gemini._tool_input(name, args))
    _emit(state, out, ItemStarted, tool_item(tool.name, tool.input, "inProgress", out.cap),
          item=tool_id, synthetic=synthetic)
    return _replace(state, tools={**state.tools, tool_id: tool})


def _completed(state: State, out: Emitter, tool_id: str, status: str, output: str,
               data: Any = UNSET) -> State:
    tool = state.tools[tool_id]
    payload = tool_item(tool.name, tool.input, status, out.cap, output=output, data=data)
    if status == "declined":
        payload = _replace(payload, isError=True)
    _emit(state, out, ItemCompleted, payload, item=tool_id)
    tools = {k: v for k, v in state.tools.items() if k != tool_id}
    return _replace(state, tools=tools, done=(*state.done, tool_id))


def _call(state: State, call: dict[str, Any], out: Emitter) -> State:
    tool_id: str = call["id"]
    if tool_id in state.done:
        return state
    native = call.get("name")
    name = normalize_tool_name(native) if isinstance(native, str) and native else "unknown"
    state = _started(state, out, tool_id, name, call.get("args"), synthetic=False)
    status = _FINAL.get(str(call.get("status")))
    if status is None:
        return state  # scheduled, awaiting approval, executing: its final write follows
    when = iso_to_ms(call.get("timestamp"))
    if when is not None and when > out.clock_ms:  # when it finished; never before it began
        out.set_clock(when)
    display = call.get("resultDisplay")
    output = display if isinstance(display, str) and display else \
        _response_text(call.get("result"))
    return _completed(state, out, tool_id, status, output)


def _response_text(result: Any) -> str:
    """The text of the first functionResponse of a tool call's `result` (what the model
    got: its `output`, or its `error`)."""
    for part in result if isinstance(result, list) else []:
        response = part.get("functionResponse") if isinstance(part, dict) else None
        if isinstance(response, dict):
            text, _ = _response_output(response)
            return text
    return ""


def _response_output(response: dict[str, Any]) -> tuple[str, bool]:
    """(text, is an error) of one functionResponse."""
    body = response.get("response")
    body = body if isinstance(body, dict) else {}
    error = body.get("error")
    if isinstance(error, str):
        return error, True
    output = body.get("output")
    return (output if isinstance(output, str) else ""), False


def _response(state: State, response: dict[str, Any], out: Emitter) -> State:
    """A tool result the model was sent: completes a call no gemini message completed
    (started here when no message showed it)."""
    tool_id = response.get("id")
    if not isinstance(tool_id, str) or tool_id in state.done:
        return state
    if state.turn is None:
        state = _open(state, out, None)
    native = response.get("name")
    # ids are `<tool>__<tool>_<epoch ms>_<n>`, as on the wire
    native = native if isinstance(native, str) and native else tool_id.split("__", 1)[0]
    state = _started(state, out, tool_id, normalize_tool_name(native), {}, synthetic=True)
    text, failed = _response_output(response)
    status = "completed" if not failed else "declined" if _REFUSED in text else "failed"
    return _completed(state, out, tool_id, status, text)


#: what the CLI answers the model for a call the user refused (`--acp` keeps no other
#: trace of the refusal)
_REFUSED = "was canceled by the user"


def _on_notice(state: State, obj: dict[str, Any], out: Emitter) -> State:
    """A warning or an error the CLI showed and recorded."""
    warning = obj["type"] == "warning"
    _emit(state, out, RuntimeErrorEvent, RuntimeErrorPayload(
        message=_text(obj.get("content")) or f"gemini {obj['type']}", errorClass="unknown",
        willRetry=warning))
    return state


# ---- tables ----------------------------------------------------------------------

_HANDLERS: Final = {
    "user": _on_user,
    "gemini": _on_gemini,
    "warning": _on_notice,
    "error": _on_notice,
}

#: Native types read on purpose and mapped to nothing, with the reason.
IGNORED_REASONS: dict[str, str] = {
    "info": "a notice the CLI showed (a command's feedback), not the conversation",
}
IGNORED: Final[frozenset[str]] = frozenset(IGNORED_REASONS)
