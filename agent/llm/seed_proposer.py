"""The seed card's LLM proposer for AgenticAutoML: `AgentSolutionProposer(model=...)`.

    from agent.llm.seed_proposer import AgentSolutionProposer
    run = AgenticAutoML(AgentSolutionProposer(model="claude-haiku-4-5"), max_iterations=8).solve(dataset)

The seed population is every allowed trainer at its defaults. Each reflection round shows the LLM the attempts so
far, best first, and asks for one next candidate in the card's contract (`trainer`, `params_json`, `rationale`),
checked by agent.llm.answers as `--llm`'s answers are: a trainer outside the allowed list becomes the best trainer
seen, malformed parameters become {} (the candidate's rationale notes both), and a candidate already tried is asked
again once. The client is kb.llm's, the one `--llm` uses, and it builds the anthropic client on the first question,
so the seed population needs no key. When the LLM gives no usable answer the round is the offline proposer's
(VariationProposer by default) and its rationale says why; after a failure that will not pass (no key, an unknown
model, the budget spent) every later round is.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import replace

from agent.candidate import AttemptRecord, SolutionCandidate
from agent.engine.dataset import Dataset
from agent.engine.trainers import SEED_TRAINERS, Trainer, trainer_registry
from agent.llm import prompts
from agent.llm.answers import SpecAnswer, read_spec
from agent.search.journal import candidate_key
from agent.seedloop.loop import CandidateProposer
from agent.seedloop.variation import VariationProposer
from kb.llm import Document, LLMAnswerError, LLMClient, LLMError

HISTORY_LINES = 24  # attempts shown to the LLM, best first
COLUMN_LINES = 200  # columns described in the data profile


class AgentSolutionProposer:
    """Seeds: each allowed trainer at its defaults. Reflection: the LLM's next candidate given the history."""

    def __init__(self, model: str, allowed_trainers: Sequence[str] = SEED_TRAINERS, *,
                 trainers: Mapping[str, Trainer] | None = None, budget_usd: float | None = None,
                 client: LLMClient | None = None, offline: CandidateProposer | None = None):
        available = trainer_registry(trainers)
        self.trainers = {name: available[name] for name in allowed_trainers if name in available and name != "baseline"}
        if not self.trainers:
            raise ValueError(f"none of the allowed trainers {list(allowed_trainers)} is available; "
                             f"casebook has {', '.join(available)}")
        self.client = client if client is not None else LLMClient(model, budget_usd=budget_usd)
        self.offline = offline if offline is not None else VariationProposer(trainers, seed_trainers=tuple(self.trainers))
        self.disabled: str | None = None  # why every later round is the offline proposer's
        self.fallbacks: list[str] = []  # why each round the LLM did not answer fell back

    def seed(self, dataset: Dataset) -> list[SolutionCandidate]:
        return [SolutionCandidate(name, {}, f"seed: {name.replace('_', ' ')} at defaults") for name in self.trainers]

    def propose(self, dataset: Dataset, attempts: Sequence[AttemptRecord]) -> SolutionCandidate | None:
        reason = self.disabled
        if reason is None:
            try:
                answer = self._ask(dataset, attempts)
            except LLMError as error:
                reason = str(error)
                if error.permanent:
                    self.disabled = reason
            else:
                notes = "".join(f" [note: {note}]" for note in answer.notes)
                rationale = f"LLM {self.client.model}: {answer.rationale or '(no rationale given)'}{notes}"
                return replace(answer.candidate, rationale=rationale)
        self.fallbacks.append(reason)
        candidate = self.offline.propose(dataset, attempts)
        return candidate and replace(candidate, rationale=f"{candidate.rationale} [offline proposer: the LLM gave no "
                                                          f"usable answer ({reason})]")

    def _ask(self, dataset: Dataset, attempts: Sequence[AttemptRecord]) -> SpecAnswer:
        ranked = best_first(attempts)
        valid = [attempt for attempt in ranked if attempt.verdict.valid and attempt.candidate.trainer in self.trainers]
        best_trainer = valid[0].candidate.trainer if valid else next(iter(self.trainers))
        tried = {candidate_key(attempt.candidate, self.trainers): attempt.index for attempt in attempts}

        def validate(data: Mapping[str, object]) -> SpecAnswer:
            answer = read_spec(data, self.trainers, best_trainer, dataset.task_type)
            same = tried.get(candidate_key(answer.candidate, self.trainers))
            if same is not None:
                raise LLMAnswerError(f"that candidate is attempt {same} already; propose a different one")
            return answer

        return self.client.ask(prompts.system_prompt(self.trainers, code=False), dataset_documents(dataset),
                               reflection_question(ranked, dataset), validate=validate).value


def best_first(attempts: Sequence[AttemptRecord]) -> list[AttemptRecord]:
    """Verified attempts by score, best first, then the rest in the order they ran."""
    return sorted(attempts, key=lambda attempt: (not attempt.verdict.valid,
                                                 -attempt.score if attempt.verdict.valid else attempt.index))


def dataset_documents(dataset: Dataset) -> list[Document]:
    """The data as the LLM reads it: set-up, size and each column's kind (column names come from the user's table)."""
    info = dataset.metric_info
    lines = [f"task type: {dataset.task_type}", f"target column: {dataset.target}",
             f"metric: {dataset.metric} ({'higher' if info.greater_is_better else 'lower'} is better"
             f"{', scored on probabilities' if info.needs_proba else ''})",
             f"training rows: {len(dataset.X)}; feature columns: {len(dataset.columns)}",
             "columns (name: kind, distinct values, missing share):"]
    lines += [f"- {column.name}: {column.kind}, {column.cardinality}, {column.missing_share:.0%}"
              for column in dataset.columns[:COLUMN_LINES]]
    if len(dataset.columns) > COLUMN_LINES:
        lines.append(f"... and {len(dataset.columns) - COLUMN_LINES} more columns")
    return [Document("data profile", "\n".join(lines), dataset.name)]


def describe_attempt(attempt: AttemptRecord, metric: str) -> str:
    candidate = attempt.candidate
    value = attempt.evidence.metric_value
    score = f"CV {metric}={value:.5g}" if math.isfinite(value) else "no CV score"
    verdict = "verified" if attempt.verdict.valid else f"rejected: {attempt.verdict.reason}"
    failure = f"; failed: {attempt.error.strip().splitlines()[-1][:160]}" if attempt.error.strip() else ""
    return (f"attempt {attempt.index} ({attempt.action}): {candidate.trainer} params "
            f"{json.dumps(dict(candidate.params), default=str)}; {score}; {verdict}{failure}")


def reflection_question(ranked: Sequence[AttemptRecord], dataset: Dataset) -> str:
    lines = ["Action: reflect", "", f"{len(ranked)} attempts so far, best first:"]
    lines += [describe_attempt(attempt, dataset.metric) for attempt in ranked[:HISTORY_LINES]]
    lines += ["", "Propose the next candidate: a change that should beat the best attempt (other parameters for its "
                  "trainer, or another trainer), not one already tried. Answer " + prompts.SPEC_FIELDS + "}."]
    return "\n".join(lines)
