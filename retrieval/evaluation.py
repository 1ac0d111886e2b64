"""Retrieval evaluation on the labelled query set in data/eval/queries.jsonl.

For the hierarchical retriever and for plain dense retrieval over the same store: top-level and
subcategory accuracy of the task analysis, precision@5, recall@10, nDCG@10 (graded relevance 0/1/2),
and the same-competition leak rate (share of queries with a competition whose results include
knowledge from it; must be 0 for the hierarchical retriever).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from kb.config import data_path
from kb.taxonomy import top_of
from retrieval.retriever import HierarchicalRetriever, RetrievedTrick, TaskQuery

DEFAULT_QUERIES = data_path("eval", "queries.jsonl")  # data/eval/queries.jsonl, as installed


class EvalSetError(ValueError):
    """A query file that cannot be used."""


@dataclass(frozen=True)
class EvalQuery:
    id: str
    description: str
    competition: str | None
    expected_labels: tuple[str, ...]
    relevant: dict

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
                                   tuple(raw["expected_labels"]), dict(raw["relevant"])))
            except (json.JSONDecodeError, KeyError, TypeError) as error:
                raise EvalSetError(f"{path} line {number}: {error}; each line needs id, description, "
                                   "expected_labels and relevant") from None
        return queries


def ndcg(grades: list[int], ideal: list[int], k: int) -> float:
    gain = lambda values: sum((2**g - 1) / math.log2(i + 2) for i, g in enumerate(values[:k]))  # noqa: E731
    best = gain(sorted(ideal, reverse=True))
    return gain(grades) / best if best else 0.0


def score_results(query: EvalQuery, results: list[RetrievedTrick], k: int = 10) -> dict:
    grades = [int(query.relevant.get(item.trick.id, 0)) for item in results[:k]]
    relevant = {i for i, g in query.relevant.items() if g > 0}
    found = {item.trick.id for item in results[:10]} & relevant
    leaked = bool(query.competition) and any(item.trick.competition == query.competition for item in results[:k])
    return {
        "precision@5": sum(1 for g in grades[:5] if g > 0) / 5,
        "recall@10": len(found) / len(relevant) if relevant else 0.0,
        "ndcg@10": ndcg(grades, list(query.relevant.values()), k),
        "leak": leaked,
    }


def evaluate(retriever: HierarchicalRetriever, queries: list[EvalQuery], k: int = 10) -> dict:
    """Mean metrics per method plus label accuracy of the task analysis, and per-query rows."""
    rows, label_hits_top, label_hits_sub = [], 0, 0
    methods = {"hierarchical": lambda q: retriever.retrieve(q, k=k),
               "dense": lambda q: retriever.dense(q, k=k)}
    for query in queries:
        analysed: TaskQuery = retriever.analyse(query.description, competition=query.competition)
        predicted = analysed.labels[0] if analysed.labels else ""
        label_hits_top += top_of(predicted) == top_of(query.expected_labels[0])
        label_hits_sub += predicted == query.expected_labels[0]
        row = {"id": query.id, "expected": query.expected_labels[0], "predicted": list(analysed.labels)}
        for name, run in methods.items():
            row[name] = score_results(query, run(analysed), k)
        rows.append(row)
    summary = {"queries": len(queries), "label_accuracy_top": label_hits_top / len(queries),
               "label_accuracy_sub": label_hits_sub / len(queries)}
    with_competition = [r for r, q in zip(rows, queries) if q.competition]
    for name in methods:
        summary[name] = {metric: sum(r[name][metric] for r in rows) / len(rows)
                         for metric in ("precision@5", "recall@10", "ndcg@10")}
        summary[name]["leak_rate"] = (sum(r[name]["leak"] for r in with_competition) / len(with_competition)
                                      if with_competition else 0.0)
    dense, hierarchical = summary["dense"]["ndcg@10"], summary["hierarchical"]["ndcg@10"]
    summary["ndcg_gain"] = (hierarchical - dense) / dense if dense else float("inf")
    return {"summary": summary, "queries": rows}
