"""The search's finish: the final combination of its best nodes, and the final fit the submission comes from.

The final combination is the engine's, with or without knowledge: when the metric can be blended
(agent.search.blending.blendable) and at least two verified nodes exist, `blends` combines the nodes
`blend_candidates` picks (each family's best, then the best of the rest) every way the metric allows: a greedy
weighted average, a linear stack, a rank average, each a node of its own. A proposer that names a retrieved
ensembling trick (`TreeProposer.blend_trick`) only has the trick named in the plan.

`final_fit` makes the submission's predictions from the best node. When the CVs behind it kept their fold models
(agent.evaluator; a node's are kept when it could be the best or a blend's member:
agent.search.blending.keep_bar), the submission is
their test predictions averaged, computed with every CV on every row, and the model is those fold models
(`FoldAverage`): no refit, so the search keeps no time back for one. On the evaluation tables the refit on every row
scored as the fold models' average did (bench/RESULTS.md, "The submission from a refit or the fold models'
average": mean ratio 1.0002 over 20 runs, the average better in 11), as AutoGluon's bagged models predict without
one. Otherwise it is the refit on every row when its estimate fits in what is left, else the fold models' average
with no model kept; a best scored on the sample only has none, and is refit on as many rows as fit.
`engineering_run` is the outcome in the card's terms, read from the journal.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from agent.candidate import EngineeringRun, Refit, SolutionCandidate
from agent.engine import runtime
from agent.engine.compile import ENSEMBLE
from agent.engine.dataset import Dataset
from agent.engine.spec import SolutionSpec
from agent.execution.sandbox import error_tail
from agent.search.blending import AVERAGE, BLEND_ROWS, RANK_AVERAGE, STACK, Blend, blend_candidates, blends
from agent.search.clock import BudgetClock, refit_estimate, rows_within
from agent.search.exploration import Exploring
from agent.search.journal import IMPROVE, Journal, Node
from agent.search.nodes import Evaluated
from agent.search.protocols import FREE_CODE, BlendProposal, TreeEvaluator, TreeProposer
from agent.verify.findings import Evidence
from retrieval.metrics import CLASSIFICATION
from retrieval.profile import TaskProfile

REFIT, FOLD_AVERAGE, SAMPLE_REFIT = "refit on every row", "CV fold models averaged", "refit on a sample of the rows"
# A blend of members that kept their fold models and members that did not (a forest's grow with the rows), refit.
KEPT_AND_REFIT = "CV fold models averaged, members without them refit on every row"


@dataclass(frozen=True)
class FinalFit:
    """How the submission's predictions were made: `how` is REFIT, FOLD_AVERAGE, KEPT_AND_REFIT or SAMPLE_REFIT,
    with the refit's estimate and its seconds (0 when nothing was fitted), the trees each early-stopping model kept
    and why; for KEPT_AND_REFIT, the positions of the blend's members that were refit."""

    how: str
    estimate: float
    seconds: float
    rounds: Mapping[str, float]
    why: str
    refit_members: tuple[int, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"how": self.how, "estimate_seconds": round(self.estimate, 1), "seconds": round(self.seconds, 1),
                "rounds": dict(self.rounds), "why": self.why, "refit_members": list(self.refit_members)}


@dataclass(frozen=True, eq=False)
class FoldAverage:
    """A solution's CV fold models (for each ensemble member, or the one model, its fold models in fold order),
    predicting as the fold-average submission was made: each member's fold predictions averaged, then the members
    combined as the spec combines them."""

    spec: SolutionSpec
    members: tuple[tuple[Any, ...], ...]

    def predict_for_metric(self, X: Any, needs_proba: bool, classification: bool, n_classes: int | None) -> Any:
        predictions = [runtime.average_fold_models(models, X, needs_proba=needs_proba, classification=classification,
                                                   n_classes=n_classes) for models in self.members]
        return fold_average(self.spec, predictions, classification)


def blend_proposal(proposer: TreeProposer, profile: TaskProfile, journal: Journal) -> BlendProposal | None:
    """The final combination's members (agent.search.blending.blend_candidates), None with fewer than two; its plan
    names the retrieved ensembling trick when the proposer has one."""
    ranked = blend_candidates(journal)
    if len(ranked) < 2:
        return None
    trick = proposer.blend_trick(profile, journal)
    plan = "blend the best nodes (the search's final combination"
    plan += f", as {trick.describe()} also suggests)" if trick is not None else ")"
    return BlendProposal(tuple(node.id for node in ranked), plan, trick)


