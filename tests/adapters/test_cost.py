"""A turn's cost and its provenance (topics.usage.Cost, adapters.core.pricing).

The runtime's own cost where it reports one (Claude Code, OpenCode), else the turn's
tokens priced for its model by genai-prices' bundled list, else `unpriced` (no `usd`,
never 0). Pricing reads neither the network nor the clock."""

from __future__ import annotations

import json
import socket
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from genai_prices import Usage, calc_price

from adapters.core import pricing
from adapters.core.pricing import computed_cost, price_version
from tests.adapters.harness import capture_lines, read_capture, run_whole
from topics.canonical import TurnCompleted, decode_event
from topics.usage import Cost, tokens

CAPTURED = Path(__file__).resolve().parents[1] / "fixtures" / "captured"


def _turns(provider: str, path: Path) -> list[Any]:
    return [ev.payload for ev in map(decode_event, run_whole(provider, read_capture(path)))
            if isinstance(ev, TurnCompleted)]


@pytest.fixture
def no_network(monkeypatch):
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("pricing tried to reach the network")
    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    pricing._price.cache_clear()  # price again, not from an earlier test's cache


def test_claude_turns_cost_what_claude_code_reported():
    for path in sorted((CAPTURED / "claude").glob("*.capture.jsonl")):
        result = [m for m in map(json.loads, path.read_text().splitlines())
                  if m["msg"].get("type") == "result"][-1]["msg"]
        since = result["model_usage_since_last_result"]
        (turn,) = _turns("claude", path)
        assert turn.cost == Cost(source="provider",
                                 usd=sum(m["costUSD"] for m in since.values()),
                                 priceSource="result.model_usage_since_last_result",
                                 model="claude-opus-5-5"), path.name
        assert turn.cost.usd == pytest.approx(result["total_cost_usd"])  # one turn each


def test_codex_turns_are_priced_from_their_tokens_and_model(no_network):
    path = CAPTURED / "codex" / "codex-app-server__tool_shell.capture.jsonl"
    (ev,) = [ev for ev in map(decode_event, run_whole("codex", read_capture(path)))
             if isinstance(ev, TurnCompleted)]
    turn = ev.payload
    assert turn.tokens == tokens(input=2400, output=80)
    expected = calc_price(Usage(input_tokens=2400, output_tokens=80), "gpt-5.5",
                          genai_request_timestamp=datetime.fromisoformat(ev.createdAt))
    assert turn.cost.source == "computed" and turn.cost.model == "gpt-5.5"
    assert turn.cost.usd == pytest.approx(float(expected.total_price)) and turn.cost.usd > 0
    assert (turn.cost.priceSource, turn.cost.priceVersion) == ("genai-prices", price_version())


def test_a_model_without_a_price_is_unpriced_never_free(no_network):
    t = tokens(input=1200, output=40)
    assert computed_cost(t, "fixture/fixture-model", "2026-11-29T18:00:00Z") == \
        Cost(source="unpriced", model="fixture/fixture-model")
    assert computed_cost(t, None, "2026-11-29T18:00:00Z") == Cost(source="unpriced")
    for path in sorted((CAPTURED / "opencode").glob("*.capture.jsonl")):
        # the fixture's model has no price: OpenCode writes cost 0, which is no price
        assert all(turn.cost == Cost(source="unpriced", model="fixture/fixture-model")
                   for turn in _turns("opencode", path) if turn.tokens)


def test_cache_reads_are_priced_as_cache_reads(no_network):
    at = "2026-06-01T00:00:00Z"
    fresh = computed_cost(tokens(input=1000, output=10), "claude-sonnet-4-5", at)
    cached = computed_cost(tokens(input=1000, cachedInput=900, output=10),
                           "claude-sonnet-4-5", at)
    assert 0 < cached.usd < fresh.usd  # type: ignore[operator]


def test_the_same_turn_always_costs_the_same(no_network):
    t = tokens(input=5000, cachedInput=1000, cacheWrite=200, output=700, reasoningOutput=300)
    at = "2026-11-29T18:38:20.123Z"
    first = computed_cost(t, "gpt-5.5", at)
    pricing._price.cache_clear()
    assert computed_cost(t, "gpt-5.5", at) == first and first.source == "computed"


def test_the_turns_model_is_the_one_its_events_name():
    """Codex names the model on turn.started; a reroute mid-turn prices the new model."""
    path = CAPTURED / "codex" / "codex-app-server__tool_shell.capture.jsonl"
    msgs = [(c["origin"], c["msg"]) for c in map(json.loads, path.read_text().splitlines())]
    turn_id = next(m["params"]["turn"]["id"] for _, m in msgs if m.get("method") == "turn/started")
    thread_id = next(m["params"]["threadId"] for _, m in msgs if m.get("method") == "turn/started")
    at = next(i for i, (_, m) in enumerate(msgs) if m.get("method") == "turn/completed")
    reroute = {"jsonrpc": "2.0", "method": "model/rerouted",
               "params": {"threadId": thread_id, "turnId": turn_id, "fromModel": "gpt-5.5",
                          "toModel": "gpt-5.1-codex", "reason": "highRiskCyberActivity"}}
    msgs.insert(at, ("agent", reroute))
    (turn,) = [ev.payload for ev in map(decode_event, run_whole("codex", capture_lines(msgs)))
               if isinstance(ev, TurnCompleted)]
    assert turn.cost.model == "gpt-5.1-codex" and turn.cost.source == "computed"
