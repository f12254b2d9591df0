"""The real-broker fixtures of tests/pipeline (the embedded broker, settings with the
catalog's topics created, a worker), for the shipper's end-to-end tests."""

from tests.pipeline.conftest import broker, settings, worker  # noqa: F401
