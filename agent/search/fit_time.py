"""How long a draft's CV should take here: a fit-time model per model family, corrected by what this table measured.

`FitTimeModel` holds, per model family, a node's seconds as a fixed cost plus a cost per training row that grows with
the columns, with free text (TF-IDF) and with the values the model predicts per row (a multiclass target's classes):
`overhead + per_1k_rows * rows/1000 * (columns/10) ** column_power * text_factor * outputs ** output_power`.
bench/fit_time.py fits it on this machine from the drafts of an experience build (each family's parameter set for the
table's size, 5-fold CV, early stopping as drafted) and ships it as data/fit_times.json; bench/class_times.py fits
`output_power`, which those drafts could not show (a multiclass CatBoost draft seldom finished within its cap before
its categorical columns were one-hot encoded).

The model's seconds are its machine's. A machine that fits the same model in twice the time would see every draft
run over its cap until the table factor learns it from the overruns (a session's new machine fitted AutoGluon's same
models in 1.6-2.4 times the seconds). So the model keeps the seconds of a fixed calibration fit measured where it was
fitted (`machine_seconds`), and a search scales it by that fit's seconds on its own machine (`FitTimeModel.for_machine`,
`calibration_seconds`).

A table's own cost differs from the pool's (its kinds of columns, its categories' levels): `table_factor` reads the
drafts this search has run, and scales the model's estimate by what they took against what it expected. The search
(agent.search.tree) uses the estimate to explore a table on a sample that its drafts fit in, and to resize a draft
that could not finish within its cap on the rows it would be scored on (`DraftTimes.size`: a faster learning rate,
fewer trees), or skip it. A node time measured on another table (a case library's or an experience pack's) is
carried to this one by the same model (`carry_seconds`).

An improvement is sized from its parent's own CV instead (`size_change`): the parent's seconds scaled by the seed bag,
the boosting rounds the change should train and the size of its trees (`change_seconds`), corrected by what the same
change took on this table's other nodes (`change_factor`). A change that would not fit within its cap runs at a
higher learning rate with its rounds capped (a write-up's learning rate of 0.01 is for hours of training), or is
skipped before it runs.
"""

from __future__ import annotations

import functools
import json
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from agent.candidate import SolutionCandidate
from agent.engine.runtime.wrappers import PATIENCE_RATE, patience, patience_adapts
from agent.engine.trainers import DEPTH, FROM_EARLIER_FOLDS, trainer_facts
from agent.search.journal import DRAFT, EXPLORED, IMPROVE, OVER_TIME, VALID, Journal, Node
from retrieval.profile import TaskProfile

FIT_TIMES_FILE = "fit_times.json"
# The fewest rows a draft is explored on: fewer than this, a model's CV score says too little to be worth a node.
MIN_SAMPLE_ROWS = 1_000
# A draft is sized to use at most this share of the seconds it may take: the model's errors on a new table are about
# a factor of 1.6 either way (bench/fit_time.py: the standard deviation of its log error, 0.35-0.59 by family).
FIT_SHARE = 0.5
# A GBDT node's cost besides its boosting rounds, in rounds: the median solved from CVs of the same draft that trained
# different rounds for the same trees (bench/patience.py: 65 over 24 LightGBM and XGBoost CVs of development and pool
# tables; CatBoost's was not measured, its patience being fixed).
FIXED_ROUNDS = 65.0
# A GBDT round's seconds grow as (levels / the parent's levels) ** power with its trees' size (`tree_levels`): the
# powers fitted by bench/tree_size.py on 7 development and pool tables, binary, numeric and multiclass (each within a
# factor of 2.9 of what was measured; a multiclass CatBoost's own power is 3.3, a binary or numeric one's 2.5).
TREE_LEVEL_POWER = {"catboost": 2.97, "xgboost": 1.22, "lightgbm": 2.30, "hist_gradient_boosting": 2.28}
# A change's first fold waits the patience of its parent's trees (scaled by the learning rates) times this: shallower
# or more regularised CatBoost changes kept up to 1.8 times them, and a first fold told the trees themselves stopped
# on a plateau once (diamonds, a stronger L2: 0.59% worse RMSLE), bench/first_fold_patience.py on 5 development tables.
CHANGE_TREES_MARGIN = 2.0
# The fastest a draft too slow for its cap may learn: XGBoost's own default rate (a ceiling chosen, not measured: past
# it a GBDT takes few, large steps).
MAX_DRAFT_RATE = 0.3
# The fewest trees a forest draft too slow for its cap may keep (a floor chosen, not measured: a sixth of the 300 trees
# AutoGluon's forests grow).
MIN_DRAFT_TREES = 50


