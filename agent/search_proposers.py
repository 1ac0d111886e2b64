"""Proposers for the tree search: what to draft, how to improve a node, how to repair a failed one.

`BuiltinTreeProposer` knows no tricks (the ablation): drafts are different model families, improvements
are built-in atomic changes (more trees at a lower learning rate, depth, log target for log-scale
metrics, another categorical encoder, missing-value indicators) and a repair reads the failure — the
error text and the step it came from — and changes the spec accordingly, rather than retrying it.

`KnowledgeTreeProposer` (`agent solve --use-kb`) drafts each model family with the retrieved tricks its
columns and metric need (free text, dates, composite ids; the loss the metric rewards), and improves a node
with exactly one retrieved trick not yet used on its branch (with probability `trick_prob`), else with a
built-in change.
It executes tricks through the recipe catalogue (agent.recipes), imported when it is first used. When
an ensembling trick was retrieved, it ends the search with a blend of the best nodes. A retrieved tuning
trick (Optuna) runs a study around the node being improved once the untried tricks are used up there:
each trial is one improvement node, and the study learns each verified score (agent.tuning).
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

from agent.loop import SolutionCandidate
from agent.models import LINEAR_STEPS, TREE_STEPS, Trainer, default_steps, trainer_registry
from agent.proposer import _LINEAR_VARIATIONS, LOG_TARGET, SEED_TRAINERS, VARIATIONS
from agent.spec import Step
from agent.tree import IMPROVE, AppliedTrick, BlendProposal, Journal, Node, Proposal, candidate_key
from agent.tuning import DEFAULT_TRIALS, Tuner
from retrieval.profile import TaskProfile

_LOG_SCALE_METRICS = ("rmsle", "mape")
CLASSIFICATION = ("binary", "multiclass")
# Model families drafted in this order: cheap and different first.
DRAFT_FAMILIES = (*SEED_TRAINERS, "extra_trees")
# The parameter that sets the number of trees / rounds, and the learning rate, per trainer.
_ROUNDS = {"random_forest": "n_estimators", "extra_trees": "n_estimators", "xgboost": "n_estimators",
           "lightgbm": "n_estimators", "hist_gradient_boosting": "max_iter", "catboost": "iterations"}
_DEFAULT_ROUNDS = {"random_forest": 300, "extra_trees": 300, "xgboost": 400, "lightgbm": 400,
                   "hist_gradient_boosting": 100, "catboost": 500}
_LEARNING_RATE = {"xgboost": "learning_rate", "lightgbm": "learning_rate", "hist_gradient_boosting": "learning_rate",
                  "catboost": "learning_rate"}
_DEFAULT_LEARNING_RATE = {"xgboost": 0.05, "lightgbm": 0.05, "hist_gradient_boosting": 0.1, "catboost": 0.05}
# Where a step's code shows up in a traceback: the op's name and the classes that implement it.
_STEP_MARKERS = {
    "one_hot": ("OneHotEncoder", "_encoders.py"),
    "ordinal_encoding": ("OrdinalCodes",),
    "target_encoding": ("TargetEncoder", "_target_encoder"),
    "datetime_parts": ("DatetimeParts", "_as_datetime"),
    "missing_indicators": ("AddMissingIndicators",),
    "impute_numeric": ("SimpleImputer", "_impute"),
    "impute_categorical": ("SimpleImputer", "_impute"),
    "standard_scale": ("StandardScaler", "_data.py"),
}
_ENCODERS = ("one_hot", "ordinal_encoding", "target_encoding")
# Ensembling tricks, which the tree search carries out by combining nodes on their out-of-fold predictions: a
# weighted average, a rank average (AUC) and a linear stack, each a node that wins only on CV (agent.ensemble).
BLEND_OPS = ("hill_climbing_ensemble", "average_ensemble", "rank_average_ensemble", "stacking_linear")
TUNE_OP = "optuna_search"  # a tuning trick: a short Optuna study around a node (agent.tuning), trials as nodes
BLEND_CANDIDATES = 8  # the verified nodes a blend picks its members from: each family's best, then the best
# Tricks for a kind of column the task has (free text, dates, composite string ids) or for the metric (the loss it
# rewards): every knowledge draft takes them, since a model that drops or mangles those columns loses the signal
# they carry, and one fitted to another loss predicts another statistic (the mean under MAE). Every other trick
# enters as a single improvement, where one that does not beat its parent is dropped: composed into drafts
# untested, retrieved presets cost more than they gave (hpc: an XGBoost draft with a small-data preset scored
# log loss 0.600 against 0.455 at defaults; churn: HistGradientBoosting with early stopping 0.198 against 0.168).
NEEDED_OPS = ("tfidf_text", "tfidf_svd", "text_stats", "split_composite_string", "datetime_parts",
              "cyclical_encoding", "loss_for_metric")
# Monotone transforms of the features, which leave a tree's splits (so its predictions) unchanged.
TREE_INVARIANT_OPS = ("standard_scale", "quantile_transform", "log_features")
TREE_FAMILIES = ("random_forest", "extra_trees", "hist_gradient_boosting", "xgboost", "lightgbm", "catboost")


def blend_candidates(journal: Journal) -> list[Node]:
    """The nodes a blend picks from: the best node of each model family, then the best of the rest. Members that
    differ in kind are what a blend gains from; the best nodes of a search are often one family's variants."""
    ranked = sorted((node for node in journal.valid_nodes if not node.members),
                    key=lambda node: node.score, reverse=True)
    leaders = list({node.candidate.trainer: node for node in reversed(ranked)}.values())[:BLEND_CANDIDATES]
    chosen = {node.id for node in leaders}
    rest = [node for node in ranked if node.id not in chosen]
    return sorted(leaders + rest[:BLEND_CANDIDATES - len(leaders)],
                  key=lambda node: node.score, reverse=True)


