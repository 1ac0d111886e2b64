"""Hierarchical retrieval of tricks for a task (AutoMind, section 3.1.2).

For each of the task's labels, in priority order, search only the knowledge carrying that label;
score each hit by label evidence (weight 0.8) and similarity to the task description (0.2); drop
knowledge from the task's own competition; re-rank by label priority and keep the list diverse
across pipeline stages. Papers are retrieved the same way and returned separately.

Tricks to run (`executable`) must also be about the task's kind of data: the top level of a trick's first label
(its area: "Sequential Modeling", "Graph Learning"...) must be one of the task's labels' areas. A trick is often
labelled with a second area it shares with a tabular task ("General Machine Learning / Regression" after "Sequential
Modeling / Time Series Forecasting"), and retrieved for it; as a change to a table's model it was a misreading
(a graph paper's "rotation in complex space" compiled to coordinate rotation) or another data's settings (M5's
Tweedie loss and 0.005 learning rate for unit sales).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property

from kb.labeller import HierarchicalLabeller
from kb.records import Trick
from kb.store import KnowledgeBase
from kb.taxonomy import top_of
from retrieval.analysis import task_competition, task_labels, task_text
from retrieval.profile import TaskProfile, TaskSetupError


@dataclass(frozen=True)
class RetrieverSettings:
    label_weight: float = 0.8  # AutoMind's weight on label evidence ...
    description_weight: float = 0.2  # ... and on similarity to the task description
    priority_decay: float = 0.1  # each later label counts this much less
    per_label_candidates: int = 60
    stage_repeat_penalty: float = 0.03  # diversity: each earlier pick of the same stage costs this


@dataclass(frozen=True)
class RetrievedTrick:
    trick: Trick
    score: float
    label: str  # the task label it was retrieved for
    label_priority: int  # 0 = the task's primary label
    similarity: float  # to the task description
    label_evidence: float

    def to_dict(self) -> dict:
        return {**self.trick.to_dict(), "score": round(self.score, 4), "matched_label": self.label,
                "label_priority": self.label_priority, "similarity": round(self.similarity, 4),
                "label_evidence": round(self.label_evidence, 4)}


@dataclass(frozen=True)
class TaskQuery:
    """What retrieval needs of a task: its text, its labels in priority order, its competition."""

    text: str
    labels: tuple[str, ...]
    competition: str | None = None
    profile: TaskProfile | None = field(default=None, compare=False)


class HierarchicalRetriever:
    def __init__(self, kb: KnowledgeBase, settings: RetrieverSettings | None = None):
        self.kb = kb
        self.settings = settings or RetrieverSettings()

    @cached_property
    def labeller(self) -> HierarchicalLabeller:
        return HierarchicalLabeller(self.kb.taxonomy, self.kb.embedder)

    def analyse(self, description: str = "", profile: TaskProfile | None = None,
                competition: str | None = None) -> TaskQuery:
        description = description or (profile.description if profile else "")
        if not description.strip():
            where = f"{profile.task_dir}/description.md" if profile else "the task description"
            raise TaskSetupError(f"{where} is empty: retrieval needs the task's goal; write a few sentences "
                                 "(what to predict, the data, the metric)")
        labels = task_labels(self.labeller, description, profile)
        return TaskQuery(task_text(description, profile), tuple(labels),
                         competition or task_competition(description, profile), profile)

    def retrieve(self, query: TaskQuery, *, k: int = 10, stage: str | None = None, kind: str | None = "solution",
                 exclude_competitions: Sequence[str] = (), executable: bool = False) -> list[RetrievedTrick]:
        """The k best tricks for the query; with `executable`, only tricks with a recipe, ranked by the same rule
        (a KB of write-ups holds mostly prose, and the top k of everything would hold few tricks to run)."""
        excluded = [c for c in (query.competition, *exclude_competitions) if c]
        among = self.kb.executable_ids() if executable else None
        vector = self.kb.embedder.embed([query.text[:2000]])[0]
        best: dict[str, RetrievedTrick] = {}
        for priority, label in enumerate(query.labels):
            hits = self.kb.search(vector, self.settings.per_label_candidates, label=label, stage=stage,
                                  kind=kind, exclude_competitions=excluded, among=among)
            evidence = self.kb.label_scores([h.trick.id for h in hits], label)
            for hit in hits:
                label_evidence = min(1.0, evidence.get(hit.trick.id, 0.0))
                score = (self.settings.label_weight * label_evidence + self.settings.description_weight * hit.score)
                score *= (1.0 - self.settings.priority_decay) ** priority
                current = best.get(hit.trick.id)
                if current is None or score > current.score:
                    best[hit.trick.id] = RetrievedTrick(hit.trick, score, label, priority, hit.score, label_evidence)
        ranked = sorted(best.values(), key=lambda item: (-item.score, item.trick.id))
        if executable:
            areas = {top_of(label) for label in query.labels}
            ranked = [item for item in ranked if not item.trick.labels or top_of(item.trick.labels[0]) in areas]
        return ranked[:k] if stage else self._diversify(ranked, k)

    def _diversify(self, ranked: list[RetrievedTrick], k: int) -> list[RetrievedTrick]:
        """Greedy re-rank: a stage already picked n times costs n * penalty."""
        chosen: list[RetrievedTrick] = []
        per_stage: dict[str, int] = {}
        pool = list(ranked)
        while pool and len(chosen) < k:
            index = max(range(len(pool)), key=lambda i: pool[i].score
                        - self.settings.stage_repeat_penalty * per_stage.get(pool[i].trick.stage, 0))
            item = pool.pop(index)
            per_stage[item.trick.stage] = per_stage.get(item.trick.stage, 0) + 1
            chosen.append(item)
        return chosen

    def dense(self, query: TaskQuery, *, k: int = 10, kind: str = "solution",
              exclude_competitions: Sequence[str] = ()) -> list[RetrievedTrick]:
        """Plain dense retrieval over the same store, the evaluation's baseline: no labels, and no
        same-competition filter unless competitions are passed explicitly."""
        excluded = [c for c in exclude_competitions if c]
        vector = self.kb.embedder.embed([query.text[:2000]])[0]
        return [RetrievedTrick(h.trick, h.score, "", -1, h.score, 0.0)
                for h in self.kb.search(vector, k, kind=kind, exclude_competitions=excluded)]


def retrieve(profile: TaskProfile, stage: str | None = None, k: int = 10, *, kb: KnowledgeBase | None = None,
             settings: RetrieverSettings | None = None, kind: str | None = None,
             executable: bool = False) -> list[RetrievedTrick]:
    """Tricks for a profiled task, best first: the agent's entry point to the knowledge base.

    By default (`kind=None`) solution tricks (write-ups and cards) and paper tricks are ranked together by the same
    rule, with no bonus for either source; pass kind="solution" or kind="paper" for one kind only, and
    `executable=True` for tricks with a recipe only."""
    retriever = HierarchicalRetriever(kb or KnowledgeBase(), settings)
    return retriever.retrieve(retriever.analyse(profile=profile), k=k, stage=stage, kind=kind, executable=executable)
