"""The plain seed loop as one process, for bench/agent_bench.py: linear, random forest and histogram
GBM at defaults, 5-fold CV, the best refit on all rows, its submission written.

    python -m bench.seed_loop TASK_DIR OUT.csv
"""

from __future__ import annotations

import sys
from pathlib import Path

from agent.candidate import SolutionCandidate
from agent.engine.dataset import Dataset
from agent.seedloop.loop import AgenticAutoML, SequenceProposer
from retrieval.profile import profile_task

SEED_LOOP = [SolutionCandidate(name, rationale=f"{name} at defaults")
             for name in ("linear", "random_forest", "hist_gradient_boosting")]


def main(task_dir: str, out: str) -> int:
    dataset = Dataset.from_profile(profile_task(task_dir))
    run = AgenticAutoML(SequenceProposer(seed=SEED_LOOP), max_iterations=0, cv=5, random_state=0).solve(dataset)
    if run.test_prediction is None:
        print(run.summary(), file=sys.stderr)
        return 1
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    dataset.submission(run.test_prediction).to_csv(out, index=False)
    print(run.summary())
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: python -m bench.seed_loop TASK_DIR OUT.csv")
    sys.exit(main(*sys.argv[1:]))
