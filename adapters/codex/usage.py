"""codex: token usage. `thread/tokenUsage/updated` carries the thread's running total
(`total`) and the last model call (`last`); a turn's tokens are its total's gain since
the turn's first call (docs "Token usage")."""

from __future__ import annotations

from typing import Any

from adapters.codex.common import Place, get_str, or_unset
from adapters.codex.state import State
from adapters.core.emitter import Emitter
from adapters.core.emitter import replace as _replace
from adapters.core.shape import native_count
from topics.canonical import ThreadTokenUsageUpdated, ThreadTokenUsageUpdatedPayload
from topics.usage import TokenUsage, subtract, tokens


def codex_tokens(breakdown: Any) -> TokenUsage | None:
    """TokenUsage of one Codex token breakdown (a `tokenUsage.total` or `.last`), None
    when it is no dict. OpenAI's rule: `inputTokens` includes the cached input (and the
    cache writes), `outputTokens` includes the reasoning."""
    if not isinstance(breakdown, dict):
        return None
    return tokens(input=native_count(breakdown, "inputTokens"),
                  cachedInput=native_count(breakdown, "cachedInputTokens"),
                  cacheWrite=native_count(breakdown, "cacheWriteInputTokens"),
                  output=native_count(breakdown, "outputTokens"),
                  reasoningOutput=native_count(breakdown, "reasoningOutputTokens"))


def turn_tokens(base: TokenUsage | None, usage: Any) -> TokenUsage | None:
    """A turn's tokens from its latest `tokenUsage` ({total, last}: `total` runs over the
    whole thread, `last` is the last model call only, and an update may repeat): the
    total's gain since `base`, the total before the turn's first call. None without a
    total."""
    total = codex_tokens(usage.get("total")) if isinstance(usage, dict) else None
    if total is None:
        return None
    return subtract(total, base) if base is not None else total


def on_token_usage(state: State, p: dict[str, Any], out: Emitter) -> State:
    usage = p.get("tokenUsage")
    turn = get_str(p, "turnId")
    total = codex_tokens(usage.get("total")) if isinstance(usage, dict) else None
    out.emit(ThreadTokenUsageUpdated,
             ThreadTokenUsageUpdatedPayload(usage=usage, tokens=or_unset(total)),
             **Place(out, thread=get_str(p, "threadId"), turn=turn).kw)
    if turn is not None and turn in state.turns:
        open_turn = state.turns[turn]
        base = open_turn.base
        if base is None and total is not None:  # the turn's first update
            last = codex_tokens(usage.get("last")) if isinstance(usage, dict) else None
            base = subtract(total, last) if last is not None else tokens()
        turns = dict(state.turns)
        turns[turn] = _replace(open_turn, usage=usage, base=base)
        state = _replace(state, turns=turns)
    return state


