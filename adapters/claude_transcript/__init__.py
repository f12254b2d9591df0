"""Claude Code's session files (~/.claude/projects/*/<session>.jsonl) -> canonical events.

The package is the runtime's `Translator` (adapters.core.record): its translator is
`translator.py` (compiled with mypyc, setup.py), its stored state `state.py` (never
compiled: mypyc drops class keywords), where its files live `sources.py` (for the
readers). Registered in topics.runtimes."""

from adapters.claude_transcript.sources import FILES, HOMES
from adapters.claude_transcript.translator import (
    IGNORED,
    initial,
    message_id,
    provider,
    raw_source,
    state_type,
    translate,
)

__all__ = ["FILES", "HOMES", "IGNORED", "initial", "message_id", "provider", "raw_source",
           "state_type", "translate"]
