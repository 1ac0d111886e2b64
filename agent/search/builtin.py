"""The built-in tree proposer: what to draft, how to improve a node, how to repair a failed one.

`BuiltinTreeProposer` knows no tricks (the ablation): drafts are different model families, improvements
are built-in atomic changes (more trees at a lower learning rate, depth, log target for log-scale
metrics, another categorical encoder, missing-value indicators) and a repair reads the failure — the
error text and the step it came from — and changes the spec accordingly, rather than retrying it.

Once a GBDT or forest node's built-in changes are used up, improving it runs a short Optuna study around it
(agent.search.tuning), each trial one node: tuning is the engine's, with or without knowledge, so both arms
of the ablation tune alike (the knowledge proposer uses this same study).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from agent.candidate import AppliedTrick, SolutionCandidate
from agent.engine.spec import ENCODING_OPS, Step, insert_before, replace_step
from agent.engine.steps import BUILTIN_STEPS, LOG_TARGET
from agent.engine.trainers import (
    MANY_LEVELS,
    NATIVE_SPLIT_PARAMS,
    EstimatorTrainer,
    Trainer,
    size_class,
    steps_for,
    trainer_facts,
    trainer_registry,
)
from agent.search.fit_time import learns_slower
from agent.search.journal import DRAFT, OVER_TIME, STOPPED_EARLY, Journal, Node, candidate_key
from agent.search.protocols import Proposal, TreeProposer
from agent.search.repair import ENCODERS, diagnose
from agent.search.tuning import DEFAULT_TRIALS, Tuner
from retrieval.metrics import CLASSIFICATION
from retrieval.profile import TaskProfile

# Model families drafted in this order: cheapest first, then different. A linear model and LightGBM (a histogram
# GBDT that stops early) before any forest; then AutoGluon's order of priority (LightGBM, random forest, CatBoost,
# extra trees and XGBoost after), with scikit-learn's histogram GBDT, LightGBM's near twin, among the late ones.
DRAFT_FAMILIES = ("linear", "lightgbm", "random_forest", "catboost", "hist_gradient_boosting", "xgboost", "extra_trees")
# How the built-in changes of a node are ordered when experience is in use (agent.memory.experience.ChangeGains.order):
# the parent's candidate and its changes (why, candidate) in the order below -> the order to try them in.
ChangeOrder = Callable[[SolutionCandidate, list[tuple[str, SolutionCandidate]]], list[tuple[str, SolutionCandidate]]]
TEXT_OPS = ("tfidf_text", "tfidf_svd")  # a draft made elsewhere with neither gets the built-in drafts' text features
NATIVE_CATEGORICAL = "native_categorical"  # the step that hands a model its categorical columns as categories
INDICATED_KINDS = ("numeric", "categorical", "datetime")  # the columns a pipeline keeps when it flags missing values


def log_target_fits(profile: TaskProfile) -> bool:
    """A log-scale metric on a regression target: fitting log(1 + y) optimises (nearly) the metric itself."""
    return profile.task_type == "regression" and profile.metric_info.log_scale


def target_note(candidate: SolutionCandidate) -> str:
    return " on log(1 + target), as the metric scores relative errors" if candidate.target_transform else ""


def sized_note(candidate: SolutionCandidate, profile: TaskProfile) -> str:
    """How a draft's parameters were chosen, in words: at defaults, or the set for the table's size."""
    if not candidate.params:
        return "at defaults"
    stopping = ", stopping early on each validation fold" if "early_stopping_rounds" in candidate.params else ""
    return f"with its parameters for a {size_class(profile.n_rows)} table ({profile.n_rows:,} rows{stopping})"


def with_text_features(candidate: SolutionCandidate, profile: TaskProfile) -> tuple[SolutionCandidate, str]:
    """The draft with TF-IDF features of the free-text columns, and a note saying so. The trainers' default steps
    drop free text, so without this a table whose only feature is text would reach the model with no columns.
    A linear model takes the sparse TF-IDF matrix itself (last: it hands the model a sparse matrix); tree models
    take 64 SVD components of it, which every GBDT and forest accepts."""
    text = [column.name for column in profile.column_infos("text")]
    if not text:
        return candidate, ""
    steps = [step for step in candidate.steps or () if step.op != "drop_text_columns"]
    if candidate.trainer == "linear":
        steps.append(Step("tfidf_text"))
        kind = "TF-IDF"
    else:
        steps = list(insert_before(steps, [Step("tfidf_svd"), Step("drop_text_columns")], ENCODING_OPS))
        kind = "TF-IDF SVD components"
    return replace(candidate, steps=tuple(steps)), f", with {kind} of the free text in {', '.join(text[:3])}"


def _may_retry(node: Node, candidate: SolutionCandidate, tries: list[Node]) -> bool:
    """Whether a change of `node` tried before may be proposed again: it was tried once, on this node, learning
    slower than it, and ran over its cap as proposed; and the node's own CV is there to size it from."""
    if len(tries) != 1 or node.evidence is None or node.members or not learns_slower(node, candidate):
        return False
    tried = tries[0]
    return tried.parent_id == node.id and tried.status == OVER_TIME and not tried.skipped and tried.proposed is None


