"""Run one function in a child process with a time limit and a memory limit, and say how it ended.

Candidates run in processes forked from a worker server this module starts once per calling process: a
plain `python -c` subprocess, not multiprocessing, so nothing ever re-runs the caller's `__main__` — a script
without an `if __name__ == "__main__":` guard, code piped to `python -` and a notebook all work alike. The
server has already imported the modelling libraries, so a candidate starts in milliseconds and never inherits
the caller's threads. The function and its arguments travel with cloudpickle, so trainers and steps defined in
a script, a notebook or a test work too.

A value many candidates read (the dataset) can be `share`d: it travels to the server once, and a job given the
returned `Shared` stand-in reads it from the memory its process inherits from the server (a fork copies nothing
until written), instead of having it pickled, sent and unpickled again for every candidate.

For each candidate the caller hands the server one end of a fresh socket pair. The server forks a supervisor,
which forks the candidate's process and reports how it exited; the candidate's process applies the memory and
thread limits, runs the function and sends its result back. The caller kills it at the time limit (and the
supervisor, should the caller have gone away, a little later).

Candidates are quiet: their warnings are ignored and their stdout and stderr discarded, unless
`Limits.verbose` (or `verbose_candidates()`) asks for them, which then go to the caller's stdout and stderr.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import math
import os
import resource
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import uuid
import warnings
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import cloudpickle
from threadpoolctl import threadpool_limits

# Imported once by the worker server so that each candidate starts warm.
_PRELOAD = ("agent.evaluator",)

_GIB = 1024**3
DEFAULT_MEMORY_LIMIT = min(8 * _GIB, os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2)
# How long a child that has sent its result may take to exit before it is killed.
_EXIT_GRACE_SECONDS = 5.0
# How long the worker server may take to import the modelling libraries.
_STARTUP_SECONDS = 300.0
# The supervisor kills a candidate this long after its time limit, in case the caller died without doing so.
_BACKSTOP_SECONDS = 30.0
# Shared values the server keeps, the most recently shared first: a run shares its table and perhaps a sample of it.
SHARED_KEPT = 4


class SandboxStartError(RuntimeError):
    """The worker server could not be started at all (as opposed to a candidate failing in it)."""


@dataclass(frozen=True)
class Limits:
    time_seconds: float
    memory_bytes: int | None = DEFAULT_MEMORY_LIMIT
    # OpenMP / BLAS threads. One by default: on a small, shared machine OpenMP threads spin-waiting for
    # a core made histogram boosting several times slower than a single thread.
    native_threads: int | None = 1
    # Whether the candidate's warnings and output reach this process's stdout and stderr (otherwise they are
    # discarded); None: as `verbose_candidates()` set it, quiet by default.
    verbose: bool | None = None


@dataclass(frozen=True)
class Outcome:
    status: str  # "ok", "error" (it raised), "timeout", "memory" (over the memory limit) or "crashed"
    value: Any = None
    error: str = ""  # the traceback or what ended the child
    elapsed: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status == "ok"


_verbose_default = False


@contextlib.contextmanager
def verbose_candidates(enabled: bool = True) -> Iterator[None]:
    """Within the block, candidates run with `Limits(verbose=None)` keep their warnings and output (`agent solve
    --verbose`)."""
    global _verbose_default
    previous, _verbose_default = _verbose_default, enabled
    try:
        yield
    finally:
        _verbose_default = previous


def shows_output(limits: Limits) -> bool:
    """Whether a candidate run under `limits` keeps its warnings and output (else they are discarded)."""
    return _verbose_default if limits.verbose is None else limits.verbose


@dataclass(frozen=True)
class Shared:
    """A value sent to the worker server once (`share`), as a job's argument: the job's process reads the value
    from the server's memory."""

    key: str


def share(value: Any) -> Shared:
    """A stand-in for `value` that `run_isolated` accepts as an argument in its place. The value is sent to the
    worker server before the first job that takes it (again after a server restart), and kept there while it is
    among the last SHARED_KEPT values shared."""
    with _server_lock:
        kept = _shared.get(id(value))  # the value itself is kept, so its id cannot be reused meanwhile
        if kept is None:
            kept = _shared[id(value)] = (value, Shared(uuid.uuid4().hex))
            while len(_shared) > SHARED_KEPT:
                _, (_, forgotten) = _shared.popitem(last=False)
                if _server is not None and _server.alive() and forgotten.key in _server.shared:
                    with contextlib.suppress(OSError):  # a server gone takes its values with it
                        _server.forget(forgotten.key)
        _shared.move_to_end(id(value))
        return kept[1]


