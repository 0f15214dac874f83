"""``track solvers``: the assignment solvers and what this machine can run."""

from __future__ import annotations

import click


@click.command("solvers")
@click.option("--warm-up", is_flag=True,
              help="Load the GPU solvers' kernels and run each once now, so that CuPy compiles the kernels "
                   "around them (the first run on a fresh machine otherwise pays for it); prints the seconds "
                   "each step took.")
def solvers_command(warm_up: bool) -> None:
    """List the assignment solvers and what this machine can run."""
    from ..backend import gpu_available
    from ..lap._registry import _SOLVERS

    gpu = gpu_available()
    for solver in _SOLVERS.values():
        usable = "yes" if (gpu or not solver.gpu) else "no (needs a GPU)"
        kind = "exact" if solver.exact else "heuristic"
        click.echo(f"{solver.name:22s} {kind:9s} usable: {usable:16s} {solver.description}")
    if warm_up:
        from ..lap import warm_up as compile_and_run

        steps = compile_and_run()
        if not steps:
            click.echo("warm-up: no GPU here, nothing to compile", err=True)
        for step, seconds in steps.items():
            click.echo(f"warm-up: {step:40s} {seconds:7.2f} s", err=True)
