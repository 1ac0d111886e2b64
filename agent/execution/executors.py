"""Where the evaluator's sandboxed jobs run: on this machine (`LocalExecutor`) or on a Ray cluster (`RayExecutor`).

A job is the same on both: `run_isolated` (agent.execution.sandbox) with its time and memory limits. On Ray it runs
inside a Ray task, so each node keeps its limits on the worker that evaluates it. `workers` is how many jobs the
tree search runs at once: each worker takes the next proposal as soon as its node is back, or with `in_order` a
batch of that many at a time, appended in the order drawn (agent.search.tree). Locally the default is one job per
core (`local_workers`): a LightGBM or linear node keeps one core busy, so a second job uses the one that would idle
(bench/RESULTS.md, "Nodes at once on this machine's cores").

A Ray worker lost mid-job (killed, out of memory, its machine gone) is that job's failure, an `Outcome` like any
other ("crashed", or "memory" when Ray's memory monitor killed it), never the run's: Ray does not retry it, since
a job that brings its worker down would only do so again.

Ray rather than Dask distributed: a node is one coarse job whose worker's death must be reported, not retried
(README, "Past one machine").
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from agent.execution.sandbox import DEFAULT_MEMORY_LIMIT, SHARED_KEPT, Limits, Outcome, run_isolated, share

LOCAL, RAY = "local", "ray"
EXECUTORS = (LOCAL, RAY)
# How much longer than a job's own time limit the driver waits for its answer from the cluster (queueing, start-up
# of the worker's sandbox, the result's transfer) before it gives the job up.
RAY_GRACE_SECONDS = 120.0
# Seconds leaving a local Ray cluster this process started takes (measured at about 1.6 s on 2 busy cores): kept out
# of the search's budget, since the run ends after it.
RAY_SHUTDOWN_SECONDS = 2.0
# The most jobs a local search runs at once by default, whatever the cores: two were measured (on two cores), and a
# batch of many proposals drawn before any is scored makes the search breadth-first.
MAX_LOCAL_WORKERS = 4


class ExecutorError(RuntimeError):
    """An executor that cannot be made: an unknown name, or a Ray cluster that cannot be reached or started."""


@runtime_checkable
class Executor(Protocol):
    """Runs sandboxed jobs; `workers` of them at once."""

    workers: int
    close_seconds: float  # how long `close` takes: the search's budget leaves it out

    def share(self, value: Any) -> Any:
        """A stand-in for `value` that `run` accepts as an argument, for a value many jobs read (the dataset):
        an executor may send it to its workers once."""
        ...

    def run(self, function: Callable[..., Any], *args: Any, limits: Limits) -> Outcome:
        """`function(*args)` in a sandboxed process under `limits`; never raises for anything the job does."""
        ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class LocalExecutor:
    """Jobs in this machine's sandbox, `workers` at a time (the search's own threads wait on them). A shared value
(the dataset) is sent to the sandbox's worker server once, and every job's process reads it from there."""

    workers: int = 1
    close_seconds: float = 0.0

    def share(self, value: Any) -> Any:
        return share(value)

    def run(self, function: Callable[..., Any], *args: Any, limits: Limits) -> Outcome:
        return run_isolated(function, *args, limits=limits)

    def close(self) -> None:
        """Nothing to release: the sandbox's server lives as long as this process."""