@dataclass(frozen=True)
class FamilyTime:
    """One model family's node seconds: overhead + per_1k_rows * rows/1000 * (columns/10)**column_power, times
    text_factor when the table has free text and outputs**output_power when the model predicts `outputs` values per
    row (the classes of a multiclass target; 1 for a binary or numeric one). Columns beyond `max_columns`, the most
    it was measured on, count as that many: the power is not extrapolated, so a wider table's estimate errs short
    (and a draft runs)."""

    overhead: float
    per_1k_rows: float
    column_power: float
    text_factor: float
    max_columns: int
    output_power: float = 0.0
    # How much of what other families' drafts took here against the model carries to this family's first draft:
    # the power their ratio is raised to (DraftTimes.table_factor), fitted on the experience pack's tables by
    # bench/table_factor.py.
    transfer: float = 1.0

    def seconds(self, rows: int, columns: int, text: bool, outputs: int = 1) -> float:
        return self.overhead + self.per_1k_rows * rows / 1000 * self._scale(columns, text, outputs)

    def rows_within(self, seconds: float, columns: int, text: bool, outputs: int = 1) -> int:
        """The most rows whose node fits in `seconds` (0 when the fixed cost alone does not)."""
        return max(int((seconds - self.overhead) / (self.per_1k_rows * self._scale(columns, text, outputs)) * 1000),
                   0)

    def _scale(self, columns: int, text: bool, outputs: int) -> float:
        return ((min(max(columns, 1), self.max_columns) / 10) ** self.column_power * (self.text_factor if text else 1.0)
                * max(outputs, 1) ** self.output_power)


@dataclass(frozen=True)
class FitTimeModel:
    families: Mapping[str, FamilyTime]
    measured: str = ""  # where and from what it was fitted, in words
    # `calibration_seconds` on the machine its times are of; None: unknown, and the model is never scaled.
    machine_seconds: float | None = None

    def knows(self, family: str) -> bool:
        return family in self.families

    def seconds(self, family: str, rows: int, columns: int, text: bool, folds: int = 5, bag: int = 1,
                outputs: int = 1) -> float:
        """A node's expected seconds on `rows` training rows in `folds` folds (fits scale with the folds), its model
        fitted `bag` times (a seed bag) in each, predicting `outputs` values per row."""
        return self.families[family].seconds(_five_fold_rows(rows, folds) * bag, columns, text, outputs)

    def rows_within(self, family: str, seconds: float, columns: int, text: bool, folds: int = 5, bag: int = 1,
                    outputs: int = 1) -> int:
        """The most training rows on which such a node should fit in `seconds`."""
        return int(self.families[family].rows_within(seconds, columns, text, outputs) * 4 / max(folds - 1, 1) / bag)

    def machine_factor(self, seconds_here: float) -> float:
        """How many times the model's seconds this machine takes, from the calibration fit's `seconds_here`: 1 when
        the model's own machine is unknown."""
        if self.machine_seconds is None or self.machine_seconds <= 0 or seconds_here <= 0:
            return 1.0
        return seconds_here / self.machine_seconds

    def for_machine(self, seconds_here: float) -> FitTimeModel:
        """The model with every family's seconds scaled to a machine whose calibration fit took `seconds_here`
        (itself when the factor is 1): its fixed costs and its costs per row alike, as a slower CPU slows both."""
        factor = self.machine_factor(seconds_here)
        if factor == 1.0:
            return self
        families = {name: replace(family, overhead=family.overhead * factor, per_1k_rows=family.per_1k_rows * factor)
                    for name, family in self.families.items()}
        return FitTimeModel(families, self.measured, seconds_here)

    def to_dict(self) -> dict[str, Any]:
        return {"measured": self.measured, "machine_seconds": self.machine_seconds,
                "families": {name: vars(family) for name, family in sorted(self.families.items())}}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FitTimeModel:
        return cls({name: FamilyTime(**values) for name, values in data["families"].items()}, data.get("measured", ""),
                   data.get("machine_seconds"))

    @staticmethod
    @functools.cache
    def bundled() -> FitTimeModel | None:
        """The model shipped with casebook (data/fit_times.json); None when this install has none."""
        from kb.config import data_path

        path = data_path(FIT_TIMES_FILE)
        return FitTimeModel.from_dict(json.loads(path.read_text())) if path.is_file() else None