def run_isolated(function: Callable[..., Any], *args: Any, limits: Limits) -> Outcome:
    """`function(*args)` in a child process; never raises for anything the child does. An argument may be a
    `Shared` stand-in of a value given to `share`."""
    started = time.monotonic()
    verbose = shows_output(limits)
    try:
        payload = cloudpickle.dumps((function, args))
    except Exception:  # noqa: BLE001 - a candidate that cannot travel to its process is the candidate's failure
        return Outcome("error", error=f"the candidate could not be sent to its process:\n{traceback.format_exc()}",
                       elapsed=time.monotonic() - started)
    job = _Job(limits.time_seconds, limits.memory_bytes, limits.native_threads, verbose, _search_path(), _cwd())
    connection = _open_job(verbose, [arg.key for arg in args if isinstance(arg, Shared)])
    status, value, pid, exitcode = "crashed", "", None, None
    try:
        deadline = time.monotonic() + max(limits.time_seconds, 0.0)
        try:
            connection.settimeout(_remaining(deadline))
            _send_frame(connection, _JOB, cloudpickle.dumps(job))
            _send_frame(connection, _PAYLOAD, payload)
            while True:
                kind, data = _receive(connection, deadline)
                if kind == _PID:
                    pid = int(data)
                elif kind == _EXIT:
                    exitcode = int(data)
                    break
                elif kind == _RESULT:
                    status, value = _read_result(data)
                    break
        except TimeoutError:
            status, value = "timeout", f"timed out after {limits.time_seconds:.0f} s"
        except (EOFError, OSError):  # the candidate's process (or the server) went away before reporting
            pass
    finally:
        exitcode = _finish(connection, pid, exitcode, kill=status in ("timeout", "crashed"))
    if status == "crashed":
        value = _death_cause(exitcode)
    elapsed = time.monotonic() - started
    if status == "ok":
        return Outcome("ok", value=value, elapsed=elapsed)
    return Outcome(status, error=value, elapsed=elapsed)


def _read_result(data: bytes) -> tuple[str, Any]:
    try:
        return cloudpickle.loads(data)
    except Exception:  # noqa: BLE001 - a result the parent cannot read back is the candidate's failure
        return "error", f"the candidate's result could not be read back:\n{traceback.format_exc()}"


def _finish(connection: socket.socket, pid: int | None, exitcode: int | None, kill: bool) -> int | None:
    """Wait for the candidate's process to end (killing it if it ran out of time or outlives its grace); its exit
    code, or None when unknown."""
    try:
        if exitcode is None and pid is not None:
            if kill:
                _kill(pid)
            exitcode = _wait_for_exit(connection, _EXIT_GRACE_SECONDS)
            if exitcode is None:
                _kill(pid)
                exitcode = _wait_for_exit(connection, _EXIT_GRACE_SECONDS)
    finally:
        connection.close()
    return exitcode


def _wait_for_exit(connection: socket.socket, seconds: float) -> int | None:
    deadline = time.monotonic() + seconds
    with contextlib.suppress(TimeoutError, EOFError, OSError):
        while True:
            kind, data = _receive(connection, deadline)
            if kind == _EXIT:
                return int(data)
    return None


def _kill(pid: int) -> None:
    """Kill the candidate's process and whatever it started (its process group, see `_run_job`)."""
    for kill in (os.killpg, os.kill):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            kill(pid, signal.SIGKILL)
            return


def _death_cause(exitcode: int | None) -> str:
    if exitcode is not None and exitcode < 0:
        return f"the candidate's process was killed by signal {-exitcode} (out of memory or a native crash)"
    if exitcode is None:
        return "the candidate's process ended before reporting a result"
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


# ---- the caller's side: one worker server per process


@dataclass(frozen=True)
class _Job:
    time_seconds: float
    memory_bytes: int | None
    native_threads: int | None
    verbose: bool
    path: list[str]  # the caller's sys.path: modules it imported from a script or test folder
    cwd: str


class _Server:
    """The worker server: `python -c` importing this module's `serve`, connected by a Unix socket pair."""

    def __init__(self) -> None:
        self.owner = os.getpid()
        self.shared: set[str] = set()  # the keys of the shared values it holds
        self.log = tempfile.TemporaryFile()
        ours, theirs = socket.socketpair()
        bootstrap = (f"import sys; sys.path[:] = {_search_path()!r}; "
                     f"from agent.execution.sandbox import serve; serve({theirs.fileno()})")
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-c", bootstrap], pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, stderr=self.log, start_new_session=True,
            )
        except OSError as error:
            ours.close()
            raise SandboxStartError(f"could not start the candidates' worker process ({sys.executable}): {error}") \
                from error
        finally:
            theirs.close()
        self.control = ours
        ours.settimeout(_STARTUP_SECONDS)
        try:
            ready = ours.recv(1)
        except OSError:
            ready = b""
        ours.settimeout(None)
        if ready != _READY:
            self.close()
            raise SandboxStartError(f"the candidates' worker process did not start: {self.failure()}")

    def alive(self) -> bool:
        return self.owner == os.getpid() and self.process.poll() is None

    def send(self, fds: list[int]) -> None:
        socket.send_fds(self.control, [_NEW_JOB], fds)

    def hold(self, key: str, value: Any) -> None:
        """Send a shared value for the server to keep."""
        _send_frame(self.control, _SHARE, cloudpickle.dumps((key, value)))
        self.shared.add(key)

    def forget(self, key: str) -> None:
        _send_frame(self.control, _FORGET, key.encode())
        self.shared.discard(key)

    def failure(self) -> str:
        self.log.seek(0)
        return last_line(self.log.read().decode(errors="replace"), 500)

    def close(self) -> None:
        if self.owner != os.getpid():
            return
        self.control.close()  # the server exits when its control socket closes
        try:
            self.process.wait(_EXIT_GRACE_SECONDS)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log.close()


