"""Factory droid `droid exec --output-format stream-json` -> canonical events.

The package is the runtime's `Translator` (adapters.core.record): its translator is
`translator.py` (compiled with mypyc, setup.py), which reuses Claude Code's translator and
state (adapters.claude).
Registered in topics.runtimes."""

from adapters.droid.translator import (
    IGNORED,
    initial,
    message_id,
    provider,
    raw_source,
    state_type,
    translate,
)

__all__ = ["IGNORED", "initial", "message_id", "provider", "raw_source", "state_type",
           "translate"]