def steps_for(trainer: str, trainers: Mapping[str, Trainer]) -> tuple[Step, ...]:
    if trainer in trainers:
        return tuple(default_steps(trainers[trainer]))
    return LINEAR_STEPS if trainer == "linear" else TREE_STEPS


def log_target_fits(profile: TaskProfile) -> bool:
    """A log-scale metric on a regression target: fitting log(1 + y) optimises (nearly) the metric itself."""
    return profile.task_type == "regression" and profile.metric in _LOG_SCALE_METRICS


def target_note(candidate: SolutionCandidate) -> str:
    return " on log(1 + target), as the metric scores relative errors" if candidate.target_transform else ""


def describe_score(node: Node, profile: TaskProfile) -> str:
    return f"CV {profile.metric}={node.metric:.4f}" if node.metric is not None else "no CV score"


def _categorical(profile: TaskProfile) -> list[Any]:
    return [column for column in profile.columns if column.kind == "categorical"]


def _replace_step(steps: Sequence[Step], old: str, new: Step) -> tuple[Step, ...]:
    return tuple(new if step.op == old else step for step in steps)


def _insert_before(steps: Sequence[Step], new: Sequence[Step], before: Sequence[str]) -> tuple[Step, ...]:
    """`new` steps placed before the first step named in `before` (at the end when there is none)."""
    steps = list(steps)
    index = next((i for i, step in enumerate(steps) if step.op in before), len(steps))
    return tuple(steps[:index] + list(new) + steps[index:])


def _ops(candidate: SolutionCandidate) -> list[str]:
    return [step.op for step in candidate.steps or ()]


