"""`python -m canonflow`: the `canonflow` command."""

from canonflow.cli import main

main(prog_name="canonflow")
