"""``track solvers``: the assignment solvers and what this machine can run."""

from __future__ import annotations

import click


@click.command("solvers")
def solvers_command() -> None:
    """List the assignment solvers and what this machine can run."""
    from ..backend import gpu_available
    from ..lap._registry import _SOLVERS

    gpu = gpu_available()
    for solver in _SOLVERS.values():
        usable = "yes" if (gpu or not solver.gpu) else "no (needs a GPU)"
        kind = "exact" if solver.exact else "heuristic"
        click.echo(f"{solver.name:22s} {kind:9s} usable: {usable:16s} {solver.description}")