class BuiltinTreeProposer:
    """The knowledge-free tree proposer: model families, built-in improvements, failure-reading repairs."""

    def __init__(self, trainers: Mapping[str, Trainer] | None = None, families: Sequence[str] = DRAFT_FAMILIES):
        self.trainers = trainer_registry(trainers)
        self.families = tuple(name for name in families if name in self.trainers)

    # ---- draft

    def draft(self, profile: TaskProfile, journal: Journal, rng: random.Random) -> Proposal | None:
        drafted = {node.candidate.trainer for node in journal.draft_nodes}
        for family in self.families:
            if family in drafted:
                continue
            candidate = self.base_candidate(family, profile)
            if journal.has(candidate_key(candidate, self.trainers), self.trainers):
                continue
            return Proposal(candidate, f"draft: {family.replace('_', ' ')} at defaults{target_note(candidate)} — a "
                                       "model family no other draft uses")
        return None

    def base_candidate(self, trainer: str, profile: TaskProfile) -> SolutionCandidate:
        return SolutionCandidate(trainer, {}, "", steps_for(trainer, self.trainers),
                                 LOG_TARGET if log_target_fits(profile) else None)

    # ---- improve

    def improve(self, node: Node, profile: TaskProfile, journal: Journal, rng: random.Random) -> Proposal | None:
        for why, candidate in self.improvements(node, profile):
            if not journal.has(candidate_key(candidate, self.trainers), self.trainers):
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
        if base.trainer == "linear":
            options = _LINEAR_VARIATIONS[profile.task_type in CLASSIFICATION]
        else:
            options = VARIATIONS.get(base.trainer, ())
        for why, params in options:
            changes.append((why, replace(base, params={**base.params, **params})))
        ops = _ops(base)
        high_cardinality = [c.name for c in _categorical(profile) if c.cardinality > 15]
        if high_cardinality and "target_encoding" not in ops:
            encoder = next((op for op in ops if op in _ENCODERS), None)
            if encoder is not None:
                changes.append((f"target encoding (inside the CV folds) instead of {encoder} for the "
                                f"high-cardinality columns {', '.join(high_cardinality[:3])}",
                                replace(base, steps=_replace_step(base.steps, encoder, Step("target_encoding")))))
        if "one_hot" in ops and base.trainer != "linear":
            changes.append(("ordinal codes instead of one-hot columns: trees split on codes directly",
                            replace(base, steps=_replace_step(base.steps, "one_hot", Step("ordinal_encoding")))))
        if "ordinal_encoding" in ops and base.trainer != "linear" and _categorical(profile):
            small = all(c.cardinality <= 15 for c in _categorical(profile))
            if small:
                changes.append(("one-hot columns instead of ordinal codes for the low-cardinality categoricals",
                                replace(base, steps=_replace_step(base.steps, "ordinal_encoding", Step("one_hot")))))
        if profile.missing_share > 0 and "missing_indicators" not in ops:
            changes.append(("add missing-value indicator columns: missingness itself can carry signal",
                            replace(base, steps=_insert_before(base.steps, [Step("missing_indicators")],
                                                               ("impute_numeric", "impute_categorical", *_ENCODERS)))))
        if log_target_fits(profile) is False and base.target_transform is not None:
            changes.append(("model the raw target", replace(base, target_transform=None)))
        return changes

    # ---- debug

    def debug(self, node: Node, profile: TaskProfile, rng: random.Random) -> Proposal | None:
        repair = diagnose(node, profile, self.trainers)
        if repair is None:
            return None
        diagnosis, candidate = repair
        return Proposal(candidate, f"debug node {node.id} ({node.candidate.trainer}): {diagnosis}")


def diagnose(node: Node, profile: TaskProfile, trainers: Mapping[str, Trainer]) -> tuple[str, SolutionCandidate] | None:
    """Read the failure (the verdict, the error text, the step it came from) and repair the spec."""
    base = node.candidate
    steps = tuple(base.steps or ())
    ops = [step.op for step in steps]
    text = f"{node.output}\n{node.error}"
    lowered = text.lower()
    for rule in _RULES:
        repair = rule(base, steps, ops, text, lowered, profile, trainers)
        if repair is not None and candidate_key(repair[1]) != candidate_key(base):
            return repair
    return None


_Rule = Callable[..., "tuple[str, SolutionCandidate] | None"]


