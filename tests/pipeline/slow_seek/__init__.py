"""Test-only start-up code for worker child processes (see sitecustomize)."""
