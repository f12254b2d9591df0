"""What the fleet-metrics stage counts, and how its windows are keyed and summed: the
part of the stage that touches no table (pipeline.worker.fleet holds the tables).

An event adds (field, amount) pairs to the one-minute pane of its provider, model,
minute and partition (`contributions`); a pane's key names them all (`pane_key`), a
published window's key names its kind and start too (`record_key`); a hopping-5m
window is the sum of its five panes (`hopping_window`). Counts stop at MAX_COUNT, and
a token count or cost no turn has is `absurd` (the module doc of
pipeline.worker.fleet says why each limit is there).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from functools import lru_cache
from typing import Any, NamedTuple

import msgspec

from pipeline.ops.prometheus import OTHER, clean_label
from topics.canonical import TOOL_ITEM_TYPES
from topics.metrics import FleetMetrics, WindowKind
from topics.usage import TokenUsage

TUMBLING: WindowKind = "tumbling-1m"
HOPPING: WindowKind = "hopping-5m"
MINUTE_MS = 60_000
HOPPING_MS = 5 * MINUTE_MS
UNKNOWN_MODEL = "unknown"
#: Distinct tool names (and error classes) kept per pane; more count as "other".
MAX_KEYS = 200
#: Distinct models with panes in a worker's table; a new model past them counts as "other".
MAX_MODELS = 100
#: Where a window's counts stop (2**53 - 1: exact in every JSON consumer's float64).
MAX_COUNT = 2**53 - 1
#: A turn's tokens (in or out) or cost above these are no real turn's.
MAX_TURN_TOKENS = 10**10
MAX_TURN_COST_USD = 100_000.0
#: Open approvals remembered per session (the oldest are forgotten past it: their
#: decision is then counted, not timed).
MAX_PENDING = 1000

RELEVANT = frozenset({b"turn.started", b"turn.completed", b"turn.aborted", b"item.started",
                       b"request.opened", b"request.resolved", b"runtime.error",
                       b"model.rerouted", b"session.exited"})
_TOOL_ITEMS = frozenset(TOOL_ITEM_TYPES)
#: Outcomes (topics.canonical.Decision) of an approval that was not allowed: refused, or
#: ended with its turn (Codex's `cancel` is the user's "no, and stop").
_DENIED = frozenset({"decline", "cancel"})
CLOCK = b"clock|"
_SUMMED = ("turnsStarted", "turnsCompleted", "turnsFailed", "turnsInterrupted",
           "approvalsRequested", "approvalsResolved", "approvalsDenied", "approvalDecisions",
           "approvalDecisionMsSum", "tokensIn", "tokensOut", "costUsd")


# ---- what the stage reads of a canonical event ---------------------------------


class _Cost(msgspec.Struct):
    source: str | None = None  # provider, computed or unpriced
    usd: Any = None  # a number, checked by `contributions` (JSON may hold any)


class _Payload(msgspec.Struct):
    model: str | None = None
    toModel: str | None = None
    state: str | None = None
    itemType: str | None = None
    toolName: str | None = None
    requestType: str | None = None
    outcome: str | None = None  # the normalised decision; never the runtime's own word
    tokens: TokenUsage | None = None  # the turn's own tokens, one rule for every runtime
    cost: _Cost | None = None  # the turn's cost and its provenance (topics.usage.Cost)
    errorClass: str | None = msgspec.field(default=None, name="class")


class _Event(msgspec.Struct):
    type: str
    provider: str
    requestId: str | None = None
    payload: _Payload = msgspec.field(default_factory=_Payload)


read_event = msgspec.json.Decoder(_Event).decode


class FleetSession(msgspec.Struct, array_like=True):
    """What the stage keeps per session: its model, and its open approvals
    (canonical request id -> event time ms of the opening)."""

    model: str = UNKNOWN_MODEL
    pending: dict[str, int] = {}


class Stored(msgspec.Struct, array_like=True):
    """A window's table value: its counts and the last source offset they include."""

    offset: int
    metrics: FleetMetrics


encode = msgspec.msgpack.Encoder().encode
decode_session = msgspec.msgpack.Decoder(FleetSession).decode
decode_stored = msgspec.msgpack.Decoder(Stored).decode
decode_int = msgspec.msgpack.Decoder(int).decode


def _number(v: Any) -> float | None:
    """A JSON number as a float (too large for one: infinity); None for anything else."""
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None
    try:
        return float(v)
    except OverflowError:
        return math.inf


