"""Sans-I/O translators from each runtime's native messages to canonical events."""

import warnings

from adapters.core import (
    AdapterError,
    Emitter,
    InternalError,
    Line,
    LineFailure,
    MalformedRecord,
    MemorySpool,
    Message,
    Session,
    Spool,
    Stream,
    Translator,
    Whole,
    canonical_id,
    close_session,
    decode_message,
    event_id,
    fit_or_warn,
    idle_close_time,
    new_session,
    split_lines,
    translate_record,
)
from adapters.registry import UnknownProvider, build, get, providers, stale_extensions

if _stale := stale_extensions():
    warnings.warn(f"adapters: {', '.join(_stale)} changed after `make compiled`; the old "
                  "compiled code runs until `make compiled` (or `make interpreted`)",
                  stacklevel=2)

__all__ = [
    "AdapterError",
    "Emitter",
    "InternalError",
    "Line",
    "LineFailure",
    "MemorySpool",
    "MalformedRecord",
    "Message",
    "Session",
    "Spool",
    "Stream",
    "Translator",
    "Whole",
    "UnknownProvider",
    "build",
    "canonical_id",
    "close_session",
    "fit_or_warn",
    "idle_close_time",
    "decode_message",
    "event_id",
    "get",
    "new_session",
    "providers",
    "split_lines",
    "stale_extensions",
    "translate_record",
]
