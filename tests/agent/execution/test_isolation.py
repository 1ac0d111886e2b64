"""The operating system's isolation of free code (agent.execution.isolation, agent.execution.confine): each route that got
past the audit hook, and each evasion of the static check, run for real under the namespaces and Landlock.

Every script here tries, through its route, to read a file outside the allow-list, write outside its run folder,
reach a server listening on the host's 127.0.0.1, read a variable planted in this (its ancestor's) environment and
leave a process running. Where the route switches the audit hook off, the test also checks that the hook was
indeed out of the way, so that what stopped the script is the kernel. No LLM is involved.
"""

from __future__ import annotations

import os
import socket
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from agent.execution import isolation
from agent.execution.free_code import FREE_CODE_OFF, check_script, execute_script
from agent.execution.isolation import Isolation
from agent.execution.sandbox import Limits

SECRET_TEXT = "PRIVATE KEY 7c1e"
PLANTED_VARIABLE, PLANTED_VALUE = "CASEBOOK_PLANTED_SECRET", "planted-secret-93b2"
HOOK = "free-code sandbox"  # how the audit hook's refusals begin; the kernel's say "Permission denied" and the like


@pytest.fixture(scope="module", autouse=True)
def isolated() -> Isolation:
    found = isolation.probe()
    if not found.available:
        if os.environ.get("CI"):  # CI must run these, not skip them
            pytest.fail(f"no OS isolation on the CI machine: {found.why_not}")
        pytest.skip(f"this machine offers no OS isolation: {found.why_not}")
    return found


@dataclass(frozen=True)
class Arena:
    run: Path  # the script's run folder
    outside: Path  # beside it: a secret to read, a place to write
    port: int  # a server listening on the host's 127.0.0.1
    server: socket.socket

    @property
    def secret(self) -> Path:
        return self.outside / "id_rsa"


@pytest.fixture
def arena(tmp_path, monkeypatch) -> Iterator[Arena]:
    monkeypatch.setenv(PLANTED_VARIABLE, PLANTED_VALUE)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "id_rsa").write_text(SECRET_TEXT)
    with socket.create_server(("127.0.0.1", 0)) as server:
        server.settimeout(0.2)
        yield Arena(tmp_path / "run", outside, server.getsockname()[1], server)


def prelude(arena: Arena) -> str:
    """What every script starts with: the targets, and `attempt`, which prints how each try ended."""
    return textwrap.dedent(f"""\
        import os, socket, sys, time
        SECRET, OUTSIDE, PORT = {str(arena.secret)!r}, {str(arena.outside)!r}, {arena.port}
        SHELL = ("cat " + SECRET + "; echo x > " + OUTSIDE + "/written; cat /proc/*/environ; "
                 "(cd " + os.getcwd() + " && sleep 30 &)").encode()

        def attempt(name, action):
            try:
                print(name, "DONE", repr(action())[:2000], flush=True)
            except BaseException as error:
                print(name, "FAILED", repr(error)[:300], flush=True)
        """)


# After a route has put the audit hook out of the way: the five tries with plain Python.
PYTHON_PAYLOAD = textwrap.dedent("""\
    attempt("read", lambda: open(SECRET).read())
    attempt("write", lambda: open(OUTSIDE + "/written", "w").write("x"))
    attempt("connect", lambda: socket.create_connection(("127.0.0.1", PORT), timeout=2).sendall(b"x"))
    attempt("environ", lambda: [open(f"/proc/{pid}/environ", "rb").read() for pid in os.listdir("/proc")
                                if pid.isdigit()] + [dict(os.environ)])

    def linger():
        if os.fork() == 0:
            os.setsid()
            time.sleep(30)
            os._exit(0)
    attempt("linger", linger)
    """)


def run(arena: Arena, route: str, payload: str = "", seconds: float = 30) -> tuple[str, str]:
    """The route's code, then `payload`, after the prelude: what the script printed and its stderr's end."""
    outcome = execute_script(prelude(arena) + textwrap.dedent(route) + payload, arena.run, Limits(seconds))
    return outcome.value or "", outcome.error


def lines(output: str, name: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith(f"{name} ")]


def assert_contained(arena: Arena, output: str, error: str) -> None:
    """Nothing read, written, reached, seen or left behind."""
    everything = output + error
    assert SECRET_TEXT not in everything
    assert PLANTED_VALUE not in everything and PLANTED_VARIABLE not in everything
    assert sorted(path.name for path in arena.outside.iterdir()) == ["id_rsa"]
    assert arena.secret.read_text() == SECRET_TEXT
    with pytest.raises(TimeoutError):  # nothing ever reached the listening server
        arena.server.accept()
    assert processes_in(arena.run) == []


