"""Token usage (topics.usage.TokenUsage): one rule, every runtime.

Each runtime states the same counts its own way; its adapter's rule function turns
them into the same TokenUsage. In every captured conversation, the turns' tokens add
up to what the scripted model itself reported, call by call where the runtime passes
each call's numbers on (read here with the native field names, not the adapters')."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from adapters.acp.translator import acp_tokens
from adapters.claude.translator import claude_tokens, result_tokens
from adapters.codex.translator import codex_tokens
from adapters.codex_exec.translator import exec_tokens
from adapters.gemini.translator import gemini_tokens
from adapters.opencode.translator import opencode_tokens
from tests.adapters.harness import capture_lines, read_capture, run_whole
from topics.canonical import ThreadTokenUsageUpdated, TurnCompleted, decode_event
from topics.usage import TokenUsage, add, subtract, tokens

CAPTURED = Path(__file__).resolve().parents[1] / "fixtures" / "captured"

# One model call: 1000 input tokens, of which 600 read from the cache and 50 written to
# it; 300 output tokens, of which 120 reasoning.
SAME = TokenUsage(input=1000, cachedInput=600, cacheWrite=50, output=300,
                  reasoningOutput=120, total=1300)


@pytest.mark.parametrize("runtime, to_tokens, native", [
    ("claude (Anthropic usage)", claude_tokens,
     {"input_tokens": 350, "cache_read_input_tokens": 600, "cache_creation_input_tokens": 50,
      "output_tokens": 300, "output_tokens_details": {"thinking_tokens": 120}}),
    ("claude (modelUsage entry)", claude_tokens,
     {"inputTokens": 350, "cacheReadInputTokens": 600, "cacheCreationInputTokens": 50,
      "outputTokens": 300, "thinkingTokens": 120, "costUSD": 0.01}),
    ("codex app-server", codex_tokens,
     {"inputTokens": 1000, "cachedInputTokens": 600, "cacheWriteInputTokens": 50,
      "outputTokens": 300, "reasoningOutputTokens": 120, "totalTokens": 1300}),
    ("codex exec", exec_tokens,
     {"input_tokens": 1000, "cached_input_tokens": 600, "cache_write_input_tokens": 50,
      "output_tokens": 300, "reasoning_output_tokens": 120}),
    ("opencode", opencode_tokens,
     {"total": 1300, "input": 350, "output": 180, "reasoning": 120,
      "cache": {"read": 600, "write": 50}}),
    ("acp", acp_tokens,
     {"stopReason": "end_turn",
      "usage": {"inputTokens": 350, "cachedReadTokens": 600, "cachedWriteTokens": 50,
                "outputTokens": 180, "thoughtTokens": 120, "totalTokens": 1300}}),
])
def test_the_same_counts_stated_natively_give_the_same_token_usage(runtime, to_tokens, native):
    assert to_tokens(native) == SAME, runtime


def test_runtimes_without_cache_writes_or_reasoning_agree_on_the_rest():
    """Gemini states no cache writes, ACP's Gemini quota neither cache nor reasoning."""
    expected = tokens(input=1000, cachedInput=600, output=300)
    assert gemini_tokens({"total_tokens": 1300, "input_tokens": 1000, "output_tokens": 300,
                          "cached": 600, "input": 400}) == expected
    assert gemini_tokens({"input_tokens": 1000, "output_tokens": 180, "thoughts": 120,
                          "cached": 600}) == tokens(input=1000, cachedInput=600, output=300,
                                                    reasoningOutput=120)
    assert acp_tokens({"_meta": {"quota": {"token_count": {"input_tokens": 1000,
                                                           "output_tokens": 300}}}}) == \
        tokens(input=1000, output=300)
    assert acp_tokens({"stopReason": "end_turn"}) is None


def test_odd_counts_read_as_absent_and_total_is_always_input_plus_output():
    assert claude_tokens({"input_tokens": True, "output_tokens": "12",
                          "cache_read_input_tokens": -5}) == TokenUsage()
    assert codex_tokens({"inputTokens": 2**60, "outputTokens": 1.5}) == TokenUsage()
    assert codex_tokens("12 tokens") is None and exec_tokens(None) is None
    assert codex_tokens({"inputTokens": 10, "outputTokens": 5, "totalTokens": 99}).total == 15


def test_arithmetic_never_goes_negative():
    a = tokens(input=10, cachedInput=4, output=3)
    assert add(a, a) == tokens(input=20, cachedInput=8, output=6)
    assert subtract(a, add(a, a)) == TokenUsage()


def test_claude_takes_the_turns_own_usage_when_the_result_states_it():
    """`modelUsage` runs over the session; `model_usage_since_last_result` is the turn's."""
    entry = {"inputTokens": 100, "outputTokens": 10, "cacheReadInputTokens": 900}
    obj = {"usage": {"input_tokens": 5000, "output_tokens": 500},
           "modelUsage": {"m": {"inputTokens": 5000}},
           "model_usage_since_last_result": {"m": entry, "haiku": entry}}
    assert result_tokens(obj) == tokens(input=2000, cachedInput=1800, output=20)
    assert result_tokens({"usage": {"input_tokens": 7, "output_tokens": 1}}) == \
        tokens(input=7, output=1)


