"""Experience packs in `agent solve`: a pack built from two real solves, added to a home, gives a third related task
its drafts after the reference draft (the portfolio's configurations, in the pack's order for it) and orders its
retrieved tricks; run.json says which pack and what came from it. Off (or with no pack), the drafts are today's and
run.json says null; a file in the home that is not a pack stops the solve with one line before the search.

These tests measure the home's pack alone, so the pack bundled with casebook is set aside here; test_bundled_pack.py
covers that one."""

from __future__ import annotations

import json
import math
import random
import re
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from agent.memory.experience import PackHeader, add_pack, build_pack, packs_in_use, portfolio_drafts, write_pack
from agent.memory.portfolio_proposer import PortfolioProposer
from agent.memory.records import TaskSignature
from agent.memory.store import MemoryStore
from agent.search.builtin import DRAFT_FAMILIES, BuiltinTreeProposer
from agent.search.journal import DRAFT, OVER_TIME, VALID, Journal, Node, candidate_key
from agent.solve import solve_task
from cli.agent import main as agent
from retrieval.profile import profile_task
from tests.agent.memory.conftest import SHORT
from tests.conftest import KNOWLEDGE

HEADER = PackHeader("agent experience build (test)", "test", "2026-11-25T00:00:00Z", "tests", 0.0)
# The pool's solves and the new task's: with the bundled cards, every improvement a trick (so the pool measures
# tricks), three drafts.
WITH_KB = replace(SHORT, search=replace(SHORT.search, num_drafts=3, trick_prob=1.0), use_kb=True)


@pytest.fixture(scope="module", autouse=True)
def without_the_bundled_pack():
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("agent.memory.experience.bundled_pack_path", lambda: None)
        yield


@pytest.fixture(scope="module")
def home(tasks, tmp_path_factory, embedder):
    """A home with a knowledge base of the bundled tabular cards and a pack built from real solves of attrition and
    churn (the pool's own case library apart)."""
    from ingest import ingest
    from kb.store import KnowledgeBase

    root = tmp_path_factory.mktemp("experience_home")
    base = KnowledgeBase(root / "home", embedder=embedder)
    assert ingest([str(path) for path in sorted(KNOWLEDGE.glob("tabular_*.jsonl"))], base).ok
    store = MemoryStore(root / "pool-memory", embedder=embedder)
    runs = []
    # Churn solved with tree models only, so that the pool's best configurations differ (at 500 rows a linear model
    # wins both) and the portfolio holds more than one.
    for name, models in (("attrition", None), ("churn", ("lightgbm", "random_forest"))):
        profile = profile_task(tasks[name].task_dir)
        result = solve_task(profile, replace(WITH_KB, models=models), root / "pool" / name, kb=base, memory=store)
        runs.append((json.loads((result.out_dir / "run.json").read_text()), TaskSignature.of(profile)))
    pack = build_pack(runs, store.tasks(), store.list(), HEADER)
    assert len(pack.portfolios["classification"]) >= 2
    add_pack(root / "home", write_pack(pack, root / "pool.json"))
    return root / "home", base


def drafts_of(run: dict) -> list[dict]:
    return sorted((node for node in run["journal"]["nodes"] if node["action"] == "draft"), key=lambda n: n["id"])


def in_portfolio_order_by_family(drafts, positions, trainer=lambda proposal: proposal.candidate.trainer) -> bool:
    """Whether portfolio drafts (after the reference draft, drafts[0]; `positions` in the portfolio) repeat no model
    family while one not yet drafted was still waiting, and keep the portfolio's order within each family."""
    families = [trainer(draft) for draft in drafts]
    for index in range(1, len(drafts)):
        new_families_left = set(families[index:]) - set(families[:index])
        if new_families_left and families[index] in families[:index]:
            return False
    by_family = {}
    for family, position in zip(families[1:], positions, strict=True):
        by_family.setdefault(family, []).append(position)
    return all(found == sorted(found) for found in by_family.values())


