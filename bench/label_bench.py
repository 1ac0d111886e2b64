"""Label benchmark (issue 11): are whole documents labelled with the right top-level category?

    HF_HUB_OFFLINE=1 .venv/bin/python bench/label_bench.py [--shared ../shared] [--json out.json]
        [--tune-only] [--cache /tmp/emb.db] [--write bench/RESULTS.md --before before.json]

The 186 shared Kaggle write-ups are copied under neutral names (doc_001.case ...) and the paper
summaries into one JSON file with neutral keys (paper_001 ...; ingest recognises the file by its
shape, a dict of {title, abs, ...}), then ingested into a fresh temporary knowledge base. A
document's top-level label is the majority over its tricks' first labels (ties: the label of the
trick seen first), as in issue 11.

Truth:
- write-ups: the corpus folder (tabular_cases -> General Machine Learning, nlp_cases -> Natural
  Language Processing, tsa_cases -> Sequential Modeling, the taxonomy's time-series top-level);
  subcategories from the competition (SUB_TRUTH), where one clearly applies.
- papers: the summary's own `Task` text mapped to a top-level by the first rule of PAPER_RULES that
  matches (ordered, most specific first); "any" also accepts a top-level of a later matching rule.
  Papers whose Task says no ML task is described have no truth and are left out.

Held out: write-ups of HELD_OUT competitions and every fourth paper (by sorted key) were not looked
at while cues and thresholds were tuned; `--tune-only` hides them.

The script runs on whatever code is importable, so the "before" numbers come from an export of HEAD with
this script copied in (so both runs use the same truth), and HEAD's data/ seen as the `casebook_data` package
(the editable install would otherwise serve the working tree's taxonomy):

    git archive HEAD | tar -x -C /tmp/label-before && cp bench/label_bench.py /tmp/label-before/bench/
    mkdir -p /tmp/label-before-pkg && ln -sfn /tmp/label-before/data /tmp/label-before-pkg/casebook_data
    PYTHONPATH=/tmp/label-before:/tmp/label-before-pkg .venv/bin/python /tmp/label-before/bench/label_bench.py \
        --shared ../shared --json before.json
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
from collections import Counter, defaultdict
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from ingest import ingest  # noqa: E402
from kb.competitions import from_name  # noqa: E402
from kb.store import KnowledgeBase  # noqa: E402

FOLDER_TRUTH = {
    "tabular_cases": "General Machine Learning",
    "nlp_cases": "Natural Language Processing",
    "tsa_cases": "Sequential Modeling",
}
# Subcategory truth by competition, only where one subcategory clearly describes the task.
SUB_TRUTH = {
    "playground-series-s3e1": {"General Machine Learning / Regression"},  # California housing prices
    "playground-series-s3e6": {"General Machine Learning / Regression"},  # Paris housing prices
    "playground-series-s3e2": {"General Machine Learning / Classification",  # stroke, binary, imbalanced
                               "General Machine Learning / Imbalanced Classification"},
    "playground-series-s3e3": {"General Machine Learning / Classification",  # employee attrition, binary
                               "General Machine Learning / Imbalanced Classification"},
    "feedback-prize-2021": {"Natural Language Processing / Named Entity Recognition"},  # span tagging
    "feedback-prize-effectiveness": {"Natural Language Processing / Text Classification"},
    "us-patent-phrase-to-phrase-matching": {"Natural Language Processing / Semantic Similarity"},
    "m5-forecasting-accuracy": {"Sequential Modeling / Time Series Forecasting"},
    "m5-forecasting-uncertainty": {"Sequential Modeling / Probabilistic Forecasting"},
    "tlvmc-parkinsons-freezing-gait-prediction": {"Sequential Modeling / Event Detection in Sequences",
                                                  "Sequential Modeling / Time Series Classification"},
    "amp-parkinsons-disease-progression-prediction": {"Sequential Modeling / Time Series Forecasting"},
    # commonlit-evaluate-student-summaries (scoring summaries) has no matching NLP subcategory.
}
HELD_OUT = ("playground-series-s3e6", "us-patent-phrase-to-phrase-matching",
            "tlvmc-parkinsons-freezing-gait-prediction", "feedback-prize-effectiveness")

# Paper Task text -> top-level; ordered, first match is the truth.
PAPER_RULES: list[tuple[str, str]] = [
    # A Task that calls its several tasks time-series tasks is about time series, whichever tasks (one may be
    # anomaly detection) it lists.
    ("Sequential Modeling", r"time[- ]series tasks"),
    ("Anomaly Detection", r"anomal|outlier detection|fraud detection"),
    ("Recommender Systems", r"recommend|user[- ]item|click-through|\bctr\b|collaborative filtering"),
    ("Reinforcement Learning", r"reinforcement|\bbandit|policy learning|policies|markov decision|off-policy|"
                               r"imitation learning"),
    ("Sequential Modeling", r"time[- ]series|forecast|trajector|temporal point process|sequential|spatio-?temporal"),
    ("Graph Learning", r"graph|node[- ]level|node classification|link prediction|\bnodes?\b|\bedges?\b|network embedding|"
                       r"molecul|link[- ]level|edge[- ]level|\bkg\b"),
    ("Computer Vision", r"image|vision|visual|video|object detection|point cloud|lidar|\b3d\b|segmentation|pixel"),
    ("Signal Processing", r"audio|speech|signal|\beeg\b|\becg\b|sensor"),
    ("Natural Language Processing", r"\btext|language|\bnlp\b|question answering|sentiment|document|sql|translation|entity|word"),
    # The taxonomy files intrusion detection under Security and Privacy / Cybersecurity, and attacks on models
    # (model inversion, membership inference, poisoning) under AI Security.
    ("Security and Privacy", r"privacy|security|\battacks?\b|cryptograph|intrusion|malware"),
    ("General Machine Learning", r"classif|regression|predict|estimat|cluster|tabular|supervised"),
]
PAPER_SUB_RULES: list[tuple[str, str]] = [
    ("Graph Learning / Link Prediction", r"^(?:(?!node).)*link prediction"),
    ("Graph Learning / Node Classification", r"node[- ]level classification|node classification"),
    ("Sequential Modeling / Time Series Forecasting", r"time[- ]series forecasting"),
    ("Computer Vision / 3D Object Detection", r"3d object detection"),
    ("Sequential Modeling / Time Series Classification", r"time[- ]series classification"),
]
NO_TASK = re.compile(r"^no (specific )?(machine learning|ml)? ?task|no specific machine learning task|"
                     r"^no information is provided to identify any (machine learning |ml )?task", re.I)


def paper_truth(task: str) -> tuple[str | None, set[str], str | None]:
    if NO_TASK.search(task.strip()):
        return None, set(), None
    lowered = task.lower()
    matched = [top for top, pattern in PAPER_RULES if re.search(pattern, lowered)]
    sub = next((label for label, pattern in PAPER_SUB_RULES if re.search(pattern, lowered)), None)
    if sub and matched and not sub.startswith(matched[0]):
        sub = None  # only a subcategory of the primary top-level counts
    truth = matched[0] if matched else "General Machine Learning"
    return truth, set(matched) | {truth}, sub


def majority(labels_per_trick: list[list[str]]) -> tuple[str | None, str | None]:
    """(top-level, full label) most often first among a document's tricks."""
    firsts = [labels[0] for labels in labels_per_trick if labels]
    if not firsts:
        return None, None
    tops = Counter(label.split(" / ", 1)[0] for label in firsts)
    top = max(tops, key=lambda t: (tops[t], -next(i for i, lab in enumerate(firsts) if lab.startswith(t))))
    subs = Counter(label for label in firsts if label.startswith(top + " / ") or label == top)
    return top, subs.most_common(1)[0][0]