def contributions(e: Any, session: FleetSession, ts_ms: int) -> list[tuple[str, Any]]:
    """What one relevant event adds to its windows: (field, amount) pairs, with
    (field, (name, amount)) for the per-name maps. Updates `session.pending` (the
    caller stores the session when it changed)."""
    t, p = e.type, e.payload
    if t == "turn.started":
        return [("turnsStarted", 1)]
    if t == "turn.completed":
        state = p.state
        out: list[tuple[str, Any]] = [
            ("turnsCompleted" if state == "completed" else
             "turnsFailed" if state == "failed" else "turnsInterrupted", 1)]
        if p.tokens is not None:
            if p.tokens.input:
                out.append(("tokensIn", p.tokens.input))
            if p.tokens.output:
                out.append(("tokensOut", p.tokens.output))
        cost = _number(p.cost.usd) if p.cost is not None else None
        if cost:
            out.append(("costUsd", cost))
        return out
    if t == "turn.aborted":
        return [("turnsInterrupted", 1)]
    if t == "item.started":
        if p.itemType in _TOOL_ITEMS:
            return [("toolCalls", (clean_label(p.toolName or p.itemType), 1))]
        return []
    if t == "runtime.error":
        return [("errors", (clean_label(p.errorClass or "unknown"), 1))]
    if t in ("request.opened", "request.resolved"):
        if not (p.requestType or "").endswith("_approval"):
            return []
        rid = e.requestId or ""
        if t == "request.opened":
            if rid:
                pending = session.pending
                if len(pending) >= MAX_PENDING and rid not in pending:
                    pending = dict(list(pending.items())[1 - MAX_PENDING:])  # oldest out
                session.pending = {**pending, rid: ts_ms}
            return [("approvalsRequested", 1)]
        out = [("approvalsResolved", 1)]
        if p.outcome in _DENIED:
            out.append(("approvalsDenied", 1))
        opened = session.pending.get(rid) if rid else None
        if opened is not None:
            session.pending = {k: v for k, v in session.pending.items() if k != rid}
            waited = max(0, ts_ms - opened)
            out += [("approvalDecisions", 1), ("approvalDecisionMsSum", waited),
                    ("approvalDecisionMsMax", waited)]
        return out
    return []


def absurd(field: str, amount: Any) -> bool:
    """Is `amount` a token count or cost that no turn has (negative, too large, not finite)?"""
    if field in ("tokensIn", "tokensOut"):
        return not 0 <= amount <= MAX_TURN_TOKENS
    if field == "costUsd":
        return not (math.isfinite(amount) and 0 <= amount <= MAX_TURN_COST_USD)
    return False


def capped_sum(a: Any, b: Any) -> Any:
    """a + b, stopping at MAX_COUNT (a float stays a float)."""
    total = a + b
    return total if total <= MAX_COUNT else type(total)(MAX_COUNT)


@lru_cache(maxsize=1)
def _faust_windows() -> tuple[Any, Any]:
    from faust import HoppingWindow, TumblingWindow

    return TumblingWindow(MINUTE_MS / 1000), HoppingWindow(HOPPING_MS / 1000, MINUTE_MS / 1000)


@lru_cache(maxsize=4096)
def window_starts(minute_ms: int) -> tuple[tuple[str, int], ...]:
    """(kind, start ms) of every window holding the minute that starts at `minute_ms`,
    from Faust's window definitions: one tumbling-1m, five hopping-5m."""
    tumbling, hopping = _faust_windows()
    return tuple([(TUMBLING, int(round(start * 1000))) for start, _ in tumbling.ranges(minute_ms / 1000)]
                 + [(HOPPING, int(round(start * 1000))) for start, _ in hopping.ranges(minute_ms / 1000)])


def pane_key(provider: str, model: str, minute_ms: int, partition: int) -> bytes:
    return f"{provider}|{model}|{minute_ms}|{partition}".encode()


def record_key(kind: str, provider: str, model: str, start_ms: int, partition: int) -> bytes:
    """The agents.metrics key of one window (topics.metrics)."""
    return f"{kind}|{provider}|{model}|{start_ms}|{partition}".encode()


def parse_pane(key: bytes) -> tuple[str, str, int, int]:
    """(provider, model, minute ms, partition) of a pane key; the model may hold '|'."""
    provider, rest = key.split(b"|", 1)
    model, minute, partition = rest.rsplit(b"|", 2)
    return provider.decode(), model.decode(), int(minute), int(partition)


