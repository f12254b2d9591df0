"""Sends that the cluster never acknowledges, for the tests of test_stuck_sends, loaded
by Python at start-up (before the worker's own code) by a worker started with this
directory on PYTHONPATH and TEST_FAILING_SENDS=<path of a control file>. Nothing
happens without the variable, nor while the control file does not exist.

The control file is JSON, read again on every send: {"topics": [...], "keys": [...],
"values": [...]}. A record batch sent to one of the topics, or holding a record whose
key starts with one of the key prefixes or whose value holds one of the strings, is
never delivered: its delivery future fails after a short delay
with KafkaTimeoutError, what aiokafka reports when the broker does not answer a produce
request within the request timeout (the full-size repro of issue 25: 51k canonical, 43k
chat and 30k metrics sends timing out). Every other batch goes to the real broker. A
failed batch is written to the worker's log after FAILED_MARK.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys

FAILED_MARK = "TEST SEND FAILED"
LOADED_MARK = "TEST FAILING SENDS LOADED"
_CONTROL = os.environ.get("TEST_FAILING_SENDS") or ""
#: Seconds before a failing batch's delivery future raises (a short request timeout).
_DELAY = 0.2

if _CONTROL:
    from typing import Any

    from aiokafka.errors import KafkaTimeoutError
    from aiokafka.producer.message_accumulator import BatchBuilder
    from aiokafka.producer.producer import AIOKafkaProducer

    _append = BatchBuilder.append
    _send_batch = AIOKafkaProducer.send_batch

    def _rule() -> dict[str, list[str]]:
        try:
            with open(_CONTROL, encoding="utf-8") as fh:
                return json.load(fh)  # type: ignore[no-any-return]
        except (FileNotFoundError, ValueError):
            return {}

    def _noting_append(self: Any, *, timestamp: Any, key: Any, value: Any,
                       headers: Any = ()) -> Any:
        meta = _append(self, timestamp=timestamp, key=key, value=value, headers=headers or [])
        if meta is not None:
            self.__dict__.setdefault("_test_records", []).append((key or b"", value or b""))
        return meta

    async def _failing_send_batch(self: Any, batch: Any, topic: str, *, partition: int) -> Any:
        rule = _rule()
        prefixes = tuple(p.encode() for p in rule.get("keys", []))
        parts = [p.encode() for p in rule.get("values", [])]
        records = batch.__dict__.get("_test_records", [])
        if topic in rule.get("topics", []) or any(
                (prefixes and k.startswith(prefixes)) or any(p in v for p in parts)
                for k, v in records):
            print(f"{FAILED_MARK} {topic}[{partition}] {len(records)} record(s)",
                  file=sys.stderr, flush=True)
            future = asyncio.get_running_loop().create_future()
            asyncio.get_running_loop().call_later(
                _DELAY, lambda: future.done() or future.set_exception(
                    KafkaTimeoutError("no answer (TEST_FAILING_SENDS)")))
            return future
        return await _send_batch(self, batch, topic, partition=partition)

    BatchBuilder.append = _noting_append  # type: ignore[method-assign]
    AIOKafkaProducer.send_batch = _failing_send_batch  # type: ignore[method-assign]
    print(f"{LOADED_MARK}: control file {_CONTROL}", file=sys.stderr, flush=True)
