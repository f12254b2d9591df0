"""Reaching a Kafka cluster, for the worker and the tools alike: the clients' connection
settings and topic creation from the catalog (`admin`), and the embedded Tansu broker a
worker or a tool starts when no cluster is given (`broker`)."""

__all__: list[str] = []