def blendable_predictions(node: Node) -> Any:
    """A node's out-of-fold predictions when it may be blended, else None. Free code is not blended: a blend is
    refit from its members' specs, and a script has none."""
    if not node.valid or node.evidence is None or node.candidate.trainer == FREE_CODE:
        return None
    return node.evidence.predictions


def combinations(proposal: BlendProposal, dataset: Dataset, journal: Journal,
                 evaluator: TreeEvaluator) -> list[Evaluated]:
    """Each way of combining the proposal's members from their OOF predictions (nothing is fitted) that keeps at
    least two of them, each evaluated as an improvement of its heaviest member. On more than BLEND_ROWS rows the
    weights are chosen on BLEND_ROWS of them (greedy selection scores the metric hundreds of times), and each
    combination is then scored on every row."""
    ids = [i for i in proposal.members if blendable_predictions(journal[i]) is not None]
    if len(ids) < 2:
        return []
    clock = time.monotonic()
    y, validation = dataset.y, evaluator.validation
    folds = runtime.make_folds(y, classification=dataset.classification, n_splits=validation.n_splits,
                               seed=validation.seed)
    members = [np.asarray(blendable_predictions(journal[i])) for i in ids]
    found = chosen_blends(members, y, dataset.metric, dataset.task_type, folds, validation.seed)
    seconds = (time.monotonic() - clock) / len(found)
    return [_combined([journal[ids[k]] for k in combination.members], combination, seconds, proposal, dataset,
                      evaluator)
            for combination in found if len(combination.members) >= 2]


def chosen_blends(members: Sequence[np.ndarray], y: np.ndarray, metric: str, task_type: str, folds: Sequence[Any],
                  seed: int) -> list[Blend]:
    """Every combination `blends` finds of these members' OOF predictions on `folds`; on more than BLEND_ROWS rows
    with the weights chosen on BLEND_ROWS of them (drawn with `seed`), then scored on every row."""
    if len(y) <= BLEND_ROWS:
        return blends(members, y, metric, task_type, folds)
    rows = np.sort(np.random.default_rng(seed).choice(len(y), BLEND_ROWS, replace=False))
    position = np.full(len(y), -1)
    position[rows] = np.arange(len(rows))
    sampled = [(position[train][position[train] >= 0], position[valid][position[valid] >= 0]) for train, valid in folds]
    return [on_every_row(combination, members, y, metric, task_type in CLASSIFICATION, folds)
            for combination in blends([member[rows] for member in members], y[rows], metric, task_type, sampled)]


def _combined(members: Sequence[Node], combination: Blend, seconds: float, proposal: BlendProposal,
              dataset: Dataset, evaluator: TreeEvaluator) -> Evaluated:
    weights = [combination.weights[k] for k in combination.members]
    stacked = combination.kind != AVERAGE
    spec = evaluator.blend_spec([node.spec for node in members], weights, intercept=combination.intercept,
                                link=combination.link if stacked else None)
    evidence = Evidence("ok", combination.metric_value, combination.fold_values, ignored_files=dataset.ignored_files,
                        elapsed=seconds, predictions=combination.predictions, rows=len(dataset.y))
    parts = ", ".join(f"node {node.id} ({node.candidate.trainer}) x {weight:.2f}"
                      for node, weight in zip(members, weights))
    how = {AVERAGE: "weights by greedy selection on out-of-fold predictions",
           RANK_AVERAGE: "a rank average, weights by greedy selection on ranks within each fold",
           STACK: f"a linear stack on out-of-fold predictions ({combination.link} space, "
                  f"intercept {combination.intercept:.3f})"}[combination.kind]
    candidate = SolutionCandidate(ENSEMBLE, dict(spec.model.params), f"{proposal.plan}: {parts} ({how})", ())
    heaviest = members[int(max(range(len(weights)), key=lambda k: abs(weights[k])))]
    # The combination is the engine's step: the trick the plan may name is provenance, not the node's trick.
    return Evaluated(IMPROVE, heaviest, candidate, None, spec, evidence, evaluator.pipeline_code(spec, dataset),
                     members=tuple(node.id for node in members))


