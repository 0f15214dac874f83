"""Persistent helper threads, one pool per purpose and process.

SciPy's k-d trees build and answer queries without holding the GIL, so the linker overlaps them with its other
work on threads that live as long as the process (starting threads for every call cost more than the overlap
gained). A pool belongs to the process that made it: a process forked from it (``multiprocessing`` on Linux)
has none of its threads, and a pool inherited that way would take work and never run it, so each process gets
pools of its own.
"""

from __future__ import annotations

import math
import os
import threading
from concurrent.futures import ThreadPoolExecutor

_pools: dict[tuple[str, int], ThreadPoolExecutor] = {}
_cores: dict[int, int] = {}  # available_cores() by process id
_lock = threading.Lock()


def thread_pool(name: str, workers: int) -> ThreadPoolExecutor:
    """The pool of ``workers`` threads named ``name`` of this process (made on first use)."""
    key = (name, os.getpid())
    pool = _pools.get(key)
    if pool is None:
        with _lock:
            pool = _pools.get(key)
            if pool is None:
                pool = _pools[key] = ThreadPoolExecutor(max_workers=workers, thread_name_prefix=f"tracker-{name}")
    return pool


CGROUP_CPU_LIMITS = ("/sys/fs/cgroup/cpu.max", "/sys/fs/cgroup/cpu/cpu.cfs_quota_us")
"""Where Linux states a container's CPU quota: cgroup v2 (``"quota period"`` or ``"max period"``), then v1 (the
quota alone, ``-1`` for none; its period is in ``cpu.cfs_period_us`` beside it)."""


def available_cores() -> int:
    """CPU cores this process may use: those it may run on, at most its container's CPU quota (rounded up).

    A container limited to 2 CPUs on a 64-core host sees 64 cores in ``os.cpu_count()`` and its affinity
    mask; splitting work 64 ways there only adds overhead. Measured once per process (the linker asks for
    every k-d tree query, and reading the cgroup files each time cost more than 1 % of a link).
    """
    cores = _cores.get(os.getpid())
    if cores is None:
        cores = _cores[os.getpid()] = _measure_cores()
    return cores


def _measure_cores() -> int:
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # (not on every platform)
        cores = os.cpu_count() or 1
    quota = cgroup_cpu_quota()
    return max(1, min(cores, math.ceil(quota))) if quota is not None else cores


def cgroup_cpu_quota(paths: tuple[str, ...] = CGROUP_CPU_LIMITS) -> float | None:
    """CPUs' worth of time per period this process's cgroup may use (None: no quota, or not stated)."""
    for path in paths:
        try:
            with open(path) as file:
                fields = file.read().split()
            if path.endswith("cpu.cfs_quota_us"):
                with open(os.path.join(os.path.dirname(path), "cpu.cfs_period_us")) as file:
                    fields.append(file.read().strip())
        except (OSError, ValueError):
            continue
        if len(fields) != 2 or fields[0] in ("max", "-1"):
            return None
        try:
            quota, period = float(fields[0]), float(fields[1])
        except ValueError:
            return None
        return quota / period if quota > 0 and period > 0 else None
    return None
