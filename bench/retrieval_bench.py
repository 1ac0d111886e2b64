"""Retrieval evaluation for bench/RESULTS.md: hierarchical vs plain dense on data/eval/queries.jsonl.

    .venv/bin/python bench/retrieval_bench.py [--shared ../shared] [--out bench/RESULTS.md]

The store holds the bundled cards, the 186 real write-ups and the 338 paper summaries.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.results import write_section  # noqa: E402
from ingest import ingest  # noqa: E402
from kb.store import KnowledgeBase  # noqa: E402
from retrieval.evaluation import EvalQuery, evaluate  # noqa: E402
from retrieval.retriever import HierarchicalRetriever, RetrieverSettings  # noqa: E402

HEADING = "## Retrieval (issue 3)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", type=Path, default=REPO.parent / "shared")
    parser.add_argument("--out", type=Path, default=REPO / "bench/RESULTS.md")
    args = parser.parse_args()
    corpus = args.shared / "corpus"
    if not corpus.exists():
        sys.exit(f"error: {corpus} not found; pass --shared PATH to the shared material")
    with tempfile.TemporaryDirectory() as home:
        base = KnowledgeBase(home)
        ingest([str(REPO / "data/knowledge"), str(corpus / "kaggle_writeups"),
                str(corpus / "papers/paper_summaries.json")], base)
        queries = EvalQuery.load_all()
        settings = RetrieverSettings()
        summary = evaluate(HierarchicalRetriever(base, settings), queries)["summary"]
        tricks = base.count()
    lines = [HEADING, "",
             f"Command: `.venv/bin/python bench/retrieval_bench.py` (the same numbers as `kb eval` on that store). "
             f"{summary['queries']} queries written by us (`data/eval/queries.jsonl`, graded 0/1/2) over a store of "
             f"{tricks} tricks: the bundled cards, the 186 write-ups and the 338 paper summaries. Label weight "
             f"{settings.label_weight}, description weight {settings.description_weight}.", "",
             "| method | P@5 | R@10 | nDCG@10 | same-competition leak rate |", "|---|---:|---:|---:|---:|"]
    for name, title in (("hierarchical", "hierarchical (labels, priority, competition filter)"),
                        ("dense", "plain dense (no labels, no filter)")):
        row = summary[name]
        lines.append(f"| {title} | {row['precision@5']:.3f} | {row['recall@10']:.3f} | {row['ndcg@10']:.3f} | "
                     f"{row['leak_rate']:.2f} |")
    lines += ["", f"nDCG@10 gain of hierarchical over dense: {summary['ndcg_gain']:+.1%} (target >= +10%). "
              f"Task-analysis label accuracy: top-level {summary['label_accuracy_top']:.1%} (target >= 90%), "
              f"subcategory {summary['label_accuracy_sub']:.1%}.", "",
              "Caveat: the query set and the taxonomy's lexical cues were written by the same team, and some cues "
              "(description words such as 'each row', 'recordings', 'responses') were added after reading "
              "this set's label errors; treat label accuracy as optimistic until a held-out set exists.", ""]
    section = "\n".join(lines)
    write_section(args.out, section)
    print(section)


if __name__ == "__main__":
    main()
