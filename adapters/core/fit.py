"""Fitting a canonical event into its topic's max.message.bytes.

A broker refuses a record above the topic's max.message.bytes, and a refused record
would be retried forever, holding up its partition. So no event canonflow publishes
is larger than the topic takes. A streamed text cannot grow an event past it: a
content.delta is split into several (Emitter), and an item's text or output that
canonflow joins from deltas is cut at the per-item cap, far below the limit. What
can is what a runtime sends whole in one message (a tool's output or input, a
message's text) and the native message itself in `raw` (CANONFLOW_INCLUDE_RAW).

`fit_event` cuts such an event until it fits, in this order, each step only while
the event is still too large:

1. `raw`: its payload (the native message, which is in its raw topic at its offset)
   becomes null, with `payloadTruncated`, `payloadBytes` and `payloadSha256`.
2. On an item's event, the longest of `output`, `text`, `diff` and the strings in
   `input` and `data` (the runtime's own item, which may repeat the output), cut
   down to one length, as far as the event needs and never below MIN_KEEP: each
   keeps its start and its end around a line that says how many characters were
   left out, as the per-item cap cuts an output, and is marked (`outputTruncated`,
   `outputLength`, `outputSha256`; `inputTruncated`, `inputLength` and `inputSha256`
   of the input's compact JSON, `data...` likewise).

An event it cannot fit that way (not an item's, or too large in its other fields) is
replaced by a runtime.warning that says so (`fit_or_warn`), and the worker
dead-letters the event. The cut is a function of the event and the limit alone:
replay and the worker cut the same event the same way.
"""

from __future__ import annotations

import hashlib
from typing import Any, Final

import msgspec

from topics.canonical import ItemPayload, RawSource, RuntimeWarningEvent, RuntimeWarningPayload

#: What a cut string keeps at least, in characters (its head and its tail).
MIN_KEEP: Final = 1024
#: The string fields of an item that may be cut, each with its marks' prefix.
_FIELDS: Final = ("output", "text", "diff")
#: Its JSON fields whose strings may be cut, each marked as a whole.
_JSON_FIELDS: Final = ("input", "data")
#: Rounds of cutting before an event is given up (each cuts what the last left over).
_ROUNDS: Final = 8

_encode: Final = msgspec.json.Encoder().encode
#: The envelope a warning in an event's place keeps (its seq and eventId: gapless,
#: deterministic).
_ENVELOPE: Final = ("schemaVersion", "eventId", "seq", "provider", "sessionId", "createdAt",
                    "threadId", "turnId", "itemId", "requestId", "parentItemId",
                    "providerRefs", "synthetic")


def cut_text(text: str, drop: int) -> str:
    """`text` less `drop` characters from its middle, with the line that says so."""
    keep = len(text) - drop
    head = keep // 2
    return f"{text[:head]}\n[canonflow: {drop} characters left out]\n{text[len(text) - (keep - head):]}"


def fit_event(event: Any, size: int, limit: int) -> Any:
    """`event` (encoded in `size` bytes) cut to fit in `limit` bytes of JSON (see the
    module's docstring); itself when it fits; None when no cut makes it fit."""
    if size <= limit:
        return event
    raw = event.raw
    if isinstance(raw, RawSource) and raw.payloadTruncated is not True:
        data = bytes(raw.payload)
        event = msgspec.structs.replace(event, raw=msgspec.structs.replace(
            raw, payload=msgspec.Raw(b"null"), payloadTruncated=True, payloadBytes=len(data),
            payloadSha256=hashlib.sha256(data).hexdigest()))
        size = len(_encode(event))
        if size <= limit:
            return event
    payload = event.payload
    if not isinstance(payload, ItemPayload):
        return None
    return _fit_item(event, payload, size, limit)


def fit_or_warn(event: Any, size: int, limit: int) -> tuple[Any, bool]:
    """(what to publish for `event`, encoded in `size` bytes, in at most `limit`
    bytes, whether it is the event): the event, cut when it must be (fit_event), else a
    runtime.warning in its place with the same envelope."""
    fitted = fit_event(event, size, limit)
    if fitted is not None:
        return fitted, True
    tag = event.__struct_config__.tag
    warning = RuntimeWarningEvent(**{f: getattr(event, f) for f in _ENVELOPE},
                                  payload=RuntimeWarningPayload(
        message=f"a {tag} event of {size} bytes was too large for agents.canonical: it "
                "is in agents.deadletter",
        detail={"eventType": tag, "bytes": size, "limit": limit}))
    return warning, False


