"""The types of the translator contract (see adapters.core.record): its errors and its msgspec
structs.

Kept apart from the driver, which may be compiled with mypyc: mypyc drops the class
keywords (frozen, kw_only, array_like) these structs are declared with."""

from __future__ import annotations

from typing import Any, Generic, TypeVar

from msgspec import Struct

from adapters.core.message import Message as Message  # re-exported: the contract names it
from topics.records import Origin

S = TypeVar("S", bound=Struct)


class AdapterError(Exception):
    """Root of every error an adapter raises."""


class MalformedRecord(AdapterError):
    """The input is not a valid native message: not JSON, not an object, wrong shape.
    Translators raise it where they check a message's shape; the driver raises it for
    a native value an event cannot carry (the payload check)."""


class UnknownOrigin(MalformedRecord):
    """A message that came without its origin (no `origin` header, no `origin` in its
    capture line) and whose direction its protocol does not settle: a method both sides
    may send or that the protocol does not define, a response to an id that no request
    in flight has, or that requests of both sides have."""


class InternalError(AdapterError):
    """canonflow's own code failed on a message (an exception a translator did not
    raise on purpose): a bug to fix, never the input's fault. `cause` names the
    exception's type, `trace` holds its traceback (for the log: the message itself
    names no file, so it is the same compiled or not)."""

    def __init__(self, message: str, cause: str = "", trace: str = ""):
        super().__init__(message)
        self.cause = cause
        self.trace = trace


class Stored(Struct, frozen=True, array_like=True, omit_defaults=True):
    """The base of every struct kept in a session's stored state (the session, each
    adapter's state and the chat projection's). Stored as arrays, without field names
    and trailing defaults: Faust writes a session's whole value to the changelog each
    time it changes, and field names were half of its bytes (`canonflow bench`,
    changelog bytes per native message). Only ever encoded for the tables: events
    never carry a stored struct."""


def fields_in_order(cls: type[Struct], *names: str) -> None:
    """Raise ImportError unless `cls`'s fields are `names`, in this order: the compiled
    core reads a stored struct's fields by position (one `msgspec.structs.astuple` where
    each attribute would be a generic lookup) and names the positions as constants."""
    if cls.__struct_fields__ != names:
        raise ImportError(f"{cls.__name__}'s fields moved: {cls.__struct_fields__}: update "
                          "the constants that name their positions")


class Stream(Stored, frozen=True, kw_only=True):
    """One text or output stream of an open item (Session.streams), as the conversation
    core (adapters.core.emitter.Emitter) tracks it: lengths and a digest of what it carried,
    never the text itself, so a session's stored value stays the same size however
    much it streams. Where the stream is spooled, its bytes are chunks in a `Spool`
    (chunk n holds what the n-th append added), and past the per-item cap only a head
    and a moving tail of them are kept (`adapters.core.emitter` says how)."""

    chars: int = 0  # characters carried so far
    size: int = 0  # their UTF-8 bytes
    digest: int = 1  # CRC-32 and Adler-32 of those bytes (adapters.core.ids._extend)
    chunks: int = 0  # chunks spooled so far (0: nothing spooled)
    head: int = 0  # chunks kept as the head, once the head is full (0: not yet)
    prev: int = 0  # first chunk of the previous tail segment (== cur: none)
    cur: int = 0  # first chunk of the current tail segment
    curSize: int = 0  # bytes of the current tail segment
    cut: int = 0  # characters dropped between head and tail (the output is truncated)
    spooled: bool = True  # are its bytes spooled (False: tracked for "never twice" only)
    # with a hold policy: the end of the last chunk that may start a secret, spooled at
    # the start of the next chunk instead, so that each chunk holds every secret whole
    # and the spool can redact chunk by chunk (at most HOLD_MAX characters; last, as a
    # field added to a stored array must be)
    pend: str = ""
    # of a spooled stream: the SHA-256 midstate of the bytes it carried
    # (adapters.core.sha256), for the digest of a completion cut to the cap
    sha: bytes = b""
    # kept whole past the cap: a tool input a runtime streams in parts and the adapter
    # parses at its end (bounded by the runtime's output limit per message), which a
    # cut would make unreadable
    whole: bool = False


class Held(Stored, frozen=True, kw_only=True):
    """Delta text held back by the conversation core (adapters.core.emitter.Emitter, "Held
    back"): a stream's tail that may be the start of a secret, published with the
    stream's next delta, or alone right before its item, turn or session ends. So a
    secret that a runtime streams across two deltas reaches the redactor whole, in one
    event. At most HOLD_MAX characters."""

    text: str
    kind: str  # the delta's streamKind
    content: int | None = None  # contentIndex
    summary: int | None = None  # summaryIndex
    thread: str | None = None
    turn: str | None = None
    parent: str | None = None
    refs: Any = None  # the delta's providerRefs (topics.canonical.ProviderRefs)
    agent: str | None = None  # the delta's agentId and parentAgentId
    parentAgent: str | None = None


class HighWater(Stored, frozen=True, kw_only=True):
    """How far a transcript session has been translated, in its runtime's own order
    (adapters.core.resent): a bounded mark, never a list of every line."""

    key: int = -1  # the greatest key translated (-1: none yet)
    last: int = -1  # the key of the last line seen: a line without its own key has it
    #: (how far below `key`, digest) pairs, flat and oldest first, of the lines
    #: translated with keys above `key - skew`: at most resent.NEAR_KEPT pairs
    near: tuple[int, ...] = ()


class Session(Stored, Generic[S], frozen=True, kw_only=True):
    """Per-session bookkeeping shared by every provider, around the adapter state.

    `watermark` is the last source position applied (Kafka offset, or line number
    in replay) and `partition` its partition: a record at or below the watermark is a
    redelivery and changes nothing. Offsets of different partitions do not compare:
    when a session's records move to another partition (partitions added to a raw
    topic, sidecars with different partitioners), `marks` keeps each earlier
    partition's watermark, and the move is said in a runtime.warning. `epochMs` is the time of the first record (see
    event_id). `thread`, `turn`, `open` and `answered` follow the events emitted (the open
    turn, open items by id with their type, whether the turn's last item is the agent's
    completed answer), so a session can be closed without knowing its runtime
    (close_session). `streams` are the open items' text and output
    streams (Stream), dropped with their item.
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
    streams: dict[str, Stream] = {}  # open streams by "<itemId>/<stream>" (Emitter.append)
    marks: dict[int, int] = {}  # watermarks of the partitions the session's records left
    seen: tuple[int, ...] = ()  # digests of the last native message ids (adapters.core.ids)
    version: str | None = None  # the runtime's release, once its stream said it
    held: dict[str, Held] = {}  # delta tails held back, by item and stream (Held)
    # the model of the session's last turn (turn.started, model.rerouted): what a turn's
    # tokens are priced for (adapters.core.pricing). Fields added to a stored array go
    # last (older states decode unchanged).
    model: str | None = None
    # the open turn's last item is the agent's answer, completed, and nothing opened
    # since: a turn closed for idleness then completed, not interrupted (close_session)
    answered: bool = False


class Line(Struct, frozen=True):
    """One native message of a raw record, with who sent it and when. `origin` None: the
    record did not say (no `origin` header, a native line): the translator's
    `origin_of` reads it from the message, else it is the agent's."""

    data: bytes
    origin: Origin | None = "agent"
    time_ms: int | None = None


class LineFailure(Struct, frozen=True):
    """One native line that could not be translated (to be dead-lettered)."""

    line: int
    data: bytes
    error: AdapterError