def may_draft(journal: Journal, candidate: SolutionCandidate, trainers: Mapping[str, Trainer]) -> bool:
    """Whether `candidate` may be drafted: it is not in the journal, or it is once, as a draft that ran over its cap
    (as proposed, or as the search sized it). The search then sizes it from that overrun (agent.search.tree's
    `_draft_size`), at a faster learning rate or with fewer trees, or skips it."""
    tries = journal.tries(candidate_key(candidate, trainers), trainers)
    if not tries:
        return True
    tried = tries[0]
    return len(tries) == 1 and tried.action == DRAFT and tried.status == OVER_TIME and not tried.skipped


def describe_score(node: Node, profile: TaskProfile) -> str:
    return f"CV {profile.metric}={node.metric:.4f}" if node.metric is not None else "no CV score"


def drafted_families(journal: Journal) -> set[str]:
    """The model families a draft has tried. One stopped at its time cap does not count: a family drafted with
    other parameters (a remembered or retrieved spec) that ran over time still gets its own sized draft, while
    the same candidate is never drafted twice (Journal.has)."""
    return {node.candidate.trainer for node in journal.draft_nodes if node.status != OVER_TIME}


def _ops(candidate: SolutionCandidate) -> list[str]:
    return [step.op for step in candidate.steps or ()]


