"""The confinement a free-code script runs under (agent.execution.free_code starts it as
`python confine.py MEMORY_BYTES CPU_SECONDS MODE SCRIPT` in the script's run folder; MODE is `isolated` inside the
namespaces of agent.execution.isolation, else `unisolated`).

The standard library and the `landlock` package only, and nothing of casebook: this file is the child interpreter's
`__main__`. Before the script's first line it:
  - restricts the file system with Landlock (the kernel's allow-list, which no code in this process can lift): the
    script may read the run folder, the Python installation (prefix and base prefix: interpreter, standard library,
    site-packages), the system libraries (/usr/lib, /lib and the loader's cache), the zoneinfo database, its own
    /proc/self and the CPU and memory facts libraries size their thread pools by; it may write, create and remove
    only inside the run folder (and write /dev/null); it may execute no file at all. In `isolated` mode a kernel
    that refuses the ruleset stops the run (exit code ISOLATION_EXIT_CODE) before the script starts;
  - sets resource limits: RLIMIT_AS (memory), RLIMIT_CPU (CPU seconds), RLIMIT_FSIZE (no file, output included, may
    grow past `MAX_FILE_BYTES`), no core dumps, and in `isolated` mode RLIMIT_NPROC (`MAX_PROCESSES` tasks, threads
    included, counted within the script's own user namespace; the kernel exempts real root from it, so as root the
    PID namespace's end is the bound);
  - installs an audit hook (PEP 578), a first filter that refuses with a clear PermissionError naming what was
    refused what Landlock and the namespaces would stop less legibly, and what they do not cover:
      - writing, creating, removing, renaming, linking or changing the permissions of any file outside the run
        folder (open() for writing, os.open with write flags, os.remove/rename/replace/mkdir/rmdir/symlink/link/
        truncate/chmod/chown/utime, shutil's copy/move/rmtree/archive operations, tempfile, sqlite3; os.mkfifo and
        os.mknod raise no audit event: Landlock refuses them);
      - reading a file or listing a folder outside what Landlock allows, and another process's /proc entry;
      - the network: creating any socket other than a Unix one, connecting, binding or sending to an address
        outside the run folder, name look-ups, urllib/http.client/ftplib/smtplib/... connections;
      - starting programs: subprocess, os.system, os.exec*, os.posix_spawn, os.spawn*, pty.spawn, os.fork; signals
        to any process but this one;
      - walking the garbage collector's object graph, and getting or setting attributes of the hook itself.
    The hook is not a boundary: C code (ctypes, _posixsubprocess, any extension) raises no audit event, and Python
    code can rebind what the hook calls (PEP 578 says as much). Landlock and the namespaces are the boundary.
Python's and NumPy's global random generators are seeded (0), so that a script relying on them repeats itself.
The time limit is the parent's: it kills the process group (and with it the namespace).
"""

import errno
import os
import random
import resource
import runpy
import site
import socket
import sys
import sysconfig
import traceback
from typing import NoReturn

MAX_FILE_BYTES = 1024**3
MAX_PROCESSES = 64  # tasks (processes and threads) in the script's user namespace: room for thread pools, not a bomb
# How this process reports that the script ran out of memory (its MemoryError's traceback is on stderr).
MEMORY_EXIT_CODE = 86
# How it reports that the kernel refused the isolation it was started for: the script did not run.
ISOLATION_EXIT_CODE = 87
ISOLATED, UNISOLATED = "isolated", "unisolated"

_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC
# (event, index of the path argument) for events that change the file system at one path.
_WRITES = {
    "os.mkdir": 0, "os.rmdir": 0, "os.remove": 0, "os.truncate": 0, "os.chmod": 0, "os.chown": 0, "os.utime": 0,
    "os.chflags": 0, "os.lchflags": 0, "os.setxattr": 0, "os.removexattr": 0, "shutil.rmtree": 0, "shutil.chown": 0,
    "shutil.copymode": 1, "shutil.copystat": 1, "tempfile.mkstemp": 0, "tempfile.mkdtemp": 0, "sqlite3.connect": 0,
    "shutil.make_archive": 0, "shutil.unpack_archive": 1,
}
# Events that write at both of their first two paths (renames and links move or expose the source too).
_PAIR_WRITES = {"os.rename", "os.link", "os.symlink", "shutil.move"}
_COPIES = {"shutil.copyfile", "shutil.copytree"}  # read the first path, write the second
_LISTINGS = {"os.listdir", "os.scandir", "os.getxattr", "os.listxattr"}
_PROCESSES = {"subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork", "os.forkpty",
              "pty.spawn", "os.startfile"}
