"""The only layer with I/O: Faust app factory, agents, tables, sinks, CLI, embedded broker.

Nothing here registers itself on import; `pipeline.worker.app.create_app(settings)` builds
the Faust application.
"""

__all__: list[str] = []