def _leak(base, steps, ops, text, lowered, profile, trainers):
    match = re.search(r"leakage: step (\d+) \((\w+)\)", text)
    if not match:
        return None
    index, op = int(match.group(1)) - 1, match.group(2)
    kept = tuple(step for position, step in enumerate(steps) if position != index)
    return f"the verifier found that step {index + 1} ({op}) leaks; drop it", replace(base, steps=kept)


def _unknown_parameter(base, steps, ops, text, lowered, profile, trainers):
    match = re.search(r"op '(\w+)' has no parameter ([\w, ]+?);", text) or re.search(
        r"op '(\w+)': (\w+)=.*? is not supported", text)
    if match:
        op, names = match.group(1), {name.strip() for name in match.group(2).split(",")}
        fixed = tuple(Step(step.op, {k: v for k, v in step.params.items() if k not in names}) if step.op == op else step
                      for step in steps)
        return f"step {op} rejects parameter(s) {', '.join(sorted(names))}; drop them", replace(base, steps=fixed)
    match = re.search(r"unexpected keyword argument '(\w+)'", text) or re.search(
        r"[Ii]nvalid parameter '?(\w+)'?", text)
    if match and match.group(1) in base.params:
        name = match.group(1)
        params = {k: v for k, v in base.params.items() if k != name}
        return f"the model rejects parameter {name}; drop it", replace(base, params=params)
    match = re.search(r"The '(\w+)' parameter of \w+ must be", text)
    if match and match.group(1) in base.params:
        name = match.group(1)
        return (f"the model rejects the value of {name}; back to its default",
                replace(base, params={k: v for k, v in base.params.items() if k != name}))
    return None


def _unknown_op(base, steps, ops, text, lowered, profile, trainers):
    match = re.search(r"unknown step op '(\w+)'", text)
    if match:
        op = match.group(1)
        return f"step op {op} does not exist; drop that step", replace(base, steps=tuple(s for s in steps if s.op != op))
    match = re.search(r"unknown target transform '(\w+)'", text)
    if match:
        return f"target transform {match.group(1)} does not exist; model the raw target", replace(base, target_transform=None)
    match = re.search(r"unknown trainer '(\w+)'", text)
    if match:
        fallback = "hist_gradient_boosting"
        return (f"trainer {match.group(1)} does not exist; use {fallback} with its own preprocessing",
                SolutionCandidate(fallback, {}, "", steps_for(fallback, trainers), base.target_transform))
    return None


def _too_big(base, steps, ops, text, lowered, profile, trainers):
    memory = ("failed (memory)" in lowered or "memoryerror" in lowered or "unable to allocate" in lowered
              or "killed by signal" in lowered)
    if not memory:
        return None
    if "one_hot" in ops:
        return ("out of memory with one-hot columns (too many levels); ordinal codes instead",
                replace(base, steps=_replace_step(steps, "one_hot", Step("ordinal_encoding"))))
    return _smaller_model("out of memory", base, trainers)


def _timeout(base, steps, ops, text, lowered, profile, trainers):
    if "failed (timeout)" not in lowered and "timed out" not in lowered:
        return None
    return _smaller_model("timed out", base, trainers)