_NETWORK = {"socket.getaddrinfo", "socket.gethostbyname", "socket.gethostbyname_ex", "socket.gethostbyaddr",
            "socket.getnameinfo", "socket.sethostname", "urllib.Request", "http.client.connect", "ftplib.connect",
            "smtplib.connect", "poplib.connect", "imaplib.open", "nntplib.connect", "telnetlib.Telnet.open",
            "webbrowser.open"}
_SOCKET_ADDRESSES = {"socket.connect", "socket.bind", "socket.sendto", "socket.sendmsg"}
_OBJECT_GRAPH = {"gc.get_objects", "gc.get_referrers", "gc.get_referents"}
_SIGNALS = {"os.kill", "os.killpg"}
_ATTRIBUTES = {"object.__getattr__", "object.__setattr__", "object.__delattr__"}
_WATCHED = frozenset({"open", *_WRITES, *_PAIR_WRITES, *_COPIES, *_LISTINGS, *_PROCESSES, *_NETWORK,
                      *_SOCKET_ADDRESSES, *_OBJECT_GRAPH, *_SIGNALS, *_ATTRIBUTES, "socket.__new__"})

# Outside the Python installation: the shared libraries extensions load (libgomp, libstdc++), and what libraries
# read to size thread pools and convert time zones.
_SYSTEM_READS = ("/usr/lib", "/usr/lib64", "/lib", "/lib64", "/usr/local/lib", "/etc/ld.so.cache",
                 "/usr/share/zoneinfo", "/etc/localtime", "/dev/null", "/dev/urandom", "/proc/self",
                 "/proc/thread-self", "/proc/cpuinfo", "/proc/meminfo", "/sys/fs/cgroup", "/sys/devices/system/cpu")


def confine(run_folder: str, memory_bytes: int | None, cpu_seconds: int | None, mode: str) -> None:
    """Restrict the file system, apply the limits and install the audit hook; from here on this process and its
    children stay in `run_folder`. SystemExit(ISOLATION_EXIT_CODE) when `mode` is ISOLATED and Landlock fails."""
    home = os.path.realpath(run_folder)
    readable = _readable_roots(home)
    _restrict_file_system(home, readable, required=mode == ISOLATED)
    if memory_bytes is not None:
        _lower_limit(resource.RLIMIT_AS, memory_bytes)
    if cpu_seconds is not None:
        _lower_limit(resource.RLIMIT_CPU, cpu_seconds)
    if mode == ISOLATED:  # outside a user namespace of its own, the count would be the whole user's processes
        _lower_limit(resource.RLIMIT_NPROC, MAX_PROCESSES)
    _lower_limit(resource.RLIMIT_FSIZE, MAX_FILE_BYTES)
    _lower_limit(resource.RLIMIT_CORE, 0)
    pid = os.getpid()
    own_proc = f"/proc/{pid}"

    def inside(path: str, roots: tuple[str, ...]) -> bool:
        return any(path == root or path.startswith(root + os.sep) for root in roots)

    def resolved(path) -> str | None:
        """The absolute, symlink-free form of a path argument; None for a file descriptor (opened by an audited
        call already)."""
        if type(path) is int:
            return None
        if type(path) is bytes:
            path = os.fsdecode(path)
        elif type(path) is not str:
            path = os.fsdecode(os.fspath(path))
        return os.path.realpath(path)

    def check_write(path, what: str) -> None:
        target = resolved(path)
        if target is not None and not inside(target, (home, "/dev/null")):
            _refuse(f"{what} {target} (outside the run folder)")

    def check_read(path, what: str) -> None:
        target = resolved(path if path is not None else ".")
        if target is not None and not inside(target, readable) and not inside(target, (own_proc,)):
            _refuse(f"{what} {target} (outside the run folder)")

    def hook(event: str, args: tuple) -> None:
        if event not in _WATCHED:
            return
        if event == "open":
            path, mode, flags = args
            writing = (type(mode) is str and any(letter in mode for letter in "wax+")) or \
                      (type(flags) is int and flags & _WRITE_FLAGS)
            if path is not None:
                (check_write if writing else check_read)(path, "writing" if writing else "reading")
        elif event in _WRITES:
            path = args[_WRITES[event]]
            if path is not None and path != ":memory:":  # sqlite3's in-memory database
                check_write(path, f"{event} on")
        elif event in _PAIR_WRITES:
            check_write(args[0], f"{event} of")
            check_write(args[1], f"{event} to")
        elif event in _COPIES:
            check_read(args[0], f"{event} of")
            check_write(args[1], f"{event} to")
        elif event in _LISTINGS:
            check_read(args[0], "listing")
        elif event in _PROCESSES:
            _refuse(f"starting a process ({event})", errno.EPERM)
        elif event in _NETWORK:
            _refuse(f"network access ({event})")
        elif event == "socket.__new__":
            if args[1] != socket.AF_UNIX:
                _refuse("network access (a socket other than a Unix one)")
        elif event in _SOCKET_ADDRESSES:
            # A Unix socket's file inside the run folder only; an abstract address (a leading NUL) names none.
            address = args[1]
            if type(address) not in (str, bytes) or address[:1] in ("\0", b"\0") \
                    or not inside(resolved(address), (home,)):
                _refuse(f"network access ({event})")
        elif event in _OBJECT_GRAPH:
            _refuse(event, errno.EPERM)
        elif event in _SIGNALS:
            if args[0] not in (pid, 0):
                _refuse(f"signalling process {args[0]}", errno.EPERM)
        elif args[0] is hook:  # _ATTRIBUTES
            _refuse("touching the sandbox's audit hook", errno.EPERM)

    sys.addaudithook(hook)


