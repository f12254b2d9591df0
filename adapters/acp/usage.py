"""acp: token usage. The prompt result's `usage` (or Gemini's `_meta.quota`) is the
turn's: thread.token-usage.updated with the native object, and `tokens` on the turn's
turn.completed (acp_tokens) and, added to the thread's running total, on that
thread.token-usage.updated. The total counts the turns this canonflow session saw (a
session/load does not replay the usage of the turns before it); it is kept per ACP
session, as one connection may hold several. `usage_update` (how full the context window is, the
session's cumulative cost) is thread.token-usage.updated with the native fields only.
"""

from __future__ import annotations

from typing import Any

from adapters.acp.envelope import Ctx, native_agent, update_fields
from adapters.acp.state import State
from adapters.core.emitter import UNSET, Emitter
from adapters.core.emitter import replace as _replace
from adapters.core.shape import native_count
from topics.canonical import (
    ThreadTokenUsageUpdated,
    ThreadTokenUsageUpdatedPayload,
)
from topics.usage import TokenUsage, running, tokens


def acp_tokens(result: dict[str, Any]) -> TokenUsage | None:
    """TokenUsage of a session/prompt result (the turn's), None when it has no counts.
    ACP's `usage` ({inputTokens, outputTokens, thoughtTokens, cachedReadTokens,
    cachedWriteTokens, totalTokens}) counts each kind apart (its total is their sum), so
    the cache reads and writes are added to the input and the thoughts to the output.
    Gemini's agent sends `_meta.quota.token_count` instead ({input_tokens,
    output_tokens}: Gemini's prompt count, which includes what the cache served).
    `usage_update` notifications say how full the context window is, not what a turn
    spent: they give no TokenUsage."""
    usage = result.get("usage")
    if isinstance(usage, dict):
        read = native_count(usage, "cachedReadTokens")
        write = native_count(usage, "cachedWriteTokens")
        thought = native_count(usage, "thoughtTokens")
        return tokens(input=native_count(usage, "inputTokens") + read + write,
                      cachedInput=read, cacheWrite=write,
                      output=native_count(usage, "outputTokens") + thought,
                      reasoningOutput=thought)
    meta = result.get("_meta")
    quota = meta.get("quota") if isinstance(meta, dict) else None
    count = quota.get("token_count") if isinstance(quota, dict) else None
    if isinstance(count, dict):
        return tokens(input=native_count(count, "input_tokens"),
                      output=native_count(count, "output_tokens"))
    return None


def on_usage(state: State, upd: dict[str, Any], sid: str | None, out: Emitter) -> State:
    c = Ctx(state, out, sid, native_agent(upd))
    out.emit(ThreadTokenUsageUpdated, ThreadTokenUsageUpdatedPayload(usage=update_fields(upd)),
             thread=c.thread, turn=c.turn, refs=c.refs())
    return state


def on_turn_usage(state: State, result: dict[str, Any], sid: str | None, out: Emitter
                  ) -> tuple[State, Any, TokenUsage | None]:
    """The usage a session/prompt result states, if any: its thread.token-usage.updated
    (with the thread's running total once the turn's tokens are counted), and (the
    native usage, the turn's tokens) for its turn.completed."""
    usage = result.get("usage")
    if usage is None:  # gemini reports token counts in `_meta.quota`
        meta = result.get("_meta")
        usage = meta.get("quota") if isinstance(meta, dict) else None
    if usage is None:
        return state, None, None
    turn = acp_tokens(result)
    c = Ctx(state, out, sid)
    total: TokenUsage | None = None
    if turn is not None:
        key = c.sid or ""
        total = running(state.totals.get(key), turn)
        state = _replace(state, totals={**state.totals, key: total})
    out.emit(ThreadTokenUsageUpdated,
             ThreadTokenUsageUpdatedPayload(usage=usage, tokens=total or UNSET),
             thread=c.thread, turn=c.turn, refs=c.refs())
    return state, usage, turn
