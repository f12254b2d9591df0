"""OpenCode's database (`opencode.db`, its `event` table) -> canonical events.

The package is the runtime's `Translator` (adapters.core.record): its translator is
`translator.py` (compiled with mypyc, setup.py), its stored state `state.py` (never
compiled: mypyc drops class keywords), `sources.py` what the readers send it (TABLES,
HOMES, DATABASES). Registered in topics.runtimes."""

from adapters.opencode_transcript.sources import DATABASES, HOMES, TABLES
from adapters.opencode_transcript.translator import (
    IGNORED,
    initial,
    message_id,
    provider,
    raw_source,
    state_type,
    translate,
)

__all__ = ["DATABASES", "HOMES", "IGNORED", "TABLES", "initial", "message_id", "provider",
           "raw_source", "state_type", "translate"]