def test_a_new_task_drafts_the_portfolio_after_the_reference_and_run_json_names_the_pack(home, tasks, tmp_path):
    home_dir, base = home
    credit = profile_task(tasks["credit"].task_dir)
    [(path, pack)] = packs_in_use(home_dir)
    text = path.read_text(encoding="utf-8")  # the cards by file name, never the building machine's path
    assert str(KNOWLEDGE) not in text and "tabular_" in text
    portfolio = portfolio_drafts([(path, pack)], TaskSignature.of(credit))
    assert len(portfolio) >= 2 and [draft.config for draft in portfolio] == \
        [draft.config for draft in pack.portfolio_for(TaskSignature.of(credit), path.name)]

    # In order, the journal holds the drafts as proposed (with two workers a slow draft comes back after the next).
    in_order = replace(WITH_KB, search=replace(WITH_KB.search, in_order=True))
    result = solve_task(credit, in_order, tmp_path / "credit", kb=base, kb_home=home_dir)
    run = json.loads((result.out_dir / "run.json").read_text())
    drafts = drafts_of(run)
    assert drafts[0]["plan"].endswith("(the reference draft, evaluated while the knowledge base is read)")
    from_portfolio = [node for node in run["journal"]["nodes"] if "portfolio draft" in node["plan"]]
    assert from_portfolio and from_portfolio == drafts[1:len(from_portfolio) + 1]  # after the reference, only drafts
    positions = []
    for node in from_portfolio:  # the configurations' models and parameters, in the portfolio's order
        positions.append(int(re.search(r"portfolio draft (\d+) of", node["plan"])[1]))
        draft = portfolio[positions[-1] - 1]
        assert node["spec"]["model"] == draft.spec["model"]
        assert node["plan"].startswith(f"draft: portfolio draft {positions[-1]} of {len(portfolio)} from experience "
                                       f"pack pool.json (configuration {draft.config}), measured on pool tasks ")
        assert draft.measured[0][0] in node["plan"]  # the nearest pool task that measured it
    assert in_portfolio_order_by_family([drafts[0], *from_portfolio], positions, trainer=lambda n: n["spec"]["model"]["name"])

    record = run["experience"]
    assert [entry["file"] for entry in record["packs"]] == [str(path)]
    assert record["packs"][0]["version"] == 1 and record["packs"][0]["tasks"] == 2
    assert record["portfolio_drafts"] == len(from_portfolio)
    assert record["measured_tricks"] > 0  # the pool measured tricks that credit's retrieval returns too
    assert run["settings"]["experience"] is True


def test_without_experience_the_drafts_are_todays_and_run_json_says_null(home, tasks, tmp_path):
    home_dir, _ = home
    out = tmp_path / "credit"
    result = CliRunner().invoke(agent, [
        "--home", str(home_dir), "solve", str(tasks["credit"].task_dir), "--use-kb", "--no-experience", "--cv", "3",
        "--num-drafts", "3", "--steps", "2", "--time-budget", "180", "--in-order", "--out", str(out), "--json",
        "--quiet"])  # in order: the drafts as proposed
    assert result.exit_code == 0, result.output
    run = json.loads((out / "run.json").read_text())
    assert run["experience"] is None and run["settings"]["experience"] is False
    drafts = drafts_of(run)
    assert drafts[0]["plan"].endswith("(the reference draft, evaluated while the knowledge base is read)")
    assert all("portfolio" not in node["plan"] for node in run["journal"]["nodes"])


def test_a_file_that_is_not_a_pack_stops_the_solve_with_one_line_before_the_search(tasks, tmp_path):
    home_dir = tmp_path / "home"
    (home_dir / "experience").mkdir(parents=True)
    (home_dir / "experience" / "notes.json").write_text('{"tasks": []}')
    out = tmp_path / "run"
    result = CliRunner().invoke(agent, ["--home", str(home_dir), "solve", str(tasks["churn"].task_dir),
                                        "--out", str(out), "--quiet"])
    assert result.exit_code == 2
    [line] = result.stderr.splitlines()
    assert line.startswith("error: ") and "notes.json" in line and "agent experience build" in line
    assert not out.exists()  # nothing searched, nothing written

    pool = CliRunner().invoke(agent, ["--home", str(home_dir), "solve-all", str(Path(tasks["churn"].task_dir).parent),
                                      "--out", str(tmp_path / "pool"), "--no-memory", "--quiet"])
    assert pool.exit_code != 0 and "notes.json" in pool.stderr and not (tmp_path / "pool").exists()


