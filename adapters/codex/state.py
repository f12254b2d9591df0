"""Codex app-server: the adapter's stored state (a session table value, encoded as arrays).

Kept apart from the translator module, which may be compiled with mypyc: mypyc drops
the class keywords (frozen, kw_only) these msgspec structs are declared with."""

from __future__ import annotations

from typing import Any

from adapters.core.contract import Stored
from topics.usage import TokenUsage


class OpenItem(Stored, frozen=True, kw_only=True):
    kind: str  # native ThreadItem type ("agentMessage", "commandExecution", ...)
    thread: str
    turn: str
    tool: str | None = None  # normalised tool name, for a completion Codex never sends
    phase: str | None = None  # agentMessage phase (commentary / final_answer)
    # what its deltas carried is not here: the item's streams (Session.streams, by
    # canonical item id) hold lengths and digests, the spool the bytes (adapters.codex)


class OpenTurn(Stored, frozen=True, kw_only=True):
    thread: str
    usage: Any = None  # last thread/tokenUsage/updated of this turn
    errorReported: bool = False  # a fatal `error` already became runtime.error
    # the thread's running total just before the turn's first model call (its first
    # update's total minus last): the turn's tokens are the latest total minus this.
    # Last, as a field added to a stored array must be.
    base: TokenUsage | None = None


class OpenRequest(Stored, frozen=True, kw_only=True):
    method: str
    requestType: str
    thread: str | None = None
    turn: str | None = None
    item: str | None = None


class SubAgent(Stored, frozen=True):
    """A collab agent's thread: the canonical ids of the collabAgentToolCall item that
    started it and of the item that started the agent which ran that one (None: the
    root agent), as Emitter.set_agent takes them."""

    spawner: str
    parent: str | None = None


class State(Stored, frozen=True, kw_only=True):
    """No text or output is kept (the conversation core's streams and spool hold
    those): turns, items and requests leave when they end, closedTurns keeps the last
    few, and only ids and small settings (the model, a turn's last token usage) are
    copied from the native messages. `threads` grows by one id per thread announced;
    `legacyWarned` keeps at most legacy.LEGACY_WARNED_KEPT kinds, `agents` the last
agents._KEPT subagent threads."""

    started: bool = False  # session.started emitted
    model: str | None = None  # model of the last configured thread
    threads: tuple[str, ...] = ()  # threads announced with thread.started (ids only)
    turns: dict[str, OpenTurn] = {}
    closedTurns: tuple[str, ...] = ()  # the last few ended turns: late messages never reopen them
    items: dict[str, OpenItem] = {}  # by Codex item id
    requests: dict[str, OpenRequest] = {}  # open server->client requests, by str(JSON-RPC id)
    pending: dict[str, str] = {}  # client->server requests awaiting a response: id -> method
    # `codex/event/<type>` kinds already reported once as runtime.warning (the legacy
    # mirror, adapters.codex): the last few, so the state stays bounded
    legacyWarned: tuple[str, ...] = ()
    # the server's release, from its initialize userAgent (session.configured says it);
    # last, as a field added to a stored array must be (older states decode unchanged)
    runtimeVersion: str | None = None
    # collab agents' threads by Codex thread id (adapters.codex.agents): the last
    # agents._KEPT started; last, as a field added to a stored array must be
    agents: dict[str, SubAgent] = {}
