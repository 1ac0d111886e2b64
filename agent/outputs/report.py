"""report.html for a run folder: one self-contained page (inline CSS and SVG plots, nothing fetched) rendered from
templates/report.html.j2 — the headline, the set-up evidence, the score over time, the solution tree, the
leaderboard, the final model, the tricks' measured effect, the settings and the full journal."""

from __future__ import annotations

import io
import json
import re
import shutil
import subprocess
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined
from markupsafe import Markup, escape

from agent.engine.compile import ENSEMBLE
from retrieval.metrics import describe_change, metric_info

if TYPE_CHECKING:
    from matplotlib.figure import Figure

RUN_FILE = "run.json"
TRACE_FILE = "trace.jsonl"
REPORT_FILE = "report.html"
SCREENSHOT_FILE = "report.png"
TEMPLATE = "report.html.j2"
TEMPLATES_DIR = Path(__file__).parent / "templates"

LEADERBOARD_SIZE = 10
SHORT_PLAN_CHARS = 110
ABSOLUTE_PATH = re.compile(r"(?<![\w.])/(?:[^\s/()'\",;]+/)+([^\s/()'\",;]+)")  # group 1: the file's name
PARENTHESES = re.compile(r"\s*\([^()]*\)")
PLAN_REASONS = re.compile(r" — |; ")  # what follows gives reasons or notes: the journal shows it
STATUS_COLOURS = {"valid": "#2e8b57", "explored": "#4f86c6", "over_time": "#8e6bbf", "stopped_early": "#b5a642",
                  "buggy": "#d9822b", "dead": "#9e9e9e"}
BEST_COLOUR = "#1f5fbf"
# The drawn tree, in pixels: a box's (width, height) from the most said to the least (id, trainer and score; id and
# score; the id only), the first whose tree fits the page (TREE_MAX_WIDTH, the width of a section at 1280 px); the
# gaps between sibling boxes and between levels; the margin on the left (room for the depth labels) and above.
TREE_BOXES = ((112.0, 38.0), (56.0, 34.0), (36.0, 24.0))
TREE_GAP = 10.0
TREE_LEVEL_GAP = 34.0
TREE_MARGIN = (60.0, 10.0)
TREE_MAX_WIDTH = 1130.0
BROWSERS = ("chromium", "chromium-browser", "google-chrome")
# Settings whose numbers are bytes or seconds, shown in units a reader takes in at a glance.
BYTE_SETTINGS = ("memory_limit",)
SECOND_SETTINGS = ("time_budget", "candidate_time_limit")


class RunDirError(ValueError):
    """A folder that is not an `agent solve` run folder."""


class ScreenshotError(RuntimeError):
    """No headless browser to render report.html with, or the browser failed."""


