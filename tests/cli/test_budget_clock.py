"""`agent solve`'s budget is the command's wall time: its clock starts when the process started, so the interpreter's
start and the imports before the command runs count too."""

from __future__ import annotations

import subprocess
import sys


def test_the_clock_starts_with_the_process_not_with_the_command():
    code = ("import time; time.sleep(1.0); from cli.agent import process_started; "
            "print(time.monotonic() - process_started())")
    age = float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
    assert age >= 0.99  # the second slept before cli.agent was imported (clock ticks are 10 ms)
