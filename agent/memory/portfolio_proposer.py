"""The experience packs' portfolio at work in the tree search (`PortfolioProposer`, a WrappingProposer).

After the inner proposer's reference draft, a new task's drafts are the portfolio's configurations for its signature
(agent.memory.experience.portfolio_drafts: the ones best on the nearest pool tasks first, the packs taken in turn),
a model family no draft has used yet first: the search improves its best draft once its `num_drafts` are made, so
drafts that repeat a family leave the others untried (on pool tables of 10k-20k rows the first three configurations
were two linear models and a forest, or a linear model and two LightGBMs, and a 120 s run then fitted no boosted
model, or no CatBoost). Each is fitted to this task's columns as a remembered spec is
(agent.memory.proposer.fit_to_task), with this task's target transform, with the built-in drafts' text features when
the task has free text and the configuration none. One is left out when its model is not available or not among
`families` (--models), when its spec names a step, model or target transform this casebook does not know, when it is
already in the journal, or when its CV time on the nearest pool task that measured it, carried to this table by the
fit-time model (agent.search.fit_time), exceeds a node's time cap; the next draft's plan names the ones left out for
a reason other than a duplicate. Once every waiting configuration repeats a drafted family, the inner proposer
drafts the families the portfolio lacks before the portfolio's next configuration: the regression portfolio holds no
XGBoost, histogram boosting or extra trees, and on car_quality (4.5k rows) the experience arm's 14 drafts (the
portfolio's, after the reference) never verified them, while the plain search's blend of its seven families was 1.6%
better held back. A configuration that ran over its time cap (as proposed, or as the search sized it) is drafted once
more before any other, and the search sizes it from its overrun (agent.search.builtin.may_draft): the pack's L1
LightGBM, second for an MAE table, ran over on a 20k-row one (a seed bag of 3 at a learning rate of 0.025) and the
next LightGBM of the portfolio fitted squared error. Once the portfolio is used up, the inner proposer drafts as
before; improvements and repairs are always its.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import replace

from agent.candidate import SolutionCandidate
from agent.engine.spec import SolutionSpec, SpecError, Step
from agent.engine.steps import LOG_TARGET, step_op, target_op
from agent.memory.experience import PortfolioDraft
from agent.memory.proposer import fit_to_task
from agent.search.builtin import TEXT_OPS, drafted_families, log_target_fits, may_draft, with_text_features
from agent.search.fit_time import TableShape, carry_seconds
from agent.search.journal import Journal, candidate_key
from agent.search.protocols import Proposal, TreeProposer, WrappingProposer
from retrieval.profile import TaskProfile

MEASURED_NAMED = 3  # pool tasks a plan names for a configuration


class PortfolioProposer(WrappingProposer):
    """Drafts from the experience packs' portfolio first (see the module docstring), then `inner`'s."""

    def __init__(self, inner: TreeProposer, drafts: Sequence[PortfolioDraft], *,
                 families: Sequence[str] | None = None, node_seconds: float | None = None):
        super().__init__(inner)
        self.families = tuple(families) if families is not None else None  # None: every available model
        self.node_seconds = node_seconds  # the longest a node may take in this search (None: no budget)
        self.portfolio = tuple(drafts)
        self._waiting = list(drafts)  # not yet proposed nor left out
        self._left_out: list[str] = []  # why, not yet named in a plan
        self._referenced = False  # whether the inner has made its reference draft
        self._unretried: list[Proposal] = []  # portfolio drafts proposed and not drafted again
        self.proposed = 0  # portfolio drafts proposed (run.json's experience record)

    def draft(self, profile: TaskProfile, journal: Journal, rng: random.Random) -> Proposal | None:
        if not self._referenced:  # the inner's reference draft first: a cheap model the run can fall back on, which a
            # configuration measured on larger tables is not (on 23 rows one did not beat the trivial baseline)
            self._referenced = True
            return super().draft(profile, journal, rng)
        ran_over = next((proposal for proposal in self._unretried if self._ran_over(proposal, journal)), None)
        if ran_over is not None:
            self._unretried.remove(ran_over)  # once: it may be drawn again before its retry is in the journal
            self.proposed += 1
            return self._naming_left_out(replace(ran_over, plan=f"{ran_over.plan}; again after it ran over its cap"))
        while self._waiting:
            index = self._next_family(journal)
            if index is None:  # every waiting configuration repeats a drafted family: the inner's new family first
                proposal = super().draft(profile, journal, rng)
                if proposal is not None:
                    return self._naming_left_out(proposal)
                index = 0
            proposal = self._portfolio_draft(self._waiting.pop(index), profile, journal)
            if proposal is not None:
                self.proposed += 1
                self._unretried.append(proposal)
                return self._naming_left_out(proposal)
        proposal = super().draft(profile, journal, rng)
        return self._naming_left_out(proposal) if proposal is not None else None

    def _ran_over(self, proposal: Proposal, journal: Journal) -> bool:
        """Whether a portfolio draft ran over its cap and may be drafted again (may_draft)."""
        key = candidate_key(proposal.candidate, self.trainers)
        return bool(journal.tries(key, self.trainers)) and may_draft(journal, proposal.candidate, self.trainers)

    def _next_family(self, journal: Journal) -> int | None:
        """Where in the waiting configurations the next draft is: the first of a model family the journal's drafts
        have not used (one over its time cap used none: once its retry is made, the next of its family); None when
        every one repeats a drafted family."""
        drafted = drafted_families(journal)
        return next((index for index, draft in enumerate(self._waiting) if model_name(draft) not in drafted), None)

    def _naming_left_out(self, proposal: Proposal) -> Proposal:
        if not self._left_out:
            return proposal
        plan = f"{proposal.plan}; the portfolio left out {'; '.join(self._left_out)}"
        self._left_out = []
        return replace(proposal, plan=plan)

    def _portfolio_draft(self, draft: PortfolioDraft, profile: TaskProfile, journal: Journal) -> Proposal | None:
        try:
            spec = SolutionSpec.from_dict(draft.spec)
            for step in spec.steps:  # the lookups compile_spec makes: a spec this casebook cannot build is no draft
                step_op(step.op)
            if spec.target_transform is not None:
                target_op(spec.target_transform.op)
        except SpecError as error:
            self._left_out.append(f"configuration {draft.config} ({error})")
            return None
        trainer = spec.model.name
        if trainer not in self.trainers or (self.families is not None and trainer not in self.families):
            why = "not available here" if trainer not in self.trainers else "not among --models"
            self._left_out.append(f"{trainer} configuration {draft.config} ({why})")
            return None
        candidate, dropped = fit_to_task(
            SolutionCandidate(trainer, dict(spec.model.params), "", spec.steps, spec.target_transform), profile)
        # The target transform is this task's, chosen from its metric as the built-in drafts choose it: a pool
        # task's log target suited that task's metric (a portfolio forest measured on wage tables scored by a
        # relative error was drafted on an income table scored by RMSE).
        transform, transform_note = LOG_TARGET if log_target_fits(profile) else None, ""
        if candidate.target_transform != transform:
            transform_note = (f"; target transform {op_name(transform)} as this task's metric asks, not the pool "
                              f"task's {op_name(candidate.target_transform)}")
            candidate = replace(candidate, target_transform=transform)
        text_note = ""
        if not {step.op for step in candidate.steps or ()} & set(TEXT_OPS):
            candidate, text_note = with_text_features(candidate, profile)
        if journal.has(candidate_key(candidate, self.trainers), self.trainers):
            return None
        nearest_task, nearest_result = draft.measured[0]
        seconds = carry_seconds(nearest_result.seconds, trainer, draft.nearest.shape(nearest_result.rows),
                                TableShape.of(profile))
        if self.node_seconds is not None and seconds is not None and seconds > self.node_seconds:
            self._left_out.append(
                f"{trainer} configuration {draft.config} (its CV took {nearest_result.seconds:.1f} s on "
                f"{nearest_result.rows:,} rows of {nearest_task}, about {seconds:.1f} s here, over the "
                f"{self.node_seconds:.1f} s a node may take)")
            return None
        position = self.portfolio.index(draft) + 1
        params = ", ".join(f"{name}={value}" for name, value in candidate.params.items())
        ops = ", ".join(step.op for step in candidate.steps or ()) or "no preprocessing"
        measured = ", ".join(f"{name} (normalised error {result.error:.2f})"
                             for name, result in draft.measured[:MEASURED_NAMED])
        more = f" and {len(draft.measured) - MEASURED_NAMED} more" if len(draft.measured) > MEASURED_NAMED else ""
        note = f"; dropped {', '.join(dropped)}" if dropped else ""
        return Proposal(candidate, (
            f"draft: portfolio draft {position} of {len(self.portfolio)} from experience pack {draft.pack} "
            f"(configuration {draft.config}), measured on pool tasks {measured}{more}: {trainer}"
            f"{f' ({params})' if params else ''} with {ops}{text_note}{transform_note}{note}"))


def model_name(draft: PortfolioDraft) -> str | None:
    """The model family a configuration fits, read from its spec as stored (None when the spec names none)."""
    model = draft.spec.get("model")
    return model.get("name") if isinstance(model, Mapping) else None


def op_name(step: Step | None) -> str:
    return step.op if step is not None else "none"