_server: _Server | None = None
_server_lock = threading.Lock()
_shared: OrderedDict[int, tuple[Any, Shared]] = OrderedDict()  # id(value) -> (value, its stand-in), see `share`


def _open_job(verbose: bool, shared: list[str]) -> socket.socket:
    """A connection to a new candidate's process (through the server, started on first use or after it died), once
    the server holds the `shared` values the job reads."""
    global _server
    ours, theirs = socket.socketpair()
    fds = [theirs.fileno(), *(_output_fds() if verbose else ())]
    try:
        with _server_lock:
            values = {stand_in.key: value for value, stand_in in _shared.values()}
            for attempt in range(2):
                _start_server()
                try:
                    for key in shared:
                        if key not in _server.shared:
                            _server.hold(key, values[key])
                    _server.send(fds)
                    break
                except OSError:
                    if attempt:
                        raise SandboxStartError("could not reach the candidates' worker process: "
                                                f"{_server.failure()}") from None
                    _server.close()
                    _server = None
    except BaseException:
        ours.close()
        raise
    finally:
        theirs.close()
    return ours


def _start_server() -> None:
    """Start the worker server unless it runs; the caller holds _server_lock."""
    global _server
    if _server is None or not _server.alive():
        if _server is not None and _server.owner == os.getpid():
            _server.close()
        _server = _Server()
        atexit.register(_server.close)


def warm_up() -> None:
    """Start the worker server on a thread, so that its imports (the modelling libraries, a few seconds) overlap the
    caller's own set-up; the first candidate waits for it. A server that cannot start is left for that candidate to
    report."""

    def start() -> None:
        with _server_lock, contextlib.suppress(SandboxStartError):
            _start_server()

    threading.Thread(target=start, name="casebook-warm-up", daemon=True).start()


def _output_fds() -> list[int]:
    """This process's stdout and stderr file descriptors, for a verbose candidate to write to (when open)."""
    fds = []
    for fd in (1, 2):
        try:
            os.fstat(fd)
        except OSError:
            return []
        fds.append(fd)
    return fds


def _search_path() -> list[str]:
    return [os.fspath(entry) for entry in sys.path if isinstance(entry, str | os.PathLike)]


def _cwd() -> str:
    try:
        return os.getcwd()
    except OSError:  # the caller's folder was removed
        return ""


def _remaining(deadline: float) -> float | None:
    """A socket timeout for `deadline`: None (block) for no deadline, a millisecond once it has passed."""
    return None if math.isinf(deadline) else max(deadline - time.monotonic(), 1e-3)


# ---- the wire: frames of (kind, length, bytes)

_READY, _NEW_JOB, _SHARE, _FORGET = b"r", b"j", b"s", b"f"
_JOB, _PAYLOAD, _PID, _RESULT, _EXIT = b"J", b"P", b"p", b"R", b"x"
_HEADER = struct.Struct("!cQ")


def _send_frame(connection: socket.socket, kind: bytes, data: bytes) -> None:
    connection.sendall(_HEADER.pack(kind, len(data)))
    connection.sendall(data)


def _receive(connection: socket.socket, deadline: float = math.inf) -> tuple[bytes, bytes]:
    """The next frame; TimeoutError if none starts before `deadline`, EOFError when the other end has closed.
    A frame that has started is read to its end, however long that takes."""
    connection.settimeout(_remaining(deadline))
    first = connection.recv(1, socket.MSG_PEEK)
    if not first:
        raise EOFError
    connection.settimeout(None)
    kind, length = _HEADER.unpack(_read_exactly(connection, _HEADER.size))
    return kind, _read_exactly(connection, length)


def _read_exactly(connection: socket.socket, size: int) -> bytes:
    buffer = bytearray(size)
    view = memoryview(buffer)
    received = 0
    while received < size:
        count = connection.recv_into(view[received:])
        if count == 0:
            raise EOFError
        received += count
    return bytes(buffer)


