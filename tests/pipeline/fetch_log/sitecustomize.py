"""Every fetch request a worker sends, written down, for test_fetch_wait: loaded by
Python at start-up by a worker started with this directory on PYTHONPATH and
TEST_FETCH_LOG=<path of a file>. Nothing happens without the variable.

Each fetch request is one JSON line: {"t": unix time, "topics": {topic: partitions},
"max_wait_ms": the longest the broker may hold it}.
"""

from __future__ import annotations

import json
import os
import sys
import time

_LOG = os.environ.get("TEST_FETCH_LOG") or ""

if _LOG:
    from typing import Any

    from aiokafka.conn import AIOKafkaConnection

    _send = AIOKafkaConnection.send

    def send(self: Any, request: Any, expect_response: bool = True) -> Any:
        if type(request).__name__ == "FetchRequest":
            topics = {topic: len(partitions) for topic, partitions in request.topics}
            with open(_LOG, "a") as fh:
                fh.write(json.dumps({"t": time.time(), "topics": topics,
                                     "max_wait_ms": request._max_wait_ms}) + "\n")
        return _send(self, request, expect_response)

    AIOKafkaConnection.send = send  # type: ignore[method-assign]
    print("TEST FETCH LOG LOADED", file=sys.stderr, flush=True)
