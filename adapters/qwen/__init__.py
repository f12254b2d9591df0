"""Qwen Code `qwen --output-format stream-json` (Claude Code's print-mode shape) -> canonical events.

The package is the runtime's `Translator` (adapters.core.record): its translator is
`translator.py` (compiled with mypyc, setup.py), which reuses Claude Code's translator
and state (adapters.claude). Registered in topics.runtimes."""

from adapters.qwen.translator import (
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