def test_the_portfolio_leaves_out_what_this_search_cannot_use_and_says_so(home, tasks):
    [(path, pack)] = packs_in_use(home[0])
    credit = profile_task(tasks["credit"].task_dir)
    portfolio = portfolio_drafts([(path, pack)], TaskSignature.of(credit))
    rng = random.Random(0)

    def drafted(*proposals):
        return Journal([Node(i, None, DRAFT, p.plan, p.candidate, None, "", VALID, 0.8, 0.8)
                        for i, p in enumerate(proposals)])

    proposer = PortfolioProposer(BuiltinTreeProposer(), portfolio)
    drafts = [proposer.draft(credit, Journal(), rng)]
    assert drafts[0].plan.startswith("draft: linear") and "portfolio" not in drafts[0].plan  # the inner's, first
    while "portfolio draft" in (proposal := proposer.draft(credit, drafted(*drafts), rng)).plan:
        drafts.append(proposal)
    assert "portfolio" not in proposal.plan  # then the built-in drafts again
    positions = [int(re.search(r"portfolio draft (\d+) of", draft.plan)[1]) for draft in drafts[1:]]
    assert positions and in_portfolio_order_by_family(drafts, positions)
    # A configuration in the journal (the reference draft's own, say) is not drafted again.
    keys = [candidate_key(draft.candidate, proposer.trainers) for draft in drafts]
    assert len(set(keys)) == len(keys)

    # --models without the first configuration's model: left out, and the next draft's plan says so.
    first = portfolio[0]
    model = first.spec["model"]["name"]
    others = tuple(family for family in DRAFT_FAMILIES if family != model)
    proposer = PortfolioProposer(BuiltinTreeProposer(families=others), portfolio, families=others)
    reference = proposer.draft(credit, Journal(), rng)
    proposal = proposer.draft(credit, drafted(reference), rng)
    assert proposal.candidate.trainer != model
    assert f"; the portfolio left out {model} configuration {first.config} (not among --models)" in proposal.plan

    # A node cap shorter than any configuration's CV time scaled to this table: the built-in drafts, saying why.
    proposer = PortfolioProposer(BuiltinTreeProposer(), portfolio, node_seconds=0.001)
    reference = proposer.draft(credit, Journal(), rng)
    proposal = proposer.draft(credit, drafted(reference), rng)
    assert proposal.plan.startswith("draft: lightgbm") and proposer.proposed == 0  # the built-in's next family
    named = re.search(r"the portfolio left out \w+ configuration (\w+) \(its CV took", proposal.plan)
    [draft] = [draft for draft in portfolio if draft.config == named[1]]
    nearest, result = draft.measured[0]
    assert f"(its CV took {result.seconds:.1f} s on {result.rows:,} rows of {nearest}, about " in proposal.plan
    assert "over the 0.0 s a node may take" in proposal.plan


def test_several_packs_take_turns_and_each_configuration_drafts_once(home, tasks, tmp_path):
    [(path, pack)] = packs_in_use(home[0])
    credit = TaskSignature.of(profile_task(tasks["credit"].task_dir))
    # A second pack, of one pool task whose only configuration is extra trees; and the first pack again, renamed.
    run = {"task": {"name": "trees"}, "metric": "roc_auc", "baseline": 0.5, "journal": {"nodes": [
        {"status": "valid", "members": [], "score": 0.75, "elapsed": 1.0, "scored_rows": 300,
         "spec": {"steps": [], "model": {"name": "extra_trees", "params": {}}, "target_transform": None}}]}}
    trees = build_pack([(run, credit)], [], [], HEADER)
    [trees_config] = trees.portfolios["classification"]
    in_use = [(path, pack), (write_pack(trees, tmp_path / "trees.json"), trees),
              (write_pack(pack, tmp_path / "again.json"), pack)]
    own = pack.portfolio_for(credit, path.name)
    drafts = portfolio_drafts(in_use, credit)
    assert [(draft.pack, draft.config) for draft in drafts] == \
        [(path.name, own[0].config), ("trees.json", trees_config), *((path.name, d.config) for d in own[1:])]
    assert portfolio_drafts([], credit) == []


def test_the_first_portfolio_drafts_are_of_model_families_not_drafted_yet(home, tasks):
    """The search improves its best draft once its drafts are made, so a portfolio whose best configurations for a
    task share a model family drafts one of another family first; the families the portfolio lacks come next, from
    the inner proposer, then the rest in the portfolio's order."""
    [(path, pack)] = packs_in_use(home[0])
    credit = profile_task(tasks["credit"].task_dir)
    portfolio = portfolio_drafts([(path, pack)], TaskSignature.of(credit))
    first = portfolio[0]  # LightGBM: churn's best, solved with trees only
    model = first.spec["model"]
    assert model["name"] not in ("linear", "random_forest")
    twin = replace(first, config=f"{first.config}-twin",
                   spec={**first.spec, "model": {**model, "params": {**model["params"], "random_state": 7}}})
    forest = replace(first, config="forest", spec={**first.spec, "model": {"name": "random_forest", "params": {}}})
    inner = BuiltinTreeProposer()
    rng, made = random.Random(0), []
    proposer = PortfolioProposer(inner, [first, twin, forest])  # two families
    while not made or made[-1].candidate.params.get("random_state") != 7:
        journal = Journal([Node(i, None, DRAFT, p.plan, p.candidate, None, "", VALID, 0.8, 0.8)
                           for i, p in enumerate(made)])
        made.append(proposer.draft(credit, journal, rng))
    trainers = [proposal.candidate.trainer for proposal in made]
    # The reference draft, the portfolio's first, the forest before the first's twin, then every family the
    # portfolio lacks (the inner's drafts), and only then the twin.
    assert trainers[:3] == ["linear", model["name"], "random_forest"]
    assert [re.search(r"portfolio draft (\d+) of", p.plan)[1] for p in made[1:3]] == ["1", "3"]
    lacking = [family for family in inner.families if family not in ("linear", model["name"], "random_forest")]
    assert lacking and trainers[3:-1] == lacking and all("no other draft uses" in p.plan for p in made[3:-1])
    assert trainers[-1] == model["name"] and "portfolio draft 2 of" in made[-1].plan
    # Had the first run over its time cap, its family would have drafted nothing: the twin comes before the forest.
    ran_over = Journal([Node(0, None, DRAFT, made[0].plan, made[0].candidate, None, "", VALID, 0.8, 0.8),
                        Node(1, None, DRAFT, made[1].plan, made[1].candidate, None, "", OVER_TIME, None, -math.inf,
                             elapsed=15.0)])
    proposer = PortfolioProposer(BuiltinTreeProposer(), [twin, *portfolio[1:], forest])
    assert proposer.draft(credit, Journal(), rng).candidate.trainer == "linear"  # the reference draft
    assert proposer.draft(credit, ran_over, rng).candidate.params.get("random_state") == 7


