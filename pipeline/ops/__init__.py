"""What the worker shows its operators: the Prometheus registry and the worker's
counters (`metrics`), /health and /metrics over HTTP (`web`). Nothing here knows the
worker's agents: the worker hands its metrics, health and tables to them."""

__all__: list[str] = []