def on_every_row(combination: Blend, members: Sequence[Any], y: Any, metric: str, classification: bool,
                 folds: Sequence[Any]) -> Blend:
    """A combination whose weights were chosen on some rows, applied to every row's OOF predictions and scored on
    each fold, as runtime.LinearStack and the voting ensembles combine the members."""
    if combination.kind == AVERAGE:
        combined = np.tensordot(np.asarray(combination.weights), np.asarray(members, dtype=float), axes=1)
    else:
        values = [member[:, 1] if classification else member for member in members]
        groups = [valid for _, valid in folds] if combination.link == "rank" else None
        combined = runtime.combine(np.asarray(values, dtype=float), combination.weights, combination.intercept,
                                   combination.link, classification=classification, groups=groups)
    return replace(combination, predictions=combined,
                   fold_values=tuple(runtime.fold_scores(combined, y, folds, metric)))


def final_model(evaluator: TreeEvaluator, clock: BudgetClock, dataset: Dataset, journal: Journal,
                explore: Exploring | None) -> tuple[Refit | None, FinalFit | None]:
    """The best node's model and test predictions (None without a verified node), and how they were made (None
    for a script, which predicted the test set itself: no refit)."""
    best = journal.best()
    if best is None:
        return None, None
    if best.candidate.trainer == FREE_CODE:
        prediction = best.evidence.test_prediction if best.evidence is not None else None
        return Refit(None, prediction, "" if prediction is not None else "the script wrote no test predictions"), None
    return final_fit(evaluator, clock, best, dataset, journal, explore)


def final_fit(evaluator: TreeEvaluator, clock: BudgetClock, best: Node, dataset: Dataset, journal: Journal,
              explore: Exploring | None) -> tuple[Refit, FinalFit]:
    """The submission's model and predictions: the CV fold models when their CVs kept them, their test predictions
    averaged; else the refit on every row when its estimate fits in what is left before the outputs; else (or when
    it fails) the CV fold models' test predictions averaged, with no model; for a best node scored on the sample
    only, which has none, a refit on as many rows as the time left allows (FLAML's retraining within the budget,
    with the rows as the resource), at least the exploration sample's."""
    spec = best.spec
    members = best.members or (best.id,)
    # A journal the search was handed may hold nodes evaluated elsewhere: their evidence is only their time.
    evidence = [journal[i].evidence or Evidence("ok", elapsed=journal[i].elapsed) for i in members]
    estimate = refit_estimate(evidence, len(dataset.y))
    rounds = refit_rounds(evidence, combined=bool(best.members))
    averaged = fold_average(spec, [item.test_prediction for item in evidence], dataset.classification)
    kept = [evaluator.kept_fold_models(item.fold_models) for item in evidence] if averaged is not None else []
    if any(models is not None for models in kept):
        finished = kept_fit(evaluator, clock, spec, [journal[i] for i in members], evidence, kept, dataset, estimate,
                            rounds)
        if finished is not None:
            return finished
    left = clock.refit_seconds_left()
    why = f"the refit's estimate, {estimate:.0f} s, fits in the {max(left, 0):.0f} s left"
    if estimate > left and averaged is not None:
        why = f"the refit's estimate, {estimate:.0f} s, is more than the {max(left, 0):.0f} s left"
        return Refit(None, averaged), FinalFit(FOLD_AVERAGE, estimate, 0.0, rounds, why)
    if estimate > left and explore is not None and len(evidence) == 1:  # scored on the sample only
        rows = min(max(rows_within(evidence[0], left), explore.rows), len(dataset.y))
        rows_drawn = replace(evaluator.sample(dataset, rows), X_test=dataset.X_test, test_ids=dataset.test_ids)
        small = evaluator.fit_all_rows(spec, rows_drawn, max(left, refit_estimate(evidence[:1], rows)), rounds)
        return small, FinalFit(SAMPLE_REFIT, estimate, small.seconds, rounds,
                               f"the refit's estimate on every row, {estimate:.0f} s, is more than the "
                               f"{max(left, 0):.0f} s left: refit on {len(rows_drawn.y):,} of them")
    refit = evaluator.fit_all_rows(spec, dataset, max(left, estimate if averaged is None else 0.0), rounds)
    if refit.test_prediction is not None or dataset.X_test is None:
        return refit, FinalFit(REFIT, estimate, refit.seconds, rounds, why)
    if averaged is not None:
        return Refit(None, averaged, refit.error, refit.seconds), FinalFit(
            FOLD_AVERAGE, estimate, refit.seconds, rounds, f"the refit failed ({error_tail(refit.error, 1)})")
    if explore is not None:  # scored on the sample only: no fold models predicted the test set
        small = evaluator.fit_all_rows(spec, replace(explore.dataset, X_test=dataset.X_test),
                                       max(clock.left(), refit_estimate(evidence[:1], explore.rows)), rounds)
        return small, FinalFit(SAMPLE_REFIT, estimate, refit.seconds + small.seconds, rounds,
                               f"the refit on every row failed ({error_tail(refit.error, 1)})")
    return refit, FinalFit(REFIT, estimate, refit.seconds, rounds, f"it failed ({error_tail(refit.error, 1)})")


