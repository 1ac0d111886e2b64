"""Benchmark: what the OS isolation of free code costs per script, with and without it.

Each arm runs the same script through agent.execution.free_code.execute_script, `--repeats` times, alternating arms
so that the machine's load falls on both alike:

    isolated     the namespaces (unshare) and Landlock, as every script runs where the kernel offers them
    unisolated   no namespaces: the audit hook and limits (free_code.execute_script's allow_unisolated on a machine
                 "without" isolation); confine still applies Landlock where the kernel has it, so the difference
                 is the namespaces' cost (unshare, a fresh /proc), and Landlock's (a ruleset of a dozen paths) is
                 in both arms

Two scripts: `pass` (the start-up alone: interpreter, confinement, and for the isolated arm unshare, the namespaces,
a fresh /proc and the Landlock ruleset) and `import numpy, pandas, sklearn` (what a real script pays before its
first line of work).

    python -m bench.isolation_bench [--repeats 15]

Results go to the "## Free-code isolation overhead (issue 21)" section of RESULTS.md.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path

import click

from agent.execution.free_code import execute_script
from agent.execution.isolation import Isolation, probe
from agent.execution.sandbox import Limits
from bench.agent_bench import run_stamp
from bench.results import write_section

BENCH = Path(__file__).resolve().parent
SECTION = "## Free-code isolation overhead (issue 21)"
SCRIPTS = (("pass", "pass\n"), ("import numpy, pandas, sklearn", "import numpy, pandas, sklearn.ensemble\n"))
NO_ISOLATION = Isolation(False, "the benchmark's unisolated arm")


def seconds_per_run(source: str, isolation: Isolation, folder: Path) -> float:
    started = time.monotonic()
    outcome = execute_script(source, folder, Limits(60), isolation, allow_unisolated=True)
    if not outcome.ok:
        raise click.ClickException(f"the script failed ({outcome.status}): {outcome.error}")
    return time.monotonic() - started


@click.command()
@click.option("--repeats", type=click.IntRange(min=1), default=15, show_default=True)
def main(repeats: int) -> None:
    isolated = probe()
    if not isolated.available:
        raise click.ClickException(f"this machine offers no isolation to measure: {isolated.why_not}")
    load = os.getloadavg()[0]
    rows = []
    with tempfile.TemporaryDirectory(prefix="casebook-isolation-bench-") as scratch:
        for name, source in SCRIPTS:
            times: dict[str, list[float]] = {"isolated": [], "unisolated": []}
            for repeat in range(repeats):
                for arm, isolation in (("isolated", isolated), ("unisolated", NO_ISOLATION)):
                    times[arm].append(seconds_per_run(source, isolation, Path(scratch) / f"{arm}-{repeat}"))
            medians = {arm: statistics.median(values) for arm, values in times.items()}
            rows.append(f"| `{name}` | {medians['isolated']:.3f} | {medians['unisolated']:.3f} | "
                        f"{medians['isolated'] - medians['unisolated']:+.3f} | "
                        f"{min(times['isolated']):.3f} / {min(times['unisolated']):.3f} |")
            click.echo(rows[-1])
    text = "\n".join([
        SECTION, "",
        f"`python -m bench.isolation_bench --repeats {repeats}` ({run_stamp()}; kernel {os.uname().release}, "
        f"{isolated.describe()}; load {load:.1f} on {os.cpu_count()} cores at the start). Seconds per script run "
        "through `execute_script`, from the call to its return (process start, confinement, the script, exit and "
        "reaping), median of the repeats, arms alternating. The unisolated arm has no namespaces but still the "
        "Landlock ruleset (confine applies it wherever the kernel has it), so the difference is the namespaces' "
        "cost:", "",
        "| script | isolated (s) | unisolated (s) | isolation costs (s) | fastest, isolated / unisolated (s) |",
        "| --- | --- | --- | --- | --- |",
        *rows])
    write_section(BENCH / "RESULTS.md", text)


if __name__ == "__main__":
    main()
