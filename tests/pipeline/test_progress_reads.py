"""The read positions /health and the source watch ask the consumer for: a call that
hangs costs only its own partition's position, and leaves nothing unretrieved."""

from __future__ import annotations

import asyncio
import gc
from typing import Any

from aiokafka import TopicPartition

from pipeline.ops import progress


class _Consumer:
    """A consumer whose position() of partition 1 never answers, and which raises as it
    is cancelled (as aiokafka's can, when its coordinator goes away meanwhile)."""

    def highwater(self, tp: Any) -> int:
        return 10

    async def position(self, tp: Any) -> int:
        if tp.partition == 1:
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                raise RuntimeError("the consumer was stopped") from None
        return 7


class _App:
    consumer = _Consumer()
    monitor = None


def test_a_hanging_position_costs_only_its_partition_and_nothing_is_left_unretrieved(monkeypatch):
    monkeypatch.setattr(progress, "READ_TIMEOUT", 0.2)
    unretrieved: list[dict[str, Any]] = []

    async def main() -> list[Any]:
        asyncio.get_running_loop().set_exception_handler(lambda _l, ctx: unretrieved.append(ctx))
        views = await progress.read_partitions(
            _App(), [TopicPartition("agents.raw.codex", p) for p in range(3)])
        gc.collect()
        await asyncio.sleep(0)
        return views

    views = asyncio.run(main())
    assert [v.position for v in views] == [7, None, 7]
    assert [v.end for v in views] == [10, 10, 10]
    assert unretrieved == []