def read_run(run_dir: str | Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The run's record (run.json) and its attempts (trace.jsonl)."""
    run_dir = Path(run_dir)
    for name in (RUN_FILE, TRACE_FILE):
        if not (run_dir / name).is_file():
            raise RunDirError(f"{run_dir / name}: missing; pass a folder written by `agent solve`")
    try:
        run = json.loads((run_dir / RUN_FILE).read_text(encoding="utf-8"))
        lines = (run_dir / TRACE_FILE).read_text(encoding="utf-8").splitlines()
        attempts = [json.loads(line) for line in lines if line.strip()]
    except json.JSONDecodeError as error:
        raise RunDirError(f"{run_dir}: run.json or trace.jsonl is not valid JSON ({error}); re-run `agent solve`") from error
    if run.get("status") == "running":  # the anytime record: the run was stopped, or still runs
        node = (run.get("submission") or {}).get("node")
        raise RunDirError(f"{run_dir}: the run has not finished (stopped, or still running); its submission.csv is "
                          f"node {node}'s, and a report needs a finished run")
    return run, attempts


def write_report(run_dir: str | Path) -> Path:
    """(Re-)render report.html from run.json and trace.jsonl."""
    run, attempts = read_run(run_dir)
    path = Path(run_dir) / REPORT_FILE
    path.write_text(render_report(run, attempts), encoding="utf-8")
    return path


def screenshot(report_path: str | Path, png_path: str | Path, *, width: int = 1400, height: int = 3000) -> Path:
    """Render the report in headless chromium and save a PNG of the page's first `height` pixels."""
    browser = find_browser()
    png_path = Path(png_path).resolve()
    png_path.unlink(missing_ok=True)  # so a stale picture is never taken for a new one
    completed = subprocess.run(
        [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", f"--screenshot={png_path}",
         f"--window-size={width},{height}", Path(report_path).resolve().as_uri()],
        capture_output=True, text=True, timeout=120,
    )
    if not png_path.is_file():
        raise ScreenshotError(f"{browser} wrote no screenshot (exit {completed.returncode}): "
                              f"{completed.stderr.strip()[-300:]}")
    return png_path


def find_browser() -> str:
    for name in BROWSERS:
        if path := shutil.which(name):
            return path
    raise ScreenshotError("chromium is not installed: install it (e.g. `apt-get install -y chromium`) "
                          "to take a screenshot of the report")


# ---------------------------------------------------------------------------------------------- the page


@dataclass(frozen=True)
class NodeView:
    """One attempt as the report shows it; a seed-loop attempt is a node without a parent."""

    id: int
    parent_id: int | None
    action: str
    trainer: str
    params: str
    cv_score: float | None
    valid: bool
    status: str  # valid / explored / over_time / buggy / dead
    verdict: str
    seconds: float
    finished: float  # seconds since the run started
    plan: str
    trick: dict[str, Any] | None
    notes: tuple[str, ...]
    error: str  # the error's last line
    llm: dict[str, Any] | None = None  # what the LLM did towards it (tokens, cost, answer, fallback), with --llm
    code: str = ""  # the node's pipeline as Python, from run.json's journal (a seed-loop run has none)
    folds: str = ""  # its fidelity, "folds scored/folds" ("" when not recorded)

    @classmethod
    def from_attempt(cls, attempt: Mapping[str, Any]) -> NodeView:
        in_tree = "node_id" in attempt
        spec = attempt["spec"]
        params = json.dumps(spec["model"]["params"]) if spec["model"]["name"] != ENSEMBLE else "(see the final model)"
        if spec.get("target_transform"):
            params += f" · target {spec['target_transform']['op']}"
        plan = attempt["plan"] if in_tree else attempt["rationale"]
        return cls(
            id=attempt["node_id"] if in_tree else attempt["index"],
            parent_id=attempt["parent_id"] if in_tree else None,
            action=attempt["action"] if in_tree else attempt["phase"],
            trainer=attempt["trainer"], params=params, cv_score=attempt["cv_score"], valid=attempt["valid"],
            status=attempt.get("node_status") or ("valid" if attempt["valid"] else "buggy"),
            verdict=attempt["verdict"], seconds=attempt["seconds"], finished=attempt["started"] + attempt["seconds"],
            plan=plan, trick=attempt.get("trick"), notes=tuple(attempt["notes"]),
            error=attempt["error"].strip().splitlines()[-1] if attempt["error"].strip() else "",
            llm=attempt.get("llm"),
            folds=f"{attempt['folds_scored']}/{attempt['folds']}" if attempt.get("folds") else "",
        )

    @property
    def short_plan(self) -> str:
        return short_plan(self.plan)

    @property
    def trick_label(self) -> str:
        """The trick, when the plan does not already name it (a knowledge-base plan does), so it is said once."""
        if not self.trick or self.trick["id"] in self.plan:
            return ""
        return f"{self.trick['id']} '{self.trick.get('title') or self.trick.get('op')}'"


def short_plan(plan: str) -> str:
    """A plan's gist for a table cell or a tooltip: without its asides in parentheses or its reasons after a dash or
    a semicolon, a file path cut to the file's name, at most SHORT_PLAN_CHARS long. The full plan stays in the
    journal."""
    text = ABSOLUTE_PATH.sub(r"\1", plan)
    while (cut := PARENTHESES.sub("", text)) != text:  # innermost first, so nested asides go too
        text = cut
    text = " ".join(PLAN_REASONS.split(text, maxsplit=1)[0].split())
    if len(text) > SHORT_PLAN_CHARS:
        text = text[:SHORT_PLAN_CHARS].rsplit(" ", 1)[0] + " …"
    return text


def render_report(run: dict[str, Any], attempts: list[dict[str, Any]]) -> str:
    task = run["task"]
    greater_is_better = metric_info(run["metric"]).greater_is_better
    code = {node["id"]: node.get("code", "") for node in (run.get("journal") or {}).get("nodes", [])}
    nodes = [replace(NodeView.from_attempt(attempt), code=code.get(attempt.get("node_id"), "")) for attempt in attempts]
    in_tree = any("node_id" in attempt for attempt in attempts)
    best = _best_node(nodes, run.get("best_node"), greater_is_better)
    members = _journal_members(run)
    return _environment().get_template(TEMPLATE).render(
        run=run, task=task, nodes=nodes, best=best, in_tree=in_tree,
        direction="higher" if greater_is_better else "lower",
        setup=_setup_evidence(task),
        score_plot=Markup(score_plot(nodes, run["baseline"], run["metric"], greater_is_better, best)),
        tree_plot=Markup(tree_svg(nodes, best, members)) if in_tree else None,
        leaderboard=leaderboard(nodes, greater_is_better), failed=[node for node in nodes if not node.valid],
        composition=composition(run.get("best_spec"), members.get(best.id, ()) if best else ()),
        tricks=trick_effects(nodes, greater_is_better), use_kb=run["settings"].get("use_kb", False),
        settings=list(flatten_settings(run["settings"])),
    )


@cache
def _environment() -> Environment:
    environment = Environment(loader=FileSystemLoader(TEMPLATES_DIR), autoescape=True, undefined=StrictUndefined,
                              trim_blocks=True, lstrip_blocks=True)
    environment.filters["score"] = lambda value: "–" if value is None else f"{value:.4f}"
    return environment


def _best_node(nodes: list[NodeView], best_id: int | None, greater_is_better: bool) -> NodeView | None:
    """The run's best node; a seed-loop run names none, so the best verified attempt."""
    by_id = {node.id: node for node in nodes}
    if best_id in by_id:
        return by_id[best_id]
    ranked = leaderboard(nodes, greater_is_better)
    return ranked[0] if ranked else None


def _journal_members(run: Mapping[str, Any]) -> dict[int, tuple[int, ...]]:
    """Each ensemble node's member node ids, in the order of its spec's members (from run.json's journal)."""
    journal = run.get("journal") or {}
    return {node["id"]: tuple(node["members"]) for node in journal.get("nodes", []) if node.get("members")}


def _setup_evidence(task: Mapping[str, Any]) -> list[tuple[str, Any, str]]:
    """(field, what was set up, why) for the target, id, metric, task type and, for a binary task, the positive
    class."""
    inferred = task["inferred"]
    fields = [("target", "target"), ("id column", "id_column"), ("metric", "metric"), ("task type", "task_type")]
    if task.get("positive_class") is not None:
        fields.append(("positive class", "positive_class"))
    return [(label, task.get(key), inferred.get(key, "given on the command line")) for label, key in fields]


def leaderboard(nodes: list[NodeView], greater_is_better: bool) -> list[NodeView]:
    """The best verified nodes, best first."""
    verified = [node for node in nodes if node.valid and node.cv_score is not None]
    return sorted(verified, key=lambda node: node.cv_score, reverse=greater_is_better)[:LEADERBOARD_SIZE]


def composition(best_spec: Mapping[str, Any] | None, member_ids: tuple[int, ...]) -> dict[str, Any] | None:
    """What the final model is made of: an ensemble's members and weights (and a stack's link and intercept),
    or the single model with its pipeline steps."""
    if not best_spec:
        return None
    model = best_spec["model"]
    if model["name"] != ENSEMBLE:
        return {"kind": "single model", "trainer": model["name"], "params": json.dumps(model["params"]),
                "steps": [step["op"] for step in best_spec["steps"]],
                "target_transform": (best_spec.get("target_transform") or {}).get("op")}
    params = model["params"]
    link = params.get("link")
    kind = "weighted average" if link is None else "rank average" if link == "rank" else f"linear stack ({link} space)"
    ids = member_ids if len(member_ids) == len(params["members"]) else (None,) * len(params["members"])
    members = [{"node": node_id, "trainer": member["model"]["name"], "params": json.dumps(member["model"]["params"]),
                "steps": [step["op"] for step in member["steps"]], "weight": weight}
               for node_id, member, weight in zip(ids, params["members"], params["weights"])]
    return {"kind": kind, "members": members, "link": link, "intercept": params.get("intercept")}


def trick_effects(nodes: list[NodeView], greater_is_better: bool) -> list[dict[str, Any]]:
    """Each node that applied a trick: helped (verified and beat its parent's CV score), hurt (verified and worse),
    unchanged, stopped_early (it trailed the best node on its first folds, so its CV stopped there), failed (not
    verified), or a draft (no parent to measure it against). `change` is the raw difference
    of the CV scores, `change_words` the same in the metric's direction ("worsened by 0.0014")."""
    by_id = {node.id: node for node in nodes}
    effects = []
    for node in nodes:
        if not node.trick:
            continue
        parent = by_id.get(node.parent_id)
        change, change_words = None, "–"
        if node.status == "stopped_early":
            outcome, change_words = "stopped_early", f"trailed the best node after {node.folds} folds"
        elif not node.valid or node.cv_score is None:
            outcome = "failed"
        elif parent is None:
            outcome = "draft"
        elif parent.cv_score is None or not parent.valid:
            outcome = "helped"  # a verified node beats a parent that had no verified score
        else:
            change = node.cv_score - parent.cv_score
            improvement = change if greater_is_better else -change
            outcome = "helped" if improvement > 0 else "hurt" if improvement < 0 else "unchanged"
            change_words = describe_change(improvement)
        effects.append({"node": node, "parent": parent, "outcome": outcome, "change": change,
                        "change_words": change_words,
                        "origin": node.trick.get("competition") or node.trick.get("source") or "–"})
    return effects


def flatten_settings(settings: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, str]]:
    """(dotted name, value for a human) for every setting, nested groups flattened."""
    for key, value in settings.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            yield from flatten_settings(value, f"{name}.")
        else:
            yield name, format_setting(key, value)


