"""How long a draft's CV should take here: a fit-time model per model family, corrected by what this table measured.

`FitTimeModel` holds, per model family, a node's seconds as a fixed cost plus a cost per training row that grows with
the columns and with free text (TF-IDF): `overhead + per_1k_rows * rows/1000 * (columns/10) ** column_power *
text_factor`. bench/fit_time.py fits it on this machine from the drafts of an experience build (each family's
parameter set for the table's size, 5-fold CV, early stopping as drafted) and ships it as data/fit_times.json.

A table's own cost differs from the pool's (its kinds of columns, its categories' levels): `table_factor` reads the
drafts this search has run, and scales the model's estimate by what they took against what it expected. The search
(agent.search.tree) uses the estimate to explore a table on a sample that its drafts fit in, and to skip a draft that
could not finish within its cap on the rows it would be scored on. A node time measured on another table (a case
library's or an experience pack's) is carried to this one by the same model (`carry_seconds`).
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agent.candidate import SolutionCandidate
from agent.search.journal import DRAFT, EXPLORED, OVER_TIME, VALID, Journal
from retrieval.profile import TaskProfile

FIT_TIMES_FILE = "fit_times.json"
# The fewest rows a draft is explored on: fewer than this, a model's CV score says too little to be worth a node.
MIN_SAMPLE_ROWS = 1_000
# A draft is sized to use at most this share of the seconds it may take: the model's errors on a new table are about
# a factor of 1.6 either way (bench/fit_time.py: the standard deviation of its log error, 0.35-0.59 by family).
FIT_SHARE = 0.5


@dataclass(frozen=True)
class FamilyTime:
    """One model family's node seconds: overhead + per_1k_rows * rows/1000 * (columns/10)**column_power, times
    text_factor when the table has free text. Columns beyond `max_columns`, the most it was measured on, count as
    that many: the power is not extrapolated, so a wider table's estimate errs short (and a draft runs)."""

    overhead: float
    per_1k_rows: float
    column_power: float
    text_factor: float
    max_columns: int

    def seconds(self, rows: int, columns: int, text: bool) -> float:
        return self.overhead + self.per_1k_rows * rows / 1000 * self._scale(columns, text)

    def rows_within(self, seconds: float, columns: int, text: bool) -> int:
        """The most rows whose node fits in `seconds` (0 when the fixed cost alone does not)."""
        return max(int((seconds - self.overhead) / (self.per_1k_rows * self._scale(columns, text)) * 1000), 0)

    def _scale(self, columns: int, text: bool) -> float:
        return (min(max(columns, 1), self.max_columns) / 10) ** self.column_power * (self.text_factor if text else 1.0)


@dataclass(frozen=True)
class FitTimeModel:
    families: Mapping[str, FamilyTime]
    measured: str = ""  # where and from what it was fitted, in words

    def knows(self, family: str) -> bool:
        return family in self.families

    def seconds(self, family: str, rows: int, columns: int, text: bool, folds: int = 5, bag: int = 1) -> float:
        """A node's expected seconds on `rows` training rows in `folds` folds (fits scale with the folds), its model
        fitted `bag` times (a seed bag) in each."""
        return self.families[family].seconds(_five_fold_rows(rows, folds) * bag, columns, text)

    def rows_within(self, family: str, seconds: float, columns: int, text: bool, folds: int = 5, bag: int = 1) -> int:
        """The most training rows on which such a node should fit in `seconds`."""
        return int(self.families[family].rows_within(seconds, columns, text) * 4 / max(folds - 1, 1) / bag)

    def to_dict(self) -> dict[str, Any]:
        return {"measured": self.measured,
                "families": {name: vars(family) for name, family in sorted(self.families.items())}}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FitTimeModel:
        return cls({name: FamilyTime(**values) for name, values in data["families"].items()}, data.get("measured", ""))

    @staticmethod
    @functools.cache
    def bundled() -> FitTimeModel | None:
        """The model shipped with casebook (data/fit_times.json); None when this install has none."""
        from kb.config import data_path

        path = data_path(FIT_TIMES_FILE)
        return FitTimeModel.from_dict(json.loads(path.read_text())) if path.is_file() else None