CALIBRATION_REPEATS = 5  # fits timed, after one to warm up; the fastest counts (another process slows some)


def calibration_seconds(repeats: int = CALIBRATION_REPEATS) -> float:
    """The seconds of a fixed fit on this machine, as a candidate fits (one thread): a LightGBM regressor of 20 trees
    on 2,000 synthetic rows of 10 columns (about 25 ms on two cores of 2026-12), the fastest of `repeats` after a
    first fit to warm up. The data are drawn with a fixed seed, so only the machine varies."""
    import lightgbm
    import numpy as np

    rng = np.random.default_rng(0)
    X = rng.normal(size=(2_000, 10))
    y = X[:, 0] + np.sin(X[:, 1]) + rng.normal(size=len(X))
    model = lightgbm.LGBMRegressor(n_estimators=20, learning_rate=0.1, num_leaves=31, min_child_samples=10,
                                   num_threads=1, verbose=-1)
    times = []
    for _ in range(repeats + 1):
        started = time.perf_counter()
        model.fit(X, y)
        times.append(time.perf_counter() - started)
    return min(times[1:])


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
    was measured (an old record). Without the term for a multiclass target's classes: a record does not hold them."""
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
    """The fit-time model read for one table (its columns, whether it has free text, its CV folds, the values a
    model predicts per row), corrected by the drafts this search has run on it (`table_factor`)."""

    model: FitTimeModel
    columns: int
    text: bool
    folds: int
    outputs: int = 1  # the classes of a multiclass target, 1 for a binary or numeric one

    def expected(self, candidate: SolutionCandidate, rows: int, journal: Journal) -> float | None:
        """The seconds a draft of `candidate` should take on `rows` rows; None for a family the model does not know
        (the search then runs it as before)."""
        family = candidate.trainer
        if not self.model.knows(family):
            return None
        seconds = self.model.seconds(family, rows, self.columns, self.text, self.folds, seed_bag(candidate), self.outputs)
        return seconds * self.table_factor(journal, candidate)

    def rows_within(self, candidate: SolutionCandidate, seconds: float, journal: Journal) -> int | None:
        """The most rows a draft of `candidate` should fit in `seconds` on; None for a family the model does not
        know."""
        family = candidate.trainer
        if not self.model.knows(family):
            return None
        return self.model.rows_within(family, seconds / self.table_factor(journal, candidate), self.columns, self.text,
                                      self.folds, seed_bag(candidate), self.outputs)

    def size(self, candidate: SolutionCandidate, rows: int, seconds: float, journal: Journal) -> Sized | None:
        """A draft sized to the `seconds` it may take on `rows` rows: as proposed when its estimate fits in FIT_SHARE
        of them (the estimate's error); else, so that it should fit there, with a smaller seed bag first, then a GBDT
        at a higher learning rate up to MAX_DRAFT_RATE with its rounds capped alike, or a forest with fewer trees
        down to MIN_DRAFT_TREES; else as proposed when its estimate fits in all of them, and otherwise nothing (over
        time before it runs). A draft expected at 93% of its cap ran into it with no fold scored (happiness,
        CatBoost): a higher rate costs a draft little, an overrun its whole cap. A draft that would be skipped at
        full size still gives its family a score (on a table 3× slower than the model, every GBDT draft of a 60 s
        search ran over its cap or was skipped, and the search went on with a linear model alone). None for a family
        the model does not know."""
        expected = self.expected(candidate, rows, journal)
        if expected is None:
            return None
        factor = self.table_factor(journal, candidate)
        measured = f", {factor:.2f}× the fit-time model as this table's drafts measured" if factor != 1.0 else ""
        return size_draft(candidate, expected, seconds, f"on {rows:,} rows{measured}")

    def table_factor(self, journal: Journal, candidate: SolutionCandidate) -> float:
        """How much longer than the model expects this table's drafts of `candidate` take: the geometric mean of
        measured / expected over the drafts of its family that finished every fold; with none, that of the other
        families' raised to its family's `transfer` (on the pack's tables a forest's time follows the other
        families' little, a CatBoost's closely: bench/table_factor.py); and at least what a draft of its family and
        loss that ran over its cap shows (its seconds are a lower bound, or
        what its first folds projected when its pace stopped it); 1 before any ran. Another loss's overrun bounds
        nothing: an L1 LightGBM projected 10 times the model on a 24k-row table, where the squared-error LightGBM
        fitted in 5 s; CatBoost drafts of one loss and other trees all ran over on a multiclass table."""
        family, loss = candidate.trainer, _loss(candidate)
        finished, bounds = [], []
        for node in journal:
            trainer = node.candidate.trainer
            if node.action != DRAFT or node.members or not self.model.knows(trainer) or node.first_cv_seconds <= 0:
                continue
            expected = self.model.seconds(trainer, node.first_cv_rows, self.columns, self.text, node.folds or 5,
                                          seed_bag(node.candidate), self.outputs)
            ratio = node.first_cv_seconds / expected
            if node.status in (VALID, EXPLORED):
                finished.append((trainer, ratio))
            elif node.status == OVER_TIME and trainer == family and _loss(node.candidate) == loss:
                bounds.append(ratio)
        own = [ratio for trainer, ratio in finished if trainer == family]
        if own:
            return _correction(own, bounds)
        return _correction([ratio for _, ratio in finished], bounds, self.model.families[family].transfer)