def kept_fit(evaluator: TreeEvaluator, clock: BudgetClock, spec: SolutionSpec, members: Sequence[Node],
             evidence: Sequence[Evidence], kept: Sequence[tuple[Any, ...] | None], dataset: Dataset, estimate: float,
             rounds: Mapping[str, float]) -> tuple[Refit, FinalFit] | None:
    """The solution's model from the fold models its members' CVs kept (`kept`, by member), a member that kept none
    refit on every row in its own process, and the test predictions they make; and how they were made (`estimate`
    and `rounds`: the whole refit's, for the record). None when such a refit does not fit in the time left or
    fails."""
    models, predictions, seconds = list(kept), [item.test_prediction for item in evidence], 0.0
    refit_members = [k for k, models_kept in enumerate(kept) if models_kept is None]
    for k in refit_members:
        left = clock.refit_seconds_left()
        if refit_estimate([evidence[k]], len(dataset.y)) > left:
            return None
        refit = evaluator.fit_all_rows(members[k].spec, dataset, left, refit_rounds([evidence[k]], combined=False))
        seconds += refit.seconds
        if refit.model is None or (dataset.X_test is not None and refit.test_prediction is None):
            return None
        models[k], predictions[k] = (refit.model,), refit.test_prediction
    model = Refit(FoldAverage(spec, tuple(models)), fold_average(spec, predictions, dataset.classification),
                  seconds=seconds)
    if not refit_members:
        return model, FinalFit(FOLD_AVERAGE, estimate, seconds, rounds, "its CVs kept their fold models: the "
                               "submission averages them, as the CV scored them, with no refit")
    names = ", ".join(f"node {members[k].id} ({members[k].candidate.trainer})" for k in refit_members)
    return model, FinalFit(KEPT_AND_REFIT, estimate, seconds, rounds, f"the other members' CVs kept their fold "
                           f"models; {names} kept none and was refit on every row", tuple(refit_members))


def refit_rounds(evidence: Sequence[Evidence], combined: bool) -> dict[str, float]:
    """The trees each early-stopping model of a solution kept in its CV, by its path in the solution's model: its
    own paths for one model, under its member's ("model/m<k>/...") in a combination of `evidence`'s members."""
    return {f"model/m{k}/{path}" if combined else path: value
            for k, item in enumerate(evidence) for path, value in item.stopped_rounds.items()}


def fold_average(spec: SolutionSpec, member_predictions: Sequence[Any], classification: bool) -> Any:
    """The CV fold models' averaged test predictions of a solution, combined as its spec combines its members (one
    member: its own); None when a member has none."""
    if not member_predictions or any(prediction is None for prediction in member_predictions):
        return None
    if spec.model.name != ENSEMBLE:
        return member_predictions[0]
    params = spec.model.params
    if "link" not in params:  # a weighted average, as VotingClassifier (soft) and VotingRegressor weigh
        weights = [float(weight) for weight in params["weights"]]
        return sum(weight * prediction for weight, prediction in zip(weights, member_predictions)) / sum(weights)
    values = [prediction[:, 1] if classification else prediction for prediction in member_predictions]
    return runtime.combine(values, params["weights"], params["intercept"], params["link"],
                           classification=classification)


def engineering_run(journal: Journal, metric: str, baseline_score: float, rounds: int, stop_reason: str,
                    refit: Refit | None = None) -> EngineeringRun:
    """The run in the card's terms, read from the journal: its nodes as attempts, the best verified node, and the
    submission's model and predictions (`refit`; None when no final fit was made)."""
    run = EngineeringRun(attempts=journal.attempts(), best_candidate=None, best_score=-math.inf, model=None,
                         metric=metric, baseline_score=baseline_score, rounds=rounds, stop_reason=stop_reason)
    best = journal.best()
    if best is None:
        return run
    run = replace(run, best_candidate=best.candidate, best_score=best.score, best_spec=best.spec)
    return run if refit is None else replace(run, model=refit.model, test_prediction=refit.test_prediction,
                                             refit_error=refit.error)
