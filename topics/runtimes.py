"""The runtimes canonflow reads, registered once: one line of RUNTIMES per runtime.

Everything that depends on the set of runtimes derives from this list, so adding a
runtime is writing its adapter package (adapters/<package>/: `translator.py`, and
`state.py` for its stored state) and adding its line here:

- the topic catalog (topics.catalog: PROVIDERS, RAW_TOPICS, the raw topic and the
  per-provider table changelogs), hence `canonflow topics` and the Strimzi manifests
  (pipeline's manifests tool, deploy/k8s);
- the JSON Schema's list of provider ids (topics.schema, `x-canonflow-providers`);
- the adapter registry (adapters.registry: provider id -> package) and the CLI's
  `--provider` choices;
- the mypyc build's module list (setup.py: the conversation core and each runtime's
  `translator.py`);
- the OTel exporter's gen_ai.provider.name (`vendor`);
- the tests that need one thing per runtime fail until it exists: a bundled sample
  (the demo), the chat equivalence conversation, usage the fleet and OTel parsers read.

The entries hold names only (the adapter package as a string): topics never imports
adapters (layering: topics <- adapters <- pipeline).
"""

from __future__ import annotations

from msgspec import Struct


class Runtime(Struct, frozen=True, kw_only=True):
    """One runtime canonflow reads."""

    #: The provider id: canonical events' `provider`, the raw topic's suffix, the
    #: CLI's --provider, CANONFLOW_PROVIDERS.
    id: str
    #: What a person calls it (docs, the schema's provider list).
    name: str
    #: The adapter package (a `Translator`, see adapters.core.record), importable by
    #: this name; its translator is `<package>/translator.py`.
    package: str
    #: The raw topic its sidecars write to (a literal, as every topic name).
    raw_topic: str
    #: gen_ai.provider.name (OpenTelemetry) when the runtime's model vendor is fixed;
    #: None when the model names it ("anthropic/claude-haiku-4-5") or it varies.
    vendor: str | None = None


#: Every runtime, in catalog order.
RUNTIMES: tuple[Runtime, ...] = (
    Runtime(id="claude", name="Claude Code", package="adapters.claude",
            raw_topic="agents.raw.claude", vendor="anthropic"),
    Runtime(id="codex", name="Codex app-server", package="adapters.codex",
            raw_topic="agents.raw.codex", vendor="openai"),
    Runtime(id="codex-exec", name="Codex exec", package="adapters.codex_exec",
            raw_topic="agents.raw.codex-exec", vendor="openai"),
    Runtime(id="opencode", name="OpenCode", package="adapters.opencode",
            raw_topic="agents.raw.opencode"),
    Runtime(id="acp", name="Agent Client Protocol", package="adapters.acp",
            raw_topic="agents.raw.acp"),
    Runtime(id="amp", name="Amp", package="adapters.amp", raw_topic="agents.raw.amp"),
    Runtime(id="gemini", name="Gemini CLI", package="adapters.gemini",
            raw_topic="agents.raw.gemini", vendor="gcp.gemini"),
    Runtime(id="pi", name="pi", package="adapters.pi", raw_topic="agents.raw.pi"),
    Runtime(id="copilot", name="GitHub Copilot CLI", package="adapters.copilot",
            raw_topic="agents.raw.copilot"),
    Runtime(id="droid", name="Factory droid", package="adapters.droid",
            raw_topic="agents.raw.droid"),
    Runtime(id="kilo", name="Kilo", package="adapters.kilo", raw_topic="agents.raw.kilo"),
    Runtime(id="qwen", name="Qwen Code", package="adapters.qwen",
            raw_topic="agents.raw.qwen"),
    Runtime(id="claude-transcript", name="Claude Code transcripts",
            package="adapters.claude_transcript", raw_topic="agents.raw.claude-transcript",
            vendor="anthropic"),
    Runtime(id="gemini-transcript", name="Gemini CLI chats", package="adapters.gemini_transcript",
            raw_topic="agents.raw.gemini-transcript", vendor="gcp.gemini"),
    Runtime(id="codex-transcript", name="Codex rollouts", package="adapters.codex_transcript",
            raw_topic="agents.raw.codex-transcript", vendor="openai"),
    Runtime(id="opencode-transcript", name="OpenCode database",
            package="adapters.opencode_transcript", raw_topic="agents.raw.opencode-transcript"),
)


def runtime(provider: str) -> Runtime:
    """The registered runtime `provider`. Raises KeyError for an unknown provider."""
    for r in RUNTIMES:
        if r.id == provider:
            return r
    raise KeyError(provider)