class _Cut:
    """One string of an item's payload that may be cut: where it is and how much of it
    is dropped so far."""

    __slots__ = ("field", "parent", "key", "text", "drop")

    def __init__(self, field: str, parent: Any, key: Any, text: str):
        self.field = field  # output, text, diff, input or data
        self.parent = parent  # within input or data: the dict or list that holds it
        self.key = key
        self.text = text
        self.drop = 0


def _fit_item(event: Any, payload: ItemPayload, size: int, limit: int) -> Any:
    cuts = [_Cut(f, None, None, getattr(payload, f)) for f in _FIELDS
            if isinstance(getattr(payload, f), str)]
    # the JSON fields: each as compact JSON, and a copy whose strings can be replaced
    # (in a list: the value may be one string)
    wholes: dict[str, tuple[bytes, list[Any]]] = {}
    for name in _JSON_FIELDS:
        value = getattr(payload, name)
        if not isinstance(value, msgspec.UnsetType):
            encoded = _encode(value)
            copy = [msgspec.json.decode(encoded)]
            wholes[name] = (encoded, copy)
            _strings(name, copy, cuts)
    cuts = [c for c in cuts if len(c.text) > MIN_KEEP]
    # bytes per character of each string, encoded (escapes weigh more)
    per = [max(1.0, len(_encode(c.text)) / len(c.text)) for c in cuts]
    for _ in range(_ROUNDS):
        # the longest are cut down to one length, as long as the event needs: a little
        # more, as a middle may be lighter than the average, and a line says the cut
        _level(cuts, per, size - limit + 64 + (size - limit) // 64)
        fields: dict[str, Any] = {}
        for c in cuts:
            if not c.drop:
                continue
            if c.field in wholes:
                c.parent[c.key] = cut_text(c.text, c.drop)
                continue
            fields[c.field] = cut_text(c.text, c.drop)
            if getattr(payload, c.field + "Truncated") is not True:  # else: already cut, at
                fields[c.field + "Truncated"] = True  # the cap: its marks are the whole's
                fields[c.field + "Length"] = len(c.text)
                fields[c.field + "Sha256"] = hashlib.sha256(
                    c.text.encode("utf-8", "surrogatepass")).hexdigest()
        for name, (encoded, copy) in wholes.items():
            if any(c.drop for c in cuts if c.field == name):
                fields[name] = copy[0]
                fields[name + "Truncated"] = True
                fields[name + "Length"] = len(encoded.decode("utf-8", "surrogatepass"))
                fields[name + "Sha256"] = hashlib.sha256(encoded).hexdigest()
        if not fields:
            return None
        fitted = msgspec.structs.replace(event, payload=msgspec.structs.replace(payload, **fields))
        size = len(_encode(fitted))
        if size <= limit:
            return fitted
        if all(len(c.text) - MIN_KEEP - c.drop <= 0 for c in cuts):
            return None
    return None


def _level(cuts: list[_Cut], per: list[float], need: float) -> None:
    """Cut the strings down to the one length (at least MIN_KEEP) that removes `need`
    bytes, or as near as the strings allow: the longest lose the most, none all."""
    left = [len(c.text) - c.drop for c in cuts]

    def removed(level: int) -> float:
        return sum([max(0, n - level) * p for n, p in zip(left, per, strict=True)])

    lo, hi = MIN_KEEP, max(left, default=MIN_KEEP)  # removed(hi) is 0
    if removed(lo) <= need:
        hi = lo
    while hi - lo > 1:  # the highest level that still removes `need`
        mid = (lo + hi) // 2
        if removed(mid) >= need:
            lo = mid
        else:
            hi = mid
    level = lo
    for c, n in zip(cuts, left, strict=True):
        if n > level:
            c.drop += n - level


def _strings(field: str, value: Any, cuts: list[_Cut]) -> None:
    """Every string in the decoded JSON `value` (in its own order), as a cut of `field`."""
    if isinstance(value, dict):
        for k, v in value.items():
            if isinstance(v, str):
                cuts.append(_Cut(field, value, k, v))
            elif isinstance(v, dict | list):
                _strings(field, v, cuts)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            if isinstance(v, str):
                cuts.append(_Cut(field, value, i, v))
            elif isinstance(v, dict | list):
                _strings(field, v, cuts)
