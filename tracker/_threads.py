"""Persistent helper threads, one pool per purpose and process.

SciPy's k-d trees build and answer queries without holding the GIL, so the linker overlaps them with its other
work on threads that live as long as the process (starting threads for every call cost more than the overlap
gained). A pool belongs to the process that made it: a process forked from it (``multiprocessing`` on Linux)
has none of its threads, and a pool inherited that way would take work and never run it, so each process gets
pools of its own.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor

_pools: dict[tuple[str, int], ThreadPoolExecutor] = {}
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


def available_cores() -> int:
    """CPU cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # (not on every platform)
        return os.cpu_count() or 1
