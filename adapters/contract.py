"""The types of the translator contract (see adapters.base): its errors and its msgspec
structs.

Kept apart from the driver, which may be compiled with mypyc: mypyc drops the class
keywords (frozen, kw_only, array_like) these structs are declared with."""

from __future__ import annotations

from typing import Any, Generic, TypeVar

from msgspec import Struct

from topics.records import Origin

S = TypeVar("S", bound=Struct)


class AdapterError(Exception):
    """Root of every error an adapter raises."""


class MalformedRecord(AdapterError):
    """The input is not a valid native message: not JSON, not an object, wrong shape."""


class Stored(Struct, frozen=True, array_like=True, omit_defaults=True):
    """The base of every struct kept in a session's stored state (the session, each
    adapter's state and the chat projection's). Stored as arrays, without field names
    and trailing defaults: Faust writes a session's whole value to the changelog each
    time it changes, and field names were half of its bytes (`canonflow bench`,
    changelog bytes per native message). Only ever encoded for the tables: events
    never carry a stored struct."""


class Session(Stored, Generic[S], frozen=True, kw_only=True):
    """Per-session bookkeeping shared by every provider, around the adapter state.

    `watermark` is the last source position applied (Kafka offset, or line number
    in replay) and `partition` its partition: a record at or below the watermark is a
    redelivery and changes nothing. `epochMs` is the time of the first record (see
    event_id). `thread`, `turn` and `open` follow the events emitted (the open turn,
    open items by id with their type), so a session can be closed without knowing
    its runtime (close_session).
    """

    seq: int = 0
    watermark: int = -1
    partition: int = -1
    clockMs: int = 0
    epochMs: int = -1
    thread: str | None = None
    turn: str | None = None
    open: dict[str, str] = {}
    state: S


class Message(Struct, gc=False):
    """One native message handed to a translator (a Struct: built per line, and a
    positional Struct is half the cost of a class with __slots__ and __init__)."""

    obj: dict[str, Any]  # the decoded JSON object
    data: bytes  # its exact bytes
    origin: Origin  # "agent" wrote it, or "client" (requests, responses, decisions)
    time_ms: int | None


class Line(Struct, frozen=True):
    """One native message of a raw record, with who sent it and when."""

    data: bytes
    origin: Origin = "agent"
    time_ms: int | None = None


class LineFailure(Struct, frozen=True):
    """One native line that could not be translated (to be dead-lettered)."""

    line: int
    data: bytes
    error: AdapterError
