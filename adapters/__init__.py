"""Sans-I/O translators from each runtime's native messages to canonical events."""

from adapters.base import (
    AdapterError,
    Emitter,
    Line,
    LineFailure,
    MalformedRecord,
    Message,
    Session,
    Translator,
    canonical_id,
    close_session,
    decode_message,
    event_id,
    new_session,
    split_lines,
    translate_record,
)
from adapters.registry import UnknownProvider, get, providers

__all__ = [
    "AdapterError",
    "Emitter",
    "Line",
    "LineFailure",
    "MalformedRecord",
    "Message",
    "Session",
    "Translator",
    "UnknownProvider",
    "canonical_id",
    "close_session",
    "decode_message",
    "event_id",
    "get",
    "new_session",
    "providers",
    "split_lines",
    "translate_record",
]