def assert_kernel_refused(output: str, *names: str) -> None:
    """The tries named ran past the audit hook and the kernel refused them."""
    for name in names:
        [line] = lines(output, name)
        assert " FAILED " in line and HOOK not in line, line


def processes_in(folder: Path) -> list[int]:
    """The processes working in `folder` (every process a script starts does, unless it moves)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cwd = os.readlink(entry / "cwd")
            except OSError:
                continue
            if cwd == str(folder.resolve()) or cwd.startswith(f"{folder.resolve()}/"):
                found.append(int(entry.name))
    return found


# ---- routes around the audit hook


def test_relative_paths_under_a_proc_self_handle_reach_nothing(arena):
    # The hook resolves "cwd/../outside/..." against the run folder and lets it pass; the kernel resolves it
    # through /proc/self/cwd, outside the run folder.
    output, error = run(arena, """
        handle = os.open("/proc/self", os.O_RDONLY | os.O_DIRECTORY)
        up = "cwd/../outside/"

        def read_environments():
            proc = os.open("root/proc", os.O_RDONLY | os.O_DIRECTORY, dir_fd=handle)
            found = []
            for pid in os.listdir(proc):
                if pid.isdigit():
                    with open(os.open(pid + "/environ", os.O_RDONLY, dir_fd=proc), "rb") as file:
                        found.append(file.read())
            return found
        attempt("read", lambda: open(os.open(up + "id_rsa", os.O_RDONLY, dir_fd=handle)).read())
        attempt("write", lambda: os.write(os.open(up + "written", os.O_WRONLY | os.O_CREAT, dir_fd=handle), b"x"))
        attempt("environ", read_environments)
        """)
    assert_kernel_refused(output, "read", "write", "environ")
    assert_contained(arena, output, error)


def test_fork_exec_starts_nothing_and_its_child_dies_with_the_run(arena):
    # _posixsubprocess raises no audit event. The shell is not executable under Landlock; a child that never
    # executes (it sleeps in preexec_fn, in a session of its own) is killed with the namespace at the time limit.
    output, error = run(arena, """
        import _posixsubprocess

        def fork_exec(argv, preexec=None):
            read_end, write_end = os.pipe()
            pid = _posixsubprocess.fork_exec(argv, [argv[0]], True, (write_end,), None, None, -1, -1, -1, -1, -1, -1,
                                             read_end, write_end, False, True, -1, None, None, None, -1, preexec,
                                             False)
            os.close(write_end)
            with open(read_end, "rb") as report:  # the child's exec error, if any, until the pipe closes
                return pid, report.read()
        attempt("exec", lambda: fork_exec([b"/bin/sh", b"-c", SHELL]))
        attempt("linger", lambda: fork_exec([b"/bin/true"], preexec=lambda: time.sleep(30)))
        time.sleep(60)
        """, seconds=3)
    [line] = lines(output, "exec")
    assert "OSError:d:" in line  # errno 13 (EACCES, in hex) from the child's execve: the kernel's refusal
    assert_contained(arena, output, error)


def test_libc_through_numpy_ctypeslib_opens_connects_and_runs_nothing(arena):
    output, error = run(arena, """
        import numpy.ctypeslib
        ctypes = numpy.ctypeslib.ctypes
        libc = ctypes.CDLL(None, use_errno=True)

        def read():
            fd = libc.open(SECRET.encode(), os.O_RDONLY)
            buffer = ctypes.create_string_buffer(200)
            assert fd >= 0, ctypes.get_errno()
            return libc.read(fd, buffer, 200), buffer.value

        def write():
            fd = libc.open((OUTSIDE + "/written").encode(), os.O_WRONLY | os.O_CREAT, 0o644)
            assert fd >= 0, ctypes.get_errno()

        def connect():
            class Address(ctypes.Structure):
                _fields_ = [("family", ctypes.c_ushort), ("port", ctypes.c_uint16), ("host", ctypes.c_uint32),
                            ("zero", ctypes.c_char * 8)]
            fd = libc.socket(socket.AF_INET, socket.SOCK_STREAM, 0)
            address = Address(socket.AF_INET, socket.htons(PORT), int.from_bytes(bytes([127, 0, 0, 1]), "little"))
            assert libc.connect(fd, ctypes.byref(address), ctypes.sizeof(address)) == 0, ctypes.get_errno()

        def linger():
            if libc.fork() == 0:
                libc.setsid()
                libc.sleep(30)
                libc._exit(0)
        attempt("read", read)
        attempt("write", write)
        attempt("connect", connect)
        attempt("system", lambda: libc.system(SHELL))
        attempt("linger", linger)
        """)
    assert_kernel_refused(output, "read", "write", "connect")
    [line] = lines(output, "system")
    assert line == "system DONE 32512"  # the shell's exit status 127: it could not be executed
    assert_contained(arena, output, error)


def test_replacing_realpath_switches_off_only_the_hooks_path_checks(arena):
    output, error = run(arena, """
        import posixpath
        posixpath.realpath = lambda path, **options: os.getcwd() + "/anything"
        """, PYTHON_PAYLOAD)
    assert_kernel_refused(output, "read", "write", "environ")
    assert_contained(arena, output, error)


def test_emptying_the_hooks_watched_set_through_the_frames_leaves_the_kernel(arena):
    output, error = run(arena, """
        frame = sys._getframe()
        while frame is not None and "_WATCHED" not in frame.f_globals:
            frame = frame.f_back
        frame.f_globals["_WATCHED"] = frozenset()
        print("hook emptied", flush=True)
        """, PYTHON_PAYLOAD)
    assert "hook emptied" in output
    assert_kernel_refused(output, "read", "write", "connect", "environ")
    assert_contained(arena, output, error)


def test_replacing_the_refusal_from_its_traceback_leaves_the_kernel(arena):
    output, error = run(arena, """
        try:
            open(SECRET)
        except PermissionError as refusal:
            traceback = refusal.__traceback__
            while "_refuse" not in traceback.tb_frame.f_globals:
                traceback = traceback.tb_next
            traceback.tb_frame.f_globals["_refuse"] = lambda *arguments: None
            print("refusal replaced", flush=True)
        """, PYTHON_PAYLOAD)
    assert "refusal replaced" in output
    assert_kernel_refused(output, "read", "write", "connect", "environ")
    assert_contained(arena, output, error)


def test_fifos_and_device_nodes_outside_the_run_folder_are_refused(arena):
    # Neither call raises an audit event: only the kernel stands in the way.
    output, error = run(arena, """
        attempt("fifo", lambda: os.mkfifo(OUTSIDE + "/fifo"))
        attempt("node", lambda: os.mknod(OUTSIDE + "/node"))
        attempt("own fifo", lambda: os.mkfifo("own-fifo"))
        """)
    assert_kernel_refused(output, "fifo", "node")
    assert lines(output, "own fifo") == ["own fifo DONE None"]  # its own folder is its own
    assert_contained(arena, output, error)


# ---- evasions of the static check: each is flagged, and run anyway (execute_script does not check), contained


@pytest.mark.parametrize("evasion", [
    'import os as o\nattempt("system", lambda: o.system(SHELL))',
    'attempt("system", lambda: getattr(os, "system")(SHELL))',
    'attempt("system", lambda: sys.modules["os"].system(SHELL))',
    'import _socket\nattempt("connect", lambda: _socket.socket().connect(("127.0.0.1", PORT)))',
    'import builtins\nattempt("eval", lambda: builtins.__dict__["eval"]("open(SECRET).read()"))',
])
def test_a_static_check_evasion_is_flagged_and_contained_when_run(arena, evasion):
    problems = check_script(evasion)
    assert problems and all(problem.startswith("line ") for problem in problems)
    output, error = run(arena, evasion + "\n", PYTHON_PAYLOAD)
    assert any(" FAILED " in line for line in output.splitlines())
    assert_contained(arena, output, error)


# ---- what the isolation changes for an ordinary script, and where there is none


def test_an_ordinary_script_sees_only_itself_and_its_folder(arena):
    output, error = run(arena, """
        import numpy, pandas, sklearn.ensemble
        open("own.txt", "w").write("mine")
        print("uid", os.getuid(), "pid", os.getpid())
        """)
    assert "uid 65534 pid 1" in output, error  # an unmapped user, first process of its own PID namespace
    assert (arena.run / "own.txt").read_text() == "mine"
    assert_contained(arena, output, error)


def test_without_isolation_free_code_is_off_unless_allowed(arena):
    missing = Isolation(False, "no user namespaces (test)")
    script = 'open("ran.txt", "w").write("ran")\n'
    outcome = execute_script(script, arena.run, Limits(30), missing)
    assert outcome.status == "error" and outcome.error.startswith(FREE_CODE_OFF)
    assert "no user namespaces (test)" in outcome.error and "--allow-unisolated-code" in outcome.error
    assert not (arena.run / "ran.txt").exists()
    assert execute_script(script, arena.run, Limits(30), missing, allow_unisolated=True).ok
    assert (arena.run / "ran.txt").read_text() == "ran"