def format_setting(key: str, value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if key in BYTE_SETTINGS and isinstance(value, int | float):
        return format_bytes(value)
    if key in SECOND_SETTINGS and isinstance(value, int | float):
        return format_seconds(value)
    return str(value)


def format_bytes(count: float) -> str:
    units = ("bytes", "KiB", "MiB", "GiB", "TiB")
    power = 0
    while count >= 1024 and power < len(units) - 1:
        count, power = count / 1024, power + 1
    return f"{count:.0f} bytes" if power == 0 else f"{count:.1f} {units[power]}"


def format_seconds(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:g} s"
    return f"{seconds / 60:.1f} min" if seconds < 7200 else f"{seconds / 3600:.1f} h"


# ---------------------------------------------------------------------------------------------- the plots


def score_plot(nodes: list[NodeView], baseline: float, metric: str, greater_is_better: bool,
               best: NodeView | None) -> str:
    """CV score of each node against the time it finished: the best verified so far as a step line, the trivial
    baseline dashed, scored-but-rejected nodes hollow, nodes scored on the exploration sample only as hollow squares
    (their scores are on other rows, so they are never part of the best line), failures as crosses along the
    bottom."""
    figure = new_figure(9, 4)
    axes = figure.add_subplot()
    by_time = sorted(nodes, key=lambda node: node.finished)
    end = max([node.finished for node in nodes] + [1.0])
    scored = [node for node in by_time if node.cv_score is not None]
    explored = [node for node in scored if node.status == "explored"]
    verified = [node for node in scored if node.valid and node.status != "explored"]
    rejected = [node for node in scored if not node.valid and node.status != "explored"]
    failed = [node for node in by_time if node.cv_score is None]

    if verified:
        times, best_so_far, current = [], [], None
        for node in verified:
            if current is None or (node.cv_score > current if greater_is_better else node.cv_score < current):
                current = node.cv_score
            times.append(node.finished)
            best_so_far.append(current)
        axes.step([*times, end], [*best_so_far, best_so_far[-1]], where="post", color=BEST_COLOUR, linewidth=2,
                  label="best verified so far")
        axes.scatter([n.finished for n in verified], [n.cv_score for n in verified], s=36, zorder=3,
                     color=STATUS_COLOURS["valid"], label="verified node")
    if rejected:
        axes.scatter([n.finished for n in rejected], [n.cv_score for n in rejected], s=36, zorder=3,
                     facecolors="none", edgecolors=STATUS_COLOURS["buggy"], label="scored but rejected")
    if explored:
        axes.scatter([n.finished for n in explored], [n.cv_score for n in explored], s=36, marker="s", zorder=3,
                     facecolors="none", edgecolors=STATUS_COLOURS["explored"],
                     label="scored on the exploration sample only")
    if best is not None and best.cv_score is not None:
        axes.scatter([best.finished], [best.cv_score], s=160, marker="*", zorder=4, color="#f2b705",
                     edgecolors="#7a5c00", label=f"best: node {best.id}")
    scores = [node.cv_score for node in verified + rejected + explored]
    if baseline is not None:  # None when a search stopped on an error before scoring it
        _draw_baseline(axes, baseline, scores)
    if failed:  # no score to place them by: crosses just above the time axis
        axes.scatter([n.finished for n in failed], [0.04] * len(failed), marker="x", s=40, zorder=3,
                     color="#c62828", transform=axes.get_xaxis_transform(), label="failed (no score)")
    if len(nodes) <= 40:
        for node in verified + rejected + explored:
            axes.annotate(str(node.id), (node.finished, node.cv_score), textcoords="offset points", xytext=(5, 4),
                          fontsize=7, color="#555")
    axes.set_xlim(0, end * 1.03)
    axes.set_xlabel("seconds since the run started")
    axes.set_ylabel(f"CV {metric} ({'higher' if greater_is_better else 'lower'} is better)")
    axes.grid(alpha=0.3)
    axes.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    return inline_svg(figure, "score")


def _draw_baseline(axes: Any, baseline: float, scores: list[float]) -> None:
    """The trivial baseline dashed; when it lies far from every score it would squash them, so the legend names
    it instead."""
    low, high = (min(scores), max(scores)) if scores else (baseline, baseline)
    spread = max(high - low, 1e-3)
    label = f"trivial baseline {baseline:.4f}"
    if low - 2 * spread <= baseline <= high + 2 * spread:
        axes.axhline(baseline, color="#777", linestyle="--", linewidth=1, label=label)
        return
    axes.set_ylim(low - spread * 0.15, high + spread * 0.15)
    axes.plot([], [], color="#777", linestyle="--", linewidth=1,
              label=f"{label}\n({'below' if baseline < low else 'above'} this scale)")


def tree_svg(nodes: list[NodeView], best: NodeView | None, members: Mapping[int, tuple[int, ...]]) -> str:
    """The solution tree as an inline <svg>, depth downwards from the task: boxes coloured by status, the path from
    the task to the best node drawn bold, an ensemble's other members joined to it by dotted lines. Each box links
    to its node's row in the journal (plan and code) and names its plan on hover. Boxes show trainer and score while
    the tree fits the page at that size, then id and score, then the id alone; a tree wider than the page even so is
    scaled down, never scrolled."""
    layouts = [tree_layout(nodes, *size) for size in TREE_BOXES]
    detail = next((i for i, boxes in enumerate(layouts) if tree_extent(boxes)[0] <= TREE_MAX_WIDTH), len(layouts) - 1)
    boxes = layouts[detail]
    width, height = tree_extent(boxes)
    by_id = {node.id: node for node in nodes}
    best_path = set(_path_to(best, by_id)) if best is not None else set()
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
             f'viewBox="0 0 {width:.0f} {height:.0f}" font-family="system-ui, sans-serif" role="img" '
             f'aria-label="solution tree of {len(nodes)} nodes">']
    for level in sorted({box.level for box in boxes.values()} - {0}):
        y = next(box.y for box in boxes.values() if box.level == level)
        parts.append(f'<text x="4" y="{y:.1f}" dy="0.35em" font-size="11" fill="#666">depth {level - 1}</text>')
    for node in nodes:  # edges under the boxes
        box, parent = boxes[node.id], boxes[node.parent_id if node.parent_id in boxes else None]
        for member in members.get(node.id, ()):
            if member != node.parent_id and member in boxes:
                other = boxes[member]
                parts.append(f'<line x1="{other.x:.1f}" y1="{other.bottom:.1f}" x2="{box.x:.1f}" y2="{box.top:.1f}" '
                             'stroke="#bbb" stroke-width="0.8" stroke-dasharray="2 3"/>')
        on_path = node.id in best_path
        parts.append(f'<line x1="{parent.x:.1f}" y1="{parent.bottom:.1f}" x2="{box.x:.1f}" y2="{box.top:.1f}" '
                     f'stroke="{BEST_COLOUR if on_path else "#bbb"}" stroke-width="{2.6 if on_path else 1}"/>')
    task = boxes[None]
    parts.append(f'<rect x="{task.left:.1f}" y="{task.top:.1f}" width="{task.width:.1f}" height="{task.height:.1f}" '
                 'rx="6" fill="#eee" stroke="#999"/>'
                 f'<text x="{task.x:.1f}" y="{task.y:.1f}" dy="0.35em" text-anchor="middle" font-size="12">task</text>')
    for node in nodes:
        box, on_path = boxes[node.id], node.id in best_path
        colour = STATUS_COLOURS.get(node.status, STATUS_COLOURS["dead"])
        text_colour = "#333" if node.status == "dead" else "#fff"
        weight = "bold" if best is not None and node.id == best.id else "normal"
        score = "–" if node.cv_score is None else f"{node.cv_score:.4f}"
        if detail < 2:
            name = f"#{node.id} {escape(_short(node.trainer))}" if detail == 0 else f"#{node.id}"
            label = (f'<tspan x="{box.x:.1f}" dy="-0.25em">{name}</tspan>'
                     f'<tspan x="{box.x:.1f}" dy="1.2em">{score}</tspan>')
        else:
            label = f'<tspan x="{box.x:.1f}" dy="0.35em">{node.id}</tspan>'
        parts.append(
            f'<a href="#node-{node.id}"><title>#{node.id} {escape(node.action)}, {escape(node.trainer)}, '
            f'{escape(node.status)}: {escape(node.short_plan)}</title>'
            f'<rect x="{box.left:.1f}" y="{box.top:.1f}" width="{box.width:.1f}" height="{box.height:.1f}" rx="6" '
            f'fill="{colour}" stroke="{BEST_COLOUR if on_path else "#fff"}" stroke-width="{2.2 if on_path else 0.5}"/>'
            f'<text x="{box.x:.1f}" y="{box.y:.1f}" text-anchor="middle" font-size="{11 if detail else 12}" '
            f'font-weight="{weight}" fill="{text_colour}">{label}</text></a>')
    parts.append("</svg>")
    return "".join(parts)


