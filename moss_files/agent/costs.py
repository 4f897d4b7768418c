"""What a model call costs: the price table and the arithmetic. Core layer (pure).

Prices are US dollars per million tokens, per model, from `[llm.prices]` in `.moss/agent.toml`
over the defaults below (Anthropic's published list prices when this was written; a cache write
is 1.25 times the input price, a cache read a tenth of it, unless a price says otherwise). A
model id takes the price of the longest key it starts with, so `claude-sonnet-4-5-20250929`
costs what `claude-sonnet-4-5` does. A model without a price has an unknown cost (None),
which the run reports rather than guessing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from moss_files.agent.model import Usage


@dataclass(frozen=True, slots=True)
class Price:
    """USD per million tokens."""

    input: float
    output: float
    cache_write: float | None = None  # default 1.25 x input
    cache_read: float | None = None  # default 0.1 x input


DEFAULT_PRICES: Mapping[str, Price] = {
    "claude-opus-5-5": Price(4.0, 20.0),
    "claude-opus-5": Price(5.0, 25.0),
    "claude-sonnet-5-5": Price(2.0, 10.0),
    "claude-sonnet-5": Price(2.0, 10.0),
    "claude-fable-5-1": Price(10.0, 50.0),
    "claude-opus-4-8": Price(5.0, 25.0),
    "claude-opus-4-7": Price(5.0, 25.0),
    "claude-opus-4-6": Price(5.0, 25.0),
    "claude-opus-4-5": Price(5.0, 25.0),
    "claude-opus-4-1": Price(15.0, 75.0),
    "claude-opus-4": Price(15.0, 75.0),
    "claude-sonnet-4-6": Price(3.0, 15.0),
    "claude-sonnet-4-5": Price(3.0, 15.0),
    "claude-sonnet-4": Price(3.0, 15.0),
    "claude-haiku-4-5": Price(1.0, 5.0),
    "claude-3-7-sonnet": Price(3.0, 15.0),
    "claude-3-5-haiku": Price(0.8, 4.0),
}


def parse_prices(table: Mapping[str, Any], where: str) -> dict[str, Price]:
    """`[llm.prices]` entries (`model = {input = 3.0, output = 15.0, cache_write?, cache_read?}`).

    Raises ValueError naming the entry at fault (the settings reader turns it into SCHEMA_ERROR).
    """
    prices: dict[str, Price] = {}
    for model, entry in table.items():
        if not isinstance(entry, Mapping):
            raise ValueError(f"{where}.{model} must be a table such as {{input = 3.0, output = 15.0}}")
        values: dict[str, float | None] = {}
        for key in ("input", "output", "cache_write", "cache_read"):
            value = entry.get(key)
            if value is None and key in ("cache_write", "cache_read"):
                values[key] = None
                continue
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise ValueError(f"{where}.{model}.{key} must be a price in USD per million tokens, 0 or more")
            values[key] = float(value)
        unknown = sorted(set(entry) - {"input", "output", "cache_write", "cache_read"})
        if unknown:
            raise ValueError(f"{where}.{model} has unknown keys {', '.join(unknown)}")
        prices[str(model)] = Price(values["input"] or 0.0, values["output"] or 0.0, values["cache_write"], values["cache_read"])
    return prices


def price_for(model: str, table: Mapping[str, Price]) -> Price | None:
    """The price of `model`: the entry whose key is the longest prefix of it (None: unknown)."""
    best: tuple[int, Price] | None = None
    for key, price in table.items():
        if model == key or model.startswith(key + "-") or model.startswith(key + "@"):
            if best is None or len(key) > best[0]:
                best = (len(key), price)
    return best[1] if best else None


def cost_usd(usage: Usage, price: Price | None) -> float | None:
    """What `usage` costs at `price`, rounded to a millionth of a dollar (None: no price)."""
    if price is None:
        return None
    write = price.cache_write if price.cache_write is not None else price.input * 1.25
    read = price.cache_read if price.cache_read is not None else price.input * 0.1
    total = (
        usage.input_tokens * price.input + usage.output_tokens * price.output + usage.cache_write_tokens * write + usage.cache_read_tokens * read
    ) / 1_000_000
    return round(total, 6)
