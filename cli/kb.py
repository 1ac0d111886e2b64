"""`kb`: the knowledge-base command line. Each command is a thin layer over a library call."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.tree import Tree

from cli.options import (
    CONTEXT_SETTINGS,
    CasebookError,
    LibraryChoice,
    chroma_url_option,
    count,
    home_option,
    print_table,
    version_option,
)
from cli.progress import Bar, Waiting

if TYPE_CHECKING:
    from agent.memory.experience import TrickEffects
    from kb.records import ScoredTrick, Trick

out = Console(soft_wrap=True)
err = Console(stderr=True)
_TRICK_INDENT = 12  # under the id, past the rank and the score


def _trainer_names() -> tuple[str, ...]:
    from agent.engine.trainers import trainers_of

    return trainers_of("linear", "forest", "gbdt")


def _records():
    from kb import records

    return records


class _Commands(click.Group):
    """`kb`'s commands: a Chroma server that does not answer is one line, whichever command found out."""

    def invoke(self, ctx: click.Context):
        from kb.store import ChromaServerError

        try:
            return super().invoke(ctx)
        except ChromaServerError as error:
            raise CasebookError(str(error)) from None


def _progress_console(quiet: bool) -> Console:
    """Where progress goes: stderr, so that stdout holds only results; nothing with --quiet or --json."""
    return Console(stderr=True, quiet=quiet)


def _open(ctx: click.Context):
    from kb.store import KnowledgeBase

    return KnowledgeBase(ctx.obj["home"], chroma_url=ctx.obj["chroma_url"])


def _print_json(data) -> None:
    click.echo(json.dumps(data, indent=2, ensure_ascii=False))


def _print_tricks(results: list[ScoredTrick], title: str, effects: TrickEffects | None = None) -> None:
    """One block per trick: its id whole on the first line (so it can be given to `kb show`), then its title or
    competition, its stage and labels (and with `effects`, its op's measured gain per model group on similar pool
    tasks), and its text wrapped under them."""
    out.print(title, style="bold", markup=False, highlight=False)
    width = max(_TRICK_INDENT + 40, out.width)  # textwrap counts the indent
    indent = " " * _TRICK_INDENT
    for index, item in enumerate(results, start=1):
        trick = item.trick
        where = trick.competition or trick.title
        if trick.rank:
            where += f" (#{trick.rank})"
        out.print(f"\n{index:>3}  {item.score:.3f}  [bold]{escape(trick.id)}[/]", highlight=False)
        about = f"{trick.stage} · {'; '.join(trick.labels) or 'no label'}"
        if effects is not None:
            about += f" · {_effect_words(trick, effects)}"
        for line in (where, about):
            out.print(indent + line, style="dim", markup=False, highlight=False)
        out.print(textwrap.fill(trick.text, width, initial_indent=indent, subsequent_indent=indent), markup=False,
                  highlight=False)


def _recipe_op(trick: Trick) -> str | None:
    return (trick.recipe or {}).get("op")


def _effect_words(trick: Trick, effects: TrickEffects) -> str:
    op = _recipe_op(trick)
    if op is None:
        return "no recipe, never measured"
    measured = effects.of_op(op)
    if not measured:
        return f"{op}: never tried on similar pool tasks"
    return f"{op} on similar pool tasks: " + ", ".join(
        f"{group} {gain:+.2%} ({count(runs, 'run')})" for group, (gain, runs) in measured.items())


@click.group(cls=_Commands, context_settings=CONTEXT_SETTINGS)
@version_option
@home_option
@chroma_url_option
@click.pass_context
def main(ctx: click.Context, home: Path, chroma_url: str | None) -> None:
    """casebook knowledge base: ingest write-ups and papers, then search their tricks."""
    ctx.obj = {"home": home, "chroma_url": chroma_url}


@main.command()
@click.argument("paths", nargs=-1)
@click.option("--bundled", is_flag=True, help="Also ingest the trick cards shipped with casebook (data/knowledge).")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@click.option("--quiet", "-q", is_flag=True, help="Nothing while it works (by default: a bar in a terminal, else a "
              "line per step).")
@click.option("--max-mb", type=float, default=25.0, show_default=True, help="Skip files larger than this.")
@click.option("--batch-size", type=click.IntRange(1), default=256, show_default=True,
              help="Commit after about this many tricks (smaller: commits more often; larger: embeds faster).")
