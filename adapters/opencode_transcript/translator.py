"""opencode-transcript: OpenCode's database (`~/.local/share/opencode/opencode.db`) -> canonical events.

Reads rows of the database of OpenCode 1.18.33 as `{"table": T, "row": {column: value}}`
(JSON text columns as the strings SQLite returns), one per message: the rows of the
`event` table (sources.TABLES), in `seq` order per session. The record key (the session
id) is the OpenCode session id, the row's `aggregate_id`.

The `event` table is the durable half of OpenCode's event bus: every row has the id,
type (with a `.1` version suffix) and payload of the `GET /event` event it was
published as. So each row is handed, as that bus event, to the bus translator
(adapters.opencode): a database gives the events, ids and payloads the live bus gives,
from the same `ses_`/`msg_`/`prt_`/`callID` ids. Text parts are stored whole
(`message.part.updated` snapshots, no `message.part.delta`), so a text item gets its
text in one content.delta; tool parts keep their pending -> running -> completed states.

What the bus says and the table does not keep: deltas, `session.status` (busy, retry,
idle), `session.idle`, `session.error`, `session.diff`, permission and question events.
The turns are inferred by the bus translator from the prompts, as on the bus; their ends,
which the bus says by going idle, are read here from the messages (OpenCode's prompt
loop stops on the same facts):
* an assistant message completed with an `error` ends its turn with that error
  (runtime.error, as session.error would: MessageAbortedError interrupted, else failed);
* completed with a `finish` other than `tool-calls` ends it completed;
* completed with `tool-calls` after the user refused one of its tool calls ends it
  completed (OpenCode does not call the model again);
* completed with neither finish nor error (a call abandoned while retrying: the error
  and the retries are only in the server log) ends it interrupted;
* a new prompt ends a turn still open (completed).
Retries, approvals (asked, answered: only a refused tool part's error remains) and
errors that did not reach a message are not in the database and are not invented.

Repeated ids: the `event` table is append-only (OpenCode updates `part` and `message`
rows in place, which is why they are not read); a part updated again is a new event
row with the part's whole state, and the bus translator emits only what it adds (a
text part's new suffix, a tool's next state; a closed part's re-sends nothing). A row
sent again is dropped by its `evt_` id (message_id).

Rewritten databases. A database replaced by another file has every row of its sessions
sent again; the rows already translated are dropped, however far back, by the
greatest `seq` translated (State.mark, adapters.core.resent: one integer, whatever the
session's length). It relies on the `event` table's contract: `seq` counts a session's
events from 0 without gaps, and a new event always gets the next one.

Rows of other tables are not read (`sources.TABLES`): one is a runtime.warning.
"""

from __future__ import annotations

import re
from typing import Any, Final

import msgspec

from adapters.core.contract import MalformedRecord, Message
from adapters.core.emitter import Emitter
from adapters.core.emitter import replace as _replace
from adapters.core.resent import resent
from adapters.opencode import translator as bus
from adapters.opencode.tools import _refused
from adapters.opencode.turns import _end_turn, _on_session_error
from adapters.opencode.turns import _idle as _bus_idle
from adapters.opencode_transcript.state import State

provider = "opencode-transcript"
raw_source = "opencode.db"
state_type = State
IGNORED: Final[frozenset[str]] = frozenset()

_RING: Final = 16  # message ids remembered (State.done, State.refused)
_VERSION: Final = re.compile(r"\.\d+$")  # the event type's version suffix
_decode: Final = msgspec.json.Decoder().decode


def message_id(obj: dict[str, Any], origin: str) -> str | None:
    """An event row's `id` (`evt_...`, the bus event's own id)."""
    row = obj.get("row")
    eid = row.get("id") if isinstance(row, dict) else None
    return eid if isinstance(eid, str) else None


def initial() -> State:
    return State()