def prepare(shared: Path, work: Path) -> tuple[list[dict], list[dict]]:
    writeups, papers = [], []
    folder = work / "corpus"
    folder.mkdir()
    cases = sorted((shared / "corpus/kaggle_writeups").glob("*_cases/*.case"))
    for number, path in enumerate(cases, start=1):
        neutral = folder / f"doc_{number:03d}.case"
        neutral.write_bytes(path.read_bytes())
        competition = from_name(path.name)
        writeups.append({"source": str(neutral.resolve()), "file": path.name, "competition": competition,
                         "truth": FOLDER_TRUTH[path.parent.name], "sub_truth": SUB_TRUTH.get(competition, set()),
                         "held_out": competition in HELD_OUT})
    summaries = json.loads((shared / "corpus/papers/paper_summaries.json").read_text(encoding="utf-8"))
    neutral_summaries = {}
    for number, key in enumerate(sorted(summaries), start=1):
        value = summaries[key]
        neutral_key = f"paper_{number:03d}"
        neutral_summaries[neutral_key] = value
        truth, any_truth, sub = paper_truth(str(value.get("Task") or ""))
        papers.append({"key": key, "neutral": neutral_key, "truth": truth, "any_truth": any_truth,
                       "sub_truth": {sub} if sub else set(), "held_out": number % 4 == 0})
    target = folder / "summaries.json"
    target.write_text(json.dumps(neutral_summaries), encoding="utf-8")
    for paper in papers:
        paper["source"] = f"{target.resolve()}#{paper['neutral']}"
    return writeups, papers


