"""Which of Faust's own consumer paths a worker takes, counted, for test_faust_consumer:
loaded by Python at start-up by a worker started with this directory on PYTHONPATH and
TEST_CONSUMER_PROBE=<path of a file>. Nothing happens without the variable.

The file holds one JSON object, rewritten as the counts change (at most every 0.2 s,
and at exit):
- "handoffs": records Faust's fetch loop handed to its conductor (its callback ran);
- "raced": Faust's own wait_first (mode's) called by the consumer, which races the
  callback against the flow's suspension in four tasks;
- "commits": offset commits the driver's thread made;
- "converted": assignments Faust's driver thread converted whole (its own assignment()).
"""

from __future__ import annotations

import atexit
import json
import os
import sys
import time

_PATH = os.environ.get("TEST_CONSUMER_PROBE") or ""

if _PATH:
    from typing import Any

    from faust.transport.consumer import Consumer
    from faust.transport.drivers.aiokafka import AIOKafkaConsumerThread
    from mode import Service

    counts = {"handoffs": 0, "raced": 0, "commits": 0, "converted": 0}
    written = [0.0]

    def write(force: bool = False) -> None:
        now = time.monotonic()
        if force or now - written[0] > 0.2:
            written[0] = now
            with open(_PATH + ".tmp", "w") as fh:
                json.dump(counts, fh)
            os.replace(_PATH + ".tmp", _PATH)

    def count(name: str) -> None:
        counts[name] += 1
        write()

    _wait_first = Service.wait_first

    async def wait_first(self: Any, *coros: Any, timeout: Any = None) -> Any:
        if isinstance(self, Consumer):
            count("raced")
        return await _wait_first(self, *coros, timeout=timeout)

    Service.wait_first = wait_first  # type: ignore[method-assign]

    _init = Consumer.__init__

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        _init(self, *args, **kwargs)
        callback = self.callback

        async def counted(message: Any) -> Any:
            count("handoffs")
            return await callback(message)

        self.callback = counted

    Consumer.__init__ = __init__  # type: ignore[method-assign]

    _commit = AIOKafkaConsumerThread._commit

    async def commit(self: Any, offsets: Any) -> Any:
        count("commits")
        return await _commit(self, offsets)

    AIOKafkaConsumerThread._commit = commit  # type: ignore[method-assign]

    _assignment = AIOKafkaConsumerThread.assignment

    def assignment(self: Any) -> Any:
        count("converted")
        return _assignment(self)

    AIOKafkaConsumerThread.assignment = assignment  # type: ignore[method-assign]
    atexit.register(write, True)
    print("TEST CONSUMER PROBE LOADED", file=sys.stderr, flush=True)