@click.option("--llm", "llm", default=None, metavar="MODEL",
              help="An Anthropic model id (e.g. claude-haiku-4-5): the LLM extracts each write-up's and paper's tricks "
                   "and chooses its labels from the taxonomy; needs ANTHROPIC_API_KEY. A document it cannot answer "
                   "for goes through the offline pipeline. Unchanged files are skipped as usual.")
@click.option("--llm-budget-usd", type=click.FloatRange(min=0), default=None, metavar="USD",
              help="With --llm: no more LLM calls once this much (estimated) is spent; the rest is offline.")
@click.pass_context
def ingest(ctx: click.Context, paths: tuple[str, ...], bundled: bool, as_json: bool, quiet: bool, max_mb: float,
           batch_size: int, llm: str | None, llm_budget_usd: float | None) -> None:
    """Read files and folders (md, txt, case, html, pdf, json, jsonl) into tricks.

    Unchanged files are skipped; changed files replace their old tricks. Exit status 1 when any
    file failed (each failure is listed with its reason). --bundled adds casebook's own trick cards,
    wherever casebook is installed.
    """
    from ingest import ingest as run_ingest
    from kb.config import bundled_knowledge
    from kb.store import KBLockedError

    if not paths and not bundled:
        raise click.UsageError("give files or folders to ingest, or --bundled for casebook's own trick cards")
    if llm_budget_usd is not None and llm is None:
        raise click.UsageError("--llm-budget-usd needs --llm MODEL")
    sources = [*paths, *([str(bundled_knowledge())] if bundled else [])]
    base = _open(ctx)
    extractor = None
    if llm is not None:
        from ingest.llm_extract import LLMExtractor
        from kb.llm import LLMClient

        extractor = LLMExtractor(LLMClient(llm, budget_usd=llm_budget_usd), base.taxonomy)
    try:
        with Bar(_progress_console(quiet or as_json), "ingest") as bar:
            summary = run_ingest(sources, base, max_bytes=int(max_mb * 2**20), batch_tricks=batch_size,
                                 progress=bar.update, extractor=extractor)
    except KBLockedError as error:
        raise CasebookError(str(error)) from None
    data = summary.to_dict()
    if extractor is not None:
        data["llm"] = extractor.record()
    if as_json:
        data.pop("outcomes")
        _print_json(data)
    else:
        for failure in data["failures"]:
            err.print(f"[red]failed[/] {failure['source']}: {failure['error']}", highlight=False)
        for passed in data["unsupported_files"]:
            err.print(f"[dim]passed over {passed['source']}: {passed['reason']}[/]", highlight=False)
        out.print(
            f"{count(data['files'], 'file')}: {data['added']} added, {data['updated']} updated, "
            f"{data['unchanged']} unchanged, {data['unsupported']} passed over, {data['failed']} failed; "
            f"{count(data['tricks'], 'trick')} "
            f"in {data['seconds']:.1f}s", highlight=False,
        )
        if data["compiled"] or data["unmapped"]:
            out.print(f"recipes compiled from the text: {data['compiled']}; left as readable knowledge (no recipe "
                      f"fits well enough): {data['unmapped']}" + (", e.g." if data["unmapped_examples"] else ""),
                      highlight=False)
            for example in data["unmapped_examples"]:
                out.print(f"  [dim]{example}[/]", highlight=False)
        if extractor is not None:
            record, usage = data["llm"], data["llm"]["usage"]
            cost = f"about ${usage['cost_usd']:.4f}" if usage["cost_usd"] is not None else "cost unknown"
            out.print(f"LLM {record['model']}: {count(record['documents'], 'document')} extracted and labelled, "
                      f"{len(record['fallbacks'])} left to the offline pipeline; {usage['calls']} calls, "
                      f"{usage['input_tokens'] + usage['cache_read_input_tokens'] + usage['cache_creation_input_tokens']}"
                      f" input tokens ({usage['cache_read_input_tokens']} from the prompt cache), "
                      f"{usage['output_tokens']} output tokens, {cost}", highlight=False)
            for fallback in record["fallbacks"][:5]:
                err.print(f"offline {fallback['source']}: {fallback['reason']}", highlight=False)
    if not summary.ok:
        sys.exit(1)


def _stage_option(function):
    return click.option("--stage", type=LibraryChoice(lambda: _records().STAGES),
                        help="Only tricks of this pipeline stage.")(function)


def _resolve_label(base, label: str | None) -> str | None:
    from kb.taxonomy import UnknownLabelError

    if label is None:
        return None
    try:
        return base.taxonomy.resolve(label)
    except UnknownLabelError as error:
        raise CasebookError(str(error)) from None