class RayExecutor:
    """Jobs on a Ray cluster, one CPU each: the cluster at `address` ("auto", "ray://host:10001", "host:6379"), or
    by Ray's own rule when None ($RAY_ADDRESS, else a cluster `ray start` began on this machine, else a new local
    one). A process already connected to Ray keeps its connection. `workers` defaults to the cluster's CPUs.
    Candidates on the workers are quiet, as in the local sandbox by default."""

    def __init__(self, address: str | None = None, workers: int | None = None):
        import ray

        self._ray = ray
        self._owns_connection = not ray.is_initialized()
        if self._owns_connection:
            try:
                ray.init(address=address, include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
            except (ConnectionError, RuntimeError, ValueError) as error:
                where = f"the Ray cluster at {address}" if address else "a local Ray cluster"
                raise ExecutorError(f"could not connect to {where}: {error}; start one with `ray start --head` "
                                    "and give its address to --ray-address (or leave it out for a local cluster)") \
                    from None
        self.close_seconds = RAY_SHUTDOWN_SECONDS if self._owns_connection else 0.0
        cpus = int(ray.cluster_resources().get("CPU", 0))
        self.workers = workers if workers is not None else max(cpus, 1)
        self._task = ray.remote(num_cpus=1, max_retries=0)(_run_on_worker)
        # id(value) -> (value, its object ref), the SHARED_KEPT most recently used, as the local sandbox keeps them
        self._shared: OrderedDict[int, tuple[Any, Any]] = OrderedDict()
        self._lock = threading.Lock()

    def share(self, value: Any) -> Any:
        with self._lock:
            if id(value) not in self._shared:  # the value is kept, so its id cannot be reused meanwhile
                self._shared[id(value)] = (value, self._ray.put(value))
                while len(self._shared) > SHARED_KEPT:
                    self._shared.popitem(last=False)
            self._shared.move_to_end(id(value))
            return self._shared[id(value)][1]

    def run(self, function: Callable[..., Any], *args: Any, limits: Limits) -> Outcome:
        ray = self._ray
        started = time.monotonic()
        job = self._task.remote(function, limits, *args)
        timeout = None if math.isinf(limits.time_seconds) else max(limits.time_seconds, 0.0) + RAY_GRACE_SECONDS
        try:
            return ray.get(job, timeout=timeout)
        except ray.exceptions.GetTimeoutError:
            with contextlib.suppress(ray.exceptions.RayError):
                ray.cancel(job, force=True)
            return Outcome("timeout", error=f"the Ray cluster gave no answer within {timeout:.0f} s (its time limit "
                                            f"and {RAY_GRACE_SECONDS:.0f} s more)", elapsed=time.monotonic() - started)
        except ray.exceptions.OutOfMemoryError as error:
            return Outcome("memory", error=f"Ray's memory monitor killed the worker evaluating it: {error}",
                           elapsed=time.monotonic() - started)
        except ray.exceptions.RayTaskError as error:  # the task itself failed on the worker, e.g. casebook missing
            return Outcome("error", error=f"the job failed on its Ray worker:\n{error}",
                           elapsed=time.monotonic() - started)
        except ray.exceptions.RayError as error:  # the worker, its node or the connection to them was lost
            return Outcome("crashed", error=f"the Ray worker evaluating it was lost ({type(error).__name__}): {error}",
                           elapsed=time.monotonic() - started)

    def close(self) -> None:
        """Forget the shared values; leave the cluster when this executor joined it."""
        self._shared.clear()
        if self._owns_connection and self._ray.is_initialized():
            self._ray.shutdown()


def _run_on_worker(function: Callable[..., Any], limits: Limits, *args: Any) -> Outcome:
    """The Ray task: the same sandboxed job as on the driver's machine, under the same limits."""
    return run_isolated(function, *args, limits=limits)


def local_workers() -> int:
    """How many jobs a local search runs at once by default: one per core this process may use, at most
    MAX_LOCAL_WORKERS, and no more than the default memory limits of the jobs together fit in this machine's
    memory."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return max(min(cores, MAX_LOCAL_WORKERS, memory // DEFAULT_MEMORY_LIMIT), 1)


def make_executor(kind: str = LOCAL, *, address: str | None = None, workers: int | None = None) -> Executor:
    """The executor `agent solve --executor KIND` names; `address` is Ray's, `workers` how many nodes at once."""
    if workers is not None and workers < 1:
        raise ExecutorError(f"workers must be at least 1, not {workers}")
    if kind == LOCAL:
        if address is not None:
            raise ExecutorError("--ray-address needs --executor ray")
        return LocalExecutor(workers or local_workers())
    if kind == RAY:
        return RayExecutor(address, workers)
    raise ExecutorError(f"unknown executor {kind!r}: expected one of {', '.join(EXECUTORS)}")
