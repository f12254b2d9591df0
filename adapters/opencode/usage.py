"""OpenCode: tokens and cost. Each step's `step-finish` part is a
thread.token-usage.updated, summed over the turn into turn.completed; the thread's
running total (Sess.total), the turn included, goes out on a thread.token-usage.updated
just before that turn.completed.
"""

from __future__ import annotations

from typing import Any

from msgspec import UnsetType

from adapters.core.emitter import UNSET, Emitter
from adapters.core.emitter import replace as _replace
from adapters.core.shape import native_count
from adapters.opencode.common import (
    _close_ids,
    _dict,
    _int,
    _num,
    _open_turn,
    _set_sess,
    _srefs,
    _str,
    _thread,
    _turn,
)
from adapters.opencode.state import Sess, State, Usage
from topics.canonical import (
    ThreadTokenUsageUpdated,
    ThreadTokenUsageUpdatedPayload,
)
from topics.usage import Cost, TokenUsage, running, tokens


def opencode_tokens(native: dict[str, Any]) -> TokenUsage:
    """TokenUsage of an OpenCode `tokens` object ({input, output, reasoning, cache: {read,
    write}}: a step-finish part's or an assistant message's). OpenCode's rule: `input`
    leaves the cache reads and writes out and `output` leaves the reasoning out (its own
    cost prices each part apart), so both are added back."""
    cache = native.get("cache")
    read = native_count(cache, "read")
    write = native_count(cache, "write")
    reasoning = native_count(native, "reasoning")
    return tokens(input=native_count(native, "input") + read + write, cachedInput=read,
                  cacheWrite=write, output=native_count(native, "output") + reasoning,
                  reasoningOutput=reasoning)


def _on_step_finish(state: State, out: Emitter, sid: str, mid: str, pid: str,
                    part: dict[str, Any]) -> State:
    state = _open_turn(state, out, sid)
    tokens = _dict(part, "tokens")
    cache = _dict(tokens, "cache")
    cost = _num(part.get("cost"))
    sess = state.sessions[sid]
    u = sess.usage or Usage()
    u = Usage(input=u.input + _int(tokens.get("input")),
              output=u.output + _int(tokens.get("output")),
              reasoning=u.reasoning + _int(tokens.get("reasoning")),
              cacheRead=u.cacheRead + _int(cache.get("read")),
              cacheWrite=u.cacheWrite + _int(cache.get("write")),
              cost=u.cost + cost)
    reason = _str(part, "reason")
    state = _set_sess(state, sid, _replace(sess, usage=u, finish=reason or sess.finish))
    out.emit(ThreadTokenUsageUpdated,
             ThreadTokenUsageUpdatedPayload(usage={
                 "step": {"tokens": tokens, "cost": cost, "reason": reason or None},
                 "turn": {"input": u.input, "output": u.output, "reasoning": u.reasoning,
                          "cacheRead": u.cacheRead, "cacheWrite": u.cacheWrite,
                          "cost": u.cost}}),
             thread=_thread(out, sid), turn=_turn(state, out, sid), refs=_srefs(sid))
    return _replace(state, closed=_close_ids(state, pid))


def _turn_usage(u: Usage) -> tuple[dict[str, Any], TokenUsage, Cost | UnsetType]:
    """A turn's summed steps: turn.completed's native `usage`, its tokens and its cost."""
    usage = {"input": u.input, "output": u.output, "reasoning": u.reasoning,
             "cacheRead": u.cacheRead, "cacheWrite": u.cacheWrite}
    turn_tokens = opencode_tokens({"input": u.input, "output": u.output,
                                   "reasoning": u.reasoning,
                                   "cache": {"read": u.cacheRead, "write": u.cacheWrite}})
    # OpenCode writes 0 for a model it has no price for: not a price
    cost: Cost | UnsetType = Cost(source="provider", usd=u.cost,
                                  priceSource="step-finish.cost") if u.cost > 0 else UNSET
    return usage, turn_tokens, cost


def _thread_total(state: State, out: Emitter, sid: str, sess: Sess, u: Usage,
                  turn_tokens: TokenUsage) -> Sess:
    """The thread's total with the turn that ends: on a thread.token-usage.updated (its
    `usage` the turn's, as the steps' updates give it), kept in the session."""
    total = running(sess.total, turn_tokens)
    out.emit(ThreadTokenUsageUpdated,
             ThreadTokenUsageUpdatedPayload(usage={"turn": {
                 "input": u.input, "output": u.output, "reasoning": u.reasoning,
                 "cacheRead": u.cacheRead, "cacheWrite": u.cacheWrite, "cost": u.cost}},
                 tokens=total),
             thread=_thread(out, sid), turn=_turn(state, out, sid), refs=_srefs(sid))
    return _replace(sess, total=total)