@main.command()
@click.argument("text")
@click.option("-k", type=int, default=10, show_default=True, help="How many tricks.")
@click.option("--label", help='Only tricks with this label, e.g. "NLP / Text Classification" or "tabular".')
@_stage_option
@click.option("--kind", type=LibraryChoice(lambda: _records().KINDS), help="Only solutions or only papers.")
@click.option("--exclude-competition", multiple=True, help="Drop tricks from this competition slug.")
@click.option("--json", "as_json", is_flag=True)
@click.option("--quiet", "-q", is_flag=True, help="Nothing while it works (say, loading the embedding model).")
@click.pass_context
def query(ctx, text, k, label, stage, kind, exclude_competition, as_json, quiet):
    """Semantic search over tricks."""
    from kb.store import EmptyKnowledgeBaseError

    base = _open(ctx)
    label = _resolve_label(base, label)
    try:
        with Waiting(_progress_console(quiet), "searching…"):
            results = base.search(text, k, label=label, stage=stage, kind=kind,
                                  exclude_competitions=exclude_competition)
    except EmptyKnowledgeBaseError as error:
        raise CasebookError(str(error)) from None
    if as_json:
        _print_json({"query": text, "label": label, "stage": stage, "kind": kind,
                     "tricks": [r.to_dict() for r in results]})
    else:
        _print_tricks(results, f"{count(len(results), 'trick')} for {text!r}")


@main.command()
@click.option("--task-type", help='A label, e.g. "General Machine Learning / Classification", '
              '"tabular classification", "NLP".')
@click.option("--task", "task_dir", type=click.Path(file_okay=False),
              help="A task folder (train.csv, test.csv, description.md): analyse it and retrieve for its labels.")
@click.option("-k", type=int, default=10, show_default=True)
@_stage_option
@click.option("--kind", type=LibraryChoice(lambda: _records().KINDS),
              help="With --task-type: only solutions or only papers.")
@click.option("--papers", type=int, default=3, show_default=True, help="With --task: how many papers to list too.")
@click.option("--exclude-competition", multiple=True, help="Drop tricks from this competition slug.")
@click.option("--executable", is_flag=True,
              help="With --task: only tricks with a recipe, the ones `agent solve --use-kb` can run.")
@click.option("--no-experience", is_flag=True,
              help="With --task: keep the retrieval's order, not the one the experience packs measured.")
@click.option("--model", type=LibraryChoice(_trainer_names),
              help="With --task: order by the effects measured on this model's group (linear models or trees), as "
                   "the search orders a node's tricks; default: over every group.")
@click.option("--json", "as_json", is_flag=True)
@click.option("--quiet", "-q", is_flag=True, help="Nothing while it works (say, loading the embedding model).")
@click.pass_context
def tricks(ctx, task_type, task_dir, k, stage, kind, papers, exclude_competition, executable, no_experience, model,
           as_json, quiet):
    """Tricks for a task type (no model load) or for a task folder (hierarchical retrieval)."""
    if bool(task_type) == bool(task_dir):
        raise CasebookError("give exactly one of --task-type LABEL or --task TASK_DIR")
    base = _open(ctx)
    if task_type:
        label = _resolve_label(base, task_type)
        results = base.tricks_for_label(label, k, stage=stage, kind=kind, exclude_competitions=exclude_competition)
        if as_json:
            _print_json({"label": label, "tricks": [r.to_dict() for r in results]})
        else:
            _print_tricks(results, f"{count(len(results), 'trick')} for {label}")
        return
    from kb.store import EmptyKnowledgeBaseError
    from retrieval.profile import TaskSetupError, profile_task
    from retrieval.retriever import HierarchicalRetriever

    try:
        with Waiting(_progress_console(quiet), "analysing the task…") as waiting:
            profile = profile_task(task_dir)
            retriever = HierarchicalRetriever(base)
            query = retriever.analyse(profile=profile)
            waiting.update("retrieving tricks for its labels…")
            found = retriever.retrieve(query, k=k, stage=stage, exclude_competitions=exclude_competition,
                                       executable=executable)
            found_papers = retriever.retrieve(query, k=papers, kind="paper", executable=executable) if papers else []
    except (TaskSetupError, EmptyKnowledgeBaseError) as error:
        raise CasebookError(str(error)) from None
    measured = None if no_experience else _measured_effects(ctx, profile)
    effects = None if measured is None else measured.for_trainer(model) if model else measured.overall()
    if effects is not None:
        from agent.memory.experience import order_by_effect

        found = order_by_effect(found, lambda r: _recipe_op(r.trick), effects)
    if as_json:
        def with_effect(result) -> dict[str, Any]:
            op = _recipe_op(result.trick)
            by_group = None if measured is None or op is None else {
                group: {"gain": gain, "runs": runs} for group, (gain, runs) in measured.of_op(op).items()}
            return {**result.to_dict(), "measured_effect": None if effects is None or op is None else effects.get(op),
                    "measured_by_group": by_group}

        _print_json({"task": profile.name, "labels": list(query.labels), "competition": query.competition,
                     "experience": effects is not None, "model": model,
                     "tricks": [with_effect(r) for r in found], "papers": [r.to_dict() for r in found_papers]})
        return
    out.print(f"[bold]{profile.name}[/]: {profile.modality}, {profile.task_type} of {profile.target!r} "
              f"by {profile.metric}; labels: " + " > ".join(query.labels)
              + (f"; leaving out {query.competition}" if query.competition else ""), highlight=False)
    from kb.records import ScoredTrick

    on = f"a {model} node's model group" if model else "every model group"
    order = f", ordered by their measured effect on similar pool tasks ({on})"
    _print_tricks([ScoredTrick(r.trick, r.score) for r in found], count(len(found), "trick")
                  + (order if effects is not None else ""), measured)
    if found_papers:
        _print_tricks([ScoredTrick(r.trick, r.score) for r in found_papers], count(len(found_papers), "paper"))


