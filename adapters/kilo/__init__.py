"""Kilo `kilo run --format json` (OpenCode's run output) -> canonical events.

The package is the runtime's `Translator` (adapters.core.record): its translator is
`translator.py` (compiled with mypyc, setup.py), which reuses OpenCode's translator and
state (adapters.opencode, whose `run` module reads the run command's lines).
Registered in topics.runtimes."""

from adapters.kilo.translator import (
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
