"""The Dask cluster a run detects on: a local cluster of worker processes, an existing scheduler, or one
Dask-CUDA worker per GPU (:class:`tracker.params.ClusterParams`).

Dask distributed is an optional dependency (the ``[distributed]`` extra); it is imported only here and only
when a cluster is asked for, with a one-line :class:`tracker.errors.InputError` where it is missing.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import Any

from ..errors import InputError
from ..params import CLUSTER_DEFAULTS, ClusterParams

THREADS_PER_WORKER = 1
"""Threads of each local worker: detection (SciPy's filters) runs in one thread, so one process per core
spreads it without contention and keeps one frame's buffers per worker (what ``--worker-memory`` must hold)."""

INSTALL_HINT = "pip install 'tracker3d[distributed]'"


def wanted(cluster: ClusterParams = CLUSTER_DEFAULTS) -> bool:
    """Whether ``cluster`` asks for a Dask cluster at all (else the run stays in this process)."""
    return cluster.workers is not None or cluster.scheduler is not None or cluster.gpus


def check_cluster(cluster: ClusterParams) -> None:
    """A one-line ``ValueError`` for options that contradict each other, before anything starts."""
    given = [flag for flag, on in (("--workers", cluster.workers is not None),
                                   ("--scheduler", cluster.scheduler is not None), ("--gpus", cluster.gpus)) if on]
    if len(given) > 1:
        raise ValueError(f"give one of --workers, --scheduler and --gpus, not {' and '.join(given)}")
    if cluster.worker_memory_gb is not None and cluster.scheduler is not None:
        raise ValueError("--worker-memory sets the limit of local workers; an existing cluster's workers have "
                         "their own (dask worker --memory-limit)")
    if cluster.worker_memory_gb is not None and not given:
        raise ValueError("--worker-memory needs --workers or --gpus")
    if cluster.link_block_frames is not None and not given:
        raise ValueError("--link-blocks needs --workers, --scheduler or --gpus (the blocks are linked on the workers)")


def import_distributed() -> Any:
    """The ``distributed`` module, or a one-line :class:`InputError` saying how to install it."""
    try:
        import distributed
    except ImportError:
        raise InputError(f"running on a Dask cluster needs Dask distributed: {INSTALL_HINT}") from None
    return distributed


@contextlib.contextmanager
def dask_client(cluster: ClusterParams) -> Iterator[Any]:
    """A ``distributed.Client`` of the cluster ``cluster`` asks for, closed (and a local cluster stopped) on exit.

    Parameters
    ----------
    cluster : ClusterParams
        ``workers``: a ``LocalCluster`` of that many processes of :data:`THREADS_PER_WORKER` thread(s), each
        limited to ``worker_memory_gb`` (10⁹ bytes); ``scheduler``: the cluster of that address; ``gpus``: a
        Dask-CUDA ``LocalCUDACluster`` (one worker per visible GPU).

    Raises
    ------
    ValueError
        Contradicting options (:func:`check_cluster`).
    InputError
        ``distributed`` (or ``dask_cuda`` for ``gpus``) is not installed, or the scheduler cannot be reached.
    """
    check_cluster(cluster)
    distributed = import_distributed()
    memory = "auto" if cluster.worker_memory_gb is None else int(cluster.worker_memory_gb * 1e9)
    quiet = {"silence_logs": logging.ERROR, "dashboard_address": ":0"}  # (any free port: no clash)
    with contextlib.ExitStack() as stack:
        if cluster.scheduler is not None:
            try:
                client = stack.enter_context(distributed.Client(cluster.scheduler, timeout="20s"))
            except (OSError, TimeoutError) as error:
                raise InputError(f"cannot reach the Dask scheduler {cluster.scheduler} "
                                 f"({str(error).splitlines()[0] if str(error) else type(error).__name__})") from None
        else:
            if cluster.gpus:
                try:
                    from dask_cuda import LocalCUDACluster
                except ImportError:
                    raise InputError("--gpus needs dask-cuda (one worker per GPU) with CuPy: pip install dask-cuda "
                                     "'tracker3d[cuda12,distributed]'") from None
                local = stack.enter_context(LocalCUDACluster(threads_per_worker=THREADS_PER_WORKER,
                                                             memory_limit=memory, **quiet))
            else:
                local = stack.enter_context(distributed.LocalCluster(
                    n_workers=cluster.workers, threads_per_worker=THREADS_PER_WORKER, processes=True,
                    memory_limit=memory, **quiet))
            client = stack.enter_context(distributed.Client(local))
        yield client
