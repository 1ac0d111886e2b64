"""Retrieval evaluation on the labelled query set in data/eval/queries.jsonl.

For the hierarchical retriever and for plain dense retrieval over the same store, both over every kind of
knowledge as the agent retrieves it (cards, write-ups and papers ranked together): top-level and subcategory
accuracy of the task analysis, precision@5, recall@10, nDCG@10 (graded relevance 0/1/2), and the same-competition
leak rate (share of queries with a competition whose results include knowledge from it; must be 0 for the
hierarchical retriever).

nDCG@10 is also reported by source (card, write-up, paper): a query's grades of one source's tricks only, over
the queries that grade any trick of that source. And by query set: "tuning" queries are the ones the taxonomy's
cues and the retriever's settings were tuned on, so they are a training set; "fresh" queries were written later,
describe real competitions of the shared corpus and grade write-up and paper tricks, and nothing was tuned on them.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kb.config import data_path
from kb.records import SOURCE_KINDS
from kb.taxonomy import top_of
from retrieval.retriever import HierarchicalRetriever, RetrievedTrick, TaskQuery

DEFAULT_QUERIES = data_path("eval", "queries.jsonl")  # data/eval/queries.jsonl, as installed
QUERY_SETS = ("tuning", "fresh")  # tuned on (a training set) / never tuned on
METRICS = ("precision@5", "recall@10", "ndcg@10")


class EvalSetError(ValueError):
    """A query file that cannot be used."""


@dataclass(frozen=True)
class EvalQuery:
    id: str
    description: str
    competition: str | None
    expected_labels: tuple[str, ...]
    relevant: dict
    set: str = "tuning"  # one of QUERY_SETS

    @classmethod
    def load_all(cls, path: str | Path = DEFAULT_QUERIES) -> list[EvalQuery]:
        path = Path(path)
        if not path.is_file():
            raise EvalSetError(f"{path}: no such query file; pass --queries PATH")
        queries = []
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if not line.strip():
                continue
            try:
                raw = json.loads(line)
                queries.append(cls(raw["id"], raw["description"], raw.get("competition"),
                                   tuple(raw["expected_labels"]), dict(raw["relevant"]), raw.get("set", "tuning")))
            except (json.JSONDecodeError, KeyError, TypeError) as error:
                raise EvalSetError(f"{path} line {number}: {error}; each line needs id, description, "
                                   "expected_labels and relevant") from None
            if queries[-1].set not in QUERY_SETS:
                raise EvalSetError(f"{path} line {number}: set {queries[-1].set!r} is not one of {QUERY_SETS}")
        return queries


def ndcg(grades: list[int], ideal: list[int], k: int) -> float:
    gain = lambda values: sum((2**g - 1) / math.log2(i + 2) for i, g in enumerate(values[:k]))  # noqa: E731
    best = gain(sorted(ideal, reverse=True))
    return gain(grades) / best if best else 0.0


def score_results(query: EvalQuery, results: list[RetrievedTrick], k: int = 10,
                  sources: dict[str, str] | None = None) -> dict:
    """P@5, R@10, nDCG@10 and the leak of one query; with `sources` (graded id -> source kind) also nDCG@10 by
    source: the grades of that source's tricks only, None when the query grades none of them."""
    grades = [int(query.relevant.get(item.trick.id, 0)) for item in results[:k]]
    relevant = {i for i, g in query.relevant.items() if g > 0}
    found = {item.trick.id for item in results[:10]} & relevant
    leaked = bool(query.competition) and any(item.trick.competition == query.competition for item in results[:k])
    scores = {
        "precision@5": sum(1 for g in grades[:5] if g > 0) / 5,
        "recall@10": len(found) / len(relevant) if relevant else 0.0,
        "ndcg@10": ndcg(grades, list(query.relevant.values()), k),
        "leak": leaked,
    }
    if sources is not None:
        scores["ndcg@10_by_source"] = {}
        for source in SOURCE_KINDS:
            ideal = [g for i, g in query.relevant.items() if sources.get(i) == source and g > 0]
            own = [int(query.relevant.get(item.trick.id, 0)) if item.trick.source_kind == source else 0
                   for item in results[:k]]
            scores["ndcg@10_by_source"][source] = ndcg(own, ideal, k) if ideal else None
    return scores


def _means(rows: list[dict], name: str) -> dict:
    """Mean metrics of one method over some query rows, nDCG@10 by source over the queries grading that source."""
    means = {metric: sum(r[name][metric] for r in rows) / len(rows) for metric in METRICS}
    means["ndcg@10_by_source"] = {}
    for source in SOURCE_KINDS:
        values = [r[name]["ndcg@10_by_source"][source] for r in rows if r[name]["ndcg@10_by_source"][source] is not None]
        means["ndcg@10_by_source"][source] = sum(values) / len(values) if values else None
        means.setdefault("queries_by_source", {})[source] = len(values)
    return means


def evaluate(retriever: HierarchicalRetriever, queries: list[EvalQuery], k: int = 10, kind: str | None = None,
             progress: Callable[[int, int], None] | None = None) -> dict:
    """Mean metrics per method (overall, by query set, nDCG@10 by source) plus label accuracy of the task analysis,
    and per-query rows. Both methods retrieve `kind` (None: every kind, as the agent does). Graded ids the store does
    not hold are counted in `graded_not_in_store`: a store without the shared write-ups and papers cannot score the
    fresh set. `progress(queries done, queries)` after each query."""
    graded = sorted({trick_id for query in queries for trick_id in query.relevant})
    held = {trick_id: trick for trick_id in graded if (trick := retriever.kb.get(trick_id)) is not None}
    sources = {trick_id: trick.source_kind for trick_id, trick in held.items()}
    rows = []
    methods = {"hierarchical": lambda q: retriever.retrieve(q, k=k, kind=kind),
               "dense": lambda q: retriever.dense(q, k=k, kind=kind)}
    if progress:
        progress(0, len(queries))
    for query in queries:
        analysed: TaskQuery = retriever.analyse(query.description, competition=query.competition)
        predicted = analysed.labels[0] if analysed.labels else ""
        row = {"id": query.id, "set": query.set, "expected": query.expected_labels[0], "predicted": list(analysed.labels),
               "label_top": top_of(predicted) == top_of(query.expected_labels[0]),
               "label_sub": predicted == query.expected_labels[0]}
        for name, run in methods.items():
            row[name] = score_results(query, run(analysed), k, sources)
        rows.append(row)
        if progress:
            progress(len(rows), len(queries))
    summary = _summary(rows, queries, methods)
    summary["graded_not_in_store"] = len(graded) - len(held)
    summary["by_set"] = {name: _summary([r for r in rows if r["set"] == name], [q for q in queries if q.set == name],
                                        methods) for name in QUERY_SETS if any(q.set == name for q in queries)}
    return {"summary": summary, "queries": rows}


def _summary(rows: list[dict], queries: list[EvalQuery], methods) -> dict:
    summary = {"queries": len(rows), "label_accuracy_top": sum(r["label_top"] for r in rows) / len(rows),
               "label_accuracy_sub": sum(r["label_sub"] for r in rows) / len(rows)}
    with_competition = [r for r, q in zip(rows, queries) if q.competition]
    for name in methods:
        summary[name] = _means(rows, name)
        summary[name]["leak_rate"] = (sum(r[name]["leak"] for r in with_competition) / len(with_competition)
                                      if with_competition else 0.0)
    dense, hierarchical = summary["dense"]["ndcg@10"], summary["hierarchical"]["ndcg@10"]
    summary["ndcg_gain"] = (hierarchical - dense) / dense if dense else float("inf")
    return summary