def _measured_effects(ctx: click.Context, profile) -> TrickEffects | None:
    """Each trick op's gain per model group on the pool tasks nearest this task, over the experience packs in use
    (the bundled one and the home's); None when no pack is in use."""
    from agent.memory.experience import PackError, effects_near, packs_in_use
    from agent.memory.records import TaskSignature

    try:
        packs = [pack for _, pack in packs_in_use(ctx.obj["home"])]
    except PackError as error:
        raise CasebookError(str(error)) from None
    return effects_near(packs, TaskSignature.of(profile)) if packs else None


@main.command(name="eval")
@click.option("--queries", type=click.Path(dir_okay=False), default=None,
              help="Labelled query set (default: the one shipped with casebook, data/eval/queries.jsonl).")
@click.option("-k", type=int, default=10, show_default=True)
@click.option("--kind", type=LibraryChoice(lambda: _records().KINDS),
              help="Retrieve one kind only (default: every kind, as the agent does).")
@click.option("--json", "as_json", is_flag=True, help="Print the summary and per-query rows as JSON.")
@click.option("--quiet", "-q", is_flag=True, help="Nothing while it works (say, loading the embedding model).")
@click.pass_context
def evaluate_command(ctx, queries, k, kind, as_json, quiet):
    """Label accuracy, P@5, R@10, nDCG@10 and leak rate: hierarchical retrieval vs plain dense."""
    from kb.store import EmptyKnowledgeBaseError
    from retrieval.evaluation import DEFAULT_QUERIES, EvalQuery, EvalSetError, evaluate
    from retrieval.retriever import HierarchicalRetriever

    try:
        loaded = EvalQuery.load_all(queries or DEFAULT_QUERIES)
        with Bar(_progress_console(quiet), "kb eval") as bar:
            result = evaluate(HierarchicalRetriever(_open(ctx)), loaded, k, kind,
                              progress=lambda done, total: bar.update(done, total, "scoring queries"))
    except (EvalSetError, EmptyKnowledgeBaseError) as error:
        raise CasebookError(str(error)) from None
    if as_json:
        _print_json(result)
        return
    summary = result["summary"]
    table = Table(title=f"retrieval on {summary['queries']} queries (tuning: tuned on, a training set; fresh: never)")
    for column in ("queries", "method", "P@5", "R@10", "nDCG@10", "nDCG@10 card / write-up / paper", "leak rate"):
        table.add_column(column, justify="right")
    for title, part in (("all", summary), *summary["by_set"].items()):
        for name in ("hierarchical", "dense"):
            row = part[name]
            by_source = " / ".join("-" if v is None else f"{v:.3f}" for v in row["ndcg@10_by_source"].values())
            table.add_row(f"{title} ({part['queries']})", name, f"{row['precision@5']:.3f}", f"{row['recall@10']:.3f}",
                          f"{row['ndcg@10']:.3f}", by_source, f"{row['leak_rate']:.2f}")
    print_table(out, table)
    out.print(f"label accuracy: top-level {summary['label_accuracy_top']:.1%}, subcategory "
              f"{summary['label_accuracy_sub']:.1%}; nDCG@10 gain over dense {summary['ndcg_gain']:+.1%}",
              highlight=False)
    if summary["graded_not_in_store"]:
        err.print(f"{summary['graded_not_in_store']} graded tricks are not in this knowledge base (the fresh queries "
                  "grade the shared write-ups and papers: ingest them to score those)", highlight=False)


