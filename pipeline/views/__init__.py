"""Reading the worker's output back, for people and other systems: OTLP export of the
canonical stream (`otel`), the browser UI (`ui`, with `ui_static/`), and the terminal
rendering of `canonflow tail` and the demo (`render`). None of them runs in the worker."""

__all__: list[str] = []
