"""OpenCode: the adapter's stored state (a session table value, encoded as arrays).

Kept apart from the translator module, which may be compiled with mypyc: mypyc drops
the class keywords (frozen, kw_only) these msgspec structs are declared with."""

from __future__ import annotations

from adapters.core.contract import Stored
from topics.usage import TokenUsage


class Part(Stored, frozen=True, kw_only=True):
    """One open message part (text, reasoning or tool)."""

    sid: str  # native session id
    msg: str  # native message id
    kind: str  # "text" | "reasoning" | "tool" | "" (only deltas seen so far)
    role: str = ""  # "user" | "assistant" | "" (unknown: text buffered, nothing emitted)
    started: bool = False  # item.started emitted
    # the text/reasoning emitted so far, and the text not emitted yet (whitespace held
    # back on the delta path, or text buffered while the role is unknown), each while it
    # is at most opencode._KEPT characters long; longer, it is spooled (streams "text"
    # and "held" of the part's item) and this is ""
    said: str = ""
    held: str = ""
    ended: bool = False  # final snapshot seen while the role was unknown
    call: str = ""  # tool callID
    tool: str = ""  # native tool name
    declined: bool = False  # its permission was rejected / its question dismissed
    busy: bool = False  # a tool call, or text that OpenCode timed (time.start) and not ended


class Usage(Stored, frozen=True, kw_only=True):
    input: int = 0
    output: int = 0
    reasoning: int = 0
    cacheRead: int = 0
    cacheWrite: int = 0
    cost: float = 0.0


class Sess(Stored, frozen=True, kw_only=True):
    """One OpenCode session (a canonical thread) seen on the bus."""

    turns: int = 0  # turns started so far (the ordinal names the turn)
    turnOpen: bool = False
    prompt: str = ""  # id of the latest user message that opened a turn
    promptAt: int = 0  # its time.created
    # a digest of the title (any length: a client may set it), to tell a rename from the
    # session.updated OpenCode re-sends for every usage change; None: no title seen
    title: str | None = None
    cwd: str = ""  # working directory of the latest assistant message (a path: bounded)
    finish: str = ""  # finish reason of the latest step of the turn (AI SDK's, one word)
    retry: int = 0  # last retry attempt reported in this turn
    usage: Usage | None = None  # summed over the turn's steps
    ending: str = ""  # how the open turn ends, once session.error said so
    error: str = ""  # that error's message while short (else spooled: the turn's "error")
    waiting: bool = False  # the last status was retry: OpenCode sleeps before its next call
    # it went idle while waiting to retry: the turn was cut short, and 1.1.x reports why
    # only after the idle, so the turn stays open for that report
    held: bool = False
    # the thread's running total (topics.usage), the turns that ended so far included
    total: TokenUsage | None = None


class Request(Stored, frozen=True, kw_only=True):
    sid: str
    kind: str  # "permission" | "question"
    requestType: str
    call: str = ""  # tool callID it gates


class Agent(Stored, frozen=True, kw_only=True):
    """The subagent an OpenCode child session is: the task tool part that started it."""

    part: str  # the task tool part's id (the entry goes when that part completes)
    spawner: str  # the canonical id of that part's tool item
    parent: str = ""  # the spawner of the agent that ran the task tool ("": the root)


class State(Stored, frozen=True, kw_only=True):
    started: bool = False  # session.started emitted
    sessions: dict[str, Sess] = {}
    # message id -> role, for the messages of open turns (ids only, pruned when the turn
    # ends: bounded by the steps of a turn, not by what they stream)
    roles: dict[str, str] = {}
    msgSession: dict[str, str] = {}  # message id -> session id (to prune `roles`)
    parts: dict[str, Part] = {}
    requests: dict[str, Request] = {}
    # the last _RING closed part and request ids, as common._closed_key: 9 bytes each in
    # msgpack where an id took 31-41; written with every record. States stored before
    # hold the ids themselves (str), read as well until the ring has moved past them.
    closed: tuple[int | str, ...] = ()
    # child session id -> the subagent it is (agents.py): one entry per running task tool
    # part that named its child session, dropped when that part completes
    agents: dict[str, Agent] = {}
