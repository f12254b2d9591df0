"""claude: tokens and cost, by the rule of Anthropic's usage objects and Claude
Code's result (docs "Token usage"), and the thread's running total (State.total) that each
turn's tokens add to.

Importable for the transcript adapters (adapters.claude_transcript): `claude_tokens`
reads any usage object, as a message's or a `modelUsage` entry."""

from __future__ import annotations

from typing import Any

from adapters.claude.session import _emit
from adapters.claude.state import State
from adapters.core.emitter import UNSET, Emitter
from adapters.core.emitter import replace as _replace
from adapters.core.shape import native_count
from topics.canonical import ThreadTokenUsageUpdated, ThreadTokenUsageUpdatedPayload
from topics.usage import Cost, TokenUsage, add, running, tokens


def claude_tokens(usage: Any) -> TokenUsage | None:
    """TokenUsage of Anthropic's `usage` (snake_case: a message's or a result's) or of a
    Claude Code `modelUsage` entry (camelCase); None when `usage` is no dict. Anthropic's
    input count leaves the cache reads and writes out (they are added to it); its output
    count includes thinking (`output_tokens_details.thinking_tokens`, `thinkingTokens`)."""
    if not isinstance(usage, dict):
        return None
    read = native_count(usage, "cache_read_input_tokens", "cacheReadInputTokens")
    write = native_count(usage, "cache_creation_input_tokens", "cacheCreationInputTokens")
    details = usage.get("output_tokens_details")
    return tokens(input=native_count(usage, "input_tokens", "inputTokens") + read + write,
                  cachedInput=read, cacheWrite=write,
                  output=native_count(usage, "output_tokens", "outputTokens"),
                  reasoningOutput=native_count(details, "thinking_tokens")
                  or native_count(usage, "thinkingTokens"))


def result_tokens(obj: dict[str, Any]) -> TokenUsage | None:
    """The turn's own tokens from a `result` line: its per-model usage since the last
    result where Claude Code sends it (`model_usage_since_last_result`; `modelUsage`
    adds up every turn of the session), else `usage` (a `-p` run is one turn)."""
    since = obj.get("model_usage_since_last_result")
    if isinstance(since, dict) and since:
        total = tokens()
        for entry in since.values():
            total = add(total, claude_tokens(entry) or tokens())
        return total
    return claude_tokens(obj.get("usage"))


def result_cost(obj: dict[str, Any]) -> Cost | None:
    """The turn's cost as Claude Code reported it: the sum of the per-model `costUSD`
    since the last result where it sends them (its `total_cost_usd` then runs over the
    session), else `total_cost_usd` (a `-p` run is one turn); None when it reports none."""
    since = obj.get("model_usage_since_last_result")
    if isinstance(since, dict) and since:
        entries = [e.get("costUSD") if isinstance(e, dict) else None for e in since.values()]
        costs = [float(c) for c in entries
                 if isinstance(c, int | float) and not isinstance(c, bool)]
        if len(costs) == len(entries):
            return Cost(source="provider", usd=sum(costs),
                        priceSource="result.model_usage_since_last_result",
                        model=next(iter(since)) if len(since) == 1 else UNSET)
    total = obj.get("total_cost_usd")
    if isinstance(total, int | float) and not isinstance(total, bool):
        models = obj.get("modelUsage")
        one = next(iter(models)) if isinstance(models, dict) and len(models) == 1 else UNSET
        return Cost(source="provider", usd=float(total), priceSource="result.total_cost_usd",
                    model=one)
    return None


def count_turn(state: State, out: Emitter, usage: Any, turn: TokenUsage) -> State:
    """Add a turn's tokens to the thread's running total (State.total; a resumed session
    keeps counting from its stored state) and say it: thread.token-usage.updated with the
    turn's native `usage` and the total including this turn as `tokens`, emitted before
    the turn's turn.completed. A native message seen twice is translated once
    (adapters.core.record drops a repeated message id), so it counts once."""
    total = running(state.total, turn)
    state = _replace(state, total=total)
    _emit(state, out, ThreadTokenUsageUpdated,
          ThreadTokenUsageUpdatedPayload(usage=usage, tokens=total))
    return state
