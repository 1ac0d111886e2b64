"""The operating system's isolation for free code (agent.execution.free_code): what this machine offers, and the
command that starts a script inside it.

A script runs under util-linux's `unshare` in fresh user, network, PID, mount, IPC and UTS namespaces:
  - user: the script's user is unmapped (nobody) with no capabilities, even when casebook runs as root;
  - network: a namespace of its own whose only interface, the loopback, is down, so nothing at all is reachable
    (no host service on 127.0.0.1, no abstract Unix socket of the host);
  - PID, with /proc mounted afresh: the script sees only its own processes (no ancestor's environment), and when
    its first process (the confinement, PID 1 there) ends or is killed, the kernel kills every process left in the
    namespace: nothing outlives a run (`--kill-child` kills PID 1 when `unshare`, which the caller kills, dies);
  - IPC and UTS: no shared memory or semaphores of the host, and its own host name.
Inside, agent.execution.confine restricts the file system with Landlock (the kernel's allow-list) before the
script's first line: it reads the Python installation, the system libraries and its run folder, writes only its
run folder, and executes nothing.

Both need a Linux kernel with unprivileged user namespaces (3.8+, not disabled by sysctl or a container's seccomp
profile) and Landlock (5.13+, enabled at boot). `probe()` checks both once per process. Where either is missing,
free code does not run unless the user asks for it (`agent solve --allow-unisolated-code`, which the evaluator and the
LLM's coder pass to agent.execution.free_code as `allow_unisolated`): then it runs under confine's audit hook and
resource limits only.
"""

from __future__ import annotations

import functools
import shutil
import subprocess
from dataclasses import dataclass

NAMESPACES = ("--user", "--net", "--pid", "--fork", "--mount-proc", "--ipc", "--uts", "--kill-child")
_PROBE_SECONDS = 10.0


@dataclass(frozen=True)
class Isolation:
    """What this machine offers free code: `available` when both the namespaces and Landlock work."""

    available: bool
    why_not: str = ""  # what is missing, when not available
    unshare: str = ""  # the unshare program's path
    landlock_abi: int = 0  # the kernel's Landlock ABI version (0: none)

    def command(self, argv: list[str]) -> list[str]:
        """`argv` run inside the namespaces."""
        return [self.unshare, *NAMESPACES, *argv]

    def describe(self) -> str:
        if self.available:
            return f"namespaces (user, network, PID, mount, IPC) and Landlock ABI {self.landlock_abi}"
        return f"none: {self.why_not}"


@functools.cache
def probe() -> Isolation:
    """The isolation this machine offers (checked once: Landlock's ABI, and `unshare` creating the namespaces)."""
    import landlock  # the kernel interface; imported here so a platform without it still imports casebook

    try:
        abi = landlock.landlock_abi_version()
    except (landlock.LandlockError, OSError) as error:
        return Isolation(False, f"the kernel offers no Landlock ({' '.join(str(error).split())})")
    unshare = shutil.which("unshare")
    if unshare is None:
        return Isolation(False, "util-linux's unshare is not installed", landlock_abi=abi)
    try:
        subprocess.run([unshare, *NAMESPACES, "true"], env={}, stdin=subprocess.DEVNULL, capture_output=True,
                       timeout=_PROBE_SECONDS, check=True)
    except subprocess.CalledProcessError as error:
        detail = error.stderr.decode(errors="replace").strip() or f"exit code {error.returncode}"
        return Isolation(False, f"unshare cannot create the namespaces here ({detail})", unshare, abi)
    except (OSError, subprocess.TimeoutExpired) as error:
        return Isolation(False, f"unshare cannot create the namespaces here ({error})", unshare, abi)
    return Isolation(True, unshare=unshare, landlock_abi=abi)