def translate(state: State, msg: Message, out: Emitter) -> State:
    """Apply one database row and return the new state.

    Raises MalformedRecord for a row that is not one (a `table` that is no string, a
    `row` that is no object) and for an event row without a string type or with `data`
    that is not a JSON object. A record without `table` and `row`, or a row of a table
    this adapter does not read, is a runtime.warning.
    """
    table, row = msg.obj.get("table"), msg.obj.get("row")
    if table is None and row is None:  # not a row: a record this adapter does not read
        kind = msg.obj.get("type")
        out.native_type = kind if isinstance(kind, str) else "?"
        out.unknown(out.native_type)
        return state
    if not isinstance(table, str) or not isinstance(row, dict):
        raise MalformedRecord("an opencode row needs a string 'table' and an object 'row'")
    if table != "event":
        out.native_type = table
        out.unknown(f"table {table}")
        return state
    seq = row.get("seq")
    old, mark = resent(state.mark, seq if isinstance(seq, int) and not isinstance(seq, bool)
                       else None, None, row, 0)
    if old:
        out.native_type = "event"
        return state  # translated already: the rows were sent again ("Rewritten databases")
    if mark is not state.mark:
        state = _replace(state, mark=mark)
    kind, data = row.get("type"), row.get("data")
    if not isinstance(kind, str):
        raise MalformedRecord("opencode event row without a string type")
    if isinstance(data, str):
        try:
            data = _decode(data)
        except (msgspec.DecodeError, RecursionError):
            raise MalformedRecord("opencode event row: data is not JSON") from None
    if not isinstance(data, dict):
        raise MalformedRecord("opencode event row: data must be a JSON object")
    kind = _VERSION.sub("", kind)
    event = {"id": row.get("id"), "type": kind, "properties": data}
    at = _time(kind, data)
    if at is not None:
        out.set_clock(at)
    if kind == "message.updated":
        state = _before_message(state, data, out)
    state = _replace(state, live=bus.translate(state.live, _as(msg, event), out))
    if kind == "message.updated":
        return _after_message(state, data, out)
    if kind == "message.part.updated":
        return _after_part(state, data)
    return state


def _as(msg: Message, event: dict[str, Any]) -> Message:
    """The row as the bus event it was published as (its bytes stay the row's)."""
    return Message(event, msg.data, msg.origin, msg.time_ms)


def _time(kind: str, data: dict[str, Any]) -> int | None:
    """When the event happened, from its payload (event rows have no time column): a
    part update's `time`, a message's completion or creation, a session's update."""
    at: Any = data.get("time")
    info = data.get("info")
    if not isinstance(at, int) and isinstance(info, dict):
        times = info.get("time")
        if isinstance(times, dict):
            at = times.get("completed", times.get("updated", times.get("created")))
    if isinstance(at, int) and not isinstance(at, bool) and 0 <= at <= 253_402_300_799_999:
        return at
    return None


def _idle(state: State, sid: str, out: Emitter) -> State:
    """What the bus translator does when the session goes idle (which the database does
    not keep): the open turn ends, as an error said or completed."""
    return _replace(state, live=_bus_idle(state.live, out, sid))


def _before_message(state: State, data: dict[str, Any], out: Emitter) -> State:
    """A new prompt while a turn is still open: that turn ended (the bus went idle)."""
    info = data.get("info")
    if not isinstance(info, dict) or info.get("role") != "user":
        return state
    sid, mid = info.get("sessionID", data.get("sessionID")), info.get("id")
    sess = state.live.sessions.get(sid) if isinstance(sid, str) else None
    times = info.get("time")
    created = times.get("created") if isinstance(times, dict) else None
    if sess is None or not sess.turnOpen or mid == sess.prompt:
        return state
    if isinstance(created, (int, float)) and created < sess.promptAt:
        return state  # an older prompt written again
    assert isinstance(sid, str)
    return _idle(state, sid, out)


def _after_message(state: State, data: dict[str, Any], out: Emitter) -> State:
    """An assistant message completed: how its turn goes on (module docstring)."""
    info = data.get("info")
    if not isinstance(info, dict) or info.get("role") != "assistant":
        return state
    times = info.get("time")
    sid, mid = info.get("sessionID", data.get("sessionID")), info.get("id")
    if not isinstance(times, dict) or times.get("completed") is None or mid in state.done \
            or not isinstance(sid, str) or not isinstance(mid, str):
        return state
    state = _replace(state, done=(*state.done, mid)[-_RING:])
    sess = state.live.sessions.get(sid)
    if sess is None or not sess.turnOpen:
        return state
    error, finish = info.get("error"), info.get("finish")
    if isinstance(error, dict):
        # what session.error says on the bus: runtime.error, and how the turn ends
        live = _on_session_error(state.live, {"sessionID": sid, "error": error}, out)
        return _idle(_replace(state, live=live), sid, out)
    if isinstance(finish, str) and finish:
        if finish not in ("tool-calls", "unknown") or mid in state.refused:
            return _idle(state, sid, out)
        return state  # the model is called again: the next message goes on with the turn
    return _replace(state, live=_end_turn(state.live, out, sid, "interrupted"))


def _after_part(state: State, data: dict[str, Any]) -> State:
    """Remember a message whose tool call the user refused (the turn stops there)."""
    part = data.get("part")
    if not isinstance(part, dict) or part.get("type") != "tool":
        return state
    tstate, mid = part.get("state"), part.get("messageID")
    if isinstance(tstate, dict) and tstate.get("status") == "error" and _refused(tstate) \
            and isinstance(mid, str) and mid not in state.refused:
        return _replace(state, refused=(*state.refused, mid)[-_RING:])
    return state
