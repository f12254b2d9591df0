"""The native message a translator reads (`Translator.translate(state, msg, out)`).

A class of its own module so that it is compiled (setup.py compiles the core but its
structs): a mypyc class keeps its attributes in the object, and a compiled translator
reads `msg.obj` in one instruction, where a msgspec Struct's attribute is a generic
lookup (callgrind: about 160 instructions; a Claude stream message reads four or five).
"""

from __future__ import annotations

from typing import Any

from topics.records import Origin


class Message:
    """One native message handed to a translator: built by the driver per line, read by
    the adapters, never stored."""

    obj: dict[str, Any]  # the decoded JSON object
    data: bytes  # its exact bytes
    origin: Origin  # "agent" wrote it, or "client" (requests, responses, decisions)
    time_ms: int | None

    def __init__(self, obj: dict[str, Any], data: bytes, origin: Origin,
                 time_ms: int | None) -> None:
        self.obj = obj
        self.data = data
        self.origin = origin
        self.time_ms = time_ms

    def __repr__(self) -> str:
        return f"Message(origin={self.origin!r}, time_ms={self.time_ms!r}, data={self.data[:80]!r})"
