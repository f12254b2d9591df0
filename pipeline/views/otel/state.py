"""What the span builder keeps between events, per session: the open turns of the root
agent, the open tool calls, the open subagents, and a few ids of what recently ended.
Every piece is dropped when what it describes ends, so a session's state is bounded by
what is open in it, never by its length."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from pipeline.views.otel.model import DONE_TURNS_KEPT, SpanEvent
from topics.usage import TokenUsage

#: Ids of recently ended tool items and subagents remembered per session, with their
#: trace: a subagent's event that comes after its spawning tool or its own span ended
#: still lands in the right trace, under the right span.
ENDED_KEPT = 64


class _Tool:
    """An open tool call: its execute_tool span, under its turn or its agent."""

    __slots__ = ("item_id", "turn_id", "agent_id", "trace_id", "span_id", "parent_id",
                 "start_ns", "events", "started")

    def __init__(self, item_id: str, turn_id: str | None, agent_id: str | None,
                 trace_id: bytes, span_id: bytes, parent_id: bytes, start_ns: int,
                 started: dict[str, Any]):
        self.item_id, self.turn_id, self.agent_id = item_id, turn_id, agent_id
        self.trace_id, self.span_id, self.parent_id = trace_id, span_id, parent_id
        self.start_ns, self.started = start_ns, started
        self.events: list[SpanEvent] = []


class _Invocation:
    """What a root turn and a subagent both gather for their invoke_agent span."""

    __slots__ = ("start_ns", "last_ns", "model", "rerouted", "error_class", "abort_reason",
                 "events", "requests")

    def __init__(self, start_ns: int):
        self.start_ns = self.last_ns = start_ns
        self.model: str | None = None
        self.rerouted: str | None = None
        self.error_class: str | None = None
        self.abort_reason: str | None = None
        self.events: list[SpanEvent] = []
        self.requests: dict[str, int] = {}  # open request id -> opened at (ns)


class _Turn(_Invocation):
    """An open turn of the session's root agent: one trace, its invoke_agent span."""

    __slots__ = ("turn_id", "thread_id")

    def __init__(self, turn_id: str, start_ns: int):
        super().__init__(start_ns)
        self.turn_id = turn_id
        self.thread_id: str | None = None


class _Agent(_Invocation):
    """An open subagent: its invoke_agent span, under the execute_tool span of the tool
    item that started it, in that tool's trace. Its own turns (a runtime that gives a
    subagent turns of its own, as Codex's collab agents have) are folded into it: their
    usage, cost, model and failure are the agent's."""

    __slots__ = ("agent_id", "parent_agent_id", "spawner", "trace_id", "span_id",
                 "parent_id", "name", "description", "turns", "turns_done", "tokens",
                 "cost_usd", "cost_sources", "finish", "failure", "spawner_done", "turn_id")

    def __init__(self, agent_id: str, parent_agent_id: str | None, spawner: str,
                 trace_id: bytes, span_id: bytes, parent_id: bytes, start_ns: int):
        super().__init__(start_ns)
        self.agent_id, self.parent_agent_id, self.spawner = agent_id, parent_agent_id, spawner
        self.trace_id, self.span_id, self.parent_id = trace_id, span_id, parent_id
        self.name: str | None = None  # gen_ai.agent.name, e.g. the Task tool's subagent_type
        self.description: str | None = None
        self.turns: set[str] = set()  # its own open turns
        self.turns_done = 0
        self.tokens: TokenUsage | None = None  # the sum of its turns' tokens
        self.cost_usd: float | None = None
        self.cost_sources: set[str] = set()
        self.finish: str | None = None  # the stop reason of its last turn
        self.failure: str | None = None  # the error message of a failed turn of it
        self.spawner_done = False  # its spawning tool completed
        self.turn_id: str | None = None  # the turn a span of it after its first is for


class _Session:
    __slots__ = ("provider", "model_provider", "model", "root_agent", "turns", "tools",
                 "agents", "done", "ended")

    def __init__(self, provider: str, root_agent: str):
        self.provider = provider
        self.model_provider: str | None = None
        self.model: str | None = None
        self.root_agent = root_agent  # gen_ai.agent.id of the root's turn spans
        self.turns: dict[str, _Turn] = {}
        self.tools: dict[str, _Tool] = {}
        self.agents: dict[str, _Agent] = {}
        #: Recently completed turns: a late event of one must not reopen it (its span
        #: is out already, and a second span with the same id would follow).
        self.done: dict[str, None] = {}
        #: Recently ended tool items and subagents -> their trace id (ENDED_KEPT).
        self.ended: OrderedDict[str, bytes] = OrderedDict()

    def finish(self, turn_id: str) -> None:
        self.turns.pop(turn_id, None)
        self.done[turn_id] = None
        if len(self.done) > DONE_TURNS_KEPT:
            del self.done[next(iter(self.done))]

    def remember(self, ended_id: str, trace_id: bytes) -> None:
        self.ended[ended_id] = trace_id
        if len(self.ended) > ENDED_KEPT:
            self.ended.popitem(last=False)