def _smaller_model(why: str, base: SolutionCandidate, trainers) -> tuple[str, SolutionCandidate] | None:
    rounds = _ROUNDS.get(base.trainer)
    if rounds is not None:
        current = int(base.params.get(rounds, _DEFAULT_ROUNDS[base.trainer]))
        if current > 25:
            params = {**base.params, rounds: max(current // 3, 25)}
            rate = _LEARNING_RATE.get(base.trainer)
            change = f"{rounds} {current} -> {params[rounds]}"
            if rate is not None:
                old = float(base.params.get(rate, _DEFAULT_LEARNING_RATE[base.trainer]))
                params[rate] = round(min(old * 3, 0.3), 4)
                change += f", {rate} {old} -> {params[rate]}"
            return f"{why}; a third of the rounds at a higher learning rate ({change})", replace(base, params=params)
    if base.trainer != "hist_gradient_boosting":
        return (f"{why}; histogram gradient boosting is the fastest learner here",
                SolutionCandidate("hist_gradient_boosting", {}, "", steps_for("hist_gradient_boosting", trainers),
                                  base.target_transform))
    return None


def _non_numeric(base, steps, ops, text, lowered, profile, trainers):
    markers = ("could not convert string to float", "dtypes for data must be", "cannot use median strategy",
               "cannot use mean strategy", "non-numeric", "dtype='object'", "unsupported dtype", "dtype: object")
    if not any(marker in lowered for marker in markers):
        return None
    if any(op in ops for op in _ENCODERS) and "datetime_parts" not in ops and profile.columns_of_kind("datetime"):
        return ("a date column reaches the model as text; split dates into parts",
                replace(base, steps=_insert_before(steps, [Step("datetime_parts")], _ENCODERS)))
    if base.trainer == "linear":
        new = [Step("impute_categorical"), Step("one_hot")]
        fix = "impute and one-hot encode the categorical columns"
    else:
        new = [Step("ordinal_encoding")]
        fix = "encode the categorical columns as ordinal codes"
    new = [step for step in new if step.op not in ops]
    if not new:
        return None
    where = ("standard_scale",) if "standard_scale" in ops else ()
    return (f"text values reach a numeric step or the model (\"{_quote(text, markers)}\"); {fix}",
            replace(base, steps=_insert_before(steps, new, where)))


def _missing_values(base, steps, ops, text, lowered, profile, trainers):
    if "contains nan" not in lowered and "input contains nan" not in lowered and "missing values" not in lowered:
        return None
    new = [step for step in (Step("impute_numeric"), Step("impute_categorical")) if step.op not in ops]
    if not new:
        return None
    return ("the model does not accept missing values; impute them first",
            replace(base, steps=_insert_before(steps, new, (*_ENCODERS, "standard_scale"))))


def _failing_step(base, steps, ops, text, lowered, profile, trainers):
    """A step whose code the traceback passes through, deepest last: drop it (keeping at least one encoder)."""
    if not steps or "failed (" not in lowered:
        return None
    best, best_position = None, -1
    for index, op in enumerate(ops):
        for marker in (op, *_STEP_MARKERS.get(op, ())):
            position = text.rfind(marker)
            if position > best_position:
                best, best_position = index, position
    if best is None:
        return None
    op = ops[best]
    kept = tuple(step for position, step in enumerate(steps) if position != best)
    if op in _ENCODERS and not any(o in _ENCODERS for o in ops if o != op):
        replacement = "one_hot" if op != "one_hot" else "ordinal_encoding"
        return (f"step {best + 1} ({op}) raised; {replacement} instead",
                replace(base, steps=_replace_step(steps, op, Step(replacement))))
    return f"step {best + 1} ({op}) raised ({_last_line(node_error=text)}); drop it", replace(base, steps=kept)


def _not_better(base, steps, ops, text, lowered, profile, trainers):
    if "non-finite cv score" not in lowered and "does not beat the trivial baseline" not in lowered \
            and "failed (" not in lowered:
        return None
    if base.target_transform is not None:
        return "no usable score with the target transform; model the raw target", replace(base, target_transform=None)
    fallback = "hist_gradient_boosting" if base.trainer != "hist_gradient_boosting" else "random_forest"
    if fallback not in trainers:
        return None
    return (f"{base.trainer} gives no usable score ({_last_line(text)}); try {fallback} with its own preprocessing",
            SolutionCandidate(fallback, {}, "", steps_for(fallback, trainers), None))


_RULES: tuple[_Rule, ...] = (_leak, _unknown_parameter, _unknown_op, _too_big, _timeout, _non_numeric,
                             _missing_values, _failing_step, _not_better)


def _last_line(node_error: str) -> str:
    lines = [line.strip() for line in node_error.strip().splitlines() if line.strip()]
    return (lines[-1] if lines else "unknown error")[:160]


def _quote(text: str, markers: Sequence[str]) -> str:
    for line in text.splitlines():
        if any(marker in line.lower() for marker in markers):
            return line.strip()[:120]
    return _last_line(text)


# ---------------------------------------------------------------------------------------------- knowledge


@dataclass(frozen=True)
class _Option:
    """A retrieved trick that the recipe catalogue can execute on this task."""

    trick: AppliedTrick
    recipe: Any  # agent.recipes.Recipe; None for a tuning trick (an Optuna study, agent.tuning)
    score: float


class KnowledgeTreeProposer:
    """Drafts and improvements composed from the tricks retrieved for the task (see the module docstring)."""

    def __init__(self, kb, trainers: Mapping[str, Trainer] | None = None, *, trick_prob: float = 0.5, k: int = 40,
                 retrieved: Sequence[Any] | None = None, embedder=None, min_mapping_confidence: float = 0.5):
        from agent import recipes  # the executable recipe catalogue; imported here, when knowledge is asked for

        self.recipes = recipes
        self.kb = kb
        self.builtin = BuiltinTreeProposer(trainers)
        self.trainers = self.builtin.trainers
        self.trick_prob = trick_prob
        self.k = k
        self._retrieved = list(retrieved) if retrieved is not None else None
        self.embedder = embedder  # for agent.trick_mapping, which maps tricks without a recipe to an op
        self.min_mapping_confidence = min_mapping_confidence
        self._options: list[_Option] | None = None
        self._reading: Future[list[_Option]] | None = None
        self._tuner: Tuner | None = None  # Optuna studies, made when a retrieved tuning trick is first used

    # ---- the tricks this task can use

    def options(self, profile: TaskProfile) -> list[_Option]:
        if self._options is None:
            self._options = self._read_knowledge(profile) if self._reading is None else self._reading.result()
        return self._options

    def _read_knowledge(self, profile: TaskProfile) -> list[_Option]:
        if self._retrieved is None:
            from retrieval.retriever import retrieve

            self._retrieved = retrieve(profile, k=self.k, kb=self.kb)
        return self._executable(profile, self._retrieved)

    def _start_reading(self, profile: TaskProfile) -> None:
        """Retrieve and map the tricks on a worker thread: loading the embedding model and searching take seconds
        that would otherwise come out of the search's budget, while a candidate's CV runs in its own process."""
        if self._options is None and self._reading is None:
            pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="casebook-retrieval")
            self._reading = pool.submit(self._read_knowledge, profile)
            pool.shutdown(wait=False)  # the thread ends with its one job

    def _card(self, profile: TaskProfile, ops: Sequence[str]) -> AppliedTrick | None:
        """The first retrieved trick whose recipe is one of `ops` (searches over nodes, which the tree runs)."""
        self.options(profile)
        trick = next((item.trick for item in self._retrieved
                      if item.trick.recipe and item.trick.recipe.get("op") in ops), None)
        return trick and AppliedTrick(trick.id, trick.title or trick.text[:80], trick.source, trick.competition,
                                      trick.recipe["op"], dict(trick.recipe.get("params") or {}))

    def blend(self, profile: TaskProfile, journal: Journal) -> BlendProposal | None:
        """Blend the best verified nodes when a retrieved trick recommends ensembling; None otherwise."""
        applied = self._card(profile, BLEND_OPS)
        if applied is None:
            return None
        ranked = blend_candidates(journal)
        if len(ranked) < 2:
            return None
        return BlendProposal(tuple(node.id for node in ranked), f"blend the best nodes as {applied.describe()} "
                                                                 "suggests", applied)

    def _executable(self, profile: TaskProfile, retrieved: Sequence[Any]) -> list[_Option]:
        catalogue = self.recipes.catalogue()
        mapped = self._mapped([item.trick for item in retrieved if not item.trick.recipe])
        options, seen = [], set()
        for item in retrieved:
            trick = item.trick
            recipe_ref, evidence = (dict(trick.recipe), "") if trick.recipe else mapped.get(trick.id, (None, ""))
            if not recipe_ref or recipe_ref.get("op") not in catalogue:
                continue
            recipe = catalogue[recipe_ref["op"]]
            try:
                if not recipe.applies(profile):
                    continue
            except Exception:  # noqa: BLE001 - a recipe that cannot judge this task is not offered
                continue
            params = dict(recipe_ref.get("params") or {})
            key = (recipe.op, repr(sorted(params.items())))
            if key in seen:
                continue
            seen.add(key)
            title = trick.title or trick.text[:80]
            if evidence:  # a trick without a recipe, read by agent.trick_mapping
                title = f"{title}; mapped to {recipe.op} by its text: {evidence}"
            applied = AppliedTrick(trick.id, title, trick.source, trick.competition, recipe.op, params)
            options.append(_Option(applied, recipe, float(item.score)))
        return options

    def _mapped(self, tricks: Sequence[Any]) -> dict[str, tuple[dict[str, Any], str]]:
        """Recipe refs for tricks that carry none, from agent.trick_mapping (one batch); {} without the mapper."""
        if not tricks:
            return {}
        try:
            from agent.trick_mapping import map_tricks

            matches = map_tricks([trick.text for trick in tricks], embedder=self.embedder)
        except Exception:  # noqa: BLE001 - without a working mapper, only tricks with a recipe are executable
            return {}
        return {trick.id: ({"op": match.op, "params": dict(match.params or {})}, match.evidence)
                for trick, match in zip(tricks, matches)
                if match is not None and float(match.confidence) >= self.min_mapping_confidence}

    def _apply(self, option: _Option, candidate: SolutionCandidate) -> tuple[SolutionCandidate, str] | None:
        """The candidate with the trick's recipe applied, and a note when the trick's own parameters did not fit."""
        note = ""
        try:
            changed = option.recipe.apply(candidate, option.trick.params or None)
        except Exception as error:  # noqa: BLE001 - params the recipe refuses: retry at its defaults
            try:
                changed = option.recipe.apply(candidate, None)
            except Exception:  # noqa: BLE001 - a recipe that cannot change this candidate is skipped
                return None
            note = f" (at the recipe's defaults: {str(error).splitlines()[0][:120]})"
        if changed.trainer not in self.trainers or candidate_key(changed, self.trainers) == candidate_key(
                candidate, self.trainers):
            return None
        return changed, note

    # ---- draft: a model family with the tricks its columns and metric need

    def draft(self, profile: TaskProfile, journal: Journal, rng: random.Random) -> Proposal | None:
        if not journal.draft_nodes:  # the reference: the first family at defaults, evaluated while knowledge is read
            self._start_reading(profile)
            plain = self.builtin.draft(profile, journal, rng)
            return plain and replace(plain, plan=f"{plain.plan} (the reference draft, evaluated while the knowledge "
                                                   "base is read)")
        needed = [option for option in self.options(profile) if option.recipe.op in NEEDED_OPS]
        drafted = {node.candidate.trainer for node in journal.draft_nodes}
        for family in self.builtin.families:
            if family in drafted:
                continue
            candidate, used = self.builtin.base_candidate(family, profile), []
            for option in needed:  # what the columns call for (text, dates, composite ids), in every draft
                if option.recipe.op in {o.recipe.op for o, _ in used}:
                    continue
                result = self._apply(option, candidate)
                if result is not None:
                    candidate = result[0]
                    used.append((option, result[1]))
            if journal.has(candidate_key(candidate, self.trainers), self.trainers):
                continue
            name, why = family.replace("_", " "), target_note(candidate)
            if not used:
                return Proposal(candidate, f"draft: {name} at defaults{why} (no retrieved trick is about a kind of "
                                           "column or the metric this task has)")
            reasons = "; ".join(f"{o.recipe.op}{note} from {o.trick.describe()}" for o, note in used)
            trick = replace(used[0][0].trick, related=tuple(o.trick.id for o, _ in used[1:]),
                            op="+".join(o.recipe.op for o, _ in used))
            return Proposal(candidate, f"draft: {name}{why} with the retrieved tricks its columns and metric need — "
                                       f"{reasons}",
                            trick)
        return None

    # ---- improve: one trick, or a built-in change

    def improve(self, node: Node, profile: TaskProfile, journal: Journal, rng: random.Random) -> Proposal | None:
        if rng.random() < self.trick_prob:
            proposal = self.improve_with_trick(node, profile, journal, rng)
            if proposal is not None:
                return proposal
        return self.builtin.improve(node, profile, journal, rng) or self.improve_with_trick(node, profile, journal, rng)

    def improve_with_trick(self, node: Node, profile: TaskProfile, journal: Journal,
                           rng: random.Random | None = None) -> Proposal | None:
        used, ineffective = journal.tricks_on_branch(node)
        # Retrieval order, but what the task needs comes first (the reference draft was made without it), and a
        # trick that already failed to beat its parent on other branches goes behind the ones not yet tried: it
        # is still allowed here (AutoMind's rule is per branch), just not first.
        failures = {}
        for child in journal:
            if child.action == IMPROVE and child.trick is not None and not child.members \
                    and not journal.beats_parent(child):
                failures[child.trick.id] = failures.get(child.trick.id, 0) + 1
        # A retrieved tuning trick comes after the untried tricks: it is for when the features are settled.
        tuning = self._card(profile, (TUNE_OP,))
        entries = [*self.options(profile), *([_Option(tuning, None, 0.0)] if tuning else [])]
        for option in sorted(entries, key=lambda option: (option.trick.op not in NEEDED_OPS,
                                                          failures.get(option.trick.id, 0))):
            if option.recipe is None:  # a study's trials are not one trick each: the study keeps its own count
                proposal = self._tune(node, option.trick, profile, journal, rng)
                if proposal is not None:
                    return proposal
                continue
            if option.trick.id in used or option.trick.id in ineffective:
                continue
            result = self._apply(option, node.candidate)
            if result is None or journal.has(candidate_key(result[0], self.trainers), self.trainers):
                continue
            if result[0].trainer != node.candidate.trainer:  # another model family is a draft's job, not a change
                continue
            if option.recipe.op in TREE_INVARIANT_OPS and node.candidate.trainer in TREE_FAMILIES:
                continue  # the same trees again: a wasted step
            changed, note = result
            plan = (f"improve node {node.id} ({node.candidate.trainer}, {describe_score(node, profile)}): apply "
                    f"{option.recipe.op}{note} as {option.trick.describe()} suggests")
            return Proposal(changed, plan, option.trick)
        return None

    def _tune(self, node: Node, trick: AppliedTrick, profile: TaskProfile, journal: Journal,
              rng: random.Random | None) -> Proposal | None:
        """The next Optuna trial of the study around `node` (or the study `node` is a trial of)."""
        if node.members:
            return None
        if self._tuner is None:
            self._tuner = Tuner((rng or random.Random(0)).randrange(2**31))
        trial = self._tuner.propose(node.id, node.candidate, int(trick.params.get("n_trials", DEFAULT_TRIALS)))
        if trial is None or journal.has(candidate_key(trial.candidate, self.trainers), self.trainers):
            return None
        values = ", ".join(f"{name}={value:.4g}" if isinstance(value, float) else f"{name}={value}"
                           for name, value in trial.params.items())
        plan = (f"improve node {node.id} ({node.candidate.trainer}, {describe_score(node, profile)}): Optuna trial "
                f"{trial.number} (TPE) of the study around node {trial.centre}: {values}, as {trick.describe()} "
                "suggests")
        return Proposal(trial.candidate, plan, trick)

    def observe(self, node: Node) -> None:
        """A verified node: an Optuna study that asked for it learns its score."""
        if self._tuner is not None:
            self._tuner.observe(node.id, node.candidate, node.score, node.valid)

    def debug(self, node: Node, profile: TaskProfile, rng: random.Random) -> Proposal | None:
        """Repairs read the failure, with or without knowledge: the built-in diagnosis."""
        return self.builtin.debug(node, profile, rng)