def _correction(ratios: list[float], bounds: list[float], power: float = 1.0) -> float:
    """The geometric mean of measured / expected `ratios` raised to `power`, and at least each of `bounds`
    (over-time nodes' ratios, lower bounds); 1 with neither."""
    factor = math.exp(power * sum(math.log(ratio) for ratio in ratios) / len(ratios)) if ratios else 1.0
    return max([factor, *bounds])


def size_draft(candidate: SolutionCandidate, expected: float, seconds: float, basis: str,
               as_run: str = "as proposed") -> Sized:
    """A draft expected to take `expected` seconds (`basis` says from what, in words) sized to the `seconds` it may
    take, as `DraftTimes.size` says; `as_run` names what `candidate` is, in the note."""
    if expected <= FIT_SHARE * seconds:
        return Sized(candidate)
    faster = _faster(candidate, expected / (FIT_SHARE * seconds)) if seconds > 0 else None
    if faster is None:
        # Nothing to cut: it runs when its estimate fits at all, since skipping it is all that could be done instead.
        if expected <= seconds:
            return Sized(candidate)
        return Sized(None, f"over time before it ran: about {expected:.1f} s expected {basis}, over the "
                           f"{max(seconds, 0.0):.1f} s it may take")
    params, changed = faster
    return Sized(replace(candidate, params=params), f"{changed}: {as_run}, about {expected:.1f} s expected "
                                                    f"{basis}, over {FIT_SHARE:.0%} of the {seconds:.1f} s it may take")


def _faster(candidate: SolutionCandidate, speedup: float) -> tuple[dict[str, Any], str] | None:
    """The draft's parameters made `speedup` times faster, and what changed in words: a seed bag shrunk first (each
    of its models is as good alone, and costs the whole of a fit); then a GBDT's learning rate raised and its rounds
    cap lowered by what is left of the factor (it keeps about that many times fewer trees), a forest's trees cut by
    it; None when that takes a GBDT past MAX_DRAFT_RATE or a forest below MIN_DRAFT_TREES, or the family has
    neither and no bag to shrink."""
    bag = seed_bag(candidate)
    if bag > 1:
        smaller = max(int(bag / speedup), 1)
        params = {name: value for name, value in candidate.params.items() if name != "seed_bag"}
        params |= {"seed_bag": smaller} if smaller > 1 else {}
        unbagged = f"with a seed bag of {smaller} instead of {bag}"
        rest = speedup * smaller / bag
        if rest <= 1:
            return params, unbagged
        faster = _faster(replace(candidate, params=params), rest)
        return (faster[0], f"{unbagged}, {faster[1]}") if faster is not None else None
    facts = trainer_facts(candidate.trainer)
    if facts.rounds_param is None:
        return None
    rounds = int(candidate.params.get(facts.rounds_param) or facts.default_rounds or 0)
    fewer = int(rounds / speedup)
    if facts.learning_rate_param is None:
        if fewer < MIN_DRAFT_TREES:
            return None
        return ({**candidate.params, facts.rounds_param: fewer},
                f"with {fewer} {facts.rounds_param} instead of {rounds}")
    rate = _rate(candidate)
    faster = _round_up(rate * speedup)
    if faster > MAX_DRAFT_RATE or fewer < 1:
        return None
    return ({**candidate.params, facts.learning_rate_param: faster, facts.rounds_param: fewer},
            f"at {facts.learning_rate_param}={faster:g} and at most {fewer} {facts.rounds_param} instead of {rate:g} "
            f"and {rounds}")


