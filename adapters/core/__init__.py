"""The conversation core every runtime's translator shares.

- `contract`: the contract's errors and stored structs (never compiled: mypyc drops
  class keywords);
- `emitter`: the Emitter (envelopes, streams, held-back deltas);
- `record`: the driver (`translate_record`, `close_session`, `Translator`);
- `ids`: deterministic ids and digests, native message ids;
- `spool`: where streamed text waits (`Spool`, `MemorySpool`, `Whole`);
- `tools`: canonical tool names and item types;
- `decisions`: the decision words a protocol shares (MCP elicitation's `action`).

This module only re-exports; the translators import the modules themselves.
"""

from adapters.core.contract import (
    AdapterError,
    Held,
    InternalError,
    Line,
    LineFailure,
    MalformedRecord,
    Message,
    Session,
    Stored,
    Stream,
)
from adapters.core.emitter import DEFAULT_ITEM_CAP, UNSET, Emitter
from adapters.core.fit import fit_event, fit_or_warn
from adapters.core.ids import canonical_id, event_id, iso_ms
from adapters.core.record import (
    Translator,
    close_session,
    decode_message,
    idle_close_time,
    new_session,
    split_lines,
    translate_record,
)
from adapters.core.spool import MemorySpool, Spool, Whole, whole_fields

__all__ = [
    "DEFAULT_ITEM_CAP",
    "UNSET",
    "AdapterError",
    "Emitter",
    "Held",
    "InternalError",
    "Line",
    "LineFailure",
    "MalformedRecord",
    "MemorySpool",
    "Message",
    "Session",
    "Spool",
    "Stored",
    "Stream",
    "Translator",
    "Whole",
    "canonical_id",
    "close_session",
    "idle_close_time",
    "decode_message",
    "event_id",
    "fit_event",
    "fit_or_warn",
    "iso_ms",
    "new_session",
    "split_lines",
    "translate_record",
    "whole_fields",
]
