"""ACP: the adapter's stored state (a session table value, encoded as arrays).

Kept apart from the translator module, which may be compiled with mypyc: mypyc drops
the class keywords (frozen, kw_only) these msgspec structs are declared with."""

from __future__ import annotations

from typing import Any

from adapters.core.contract import Stored
from topics.usage import TokenUsage


class Pending(Stored, frozen=True, kw_only=True):
    """A request in flight, remembered until its response arrives."""

    method: str
    turn: int = 0  # session/prompt: the ordinal of the turn it opened
    session: str | None = None  # the session the request names
    arg: str | None = None  # set_mode: the mode; terminal/*: the terminal id
    tool: str | None = None  # agent requests: key of the tool item they belong to
    own: bool = False  # that tool item was opened for this request
    requestType: str | None = None  # session/request_permission
    options: dict[str, str] = {}  # permission optionId -> option kind


class Diff(Stored, frozen=True, kw_only=True):
    """One diff block of a tool call's content, in short: its file and line counts (its
    texts are spooled, see adapters.acp "Streams")."""

    path: str
    old: int | None = None  # lines of oldText; None: a new file
    new: int = 0  # lines of newText


class Tool(Stored, frozen=True, kw_only=True):
    """What is known of one open tool call (the merge of its announcements). Its long
    content (text, description, terminal output, raw output, the first diff's texts) is
    in the item's spooled streams, never here (see adapters.acp "Streams")."""

    own: bool = False  # opened for a client-side method call, not a tool_call
    name: str | None = None  # the runtime's own tool name, when it gives one
    kind: str | None = None
    title: str | None = None
    status: str = "pending"
    # The call's input: kept whole, as every payload of the item carries it. Bounded:
    # the runtime sends it whole in one announcement (never streamed, never appended
    # to), and it is dropped with the item.
    rawInput: Any = None
    rawExit: int | None = None  # the exit code in rawOutput (a codex exec record)
    diffs: list[Diff] = []  # one per diff block (as many as the one announcement holds)
    paths: list[str] = []
    exitCode: int | None = None
    declined: bool = False
    # the tool call that started the subagent running this one (None: the root agent);
    # last, as a field added to a stored array must be
    agent: str | None = None
    # where the command runs when its input does not say: the client terminal's cwd,
    # else the session's (a path)
    cwd: str | None = None


class Stream(Stored, frozen=True, kw_only=True):
    """The message (or reasoning) item that text chunks are currently appended to (its
    text is the item's spooled `text` stream, see adapters.acp "Streams")."""

    kind: str  # "assistant" | "reasoning" | "user"
    n: int  # session-wide item ordinal (names the item)
    messageId: str | None = None
    agent: str | None = None  # the subagent's (Tool.agent) whose message it is


class State(Stored, frozen=True, kw_only=True):
    session: str | None = None  # the ACP sessionId of the last session/new|load
    started: bool = False  # session.started emitted
    turns: int = 0  # prompts so far (the ordinal names the turn)
    turnOpen: bool = False
    items: int = 0  # message items so far
    stream: Stream | None = None
    tools: dict[str, Tool] = {}
    done: list[str] = []  # tool calls completed in this turn: late updates are dropped
    client: dict[str, Pending] = {}  # requests from the client, by id key
    agent: dict[str, Pending] = {}  # requests from the agent, by id key
    terminals: dict[str, str] = {}  # terminal id -> key of the tool item it runs for
    # each ACP session's running token total over the turns seen (docs "Token usage");
    # last, as a field added to a stored array must be
    totals: dict[str, TokenUsage] = {}
    cwd: str | None = None  # the working directory of the last session/new|load (a path)