# The parameters that choose a model's loss (XGBoost and LightGBM, CatBoost, scikit-learn), which change how many
# rounds a GBDT trains before it stops early more than its trees' settings do.
LOSS_PARAMS = ("objective", "loss_function", "loss")


def _loss(candidate: SolutionCandidate) -> tuple[str, ...]:
    return tuple(repr(candidate.params.get(name)) for name in LOSS_PARAMS)


def seed_bag(candidate: SolutionCandidate) -> int:
    """How many seeds the candidate's model is fitted with (1 without a seed bag)."""
    return int(candidate.params.get("seed_bag") or 1)


# ---- improvements: sized from the parent's own CV


@dataclass(frozen=True)
class Sized:
    """A node sized to the seconds it may take: an improvement from its parent's CV on the same rows (`size_change`),
    a draft from the fit-time model (`DraftTimes.size`). `candidate` is what to run (as proposed, or resized until it
    fits), None when nothing allowed fits; `note` says what was done, in words ("" when it runs as proposed)."""

    candidate: SolutionCandidate | None
    note: str = ""


def expected_trees(parent: Node, candidate: SolutionCandidate, rows: int) -> dict[str, float] | None:
    """The most trees each early-stopping model of a change of `parent` should keep (by path, as
    Evidence.stopped_rounds): the parent's on the same `rows`, scaled by the learning rates (`_Pace.child_kept`), times
    CHANGE_TREES_MARGIN. What its first fold's patience follows (runtime.cross_fit's expected_trees), for a family
    whose patience follows its earlier folds (CatBoost; XGBoost and LightGBM adapt within each fit). Without it that
    fold waited its full patience, 300 rounds: on a 12.9k-row multiclass table CatBoost's first folds took twice its
    later folds'. None when the parent says nothing of it (another family, loss or rows, or no early stopping)."""
    if (trainer_facts(candidate.trainer).adaptive_patience != FROM_EARLIER_FOLDS
            or candidate.params.get("early_stopping_rounds") is None):
        return None
    pace = _Pace.of(parent, candidate, rows)
    if pace is None or pace.child_kept(candidate) is None:
        return None
    scale = CHANGE_TREES_MARGIN * pace.rate / _rate(candidate)
    return {path: kept * scale for path, kept in parent.evidence.stopped_rounds.items()}


def change_seconds(parent: Node, candidate: SolutionCandidate, rows: int) -> float | None:
    """The seconds a change of `parent` should take on `rows` rows, from the parent's own CV on those rows: scaled by
    the seed bag and by the trees or boosting rounds it should train. A GBDT that stops early keeps about as many
    trees as its parent kept times the parent's learning rate over its own, and trains its patience beyond them, within
    its cap on the rounds (under another loss, its cap); each round costs more as its trees grow deeper or leafier
    (`_Pace.tree_factor`), and the rest of its cost counts as FIXED_ROUNDS. None when the parent is not one model of
    the same family measured on those rows."""
    pace = _Pace.of(parent, candidate, rows)
    return pace.seconds(candidate) if pace is not None else None


