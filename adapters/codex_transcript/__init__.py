"""Codex rollouts (`~/.codex/sessions/Y/M/D/rollout-*-<thread>.jsonl`) -> canonical events.

The package is the runtime's `Translator` (adapters.core.record): its translator is
`translator.py` (compiled with mypyc, setup.py), its stored state `state.py` (never
compiled: mypyc drops class keywords), `items.py` the rollout's items in the
app-server's v2 shapes, `sources.py` where the readers find the files (FILES, HOMES).
Registered in topics.runtimes."""

from adapters.codex_transcript.sources import FILES, HOMES
from adapters.codex_transcript.translator import (
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