@dataclass(frozen=True)
class TreeBox:
    """A box of the drawn tree, in pixels from the picture's top left; node None is the task at the top."""

    node: int | None
    level: int  # 0 for the task, 1 for the drafts
    x: float  # centre
    y: float
    width: float
    height: float

    @property
    def left(self) -> float:
        return self.x - self.width / 2

    @property
    def top(self) -> float:
        return self.y - self.height / 2

    @property
    def bottom(self) -> float:
        return self.y + self.height / 2

    def overlaps(self, other: TreeBox) -> bool:
        return (abs(self.x - other.x) < (self.width + other.width) / 2
                and abs(self.y - other.y) < (self.height + other.height) / 2)


def tree_layout(nodes: list[NodeView], box_width: float, box_height: float) -> dict[int | None, TreeBox]:
    """A tidy tree (after Reingold and Tilford): each subtree is laid out on its own, then pushed right of its
    left siblings' subtrees just far enough that no level of the two collides, and each parent is centred over its
    first and last child. Leaves sit side by side only when they must, so a deep branch does not widen the rest."""
    ids = {node.id for node in nodes}
    children: dict[int | None, list[int]] = {}
    for node in nodes:
        children.setdefault(node.parent_id if node.parent_id in ids else None, []).append(node.id)
    step = box_width + TREE_GAP
    offset: dict[int, float] = {}  # each node's centre relative to its parent's

    def place(node_id: int | None) -> list[tuple[float, float]]:
        """Lays out node_id's subtree and returns its contour: the leftmost and rightmost box centre of each level,
        relative to node_id, from node_id's own level down."""
        contour: list[tuple[float, float]] = []
        placed: list[int] = []
        for child in children.get(node_id, []):
            below = place(child)
            shift = max((right + step - left for (_, right), (left, _) in zip(contour, below)), default=0.0)
            offset[child] = shift
            placed.append(child)
            contour = _merge_contours(contour, below, shift)
        centre = (offset[placed[0]] + offset[placed[-1]]) / 2 if placed else 0.0
        for child in placed:
            offset[child] -= centre
        return [(0.0, 0.0), *((left - centre, right - centre) for left, right in contour)]

    place(None)
    centres: dict[int | None, tuple[float, int]] = {None: (0.0, 0)}

    def descend(node_id: int | None) -> None:
        x, level = centres[node_id]
        for child in children.get(node_id, []):
            centres[child] = (x + offset[child], level + 1)
            descend(child)

    descend(None)
    left = min(x for x, _ in centres.values()) - box_width / 2
    return {node_id: TreeBox(node_id, level, x - left + TREE_MARGIN[0],
                             TREE_MARGIN[1] + level * (box_height + TREE_LEVEL_GAP) + box_height / 2,
                             box_width, box_height)
            for node_id, (x, level) in centres.items()}