def score(rows: list[dict]) -> dict:
    with_truth = [r for r in rows if r["truth"]]
    subs = [r for r in with_truth if r["sub_truth"]]
    out = {"n": len(with_truth),
           "top_correct": sum(r["predicted"] == r["truth"] for r in with_truth),
           "sub_n": len(subs),
           "sub_correct": sum(r["predicted_label"] in r["sub_truth"] for r in subs)}
    if any("any_truth" in r for r in with_truth):
        out["top_any_correct"] = sum(r["predicted"] in r.get("any_truth", {r["truth"]}) for r in with_truth)
    return out


def run(shared: Path, cache: Path | None) -> dict:
    with tempfile.TemporaryDirectory(prefix="label-bench-") as tmp:
        work = Path(tmp)
        writeups, papers = prepare(shared, work)
        embedder = None
        if cache is not None:
            from kb.embedding import CachedEmbedder, MiniLMEmbedder
            embedder = CachedEmbedder(MiniLMEmbedder(), cache)
        base = KnowledgeBase(work / "home", embedder=embedder)
        summary = ingest([str(work / "corpus")], base)
        by_source: dict[str, list[list[str]]] = defaultdict(list)
        for trick in base.export():
            by_source[trick.source].append(list(trick.labels))
        for row in writeups + papers:
            row["predicted"], row["predicted_label"] = majority(by_source.get(row["source"], []))
        failed = [o.source for o in summary.outcomes if o.status == "failed"]
    result = {"failed": failed, "groups": {}}
    for kind, rows in (("write-ups", writeups), ("papers", papers)):
        for part, chosen in (("tuned", [r for r in rows if not r["held_out"]]),
                             ("held out", [r for r in rows if r["held_out"]]),
                             ("all", rows)):
            result["groups"][f"{kind} / {part}"] = score(chosen)
    per_folder = defaultdict(list)
    for row in writeups:
        per_folder[(row["truth"], row["held_out"])].append(row)
    result["per_truth"] = {f"{t} ({'held out' if h else 'tuned'})": score(rs) for (t, h), rs in sorted(per_folder.items())}
    per_comp = defaultdict(list)
    for row in writeups:
        per_comp[row["competition"]].append(row)
    result["per_competition"] = {c: {**score(rs), "held_out": c in HELD_OUT,
                                     "predicted": dict(Counter(r["predicted"] for r in rs))}
                                 for c, rs in sorted(per_comp.items())}
    paper_truths = defaultdict(list)
    for row in papers:
        paper_truths[row["truth"] or "(no task)"].append(row)
    result["papers_by_truth"] = {t: {**score(rs), "n_all": len(rs),
                                     "predicted": dict(Counter(r["predicted"] for r in rs))}
                                 for t, rs in sorted(paper_truths.items())}
    result["errors"] = [
        {"doc": r.get("file") or r.get("key"), "truth": r["truth"], "predicted": r["predicted_label"],
         "held_out": r["held_out"]}
        for r in writeups + papers if r["truth"] and r["predicted"] != r["truth"]
    ]
    return result