def test_a_portfolio_draft_that_ran_over_its_cap_is_drafted_once_more_before_the_next_of_its_family(home, tasks):
    """A configuration the portfolio put first for this task, stopped at its time cap, is proposed again (the search
    sizes it from its overrun) before another configuration of its family, and only once; one skipped before it ran
    is not."""
    [(path, pack)] = packs_in_use(home[0])
    credit = profile_task(tasks["credit"].task_dir)
    portfolio = portfolio_drafts([(path, pack)], TaskSignature.of(credit))
    first = portfolio[0]
    model = first.spec["model"]
    twin = replace(first, config=f"{first.config}-twin",
                   spec={**first.spec, "model": {**model, "params": {**model["params"], "random_state": 7}}})
    rng = random.Random(0)

    def node(i: int, proposal, status: str, **fields) -> Node:
        return Node(i, None, DRAFT, proposal.plan, proposal.candidate, None, "", status,
                    *((0.8, 0.8) if status == VALID else (None, -math.inf)), **fields)

    for skipped in (False, True):
        proposer = PortfolioProposer(BuiltinTreeProposer(), [first, twin, *portfolio[1:]])
        reference = proposer.draft(credit, Journal(), rng)
        proposed = proposer.draft(credit, Journal([node(0, reference, VALID)]), rng)
        assert proposed.plan.startswith("draft: portfolio draft 1 of")
        over = Journal([node(0, reference, VALID), node(1, proposed, OVER_TIME, elapsed=0.0 if skipped else 15.0,
                                                        error="over time before it ran" if skipped else "over time")])
        again = proposer.draft(credit, over, rng)
        if skipped:
            assert again.candidate.params.get("random_state") == 7  # nothing it could be sized from: the twin
            continue
        assert again.candidate == proposed.candidate and again.plan.endswith("again after it ran over its cap")
        assert proposer.draft(credit, over, rng).candidate.params.get("random_state") == 7  # once, even in flight


def test_a_portfolio_draft_takes_this_tasks_target_transform_not_the_pool_tasks(home, tasks):
    """A log target measured on a pool task's target is not carried to a task whose metric is not on a log scale (on
    a target with negative values log(1 + y) is NaN): wages scored by mean absolute error are modelled raw."""
    [(path, pack)] = packs_in_use(home[0])
    wage = profile_task(tasks["wage"].task_dir)
    assert wage.task_type == "regression" and not wage.metric_info.log_scale
    credit = profile_task(tasks["credit"].task_dir)  # the pack's pool is of binary tables: a configuration of theirs
    [first, *_] = portfolio_drafts([(path, pack)], TaskSignature.of(credit))
    logged = replace(first, spec={**first.spec, "model": {"name": "lightgbm", "params": {}},
                                  "target_transform": {"op": "log_target", "params": {}}})
    proposer = PortfolioProposer(BuiltinTreeProposer(), [logged])
    reference = proposer.draft(wage, Journal(), random.Random(0))
    drafted = Journal([Node(0, None, DRAFT, reference.plan, reference.candidate, None, "", VALID, 0.8, 0.8)])
    proposal = proposer.draft(wage, drafted, random.Random(0))
    assert "portfolio draft 1 of 1" in proposal.plan and proposal.candidate.target_transform is None
    assert "; target transform none as this task's metric asks, not the pool task's log_target" in proposal.plan