def size_change(parent: Node, candidate: SolutionCandidate, rows: int, seconds: float, factor: float = 1.0,
                rate_may_rise: bool = True) -> Sized | None:
    """The change of `parent` sized to the `seconds` it may take, its expected seconds multiplied by `factor` (how
    much longer the same change took than expected on this table's other nodes, `change_factor`). A change that
    learns slower than its parent, when `rate_may_rise`, must fit in FIT_SHARE of them: shallower or more
    regularised trees also keep more trees than its rate alone says (a write-up's slow-learning parameters took
    3.8 times the estimate on the median, bench/change_times.py). One that does not runs at the lowest learning
    rate up to the parent's that fits, with no more rounds than fit in all of its seconds at the parent's pace. A
    change of loss (LOSS_PARAMS), expected to train its rounds cap, must fit in FIT_SHARE of them too, else it is
    sized as a draft is (`size_draft`: a smaller seed bag, a higher rate with fewer rounds). Any other change over
    its seconds, and one that no size fits, is over time before it runs (no candidate). None when `change_seconds`
    cannot tell."""
    pace = _Pace.of(parent, candidate, rows)
    if pace is None:
        return None
    expected = pace.seconds(candidate) * factor
    facts = trainer_facts(candidate.trainer)
    rate, parent_rate = _rate(candidate), _rate(parent.candidate)
    # A slower change that may be resized must leave room for the estimate's error; one that may not (an Optuna
    # trial) is skipped only when its estimate is over the whole cap: skipping is all that could be done with it.
    slower, new_loss = learns_slower(parent, candidate), pace.loss != _loss(candidate)
    resizable = (slower or new_loss) and rate_may_rise
    if expected <= (FIT_SHARE if resizable else 1.0) * seconds:
        return Sized(candidate)
    share = f"{FIT_SHARE:.0%} of " if resizable else ""
    over = f"about {expected:.1f} s expected from node {parent.id}'s CV, over {share}the {max(seconds, 0):.1f} s it may take"
    if resizable and new_loss:
        # Its trees are not the parent's to count: sized as a draft is, to train its rounds cap in FIT_SHARE of them.
        faster = _faster(candidate, expected / (FIT_SHARE * seconds)) if seconds > 0 else None
        if faster is not None:
            return Sized(replace(candidate, params=faster[0]), f"{faster[1]}: as proposed, {over}")
        return Sized(None, f"over time before it ran: {over}")
    kept = pace.child_kept(candidate)
    if resizable and kept is not None and candidate.params.get("early_stopping_rounds") is not None:
        # rounds that fit: FIT_SHARE of the seconds for the trees the rate should keep and its patience past them,
        # all of them as the cap
        most = _most_kept(candidate, pace.rounds_within(candidate, FIT_SHARE * seconds / factor), pace.stopping)
        needed = kept * rate / most if most > 0 else math.inf
        if needed <= parent_rate:
            cap = max(int(pace.rounds_within(candidate, seconds / factor)), 1)
            params = {**candidate.params, facts.learning_rate_param: min(_round_up(max(needed, rate)), parent_rate),
                      facts.rounds_param: min(int(_trained(candidate, None, pace.stopping)), cap)}
            sized = replace(candidate, params=params)
            return Sized(sized, f"at {facts.learning_rate_param}={params[facts.learning_rate_param]:g} "
                                f"and at most {params[facts.rounds_param]} {facts.rounds_param} "
                                f"instead of {rate:g}: as proposed, {over}")
    return Sized(None, f"over time before it ran: {over}")


def change_factor(journal: Journal, parent: Node, candidate: SolutionCandidate) -> float:
    """How much longer than `change_seconds` expects the same change (the same parameters set, and the same steps and
    target where they differ from the parent's, of the same model family) took on this table's other nodes: the
    geometric mean of measured / expected where it ran every fold, and at least what it shows where it ran over its
    cap (its seconds, or its pace's projection); 1 where it has not run. Only the same change counts: the parent's own
    CV already holds what this table costs, and deeper trees that took twice their estimate say nothing of a stronger
    L2."""
    finished, bounds = [], []
    change = _change(parent, candidate)
    for node in journal:
        before = journal.parent(node)
        if (node.action != IMPROVE or before is None or node.first_cv_seconds <= 0
                or node.candidate.trainer != candidate.trainer or _change(before, node.proposed or node.candidate) != change):
            continue
        expected = change_seconds(before, node.candidate, node.first_cv_rows)
        if expected is None or expected <= 0:
            continue
        if node.status in (VALID, EXPLORED):
            finished.append(node.first_cv_seconds / expected)
        elif node.status == OVER_TIME:
            bounds.append(node.first_cv_seconds / expected)
    return _correction(finished, bounds)