def hide_held_out(result: dict) -> dict:
    return {
        "groups": {k: v for k, v in result["groups"].items() if "tuned" in k},
        "per_truth": {k: v for k, v in result["per_truth"].items() if "tuned" in k},
        "per_competition": {k: v for k, v in result["per_competition"].items() if not v["held_out"]},
        "errors": [e for e in result["errors"] if not e["held_out"]],
    }


def pct(correct: int, n: int) -> str:
    return f"{correct}/{n} ({100 * correct / n:.0f}%)" if n else "n/a"


def section(before: dict | None, after: dict, before_name: str) -> str:
    lines = ["## Labels (issue 11)", "",
             "Command: `HF_HUB_OFFLINE=1 .venv/bin/python bench/label_bench.py --write bench/RESULTS.md --before "
             f"before.json`; \"before\" is {before_name}. The 186 shared "
             "write-ups are ingested as doc_001.case ... and the 338 paper summaries as one JSON file with keys "
             "paper_001 ..., into a fresh KB. A document's top-level is the majority of its tricks' first labels.", "",
             "| documents | n | top-level before | top-level after | subcategory before | subcategory after |",
             "|---|---:|---:|---:|---:|---:|"]
    for group, now in after["groups"].items():
        old = (before or {}).get("groups", {}).get(group)
        lines.append(
            f"| {group} | {now['n']} | {pct(old['top_correct'], old['n']) if old else 'n/a'} | "
            f"{pct(now['top_correct'], now['n'])} | {pct(old['sub_correct'], old['sub_n']) if old else 'n/a'} | "
            f"{pct(now['sub_correct'], now['sub_n'])} |")
    lines += ["", "Write-ups by truth (after): " + "; ".join(
        f"{k}: {pct(v['top_correct'], v['n'])}" for k, v in after["per_truth"].items()) + "."]
    anyp = after["groups"]["papers / all"].get("top_any_correct")
    if anyp is not None:
        old_any = (before or {}).get("groups", {}).get("papers / all", {}).get("top_any_correct")
        lines.append(f"Papers, counting any top-level the Task text names as right: before "
                     f"{pct(old_any, after['groups']['papers / all']['n']) if old_any is not None else 'n/a'}, "
                     f"after {pct(anyp, after['groups']['papers / all']['n'])}.")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--shared", type=Path, default=REPO.parent / "shared")
    parser.add_argument("--cache", type=Path, default=None, help="a persistent embedding cache (speeds re-runs)")
    parser.add_argument("--json", type=Path, default=None, help="write the full result here")
    parser.add_argument("--tune-only", action="store_true", help="print only the documents used for tuning")
    parser.add_argument("--write", type=Path, default=None, help="RESULTS.md to update")
    parser.add_argument("--before", type=Path, default=None, help="a --json result of the HEAD code")
    parser.add_argument("--before-name", default="the same script run on the HEAD code",
                        help="what the --before result is, for the RESULTS text")
    parser.add_argument("--notes", type=Path, default=None, help="a text appended to the RESULTS section")
    args = parser.parse_args()
    if not (args.shared / "corpus/kaggle_writeups").is_dir():
        sys.exit(f"no corpus under {args.shared}")
    result = run(args.shared, args.cache)
    if args.json:
        args.json.write_text(json.dumps(result, indent=1, default=sorted), encoding="utf-8")
    shown = hide_held_out(result) if args.tune_only else result
    print(json.dumps({k: shown[k] for k in ("groups", "per_truth", "per_competition") if k in shown},
                     indent=1, default=sorted))
    if args.write:
        from bench.results import write_section
        before = json.loads(args.before.read_text(encoding="utf-8")) if args.before else None
        text = section(before, result, args.before_name)
        if args.notes:
            text += "\n" + args.notes.read_text(encoding="utf-8").strip() + "\n"
        write_section(args.write, text)


if __name__ == "__main__":
    main()