# ---- Codex app-server: a running total, updates that repeat ---------------------


def _codex_with(transform: Any) -> list[TokenUsage]:
    path = CAPTURED / "codex" / "codex-app-server__tool_shell.capture.jsonl"
    msgs = []
    for line in path.read_text().splitlines():
        cap = json.loads(line)
        msgs.extend((cap["origin"], m) for m in transform(cap["msg"]))
    out = []
    for raw in run_whole("codex", capture_lines(msgs)):
        ev = decode_event(raw)
        if isinstance(ev, TurnCompleted) and ev.payload.tokens:
            out.append(ev.payload.tokens)
    return out


def _is_usage(msg: dict[str, Any]) -> bool:
    return msg.get("method") == "thread/tokenUsage/updated"


def test_codex_turn_is_its_gain_in_the_thread_total_and_repeats_count_once():
    once = _codex_with(lambda m: [m])
    assert once == [tokens(input=2400, output=80)]
    assert _codex_with(lambda m: [m, m] if _is_usage(m) else [m]) == once


def test_codex_turn_of_a_resumed_thread_leaves_the_history_out():
    def history(m: dict[str, Any]) -> list[dict[str, Any]]:
        if _is_usage(m):
            m = json.loads(json.dumps(m))
            total = m["params"]["tokenUsage"]["total"]
            total["inputTokens"] += 50_000
            total["outputTokens"] += 900
        return [m]
    assert _codex_with(history) == [tokens(input=2400, output=80)]


# ---- every captured conversation against the model's own numbers ----------------


def _model_calls(provider: str, msgs: list[dict[str, Any]]) -> TokenUsage | None:
    """What the scripted model reported, from the native messages: per call where the
    runtime passes each call on, else the runtime's per-run count. None: no counts."""
    found: dict[str, TokenUsage] = {}  # per call (or run), the last report wins
    for m in msgs:
        if provider == "claude" and m.get("type") == "result":
            # Claude Code's `assistant` lines show a call's output count as it starts
            # streaming (1): the result's per-model count, the model's own numbers
            # summed over the calls, is the reference
            u = next(iter(m["modelUsage"].values()))
            found[str(len(found))] = tokens(
                input=u["inputTokens"] + u["cacheReadInputTokens"]
                + u["cacheCreationInputTokens"], cachedInput=u["cacheReadInputTokens"],
                cacheWrite=u["cacheCreationInputTokens"], output=u["outputTokens"])
        elif provider == "codex" and m.get("method") == "thread/tokenUsage/updated":
            last = m["params"]["tokenUsage"]["last"]
            found[str(len(found))] = tokens(
                input=last["inputTokens"], cachedInput=last["cachedInputTokens"],
                output=last["outputTokens"], reasoningOutput=last["reasoningOutputTokens"])
        elif provider == "codex-exec" and m.get("type") == "turn.completed":
            u = m["usage"]
            found[str(len(found))] = tokens(input=u["input_tokens"],
                                            cachedInput=u["cached_input_tokens"],
                                            output=u["output_tokens"],
                                            reasoningOutput=u["reasoning_output_tokens"])
        elif provider == "opencode" and m.get("type") == "message.part.updated":
            part = m["properties"]["part"]
            if part.get("type") == "step-finish":
                t = part["tokens"]
                found[part["id"]] = tokens(input=t["input"] + t["cache"]["read"],
                                           cachedInput=t["cache"]["read"],
                                           output=t["output"] + t["reasoning"],
                                           reasoningOutput=t["reasoning"])
        elif provider == "gemini" and m.get("type") == "result":
            s = m["stats"]
            found["run"] = tokens(input=s["input_tokens"], cachedInput=s["cached"],
                                  output=s["output_tokens"])
        elif provider == "acp" and isinstance(m.get("result"), dict):
            quota = (m["result"].get("_meta") or {}).get("quota")
            if quota:
                c = quota["token_count"]
                found[str(m["id"])] = tokens(input=c["input_tokens"], output=c["output_tokens"])
    total = None
    for call in found.values():
        total = call if total is None else add(total, call)
    return total


CAPTURES = sorted(CAPTURED.glob("*/*.capture.jsonl"))


@pytest.mark.parametrize("path", CAPTURES, ids=[p.stem for p in CAPTURES])
def test_captured_turns_add_up_to_the_models_own_numbers(path: Path):
    provider = path.parent.name
    msgs = [json.loads(line)["msg"] for line in path.read_text().splitlines() if line]
    expected = _model_calls(provider, msgs)
    turns: TokenUsage | None = None
    thread_total: TokenUsage | None = None
    for raw in run_whole(provider, read_capture(path)):
        ev = decode_event(raw)
        if isinstance(ev, TurnCompleted) and ev.payload.tokens:
            turns = ev.payload.tokens if turns is None else add(turns, ev.payload.tokens)
        if isinstance(ev, ThreadTokenUsageUpdated) and ev.payload.tokens:
            thread_total = ev.payload.tokens
    assert turns == expected
    if provider != "codex":  # Codex states its own total; the others' is their turns' sum
        assert thread_total == turns
    assert expected is not None or path.name.startswith(("acp-claude-code", "acp-codex"))
