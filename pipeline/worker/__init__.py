"""What runs inside `canonflow run`: the Faust app factory and its agents (`app`), what
an agent's parts share (`context`), the per-record translation step (`normalize`), the
one commit path for everything the worker publishes or stores (`checkpoint`), the
output producer (`output`), the idle close (`idle`), the stall watch (`stall`), the
fleet-metrics stage (`fleet`), the two modules that touch Faust's internals
(`faust_internals`: tables, acknowledgements, batches; `faust_consumer`: the consumer
and table recovery), the worker's exceptions (`exceptions`), and the worker's process
(`process`: started on a cluster or on an embedded broker, or as a child process for
tools and tests).

Nothing here imports a tool (`pipeline.tools`) or a viewer (`pipeline.views`)."""

__all__: list[str] = []