class BuiltinTreeProposer(TreeProposer):
    """The knowledge-free tree proposer: model families, built-in improvements, failure-reading repairs."""

    def __init__(self, trainers: Mapping[str, Trainer] | None = None, families: Sequence[str] = DRAFT_FAMILIES,
                 change_order: ChangeOrder | None = None):
        self.trainers = trainer_registry(trainers)
        self.families = tuple(name for name in families if name in self.trainers)
        self.change_order = change_order  # None: the order of `improvements`
        self.tuner: Tuner | None = None  # the search's Optuna studies, made when a node is first tuned

    # ---- draft

    def draft(self, profile: TaskProfile, journal: Journal, rng: random.Random) -> Proposal | None:
        drafted = drafted_families(journal)
        for family in self.families:
            if family in drafted:
                continue
            candidate, text_note = with_text_features(self.base_candidate(family, profile), profile)
            if not may_draft(journal, candidate, self.trainers):
                continue
            return Proposal(candidate, f"draft: {family.replace('_', ' ')} {sized_note(candidate, profile)}"
                                       f"{target_note(candidate)}{text_note} — a model family no other draft uses")
        return None

    def base_candidate(self, trainer: str, profile: TaskProfile) -> SolutionCandidate:
        """The trainer's own preprocessing, with its parameter set for the table's size (TrainerFacts.params_for)."""
        return SolutionCandidate(trainer, trainer_facts(trainer).params_for(profile.n_rows), "",
                                 steps_for(trainer, self.trainers), LOG_TARGET if log_target_fits(profile) else None)

    # ---- improve

    def improve(self, node: Node, profile: TaskProfile, journal: Journal, rng: random.Random) -> Proposal | None:
        """A built-in change of the node; once those are used up, the next trial of an Optuna study around it."""
        return self.change(node, profile, journal) or self.tune(node, profile, journal, rng)

    def change(self, node: Node, profile: TaskProfile, journal: Journal) -> Proposal | None:
        """The first built-in change of the node (in experience's order, with one) not yet in the journal, nor a
        parameter change that already ran over its time cap on a node of the same model (it would again at full
        size). A change to a slower learning rate that ran over its cap on this node, as proposed, is proposed once
        more: the search then sizes it from that overrun (agent.search.fit_time), at a higher rate with its rounds
        capped, or skips it."""
        slow = [other.candidate.params for other in journal
                if other.status == OVER_TIME and other.candidate.trainer == node.candidate.trainer]
        changes = self.improvements(node, profile)
        if self.change_order is not None:
            changes = self.change_order(node.candidate, changes)
        for why, candidate in changes:
            tries = journal.tries(candidate_key(candidate, self.trainers), self.trainers)
            if tries:
                if _may_retry(node, candidate, tries):
                    return Proposal(candidate, f"improve node {node.id} ({node.candidate.trainer}, "
                                               f"{describe_score(node, profile)}): {why}, again at a size that fits "
                                               f"(node {tries[0].id} ran it over its cap)")
                continue
            changed = {name: value for name, value in candidate.params.items()
                       if node.candidate.params.get(name) != value}
            if changed and any(all(params.get(name) == value for name, value in changed.items()) for params in slow):
                continue
            return Proposal(candidate, f"improve node {node.id} ({node.candidate.trainer}, "
                                       f"{describe_score(node, profile)}): {why}")
        return None

    def improvements(self, node: Node, profile: TaskProfile) -> list[tuple[str, SolutionCandidate]]:
        """Built-in atomic changes of a node, most promising first."""
        base = node.candidate
        changes: list[tuple[str, SolutionCandidate]] = []
        if log_target_fits(profile) and base.target_transform is None:
            changes.append(("model log(1 + target), as the metric scores relative errors",
                            replace(base, target_transform=LOG_TARGET)))
        stopping = base.params.get("early_stopping_rounds")
        patience = {} if stopping is None else {"early_stopping_rounds": stopping}
        ops = _ops(base)
        facts = trainer_facts(base.trainer)
        with_statistics = self._columns_with_statistics(base, profile)
        for why, params in facts.variations_for(profile.task_type in CLASSIFICATION):
            if set(params) <= set(facts.combination_params) and (with_statistics == 0 or (
                    with_statistics == 1 and all(base.params.get(name, value) >= 2 for name, value in params.items()))):
                continue  # nothing more to combine: the change would score as its parent
            # the patience stays the one the table's size set (TrainerFacts.params_for)
            changes.append((why, replace(base, params={**base.params, **params, **patience})))
        high_cardinality = [c.name for c in profile.column_infos("categorical") if c.cardinality > 15]
        if high_cardinality and "target_encoding" not in ops:
            encoder = next((op for op in ops if op in ENCODERS), None)
            if encoder is not None:
                changes.append((f"target encoding (inside the CV folds) instead of {encoder} for the "
                                f"high-cardinality columns {', '.join(high_cardinality[:3])}",
                                replace(base, steps=replace_step(base.steps, encoder, Step("target_encoding")))))
        native_splits = _native_splits(base, profile)
        if native_splits is not None:
            changes.append(native_splits)
        # Codes and one-hot columns give a tree the same splits on a column of at most two levels, so swapping
        # one encoder for the other needs a categorical with more (7 nodes on a table without any categorical
        # scored exactly as their parents on the judge tables).
        categoricals = profile.column_infos("categorical")
        several_levels = any(c.cardinality > 2 for c in categoricals)
        if "one_hot" in ops and base.trainer != "linear" and several_levels:
            changes.append(("ordinal codes instead of one-hot columns: trees split on codes directly",
                            replace(base, steps=replace_step(base.steps, "one_hot", Step("ordinal_encoding")))))
        if "ordinal_encoding" in ops and base.trainer != "linear" and several_levels:
            small = all(c.cardinality <= 15 for c in categoricals)
            if small:
                changes.append(("one-hot columns instead of ordinal codes for the low-cardinality categoricals",
                                replace(base, steps=replace_step(base.steps, "ordinal_encoding", Step("one_hot")))))
        if _indicated_columns(profile) and "missing_indicators" not in ops:
            changes.append(("add missing-value indicator columns: missingness itself can carry signal",
                            replace(base, steps=insert_before(base.steps, [Step("missing_indicators")],
                                                               ("impute_numeric", "impute_categorical", *ENCODERS)))))
        if log_target_fits(profile) is False and base.target_transform is not None:
            changes.append(("model the raw target", replace(base, target_transform=None)))
        return changes

    def _columns_with_statistics(self, base: SolutionCandidate, profile: TaskProfile) -> int:
        """How many categorical columns the model computes statistics on: those handed to it as categories (the
        native_categorical step keeps at most its max_levels levels) with more levels than it one-hot encodes
        (TrainerFacts.one_hot_levels, from the node's parameters, else the trainer's defaults for the task type,
        else the library's)."""
        native = next((step for step in base.steps or () if step.op == NATIVE_CATEGORICAL), None)
        if native is None:
            return 0
        most = native.params.get("max_levels", BUILTIN_STEPS[NATIVE_CATEGORICAL].defaults["max_levels"])
        one_hot = 0
        facts = trainer_facts(base.trainer)
        if facts.one_hot_levels is not None:
            name, library_default = facts.one_hot_levels
            trainer = self.trainers.get(base.trainer)
            defaults = trainer.defaults_for(profile.task_type) if isinstance(trainer, EstimatorTrainer) else {}
            one_hot = int(base.params.get(name, defaults.get(name, library_default)))
        return sum(min(column.cardinality, most) > one_hot for column in profile.column_infos("categorical"))

    # ---- tune: a short Optuna study around a GBDT or forest node (agent.search.tuning)

    def tune(self, node: Node, profile: TaskProfile, journal: Journal, rng: random.Random | None,
             trick: AppliedTrick | None = None) -> Proposal | None:
        """The next trial of the study around `node` (or of the study `node` is a trial of); None for a model
        without a search space, a combination, or a study that has used its DEFAULT_TRIALS trials. `trick`, a
        retrieved tuning trick, is only named in the plan: the study is the same with or without it."""
        if node.members:
            return None
        if self.tuner is None:
            self.tuner = Tuner((rng or random.Random(0)).randrange(2**31))
        trial = self.tuner.propose(node.id, node.candidate, DEFAULT_TRIALS)
        if trial is None or journal.has(candidate_key(trial.candidate, self.trainers), self.trainers):
            return None
        values = ", ".join(f"{name}={value:.4g}" if isinstance(value, float) else f"{name}={value}"
                           for name, value in trial.params.items())
        why = f", as {trick.describe()} suggests" if trick is not None else ""
        return Proposal(trial.candidate, f"improve node {node.id} ({node.candidate.trainer}, "
                                         f"{describe_score(node, profile)}): Optuna trial {trial.number} (TPE) of the "
                                         f"study around node {trial.centre}: {values}{why}", rate_may_rise=False)

    def observe(self, node: Node) -> None:
        """A node: the Optuna study that asked for it learns its verified score (the exploration sample's, when the
        node was explored on one, so that a study's trials compare on the same rows), or its first folds' score
        when multi-fidelity CV stopped it there."""
        if self.tuner is not None:
            score = node.exploration.score if node.exploration is not None else node.score
            stopped_after = node.folds_scored if node.status == STOPPED_EARLY else 0
            self.tuner.observe(node.id, node.candidate, score, node.verified, stopped_after)

    # ---- debug

    def debug(self, node: Node, profile: TaskProfile, journal: Journal, rng: random.Random) -> Proposal | None:
        repair = diagnose(node, profile, self.trainers)
        if repair is None:
            return None
        diagnosis, candidate = repair
        return Proposal(candidate, f"debug node {node.id} ({node.candidate.trainer}): {diagnosis}")


