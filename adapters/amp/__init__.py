"""Amp `amp --stream-json` (Claude Code's shape, with its own differences) -> canonical events.

The package is the runtime's `Translator` (adapters.core.record): its translator is
`translator.py` (compiled with mypyc, setup.py), which reuses Claude Code's translator
and state (adapters.claude). Registered in topics.runtimes."""

from adapters.amp.translator import (
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
