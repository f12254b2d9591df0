"""Claude Code: the adapter's stored state (a session table value, encoded as arrays).

Kept apart from the translator module, which may be compiled with mypyc: mypyc drops
the class keywords (frozen, kw_only) these msgspec structs are declared with."""

from __future__ import annotations

from typing import Any

from adapters.core.contract import Stored
from topics.usage import TokenUsage


class Block(Stored, frozen=True, kw_only=True):
    """A content block streamed by `stream_event`s whose item is not completed yet.

    What it streamed is not kept here but in the conversation core's streams
    (adapters.core.emitter.Emitter, "Streams"; adapters.claude says which)."""

    kind: str  # "text" | "thinking" | "tool"
    tool: str | None = None  # tool_use id of a tool block


class Msg(Stored, frozen=True, kw_only=True):
    """An assistant message of the current turn (kept until the turn ends, to dedupe)."""

    key: str  # what the message's item ids derive from: message.id, or a synthesised id
    native: str | None = None  # message.id once known
    parent: str | None = None  # parent_tool_use_id (subagent output)
    streamed: bool = False  # stream_events were seen for it (partial messages)
    cur: int = -1  # index of the block streamed last
    next: int = 0  # next index for one-block `assistant` lines of an unstreamed message
    done: tuple[int, ...] = ()  # block indices whose item is completed (or a tool started)


class Tool(Stored, frozen=True, kw_only=True):
    """A tool item waiting for its result, by tool_use id."""

    itemType: str
    toolName: str
    # the tool call's whole input, carried by every event of the item: one message's
    # tool_use block, so bounded by a message, and dropped with the item (its result)
    input: Any = None
    parent: str | None = None
    final: bool = False  # the whole input is known (not only streamed JSON)
    denied: bool = False  # permission refused: completes as declined
    question: int = 0  # AskUserQuestion: 1 user-input opened, 2 resolved


class Pending(Stored, frozen=True, kw_only=True):
    """A control_request waiting for its control_response, by request_id."""

    subtype: str
    origin: str  # who asked: "agent" or "client"
    requestType: str = "unknown"
    request: str | None = None  # native key of the canonical request id
    tool: str | None = None  # tool_use id the request is about
    value: Any = None  # what a client's set_* request asked for (a mode, a model, a number)


class State(Stored, frozen=True, kw_only=True):
    session: str | None = None  # provider session_id (the thread)
    started: bool = False  # session.started emitted
    cwd: str | None = None
    model: str | None = None
    turns: int = 0  # turns opened so far (the ordinal names the turn)
    turnOpen: bool = False
    interrupting: bool = False  # the client asked for an interrupt in this turn
    failed: bool = False  # an error was reported in this turn (Amp's legacy `done`)
    anon: int = 0  # counter for native objects without an id
    msgs: dict[str, Msg] = {}  # by message.id (or synthesised key), current turn only
    streams: dict[str, str] = {}  # parent_tool_use_id ("" = main agent) -> msgs key streaming
    blocks: dict[str, Block] = {}  # "<msg key>#<index>" -> streamed block not completed
    tools: dict[str, Tool] = {}
    pending: dict[str, Pending] = {}
    # a nested subagent's Task call -> the Task call of the subagent that made it (first-
    # level ones are absent: their parent is the root); kept until the turn ends, when
    # the items it names are all closed (adapters.claude.agents)
    agents: dict[str, str] = {}
    total: TokenUsage | None = None  # the thread's tokens so far (adapters.claude.usage)
