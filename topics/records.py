"""Records that cross topics besides the canonical event: raw-record metadata, the
capture line format, and the dead letter."""

from __future__ import annotations

from typing import Literal

import msgspec
from msgspec import UNSET, Struct, UnsetType

Origin = Literal["agent", "client"]

#: Kafka header names on raw records (values are UTF-8).
HEADER_ORIGIN = "origin"  # "agent" (default) or "client"
HEADER_TIME = "t"  # capture time, epoch milliseconds


class CaptureLine(Struct, frozen=True, kw_only=True):
    """One line of `--format capture`: a native message and who sent it.

    `msg` stays undecoded (msgspec.Raw) so the native bytes pass through unchanged.
    """

    origin: Origin = "agent"
    t: int | None = None
    msg: msgspec.Raw


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

    topic: str
    partition: int
    offset: int
    provider: str
    errorClass: str
    reason: str
    value: bytes
    key: str | None = None
    line: int | UnsetType = UNSET
    origin: Origin | UnsetType = UNSET
    timestampMs: int | UnsetType = UNSET
    valueBytes: int | UnsetType = UNSET
    valueSha256: str | UnsetType = UNSET
    recordSha256: str | UnsetType = UNSET


capture_line_decoder = msgspec.json.Decoder(CaptureLine)
encode_deadletter = msgspec.json.Encoder().encode
decode_deadletter = msgspec.json.Decoder(DeadLetter).decode
