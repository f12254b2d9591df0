"""The `canonflow` command's entry point (the console script)."""

from pipeline.cli import main

__all__ = ["main"]
