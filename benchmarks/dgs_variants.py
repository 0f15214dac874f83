"""DGS variants side by side (GPU): time and optimality gap per class and size, one row per variant.

Usage::

    python benchmarks/dgs_variants.py --sizes 512,1024,2048 --variant "grid off" SINKHORN_GRID_MAX_N=0 \
        --variant "300 iterations" SINKHORN_ITERS=300
"""

from __future__ import annotations

import argparse
import ast

from sparse_section import dgs_table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="512,1024,2048")
    parser.add_argument("--classes", default="geom_paper,geometric,uniform,jittered3d")
    parser.add_argument("--scipy-max-n", type=int, default=4096, help="largest n solved by SciPy for the optimum")
    parser.add_argument("--exact", default="", help="exact GPU solvers to time, comma-separated (default: all)")
    parser.add_argument("--variant", nargs="+", action="append", default=[], metavar=("LABEL", "NAME=VALUE"),
                        help="a label and tracker.lap.dgs settings (repeatable)")
    args = parser.parse_args()
    variants = [("default", {})]
    for label, *settings in args.variant:
        values = {}
        for setting in settings:
            name, value = setting.split("=", 1)
            values[name] = ast.literal_eval(value)  # numbers and quoted strings
        variants.append((label, values))
    print(dgs_table([int(n) for n in args.sizes.split(",")], classes=tuple(args.classes.split(",")),
                    variants=variants, scipy_max_n=args.scipy_max_n,
                    exact_solvers=[name for name in args.exact.split(",") if name] or None))


if __name__ == "__main__":
    main()
