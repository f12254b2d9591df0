"""Records that cross topics besides the canonical event: raw-record metadata, the
capture line format, and the dead letter."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec
from msgspec import UNSET, Meta, Struct, UnsetType

Origin = Literal["agent", "client"]

#: Kafka header names on raw records (values are UTF-8).
HEADER_ORIGIN = "origin"  # "agent" or "client"; absent: read from the message (Line.origin)
HEADER_TIME = "t"  # capture time, epoch milliseconds
#: "<producer stream>:<n>": the record's place in what one producer sends, the same when
#: it sends the record again (record_id, seen)
HEADER_RECORD = "record-id"
#: The producer streams a session remembers (seen): the last ones to send it a record.
PRODUCERS_KEPT = 8


class BadRecordId(ValueError):
    """A `record-id` that is not `<producer stream>:<n>`."""


def record_id(value: bytes | str) -> tuple[str, int]:
    """(producer stream, n) of a `record-id` header or capture-line value: everything
    before the last ':' (1 to 200 characters), then a decimal integer from 0. Raises
    BadRecordId for anything else."""
    text = value.decode("utf-8", "replace") if isinstance(value, bytes) else value
    stream, _, n = text.rpartition(":")
    if not 0 < len(stream) <= 200 or not n.isascii() or not n.isdigit():
        raise BadRecordId(f"header {HEADER_RECORD!r} is {text[:60]!r}: it must be "
                          "'<producer stream>:<n>', n a decimal integer")
    return stream, int(n)


def seen(marks: dict[str, int], rid: tuple[str, int]) -> bool:
    """Whether a session whose producer streams are at `marks` has had the record `rid`
    (its n at or below its stream's mark): a copy a producer sent again."""
    mark = marks.get(rid[0])
    return mark is not None and rid[1] <= mark


def advanced(marks: dict[str, int], rid: tuple[str, int]) -> dict[str, int]:
    """`marks` after the record `rid`: its stream's mark is its n, and the stream the
    most recent; past PRODUCERS_KEPT streams, the one that sent last longest ago goes."""
    out = {k: v for k, v in marks.items() if k != rid[0]}
    out[rid[0]] = rid[1]
    while len(out) > PRODUCERS_KEPT:
        del out[next(iter(out))]
    return out


class CaptureLine(Struct, frozen=True, kw_only=True):
    """One line of `--format capture`: a native message and who sent it.

    `msg` stays undecoded (msgspec.Raw) so the native bytes pass through unchanged.
    No `origin`: as a raw record without the header (adapters.core.contract.Line).
    """

    origin: Origin | None = None
    t: int | None = None
    msg: msgspec.Raw
    #: the `record-id` header of the record it was (record_id); None: it had none
    record_id: str | None = msgspec.field(default=None, name="record-id")


class DeadLetter(Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A raw record (or one line of it) that could not be translated.

    `value` holds the original bytes (base64 in JSON), redacted as every output is
    (pipeline.privacy.redact): each span that holds a secret is replaced by a mask.
    A dead letter that would be larger than the cluster takes
    (CANONFLOW_MAX_MESSAGE_BYTES) holds only the first bytes of the original. When
    `value` is redacted or cut, `valueBytes` is the original value's size and
    `valueSha256` its SHA-256 (hex). A redacted letter also has `recordSha256`, the
    SHA-256 of the whole raw record it comes from (the one at topic/partition/offset,
    of which `value` may be one line): it matches that record for as long as its
    topic's retention keeps it.
    """

    topic: Annotated[str, Meta(description="The raw topic the record was read from.")]
    partition: Annotated[int, Meta(description="Its partition there.")]
    offset: Annotated[int, Meta(description=(
        "Its offset there: with topic and partition, where the original is while its "
        "topic's retention keeps it."))]
    provider: Annotated[str, Meta(description="The runtime whose adapter could not translate it.")]
    errorClass: Annotated[str, Meta(description=(
        "What went wrong, as a class name to match on (MalformedRecord, BadHeader, "
        "EmptyRecord, MalformedKey, LineTooLong, ...); `reason` says it in words."))]
    reason: Annotated[str, Meta(description="Why, in one line a person can act on.")]
    value: Annotated[bytes, Meta(description=(
        "The record's bytes (base64 in JSON), or the one line of it that failed; redacted "
        "(each secret masked) and cut to the cluster's message size, see valueBytes."))]
    key: Annotated[str | None, Meta(description=(
        "The record's key (the session id) as text; null when it had none."))] = None
    line: Annotated[int | UnsetType, Meta(description=(
        "When one line of a record of several failed: its index in the record, from 0 "
        "(`value` is that line); absent when the whole record failed."))] = UNSET
    origin: Annotated[Origin | UnsetType, Meta(description=(
        "Who sent the native message (agent or client), from its origin header; absent "
        "when it had none."))] = UNSET
    timestampMs: Annotated[int | UnsetType, Meta(description=(
        "The record's Kafka timestamp, epoch milliseconds; absent when none."))] = UNSET
    valueBytes: Annotated[int | UnsetType, Meta(description=(
        "When `value` is redacted or cut: the original value's size in bytes; absent when "
        "`value` is the original."))] = UNSET
    valueSha256: Annotated[str | UnsetType, Meta(description=(
        "When `value` is redacted or cut: the original value's SHA-256 (hex); absent "
        "otherwise."))] = UNSET
    recordSha256: Annotated[str | UnsetType, Meta(description=(
        "On a redacted letter: the SHA-256 (hex) of the whole raw record at "
        "topic/partition/offset; absent otherwise."))] = UNSET


capture_line_decoder = msgspec.json.Decoder(CaptureLine)
encode_deadletter = msgspec.json.Encoder().encode
decode_deadletter = msgspec.json.Decoder(DeadLetter).decode