@dataclass(frozen=True)
class TableShape:
    """What a node's fit time depends on beside its model: the training rows it is scored on, the feature columns,
    and whether some of them are free text."""

    rows: int
    columns: int
    text: bool

    @classmethod
    def of(cls, profile: TaskProfile) -> TableShape:
        return cls(profile.n_rows, len(profile.columns), bool(profile.column_infos("text")))


def carry_seconds(seconds: float, family: str, measured_on: TableShape, here: TableShape,
                  model: FitTimeModel | None = None) -> float | None:
    """A node's CV seconds measured on one table, carried to another: scaled by the ratio of the fit-time model's
    estimates for the two (default: the bundled model), so that the measured table's own cost is kept and the fixed
    cost is not scaled with the rows; linear in the rows for a family the model does not know. None when no time
    was measured (an old record)."""
    if seconds <= 0 or measured_on.rows <= 0:
        return None
    model = model if model is not None else FitTimeModel.bundled()
    if model is None or not model.knows(family):
        return seconds * here.rows / measured_on.rows
    return seconds * (model.seconds(family, here.rows, here.columns, here.text)
                      / model.seconds(family, measured_on.rows, measured_on.columns, measured_on.text))


def _five_fold_rows(rows: int, folds: int) -> int:
    """Rows as the model counts them (fitted on 5-fold CVs): k folds fit k * (k-1)/k of the rows."""
    return int(rows * max(folds - 1, 1) / 4)


@dataclass(frozen=True)
class DraftTimes:
    """The fit-time model read for one table (its columns, whether it has free text, its CV folds), corrected by
    the drafts this search has run on it (`table_factor`)."""

    model: FitTimeModel
    columns: int
    text: bool
    folds: int

    def expected(self, candidate: SolutionCandidate, rows: int, journal: Journal) -> float | None:
        """The seconds a draft of `candidate` should take on `rows` rows; None for a family the model does not know
        (the search then runs it as before)."""
        family = candidate.trainer
        if not self.model.knows(family):
            return None
        seconds = self.model.seconds(family, rows, self.columns, self.text, self.folds, _bag(candidate))
        return seconds * self.table_factor(journal, family)

    def rows_within(self, candidate: SolutionCandidate, seconds: float, journal: Journal) -> int | None:
        """The most rows a draft of `candidate` should fit in `seconds` on; None for a family the model does not
        know."""
        family = candidate.trainer
        if not self.model.knows(family):
            return None
        return self.model.rows_within(family, seconds / self.table_factor(journal, family), self.columns, self.text,
                                      self.folds, _bag(candidate))

    def table_factor(self, journal: Journal, family: str) -> float:
        """How much longer than the model expects this table's drafts take: the geometric mean of measured /
        expected over the drafts that finished every fold (those of `family` when there are any), and at least
        what a draft of `family` that ran over its cap shows (its seconds are a lower bound); 1 before any ran."""
        finished, bounds = [], []
        for node in journal:
            trainer = node.candidate.trainer
            if node.action != DRAFT or node.members or not self.model.knows(trainer) or node.first_cv_seconds <= 0:
                continue
            expected = self.model.seconds(trainer, node.first_cv_rows, self.columns, self.text, node.folds or 5,
                                          _bag(node.candidate))
            ratio = node.first_cv_seconds / expected
            if node.status in (VALID, EXPLORED):
                finished.append((trainer, ratio))
            elif node.status == OVER_TIME and trainer == family:
                bounds.append(ratio)
        ratios = [ratio for trainer, ratio in finished if trainer == family] or [ratio for _, ratio in finished]
        factor = math.exp(sum(math.log(ratio) for ratio in ratios) / len(ratios)) if ratios else 1.0
        return max([factor, *bounds])


def _bag(candidate: SolutionCandidate) -> int:
    return int(candidate.params.get("seed_bag") or 1)