# ---- the worker server's side

_held: dict[str, Any] = {}  # the shared values, by key: a candidate's process inherits them



def serve(control_fd: int) -> None:
    """The worker server's main loop: fork a supervisor for each job, until the caller closes the control socket."""
    control = socket.socket(fileno=control_fd)
    for module in _PRELOAD:
        importlib.import_module(module)
    sys.stdout.flush()
    sys.stderr.flush()
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # supervisors are reaped by the system
    control.sendall(_READY)
    while True:
        try:
            message, fds, _, _ = socket.recv_fds(control, 1, 3)
        except OSError:
            return
        if not message:
            return
        if message in (_SHARE, _FORGET):
            (length,) = struct.unpack("!Q", _read_exactly(control, 8))
            data = _read_exactly(control, length)
            if message == _SHARE:
                key, value = cloudpickle.loads(data)
                _held[key] = value
            else:
                _held.pop(data.decode(), None)
            continue
        try:
            pid = os.fork()
        except OSError:  # the job's caller sees its connection close: a crashed candidate
            pid = -1
        if pid == 0:
            code = 0
            try:
                control.close()
                _supervise(fds[0], fds[1:])
            except BaseException:  # noqa: BLE001 - logged to the server's stderr; the caller sees a crash
                traceback.print_exc()
                code = 1
            finally:
                os._exit(code)
        for fd in fds:
            os.close(fd)


def _supervise(job_fd: int, output_fds: list[int]) -> None:
    """In a fork of the server: run the job in a process of its own and report how that process exited."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    connection = socket.socket(fileno=job_fd)
    kind, data = _receive(connection)
    job: _Job = cloudpickle.loads(data)
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            _run_job(connection, job, output_fds)
        except BaseException:  # noqa: BLE001 - e.g. the caller went away: nothing left to report to
            code = 70
        finally:
            with contextlib.suppress(Exception):
                sys.stdout.flush()
                sys.stderr.flush()
            os._exit(code)
    for fd in output_fds:
        os.close(fd)
    if math.isfinite(job.time_seconds):
        signal.signal(signal.SIGALRM, lambda *_: _kill(pid))
        signal.setitimer(signal.ITIMER_REAL, max(job.time_seconds, 0.0) + _BACKSTOP_SECONDS)
    _, status = os.waitpid(pid, 0)
    signal.setitimer(signal.ITIMER_REAL, 0)
    with contextlib.suppress(OSError):
        _send_frame(connection, _EXIT, str(os.waitstatus_to_exitcode(status)).encode())


def _run_job(connection: socket.socket, job: _Job, output_fds: list[int]) -> None:
    """The candidate's own process: limits, then `function(*args)`, then the result back to the caller."""
    os.setpgid(0, 0)  # a group of its own, so that a kill reaches the processes it starts too
    _send_frame(connection, _PID, str(os.getpid()).encode())
    _redirect_output(output_fds)
    if not job.verbose:
        warnings.simplefilter("ignore")
        os.environ["PYTHONWARNINGS"] = "ignore"  # worker processes the candidate starts (joblib) stay quiet too
    if job.cwd:
        with contextlib.suppress(OSError):
            os.chdir(job.cwd)
    sys.path[:] = job.path  # find modules the parent imported from a script or test folder
    memory_bytes = job.memory_bytes
    try:
        if memory_bytes is not None:
            resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
        if job.native_threads is not None:
            threadpool_limits(limits=job.native_threads)
        kind, payload = _receive(connection)
        function, args = cloudpickle.loads(payload)
        del payload
        args = [_held[arg.key] if isinstance(arg, Shared) else arg for arg in args]
        result = ("ok", function(*args))
    except MemoryError:
        result = ("memory", f"over the memory limit of {memory_bytes / _GIB:.1f} GiB:\n{traceback.format_exc()}")
    except BaseException:  # noqa: BLE001 - whatever the candidate raises is its failure, reported in full
        result = ("error", traceback.format_exc())
    try:
        message = cloudpickle.dumps(result)
    except Exception:  # noqa: BLE001 - a result that cannot travel back is a failure of the candidate
        message = cloudpickle.dumps(("error", f"the result could not be sent back:\n{traceback.format_exc()}"))
    _send_frame(connection, _RESULT, message)


def _redirect_output(output_fds: list[int]) -> None:
    """stdout and stderr to the caller's (verbose) or to /dev/null (quiet)."""
    if len(output_fds) == 2:
        targets = output_fds
    else:
        null = os.open(os.devnull, os.O_WRONLY)
        targets = [null, null]
    for target, fd in zip(targets, (1, 2), strict=True):
        os.dup2(target, fd)
    for target in set(targets):
        os.close(target)