def _change(parent: Node, candidate: SolutionCandidate) -> tuple[Any, ...]:
    """What a change does to its parent: the parameters it sets to other values, and its steps and its target where
    they differ from the parent's (so that one loss set on parents with other encodings is one change)."""
    params = sorted((name, repr(value)) for name, value in candidate.params.items()
                    if parent.candidate.params.get(name) != value)
    steps = candidate.steps if candidate.steps != parent.candidate.steps else None
    target = candidate.target_transform if candidate.target_transform != parent.candidate.target_transform else None
    return tuple(params), steps, target


def learns_slower(parent: Node, candidate: SolutionCandidate) -> bool:
    """Whether `candidate` learns slower than its parent: a lower learning rate of the same GBDT."""
    return (candidate.trainer == parent.candidate.trainer and trainer_facts(candidate.trainer).learning_rate_param
            is not None and _rate(candidate) < _rate(parent.candidate))


@dataclass(frozen=True)
class _Pace:
    """A parent's CV as a change of it is sized from: its seconds on every fold, the rounds it trained, and the
    trees it kept on average (None without early stopping)."""

    cv_seconds: float
    bag: int
    trained: float
    kept: float | None
    rate: float
    stopping: FoldStopping
    loss: tuple[str, ...]
    levels: float | None  # the parent's tree size (`tree_levels`)

    @classmethod
    def of(cls, parent: Node, candidate: SolutionCandidate, rows: int) -> _Pace | None:
        evidence = parent.evidence
        if (evidence is None or parent.members or candidate.trainer != parent.candidate.trainer
                or parent.first_cv_rows != rows or parent.first_cv_seconds <= 0):
            return None
        seconds = parent.first_cv_seconds
        if parent.exploration is None and evidence.stopped_early:  # the fold gate stopped it: every fold costs more
            seconds *= evidence.folds / len(evidence.fold_values)
        rounds = evidence.stopped_rounds
        kept = sum(rounds.values()) / len(rounds) if rounds and trainer_facts(candidate.trainer).rounds_param else None
        folds, adaptive = evidence.folds or 5, patience_adapts(rows / (evidence.folds or 5))  # a fold's validation rows
        # The parent's first fold waited its full patience unless it was told the trees to expect; a change's is told
        # (`expected_trees`) whenever its kept trees can be told.
        trained = _trained(parent.candidate, kept, FoldStopping(adaptive, folds, bool(evidence.expected_trees)))
        return cls(seconds, seed_bag(parent.candidate), trained, kept, _rate(parent.candidate),
                   FoldStopping(adaptive, folds, first_fold_knows=True), _loss(parent.candidate),
                   tree_levels(parent.candidate))

    def child_kept(self, candidate: SolutionCandidate) -> float | None:
        """The trees a change should keep: the parent's, scaled by their learning rates; None (its rounds cap) under
        another loss, which stops after other rounds (an L1 change of a squared-error LightGBM took 1.4-1.9 times its
        parent's seconds at the same rate, flight_delay)."""
        if self.kept is None or _loss(candidate) != self.loss:
            return None
        return self.kept * self.rate / _rate(candidate)

    def per_round(self, candidate: SolutionCandidate) -> float:
        """Seconds per round of the parent's trees (per fit, for a model without rounds), with the candidate's seed
        bag."""
        return self.cv_seconds * seed_bag(candidate) / self.bag / (self.trained + _fixed_rounds(candidate))

    def tree_factor(self, candidate: SolutionCandidate) -> float:
        """How much more a round of the candidate's trees costs than one of the parent's: (levels / the parent's
        levels) ** TREE_LEVEL_POWER of its family; 1 where either's size is not known."""
        levels, power = tree_levels(candidate), TREE_LEVEL_POWER.get(candidate.trainer)
        if levels is None or self.levels is None or power is None:
            return 1.0
        return (levels / self.levels) ** power

    def seconds(self, candidate: SolutionCandidate) -> float:
        trained = _trained(candidate, self.child_kept(candidate), self.stopping)
        return self.per_round(candidate) * (trained * self.tree_factor(candidate) + _fixed_rounds(candidate))

    def rounds_within(self, candidate: SolutionCandidate, seconds: float) -> float:
        """The rounds `candidate` may train in `seconds` at this pace, its cost besides them taken out."""
        return (seconds / self.per_round(candidate) - _fixed_rounds(candidate)) / self.tree_factor(candidate)