def merge(m: FleetMetrics, acc: dict[str, Any]) -> FleetMetrics:
    """A pane plus the counts a batch adds to it."""
    changes: dict[str, Any] = {}
    for field, amount in acc.items():
        if field in ("toolCalls", "errors"):
            merged = dict(getattr(m, field))
            for name, n in amount.items():
                if name not in merged and len(merged) >= MAX_KEYS:
                    name = OTHER
                merged[name] = capped_sum(merged.get(name, 0), n)
            changes[field] = merged
        elif field == "approvalDecisionMsMax":
            changes[field] = min(MAX_COUNT, max(m.approvalDecisionMsMax, amount))
        else:
            changes[field] = capped_sum(getattr(m, field), amount)
    return msgspec.structs.replace(m, **changes)


def add_contributions(acc: dict[str, Any], contribs: list[tuple[str, Any]]) -> None:
    for field, amount in contribs:
        if field in ("toolCalls", "errors"):
            name, n = amount
            sub = acc.setdefault(field, {})
            sub[name] = capped_sum(sub.get(name, 0), n)
        elif field == "approvalDecisionMsMax":
            acc[field] = max(acc.get(field, 0), amount)
        else:
            acc[field] = capped_sum(acc.get(field, 0), amount)


def hopping_window(panes: Iterable[FleetMetrics], start_ms: int, closed: bool,
                   like: FleetMetrics) -> FleetMetrics:
    """The hopping-5m window starting at `start_ms`: the sum of its panes."""
    sums: dict[str, Any] = dict.fromkeys(_SUMMED, 0)
    tools: dict[str, int] = {}
    errors: dict[str, int] = {}
    longest = 0
    for pane in panes:
        for field in _SUMMED:
            sums[field] = capped_sum(sums[field], getattr(pane, field))
        for name, n in pane.toolCalls.items():
            tools[name] = capped_sum(tools.get(name, 0), n)
        for name, n in pane.errors.items():
            errors[name] = capped_sum(errors.get(name, 0), n)
        longest = max(longest, pane.approvalDecisionMsMax)
    sums["costUsd"] = float(sums["costUsd"])
    return msgspec.structs.replace(like, window=HOPPING, windowStartMs=start_ms,
                                   windowEndMs=start_ms + HOPPING_MS, closed=closed,
                                   toolCalls=tools, errors=errors,
                                   approvalDecisionMsMax=longest, **sums)



Group = tuple[str, str, int]  # provider, model, partition


class Counted(NamedTuple):
    """One canonical event as the stage counts it, published by a normalize agent."""

    key: bytes  # the session id
    value: bytes  # the event, as published
    partition: int
    #: The offset of the raw record it came from (monotonic per raw topic partition,
    #: and a pane's key names the provider, so its raw topic): a pane that stored a
    #: higher one counted this event before a crash. None for the idle scan's synthetic
    #: closings, which no raw record carries (counted, never taken for a redelivery).
    offset: int | None
    ts_ms: int  # event time: the raw record's timestamp, the canonical record's too
    source: Any  # the record (or partition record) whose partition table reads and writes use


def panes_of(rkey: bytes) -> list[bytes]:
    """The pane keys a published window covers."""
    kind, rest = rkey.split(b"|", 1)
    provider, model_start_p = rest.split(b"|", 1)
    model, start, p = model_start_p.rsplit(b"|", 2)
    n = 5 if kind == HOPPING.encode() else 1
    return [b"|".join((provider, model, str(int(start) + k * MINUTE_MS).encode(), p))
            for k in range(n)]


class SessionCount(NamedTuple):
    """A session's fleet state as a batch left it: on `partition`, `session` (None:
    forget it), whether the batch `changed` it, and the record to write it for."""

    partition: int
    session: FleetSession | None
    changed: bool
    record: Any


class Batch:
    """What counting one batch accumulates before it writes the tables."""

    __slots__ = ("acc", "last", "n", "stored", "states")

    def __init__(self) -> None:
        self.acc: dict[bytes, dict[str, Any]] = {}  # pane -> the counts the batch adds
        self.last: dict[bytes, Counted] = {}  # pane -> the last event counted in it
        self.n: dict[bytes, int] = {}  # pane -> events counted in it
        self.stored: dict[bytes, Stored | None] = {}  # pane -> its table value
        self.states: dict[bytes, SessionCount] = {}  # session -> its state after the batch
