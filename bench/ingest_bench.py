"""Knowledge-base benchmark: ingest throughput, query latency at 1k and 20k tricks, CLI wall time.

    .venv/bin/python bench/ingest_bench.py [--shared ../shared] [--out bench/RESULTS.md]

Ingest is measured from an empty home and an empty embedding cache on the real corpus in
../shared (write-ups, paper summaries, full papers) plus the bundled cards. For the 20k-trick
latency store, the corpus's real tricks are repeated with distinct ids and slightly perturbed
vectors (Gaussian noise, sigma 0.02, renormalised): index size is what latency depends on.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.results import write_section  # noqa: E402
from ingest import ingest  # noqa: E402
from kb.store import DocumentRecord, KnowledgeBase  # noqa: E402

QUERIES = [
    "target encoding of high-cardinality categorical columns inside folds",
    "rotate latitude and longitude as extra features",
    "pseudo labelling with a transformer for essays",
    "lag and rolling mean features for daily sales",
    "blend lightgbm catboost and xgboost predictions",
    "stratified group k-fold to avoid leakage",
    "early stopping with a low learning rate",
    "test time augmentation for image classification",
    "quantile loss for probabilistic forecasts",
    "missing value indicators before imputation",
]
TASK_TYPES = ["tabular classification", "General Machine Learning / Regression", "NLP", "time series forecasting"]


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values) * 1000.0, q))


def measure_ingest(shared: Path, work: Path) -> tuple[KnowledgeBase, list[dict]]:
    rows = []
    papers = work / "papers"
    papers.mkdir()
    shutil.copy(shared / "corpus/papers/paper_summaries.json", papers)
    shutil.copytree(shared / "corpus/papers/full", papers / "full")
    sets = [
        ("tabular + time-series write-ups (~1k tricks)", [shared / "corpus/kaggle_writeups/tabular_cases",
                                                          shared / "corpus/kaggle_writeups/tsa_cases"]),
        ("all write-ups + papers + bundled cards", [shared / "corpus/kaggle_writeups", papers, REPO / "data/knowledge"]),
    ]
    base = None
    for name, paths in sets:
        home = work / re.sub(r"\W+", "-", name)[:20]
        base = KnowledgeBase(home)
        base.embedder.embed(["warm up the model"])  # model load is reported separately
        started = time.perf_counter()
        summary = ingest([str(p) for p in paths], base)
        seconds = time.perf_counter() - started
        rows.append({"set": name, "files": len(summary.outcomes), "documents": len(base.documents()),
                     "tricks": summary.tricks, "seconds": seconds, "embedded": summary.embedded})
    return base, rows


def build_store(source: KnowledgeBase, home: Path, size: int) -> KnowledgeBase:
    tricks = list(source.export())
    vectors = source.vectors([t.id for t in tricks])
    base = KnowledgeBase(home, embedder=source.embedder)
    rng = np.random.default_rng(0)
    made, copy = 0, 0
    while made < size:
        batch = []
        for start in range(0, len(tricks), 500):
            chunk = tricks[start : start + 500][: size - made]
            if not chunk:
                break
            renamed = [replace(t, id=f"{t.id}~{copy}", source=f"{t.source}~{copy}") for t in chunk]
            noise = np.stack([vectors[t.id] for t in chunk]) + rng.normal(0, 0.02, (len(chunk), 384)) * (copy > 0)
            noise /= np.linalg.norm(noise, axis=1, keepdims=True)
            record = DocumentRecord(f"bench-{copy}-{start}", "0", "solution", "bench", None)
            batch.append((record, renamed, noise.astype(np.float32), [[1.0] * len(t.labels) for t in renamed]))
            made += len(chunk)
        base.write_documents(batch)
        copy += 1
    return base


def measure_queries(base: KnowledgeBase, repeats: int = 20) -> dict:
    base.search(QUERIES[0], k=10)  # warm: model and index loaded
    size = base.count()
    semantic, by_label = [], []
    for repeat in range(repeats):
        for text in QUERIES:
            fresh = f"{text} (case {repeat}, store {size})"  # never in the cache: the model runs every time
            started = time.perf_counter()
            base.search(fresh, k=10)
            semantic.append(time.perf_counter() - started)
        for task_type in TASK_TYPES:
            label = base.taxonomy.resolve(task_type)
            started = time.perf_counter()
            base.tricks_for_label(label, k=10)
            by_label.append(time.perf_counter() - started)
    return {"tricks": base.count(), "query_p50": percentile(semantic, 50), "query_p95": percentile(semantic, 95),
            "tricks_p50": percentile(by_label, 50), "tricks_p95": percentile(by_label, 95)}


def measure_cli(home: Path, repeats: int = 5) -> float:
    walls = []
    for _ in range(repeats):
        started = time.perf_counter()
        subprocess.run([str(Path(sys.executable).parent / "kb"), "--home", str(home), "tricks", "--task-type",
                        "tabular classification", "-k", "10", "--json"], check=True, capture_output=True)
        walls.append(time.perf_counter() - started)
    return statistics.median(walls)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", type=Path, default=REPO.parent / "shared")
    parser.add_argument("--out", type=Path, default=REPO / "bench/RESULTS.md")
    args = parser.parse_args()
    if not (args.shared / "corpus").exists():
        sys.exit(f"error: {args.shared}/corpus not found; pass --shared PATH to the shared material")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        corpus, ingest_rows = measure_ingest(args.shared, work)
        latency = [measure_queries(build_store(corpus, work / f"store{n}", n)) for n in (1000, 20000)]
        cli_wall = measure_cli(work / "store20000")
    lines = [
        "## Knowledge base (issue 2)", "",
        f"Command: `.venv/bin/python bench/ingest_bench.py` on {os.cpu_count()} cores, CPU only, "
        "empty embedding cache, model load excluded (it is paid once per process, about 6 s).", "",
        "| ingest set | files | documents | tricks | seconds | documents/s | tricks/s |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for row in ingest_rows:
        lines.append(f"| {row['set']} | {row['files']} | {row['documents']} | {row['tricks']} | {row['seconds']:.1f} "
                     f"| {row['documents'] / row['seconds']:.1f} | {row['tricks'] / row['seconds']:.1f} |")
    lines += ["", "| store size | `kb query` p50 ms | p95 ms | `kb tricks --task-type` p50 ms | p95 ms |",
              "|---:|---:|---:|---:|---:|"]
    for row in latency:
        lines.append(f"| {row['tricks']} | {row['query_p50']:.1f} | {row['query_p95']:.1f} | "
                     f"{row['tricks_p50']:.1f} | {row['tricks_p95']:.1f} |")
    lines += ["", f"Whole `kb tricks --task-type \"tabular classification\" --json` command at 20k tricks "
              f"(new process, median of 5): {cli_wall:.2f} s wall.", "",
              "In-process `kb query` latencies include embedding a query text that is not in the cache; "
              "`kb tricks --task-type` reads the sqlite catalog only. The 20k store repeats the corpus's real "
              "tricks with perturbed vectors (see the script's docstring).", ""]
    section = "\n".join(lines)
    write_section(args.out, section)
    print(section)


if __name__ == "__main__":
    main()