def _fixed_rounds(candidate: SolutionCandidate) -> float:
    """A GBDT node's cost besides its boosting rounds (preprocessing, binning, predicting), counted in rounds: both
    grow with the rows and columns alike. 0 for other families: a forest's tree costs far more than a round."""
    return FIXED_ROUNDS if trainer_facts(candidate.trainer).family == "gbdt" else 0.0


def _trained(candidate: SolutionCandidate, kept: float | None, stopping: FoldStopping) -> float:
    """Rounds a model trains: a GBDT that stops early, the trees it keeps and its patience past them, within its
    cap; any other, its cap (1 for a model without rounds)."""
    facts = trainer_facts(candidate.trainer)
    if facts.rounds_param is None:
        return 1.0
    cap = float(candidate.params.get(facts.rounds_param) or facts.default_rounds or 1)
    if kept is None or candidate.params.get("early_stopping_rounds") is None:
        return cap
    return max(min(cap, kept + stopping.patience(candidate, kept)), 1.0)


def _most_kept(candidate: SolutionCandidate, rounds: float, stopping: FoldStopping) -> int:
    """The most trees a GBDT may keep when it may train `rounds` rounds, its patience past them included."""
    low, high = 0, max(int(rounds), 0)
    while low < high:  # kept + patience grows with kept
        middle = (low + high + 1) // 2
        low, high = (middle, high) if middle + stopping.patience(candidate, middle) <= rounds else (low, middle - 1)
    return low


@dataclass(frozen=True)
class FoldStopping:
    """How a CV's GBDT folds stop: whether they have the validation rows for an adaptive patience, and how many."""

    adaptive: bool
    folds: int
    first_fold_knows: bool = False  # whether the first fold is told the trees to expect (`expected_trees`)

    def patience(self, candidate: SolutionCandidate, kept: float) -> float:
        """Rounds a GBDT that stops early trains past the `kept` trees on a fold, as runtime.EarlyStopped waits:
        adaptively in each fit, or from the earlier folds on all but the first, which waits the fixed patience or,
        told the trees to expect, theirs with CHANGE_TREES_MARGIN (on the mean over the folds)."""
        rounds = int(candidate.params["early_stopping_rounds"])
        kind = trainer_facts(candidate.trainer).adaptive_patience
        if not self.adaptive or kind is None:
            return rounds
        rate = float(candidate.params.get("patience_rate", PATIENCE_RATE))
        waited = patience(round(kept), rounds, rate)
        if kind != FROM_EARLIER_FOLDS:
            return waited
        first = patience(round(CHANGE_TREES_MARGIN * kept), rounds, rate) if self.first_fold_knows else rounds
        return (first + (self.folds - 1) * waited) / self.folds


def tree_levels(candidate: SolutionCandidate) -> float | None:
    """A GBDT's tree size in levels: its depth, or log2 of its leaves (within 2 ** max_depth where that is set too);
    None for a model whose tree size is not known."""
    size = trainer_facts(candidate.trainer).tree_size
    if size is None:
        return None
    name, default, kind = size
    value = candidate.params.get(name) or default
    if kind == DEPTH:
        return float(max(value, 1))
    depth = candidate.params.get("max_depth")
    leaves = min(value, 2 ** depth) if isinstance(depth, int) and depth > 0 else value
    return math.log2(max(leaves, 2))


def _rate(candidate: SolutionCandidate) -> float:
    """Its learning rate (1 for a model without one)."""
    facts = trainer_facts(candidate.trainer)
    if facts.learning_rate_param is None:
        return 1.0
    return float(candidate.params.get(facts.learning_rate_param) or facts.default_learning_rate or 1.0)


def _round_up(value: float) -> float:
    """`value` rounded up to two significant digits (a learning rate a plan can name)."""
    step = 10 ** (math.floor(math.log10(value)) - 1)
    return round(math.ceil(round(value / step, 9)) * step, 12)