def _merge_contours(left: list[tuple[float, float]], right: list[tuple[float, float]],
                    shift: float) -> list[tuple[float, float]]:
    """The contour of two side-by-side subtrees, the right one moved by `shift`."""
    merged = []
    for level in range(max(len(left), len(right))):
        spans = [left[level]] if level < len(left) else []
        if level < len(right):
            spans.append((right[level][0] + shift, right[level][1] + shift))
        merged.append((min(start for start, _ in spans), max(end for _, end in spans)))
    return merged


def tree_extent(boxes: Mapping[int | None, TreeBox]) -> tuple[float, float]:
    """The picture's width and height: the boxes and a margin on the right and below as on the left and above."""
    return (max(box.x + box.width / 2 for box in boxes.values()) + TREE_MARGIN[1],
            max(box.bottom for box in boxes.values()) + TREE_MARGIN[1])


def _path_to(node: NodeView, by_id: Mapping[int, NodeView]) -> list[int]:
    path = [node.id]
    while (parent := by_id.get(by_id[path[-1]].parent_id)) is not None:
        path.append(parent.id)
    return path


def _short(trainer: str) -> str:
    return {"hist_gradient_boosting": "hist GBM", "random_forest": "forest"}.get(trainer, trainer)


def new_figure(width: float, height: float) -> Figure:
    """A figure on the Agg canvas (never a GUI backend), sized in inches. matplotlib is imported here, when a report
    is drawn, not with `agent` (a third of a second of every run's start-up)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(figure)
    return figure


def inline_svg(figure: Figure, name: str) -> str:
    """The figure as an <svg> element to inline: text kept as text (small, selectable), no XML prologue, and
    ids salted by the plot's name, so the page is the same each time and two plots' ids never clash."""
    import matplotlib

    buffer = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": name}):
        figure.savefig(buffer, format="svg", metadata={"Date": None})
    text = buffer.getvalue()
    return text[text.index("<svg"):]
