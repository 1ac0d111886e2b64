"""Run one function in a child process with a time limit and a memory limit, and say how it ended.

Children fork from a forkserver that has already imported the modelling libraries, so a candidate
starts in well under a second and never inherits the parent's threads. The function and its
arguments travel with cloudpickle, so trainers and steps defined in a script or a test work too.
"""

from __future__ import annotations

import multiprocessing
import os
import resource
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import cloudpickle
from threadpoolctl import threadpool_limits

# Imported once by the forkserver so that each child starts warm.
_PRELOAD = ["agent.evaluator"]
_CONTEXT = multiprocessing.get_context("forkserver")
_CONTEXT.set_forkserver_preload(_PRELOAD)

_GIB = 1024**3
DEFAULT_MEMORY_LIMIT = min(8 * _GIB, os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2)
# How long a child that has sent its result may take to exit before it is killed.
_EXIT_GRACE_SECONDS = 5.0


class SandboxStartError(RuntimeError):
    """The child process could not be started at all (as opposed to a candidate failing in it)."""


@dataclass(frozen=True)
class Limits:
    time_seconds: float
    memory_bytes: int | None = DEFAULT_MEMORY_LIMIT
    # OpenMP / BLAS threads. One by default: on a small, shared machine OpenMP threads spin-waiting for
    # a core made histogram boosting several times slower than a single thread.
    native_threads: int | None = 1


@dataclass(frozen=True)
class Outcome:
    status: str  # "ok", "error" (it raised), "timeout", "memory" (over the memory limit) or "crashed"
    value: Any = None
    error: str = ""  # the traceback or what ended the child
    elapsed: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def run_isolated(function: Callable[..., Any], *args: Any, limits: Limits) -> Outcome:
    """`function(*args)` in a child process; never raises for anything the child does."""
    started = time.monotonic()
    receiver, sender = _CONTEXT.Pipe(duplex=False)
    payload = cloudpickle.dumps((function, args))
    child = _CONTEXT.Process(target=_child_main, args=(sender, payload, list(sys.path), limits))
    try:
        child.start()
    except (BrokenPipeError, EOFError) as error:
        raise SandboxStartError(
            "could not start a candidate process: multiprocessing re-imports the main script in each child, so a "
            "script that runs the agent must do so under `if __name__ == '__main__':`"
        ) from error
    sender.close()
    status, value = "crashed", ""
    try:
        if receiver.poll(max(limits.time_seconds, 0.0)):
            status, value = cloudpickle.loads(receiver.recv_bytes())
        elif child.is_alive():
            status, value = "timeout", f"timed out after {limits.time_seconds:.0f} s"
    except EOFError:  # the child died before sending anything
        pass
    except Exception:  # noqa: BLE001 - a result the parent cannot read back is the candidate's failure
        status, value = "error", f"the candidate's result could not be read back:\n{traceback.format_exc()}"
    finally:
        receiver.close()
        if status == "timeout":
            child.kill()
        child.join(_EXIT_GRACE_SECONDS)
        if child.is_alive():
            child.kill()
            child.join()
    if status == "crashed":
        value = _death_cause(child.exitcode)
    elapsed = time.monotonic() - started
    if status == "ok":
        return Outcome("ok", value=value, elapsed=elapsed)
    return Outcome(status, error=value, elapsed=elapsed)


def _death_cause(exitcode: int | None) -> str:
    if exitcode is not None and exitcode < 0:
        return f"the candidate's process was killed by signal {-exitcode} (out of memory or a native crash)"
    return f"the candidate's process exited with code {exitcode} before reporting a result"


def last_line(error: str, limit: int | None = None) -> str:
    """The last non-blank line of an error (where a traceback says what went wrong), stripped and cut to `limit`
    characters."""
    lines = [line.strip() for line in error.strip().splitlines() if line.strip()]
    line = lines[-1] if lines else "unknown error"
    return line if limit is None else line[:limit]


def error_tail(error: str, lines: int = 12) -> str:
    """The end of a traceback: where it failed and why, without the whole stack (blank lines dropped)."""
    kept = [line for line in error.strip().splitlines() if line.strip()]
    return "\n".join(kept[-lines:])


def _child_main(sender, payload: bytes, parent_path: list[str], limits: Limits) -> None:
    memory_bytes = limits.memory_bytes
    if memory_bytes is not None:
        resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    if limits.native_threads is not None:
        threadpool_limits(limits=limits.native_threads)
    sys.path[:] = parent_path  # find modules the parent imported from a script or test folder
    try:
        function, args = cloudpickle.loads(payload)
        result = ("ok", function(*args))
    except MemoryError:
        result = ("memory", f"over the memory limit of {memory_bytes / _GIB:.1f} GiB:\n{traceback.format_exc()}")
    except BaseException:  # noqa: BLE001 - whatever the candidate raises is its failure, reported in full
        result = ("error", traceback.format_exc())
    try:
        message = cloudpickle.dumps(result)
    except Exception:  # noqa: BLE001 - a result that cannot travel back is a failure of the candidate
        message = cloudpickle.dumps(("error", f"the result could not be sent back:\n{traceback.format_exc()}"))
    sender.send_bytes(message)
    sender.close()
