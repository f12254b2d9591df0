"""Token usage in one shape for every runtime, and a turn's cost (docs "Token usage",
"Cost").

Each runtime counts tokens its own way (Anthropic leaves cache reads and writes out of
`input_tokens`, OpenAI counts cached input inside it, OpenCode leaves both caches and
reasoning out, Codex's app-server reports a running total): each adapter turns its
runtime's numbers into a `TokenUsage` with one function, and every consumer reads that.
"""

from __future__ import annotations

from typing import Annotated, Literal

from msgspec import UNSET, Meta, Struct, UnsetType


class TokenUsage(Struct, frozen=True, kw_only=True):
    """Tokens of one turn (or of a thread so far), under one rule for every runtime:

    - `input`: every input (prompt) token, *including* `cachedInput` and `cacheWrite`
      (the OpenAI and OpenTelemetry `gen_ai.usage.input_tokens` rule);
    - `cachedInput`: the input tokens read from the prompt cache (a part of `input`);
    - `cacheWrite`: the input tokens written to the prompt cache (a part of `input`);
    - `output`: every output token, *including* `reasoningOutput`;
    - `reasoningOutput`: the output tokens spent on reasoning (a part of `output`);
    - `total`: `input + output`, always (never the runtime's own total).

    Every field is present (0 when the runtime reports none of it).
    """

    input: Annotated[int, Meta(description=(
        "Every input (prompt) token, cachedInput and cacheWrite included (the "
        "OpenTelemetry gen_ai.usage.input_tokens rule); 0 when none reported."))] = 0
    cachedInput: Annotated[int, Meta(description=(
        "Input tokens read from the prompt cache (a part of input); 0 when none reported."))] = 0
    cacheWrite: Annotated[int, Meta(description=(
        "Input tokens written to the prompt cache (a part of input); 0 when none "
        "reported."))] = 0
    output: Annotated[int, Meta(description=(
        "Every output token, reasoningOutput included; 0 when none reported."))] = 0
    reasoningOutput: Annotated[int, Meta(description=(
        "Output tokens spent on reasoning (a part of output); 0 when none reported."))] = 0
    total: Annotated[int, Meta(description=(
        "input + output, always (never the runtime's own total)."))] = 0


def tokens(*, input: int = 0, cachedInput: int = 0, cacheWrite: int = 0, output: int = 0,
           reasoningOutput: int = 0) -> TokenUsage:
    """A TokenUsage whose `total` follows the rule (input + output)."""
    return TokenUsage(input=input, cachedInput=cachedInput, cacheWrite=cacheWrite,
                      output=output, reasoningOutput=reasoningOutput, total=input + output)


def add(a: TokenUsage, b: TokenUsage) -> TokenUsage:
    """The usage of `a` and `b` together (two model calls of a turn, two turns)."""
    return tokens(input=a.input + b.input, cachedInput=a.cachedInput + b.cachedInput,
                  cacheWrite=a.cacheWrite + b.cacheWrite, output=a.output + b.output,
                  reasoningOutput=a.reasoningOutput + b.reasoningOutput)


def running(total: TokenUsage | None, turn: TokenUsage) -> TokenUsage:
    """A thread's running total with `turn` added (`turn` alone when none was kept yet)."""
    return turn if total is None else add(total, turn)


def subtract(a: TokenUsage, b: TokenUsage) -> TokenUsage:
    """What a running total `a` gained since an earlier total `b`; a count that went down
    (a runtime that reset its total) gives 0, never a negative count."""
    return tokens(input=max(a.input - b.input, 0),
                  cachedInput=max(a.cachedInput - b.cachedInput, 0),
                  cacheWrite=max(a.cacheWrite - b.cacheWrite, 0),
                  output=max(a.output - b.output, 0),
                  reasoningOutput=max(a.reasoningOutput - b.reasoningOutput, 0))


#: Where a turn's cost came from: the runtime reported it (`provider`), canonflow
#: computed it from the turn's tokens and model with a price list (`computed`), or no
#: price is known for the model (`unpriced`: no `usd`, never a cost of 0).
CostSource = Literal["provider", "computed", "unpriced"]


class Cost(Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A turn's cost in US dollars, and its provenance.

    `usd` is absent when `source` is `unpriced`. `priceSource` names what gave the
    price: the runtime's own field for `provider` (e.g. "result.total_cost_usd"), the
    price list for `computed` ("genai-prices"), with its release in `priceVersion` (the
    same tokens, model and version always give the same `usd`). `model` is the model
    priced, or the one no price was found for (absent when the turn named none).
    """

    source: Annotated[CostSource, Meta(description=(
        "Where the cost comes from: provider (the runtime reported it), computed "
        "(canonflow priced the tokens) or unpriced (no price known for the model: no usd, "
        "never a cost of 0)."))]
    usd: Annotated[float | UnsetType, Meta(description=(
        "The cost in US dollars; absent when source is unpriced."))] = UNSET
    priceSource: Annotated[str | UnsetType, Meta(description=(
        "What gave the price: the runtime's field for provider (e.g. "
        "result.total_cost_usd), genai-prices for computed; absent when unpriced."))] = UNSET
    priceVersion: Annotated[str | UnsetType, Meta(description=(
        "With computed: the price list's release (the same tokens, model and version "
        "always give the same usd); absent otherwise."))] = UNSET
    model: Annotated[str | UnsetType, Meta(description=(
        "The model priced, or the one no price was found for; absent when the turn named "
        "none."))] = UNSET