def _native_splits(base: SolutionCandidate, profile: TaskProfile) -> tuple[str, SolutionCandidate] | None:
    """Native category splits for a GBDT node that hands a categorical column of more than MANY_LEVELS levels (and
    at most the native_categorical step's max_levels, which it would cut) to its model as codes. On 18 pool tables
    they moved the drafts' CV score by -48% to +73% (bench/RESULTS.md, many-level columns): a change for CV to
    judge per table. Columns of more levels than max_levels stay codes."""
    if base.trainer not in NATIVE_SPLIT_PARAMS:
        return None
    coding = next((step for step in base.steps or () if step.op in ("ordinal_encoding", NATIVE_CATEGORICAL)), None)
    if coding is None:
        return None
    most = BUILTIN_STEPS[NATIVE_CATEGORICAL].defaults["max_levels"]
    coded_above = MANY_LEVELS if coding.op == "ordinal_encoding" else coding.params.get("codes_above")
    if coded_above is None or coded_above >= most:
        return None  # it splits on every column it can natively already
    many = [c.name for c in profile.column_infos("categorical") if coded_above < c.cardinality <= most]
    if not many:
        return None
    params = {} if coding.op == "ordinal_encoding" else coding.params
    native = Step(NATIVE_CATEGORICAL, {**params, "codes_above": most})
    return (f"native category splits instead of codes for the many-level columns {', '.join(many[:3])}",
            replace(base, steps=replace_step(base.steps, coding.op, native),
                    params={**base.params, **NATIVE_SPLIT_PARAMS[base.trainer]}))


def _indicated_columns(profile: TaskProfile) -> list[str]:
    """The columns the missing_indicators step would flag: those its features keep (not the id or text columns)
    missing in at least its min_missing_frac of the rows. With none, adding the step changes nothing."""
    least = BUILTIN_STEPS["missing_indicators"].defaults["min_missing_frac"]
    return [column.name for column in profile.columns if column.kind in INDICATED_KINDS
            and column.missing_share > 0 and column.missing_share >= least]