@main.command()
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def stats(ctx, as_json):
    """Counts by status, kind, stage and top-level label."""
    data = _open(ctx).stats()
    if as_json:
        _print_json(data)
        return
    out.print(f"[bold]{data['home']}[/]: {count(data['documents'], 'document')}, {count(data['tricks'], 'trick')} "
              f"({data['with_recipe']} with a recipe, {data['compiled_from_text']} of them compiled from the text), "
              f"{count(data['competitions'], 'competition')}")
    out.print("  executable tricks by source: " + ", ".join(f"{n} {kind}" for kind, n in
                                                         data["executable_by_source"].items()), highlight=False)
    for key in ("documents_by_status", "tricks_by_kind", "tricks_by_stage", "tricks_by_top_label"):
        out.print(f"  {key.replace('_', ' ')}: " + ", ".join(f"{n} {v}" for n, v in data[key].items()),
                  highlight=False)


@main.command()
@click.option("--json", "as_json", is_flag=True)
def labels(as_json):
    """The hierarchical label set as a tree."""
    from kb.taxonomy import load_taxonomy

    taxonomy = load_taxonomy()
    if as_json:
        _print_json({"labels": taxonomy.tree()})
        return
    tree = Tree("[bold]labels[/]")
    for top in taxonomy.tree():
        branch = tree.add(f"[bold]{top['name']}[/] [dim]{top['description']}[/]")
        for sub in top["subcategories"]:
            branch.add(sub["name"])
    out.print(tree)


def _readable(value) -> str:
    """A trick's field for a reader, not a Python repr: labels joined, a recipe as JSON, none as a dash."""
    if value is None:
        return "–"
    if isinstance(value, list | tuple):
        return "; ".join(map(str, value)) or "–"
    if isinstance(value, dict):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


@main.command()
@click.argument("trick_id")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def show(ctx, trick_id, as_json):
    """One trick with its provenance."""
    trick = _open(ctx).get(trick_id)
    if trick is None:
        raise CasebookError(f"no trick with id {trick_id!r}; find ids with `kb query` or `kb export`")
    if as_json:
        _print_json(trick.to_dict())
        return
    record = trick.to_dict()
    why, confidence = record.pop("recipe_why"), record.pop("recipe_confidence")
    for key, value in {**record, "source_kind": trick.source_kind}.items():
        out.print(f"[bold]{key}[/]: {escape(_readable(value))}", highlight=False)
    if trick.recipe is not None:
        how = "" if confidence is None else f" (compiled from its text, confidence {confidence:.2f})"
        out.print(f"[bold]recipe why[/]{how}: {why or 'not recorded'}", highlight=False)


@main.command()
@click.argument("source")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def remove(ctx, source, as_json):
    """Forget a source file (or every file under a folder) and its tricks."""
    from kb.store import KBLockedError, UnknownSourceError

    try:
        removed = _open(ctx).remove(source)
    except (KBLockedError, UnknownSourceError) as error:
        raise CasebookError(str(error)) from None
    if as_json:
        _print_json({"source": source, "tricks_removed": removed})
    else:
        out.print(f"removed {count(removed, 'trick')} from {source}", highlight=False)


@main.command()
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def rebuild(ctx, as_json):
    """Recreate the vector index from the sqlite catalog (e.g. after deleting or corrupting chroma/, or on a new
    Chroma server)."""
    from kb.store import KBLockedError

    try:
        indexed = _open(ctx).rebuild_index()
    except KBLockedError as error:
        raise CasebookError(str(error)) from None
    if as_json:
        _print_json({"indexed": indexed})
    else:
        out.print(f"indexed {count(indexed, 'trick')} from the catalog", highlight=False)


@main.command()
@click.pass_context
def export(ctx):
    """Every trick as one JSON object per line (id, kind, source, competition, title, text, labels, stage, recipe, ...)."""
    for trick in _open(ctx).export():
        click.echo(json.dumps(trick.to_dict(), ensure_ascii=False))


if __name__ == "__main__":
    main()
