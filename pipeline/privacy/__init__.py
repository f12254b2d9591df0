"""Secrets kept out of what canonflow publishes: the redactor the worker and the
offline replay both apply to every output (`redact`, the room's API), its built-in
rules (`rules`), the literal prefilter derived from them (`literals`), and where a
streamed delta's tail may start a secret (`hold`)."""

__all__: list[str] = []
