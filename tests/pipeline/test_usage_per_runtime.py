"""Token usage arrives in each runtime's own shape; its adapter turns it into the
turn.completed `tokens` (topics.usage.TokenUsage), the only usage the fleet counts and
the OTel spans read: a registered runtime whose adapter gives no `tokens` would count no
tokens, silently. So every registered runtime (topics.runtimes) must show, in its
recordings, its bundled sample or its goldens, a turn whose `tokens` both read."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from adapters import providers
from pipeline.tools.demo import SAMPLES, TRANSCRIPTS, samples
from pipeline.views.otel import turn_tokens
from pipeline.worker.fleet_counts import FleetSession, contributions, read_event
from tests.adapters.harness import GOLDENS, read_capture, read_native, run_whole
from topics.canonical import TurnCompleted, decode_event, encode_event

CAPTURED = Path(__file__).resolve().parents[1] / "fixtures" / "captured"


def _turn_payloads(provider: str) -> list[bytes]:
    """Every turn.completed with `tokens` in the runtime's recordings, as published."""
    paths = [*sorted((CAPTURED / provider).glob("*.capture.jsonl")),
             *sorted((CAPTURED.parent / "more-runtimes" / provider).glob("*.capture.jsonl")),
             *(path for p, _, path in samples() if p == provider),
             *sorted((GOLDENS / provider).glob("*.in.jsonl"))]
    found = []
    for path in paths:
        # a transcript runtime's sample is its session file, as the runtime writes it
        native = path.parent == SAMPLES and provider in TRANSCRIPTS
        for raw in run_whole(provider, read_native(path) if native else read_capture(path)):
            ev = decode_event(raw)
            if isinstance(ev, TurnCompleted) and ev.payload.tokens:
                found.append(encode_event(ev))
    return found


#: Transcript adapters written before TokenUsage: each can call its runtime's rule
#: (adapters.claude.translator.claude_tokens, adapters.gemini.translator.gemini_tokens).
#: Strict: the day one gives `tokens`, its entry here must go.
_NO_TOKENS_YET: set[str] = set()
#: Runtimes whose format carries no token counts at all (Copilot CLI's json mode: premium
#: requests and durations only). Strict too: a recording with tokens fails here.
NO_TOKENS_ON_THE_WIRE = frozenset({"copilot"})


@pytest.mark.parametrize("provider", [
    pytest.param(p, marks=pytest.mark.xfail(strict=True, reason="no `tokens` yet"))
    if p in _NO_TOKENS_YET else p for p in providers() if p not in NO_TOKENS_ON_THE_WIRE])
def test_the_fleet_and_otel_read_every_runtimes_usage(provider: str):
    turns = _turn_payloads(provider)
    assert turns, f"{provider}: no recording or sample has a turn.completed with tokens"
    counted = [dict((k, v) for k, v in contributions(read_event(t), FleetSession(), 0)
                    if k.startswith("tokens")) for t in turns]
    assert any(c.get("tokensIn") and c.get("tokensOut") for c in counted), (
        f"{provider}: the fleet counts no tokens in any of {turns[:3]}")
    spans = [turn_tokens(msgspec.json.decode(t)["payload"]) for t in turns]
    assert any(s and s.input and s.output for s in spans), (
        f"{provider}: OTel reads no tokens in any of {turns[:3]}")


@pytest.mark.parametrize("provider", sorted(NO_TOKENS_ON_THE_WIRE))
def test_a_runtime_without_token_counts_gets_none_invented(provider: str):
    assert _turn_payloads(provider) == []
