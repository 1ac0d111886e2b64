"""The fresh retrieval queries: real competitions of the shared corpus, graded with write-up and paper tricks of other
competitions, by ids that ingest gives wherever the corpus lies; and nDCG@10 by source."""

from __future__ import annotations

import re
import shutil
from collections import Counter

from ingest import ingest
from kb.competitions import from_name, known_competitions
from retrieval.evaluation import EvalQuery, score_results
from retrieval.retriever import RetrievedTrick
from tests.conftest import WRITEUPS, need


def _stem(path) -> str:
    return re.sub(r"[^a-z0-9]+", "-", path.stem.lower()).strip("-")[:40]  # as ingest.pipeline names trick ids


def _files_of(trick_id: str) -> list:
    return [path for path in sorted(need(WRITEUPS).rglob("*.case")) if trick_id.startswith(_stem(path) + "-")]


def test_fresh_queries_describe_corpus_competitions_and_grade_other_ones():
    fresh = [query for query in EvalQuery.load_all() if query.set == "fresh"]
    assert len(fresh) >= 20
    slugs = {competition.slug for competition in known_competitions()}
    kinds = Counter()
    for query in fresh:
        assert query.competition in slugs and len(query.relevant) >= 4 and set(query.relevant.values()) <= {1, 2}
        for trick_id in query.relevant:
            if trick_id.startswith("paper-summaries-"):
                kinds["paper"] += 1
                continue
            files = _files_of(trick_id)
            assert files, trick_id  # a write-up of the shared corpus
            assert all(from_name(path.name) != query.competition for path in files), (query.id, trick_id)
            kinds["write-up"] += 1
    assert kinds["write-up"] >= 150 and kinds["paper"] >= 20, kinds
    assert len({query.competition for query in fresh}) >= 10


def test_graded_ids_are_the_ids_ingest_gives(make_kb, tmp_path):
    """The grades name tricks by id: ingesting a graded write-up from another folder gives those very ids."""
    graded = {trick_id for query in EvalQuery.load_all() if query.set == "fresh" for trick_id in query.relevant}
    by_file = Counter(files[0] for trick_id in graded if len(files := _files_of(trick_id)) == 1)
    source, count = by_file.most_common(1)[0]
    assert count >= 3
    copy = tmp_path / "elsewhere" / source.name
    copy.parent.mkdir()
    shutil.copy(source, copy)
    base = make_kb()
    ingest([str(copy)], base)
    ids = {trick.id for trick in base.export()}
    assert {trick_id for trick_id in graded if trick_id.startswith(_stem(source) + "-")} <= ids

    # nDCG@10 by source: only that source's grades count, and a source the query does not grade has none
    tricks = list(base.export())
    query = EvalQuery("q", "", None, ("General Machine Learning / Regression",), {tricks[1].id: 2, tricks[2].id: 1})
    ranked = [RetrievedTrick(trick, 1.0, "", 0, 1.0, 1.0) for trick in tricks[1:3] + tricks[:1]]
    sources = {trick.id: trick.source_kind for trick in tricks}
    scores = score_results(query, ranked, 10, sources)
    assert scores["ndcg@10_by_source"] == {"card": None, "write-up": 1.0, "paper": None}
    reversed_scores = score_results(query, ranked[::-1], 10, sources)
    assert 0 < reversed_scores["ndcg@10_by_source"]["write-up"] < 1.0