def _refuse(what: str, number: int = errno.EACCES) -> NoReturn:
    raise PermissionError(number, f"free-code sandbox: {what} is refused")


def _restrict_file_system(home: str, readable: tuple[str, ...], required: bool) -> None:
    """Landlock: read `readable`, read and write `home`, write /dev/null, execute nothing. Every access right the
    kernel knows is handled, so whatever is not allowed here is refused, for this process and every child."""
    try:
        from landlock import FSAccess, LandlockError, Ruleset

        ruleset = Ruleset()
        no_execute = ~FSAccess.EXECUTE
        for root in readable:
            if os.path.isdir(root):
                ruleset.allow(root, rules=FSAccess.READ_FILE | FSAccess.READ_DIR)
            elif os.path.exists(root):
                ruleset.allow(root, rules=FSAccess.READ_FILE)
        ruleset.allow(home, rules=FSAccess.all() & no_execute)
        ruleset.allow("/dev/null", rules=FSAccess.all_file() & no_execute)
        ruleset.apply()
    except (ImportError, LandlockError, OSError) as error:
        if required:
            print(f"free-code sandbox: the kernel refused the Landlock ruleset, so the script did not run: {error}",
                  file=sys.stderr)
            sys.exit(ISOLATION_EXIT_CODE)


def _lower_limit(kind: int, value: int) -> None:
    """Soft and hard limit to `value`, or to the hard limit the process already has when that is lower."""
    hard = resource.getrlimit(kind)[1]
    if hard != resource.RLIM_INFINITY:
        value = min(value, hard)
    resource.setrlimit(kind, (value, value))


def _readable_roots(home: str) -> tuple[str, ...]:
    """The run folder, the Python installation (prefix and base prefix, site-packages, the interpreter), this file
    (for tracebacks) and the system files in _SYSTEM_READS. Not other sys.path entries: an editable install's
    source tree is no part of what a script needs."""
    paths = sysconfig.get_paths()
    libraries = (paths[name] for name in ("stdlib", "platstdlib", "purelib", "platlib"))
    roots = [home, sys.prefix, sys.base_prefix, sys.exec_prefix, sys.executable, __file__, *libraries,
             *site.getsitepackages(), *_SYSTEM_READS]
    return tuple(dict.fromkeys(os.path.realpath(root) for root in roots))


def _seed_global_generators() -> None:
    """A script that forgot its seeds still repeats itself (the leak probe compares its runs)."""
    random.seed(0)
    try:
        import numpy
    except ImportError:
        return
    numpy.random.seed(0)


def main(argv: list[str]) -> None:
    memory, cpu_seconds, mode, script = argv
    run_folder = os.getcwd()
    sys.dont_write_bytecode = True
    sys.path.insert(0, run_folder)  # as `python script.py` would: the script's own modules import
    sys.argv = [script]
    confine(run_folder, None if memory == "none" else int(memory), None if cpu_seconds == "none" else int(cpu_seconds),
            mode)
    _seed_global_generators()
    try:
        runpy.run_path(script, run_name="__main__")
    except MemoryError:  # numpy's own subclass included
        traceback.print_exc()
        sys.exit(MEMORY_EXIT_CODE)


if __name__ == "__main__":
    main(sys.argv[1:])
