"""A slow broker for one test (test_shutdown), loaded by Python at start-up (before
the worker's own code) by a worker started with this directory on PYTHONPATH and
TEST_SLOW_SEEK_SECONDS=<seconds>. Nothing happens without the variable.

- Faust's table recovery, seeking the raw partitions back to their committed offsets,
  gets the broker's answer that many seconds late.
- Every offset range Faust acknowledges as a gap (offsets it believes the broker will
  never deliver) is written to the worker's log, after GAP_MARK. A raw topic has no
  gaps (no compaction, no transactions): a gap acknowledged there is a record skipped.
"""

from __future__ import annotations

import asyncio
import os
import sys

GAP_MARK = "TEST GAP ACKNOWLEDGED"
LOADED_MARK = "TEST SLOW SEEK LOADED"
_DELAY = float(os.environ.get("TEST_SLOW_SEEK_SECONDS") or 0)

if _DELAY > 0:
    from typing import Any

    from faust.transport.consumer import Consumer as BaseConsumer
    from faust.transport.drivers.aiokafka import Consumer

    _seek_to_committed = Consumer.seek_to_committed
    _add_gap = BaseConsumer._add_gap

    async def _slow_seek_to_committed(self: Any) -> Any:
        await asyncio.sleep(_DELAY)
        return await _seek_to_committed(self)

    async def _logged_add_gap(self: Any, tp: Any, offset_from: int, offset_to: int) -> None:
        print(f"{GAP_MARK} {tp.topic}[{tp.partition}] {offset_from}..{offset_to}",
              file=sys.stderr, flush=True)
        await _add_gap(self, tp, offset_from, offset_to)

    Consumer.seek_to_committed = _slow_seek_to_committed  # type: ignore[method-assign]
    BaseConsumer._add_gap = _logged_add_gap  # type: ignore[method-assign]
    print(f"{LOADED_MARK}: seek to committed offsets {_DELAY} s late", file=sys.stderr,
          flush=True)
