"""`python -m pipeline.cli`: the `canonflow` command, as the worker's child processes and
the tests start it."""

from pipeline.cli import main

main(prog_name="canonflow")
