"""What runs inside `canonflow run`: the Faust app factory and its agents (`app`), the
per-record translation step (`normalize`), the ordered publish -> store -> acknowledge
step of each batch (`checkpoint`), the output producer (`output`), the idle-session
scan (`idle`), the fleet-metrics stage (`fleet`), the two modules that touch Faust's
internals (`faust_door`: tables, acknowledgements, batches; `faust_consumer`: the
consumer and table recovery), and the worker's process (`process`: started on a cluster or
on an embedded broker, or as a child process for tools and tests).

Nothing here imports a tool (`pipeline.tools`) or a viewer (`pipeline.views`)."""

__all__: list[str] = []
