"""A turn's cost when the runtime reported none: its tokens priced for its model.

Prices come from `genai-prices` (pinned in pyproject.toml), from the price list bundled
in the installed release only: canonflow never starts its updater (`UpdatePrices`), the
one part that fetches prices over the network, so pricing reads no network and no clock.
The price is the one in force at the turn's `createdAt`; with the release named in the
event (`priceVersion`), the same turn always costs the same, in the worker and in replay.

A model the list does not know is `unpriced`: no `usd`, never 0 (the fleet counts such
turns, `canonflow_unpriced_turns_total`). The library is imported at the first priced
turn, not with the adapters.
"""

from __future__ import annotations

from datetime import datetime
from functools import lru_cache
from typing import Any

from msgspec import UNSET

from topics.usage import Cost, TokenUsage

PRICE_SOURCE = "genai-prices"


@lru_cache(maxsize=1)
def price_version() -> str:
    """The installed genai-prices release (its bundled price list)."""
    from importlib.metadata import version

    return version("genai-prices")


@lru_cache(maxsize=4096)
def _price(model: str, at: datetime, input: int, cached: int, written: int,
           output: int) -> float | None:
    from genai_prices import Usage, calc_price

    try:
        result: Any = calc_price(
            Usage(input_tokens=input, cache_read_tokens=cached, cache_write_tokens=written,
                  output_tokens=output), model, genai_request_timestamp=at)
    except (LookupError, ValueError, ArithmeticError):  # an unknown model, counts it refuses
        return None
    return float(result.total_price)


def computed_cost(tokens: TokenUsage, model: str | None, created_at: str) -> Cost:
    """The cost of a turn of `tokens` on `model`, priced as of `created_at` (ISO-8601):
    `computed`, or `unpriced` when the model is unnamed or has no price. Never raises
    (a `created_at` that is no time prices at nothing: unpriced)."""
    if not model:
        return Cost(source="unpriced")
    try:
        at = datetime.fromisoformat(created_at)
    except ValueError:
        return Cost(source="unpriced", model=model)
    # genai-prices' input count includes the cache reads and writes, as TokenUsage's does
    usd = _price(model, at, tokens.input, tokens.cachedInput, tokens.cacheWrite, tokens.output)
    if usd is None:
        return Cost(source="unpriced", model=model)
    return Cost(source="computed", usd=usd, priceSource=PRICE_SOURCE,
                priceVersion=price_version(), model=model or UNSET)
