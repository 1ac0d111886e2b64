"""report.html for a run folder: score over time (inline SVG, nothing fetched), the solution tree and the attempt table."""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

from retrieval.metrics import metric_info

RUN_FILE = "run.json"
TRACE_FILE = "trace.jsonl"
REPORT_FILE = "report.html"

_WIDTH, _HEIGHT, _PAD = 760, 320, 64


class RunDirError(ValueError):
    """A folder that is not an `agent solve` run folder."""


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
    return run, attempts


def write_report(run_dir: str | Path) -> Path:
    """(Re-)render report.html from run.json and trace.jsonl."""
    run, attempts = read_run(run_dir)
    path = Path(run_dir) / REPORT_FILE
    path.write_text(render_report(run, attempts), encoding="utf-8")
    return path


def render_report(run: dict[str, Any], attempts: list[dict[str, Any]]) -> str:
    task = run["task"]
    title = f"agent solve: {task['name']}"
    inferred = "".join(f"<li><b>{html.escape(key)}</b>: {html.escape(str(task.get(key)))} "
                       f"<small>({html.escape(evidence)})</small></li>" for key, evidence in task["inferred"].items())
    settings = ", ".join(f"{key}={value}" for key, value in run["settings"].items())
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2em; color: #222; }}
table {{ border-collapse: collapse; font-size: 0.9em; }}
td, th {{ border: 1px solid #ccc; padding: 4px 8px; text-align: left; vertical-align: top; }}
tr.valid td.verdict {{ color: #176b2c; }} tr.invalid td.verdict {{ color: #a61b1b; }}
tr.best {{ background: #eef7ee; }} small {{ color: #666; }}
ul.tree, ul.tree ul {{ list-style: none; padding-left: 1.4em; border-left: 1px dotted #bbb; }}
ul.tree li {{ margin: 3px 0; }} .node-valid {{ color: #176b2c; }} .node-buggy {{ color: #a61b1b; }}
.node-dead {{ color: #777; text-decoration: line-through; }} .node-best {{ background: #eef7ee; font-weight: bold; }}
</style></head><body>
<h1>{html.escape(title)}</h1>
<p><b>{html.escape(run['summary'])}</b></p>
<p>Task: {html.escape(task['task_type'])}, metric {html.escape(task['metric'])}, {task['n_rows']} training rows,
target <code>{html.escape(task['target'])}</code>. Stopped: {html.escape(run.get('stop_reason', ''))}.
Settings: {html.escape(settings)}.</p>
<ul>{inferred}</ul>
{''.join(f'<p><small>{html.escape(note)}</small></p>' for note in run.get('notes', []))}
<h2>Score over time</h2>
{score_plot(attempts, run['baseline'], task['metric'])}
{tree_section(attempts, task['metric'])}
<h2>Attempts</h2>
{attempt_table(attempts)}
</body></html>
"""


def score_plot(attempts: list[dict[str, Any]], baseline: float, metric: str) -> str:
    """CV score of each attempt against the time it finished, the best so far as a step line, failures as ×."""
    greater_is_better = metric_info(metric).greater_is_better
    finished = sorted(((a["started"] + a["seconds"], a) for a in attempts), key=lambda item: item[0])
    scored = [(t, a["cv_score"], a) for t, a in finished if a["cv_score"] is not None]
    values = [value for _, value, _ in scored] or [baseline]
    margin = max(max(values) - min(values), 1e-3) * 0.08
    low, high = min(values) - margin, max(values) + margin
    end = max([t for t, _ in finished] + [1.0])

    def x(seconds: float) -> float:
        return _PAD + seconds / end * (_WIDTH - 2 * _PAD)

    def y(value: float) -> float:
        return _HEIGHT - _PAD - (value - low) / (high - low) * (_HEIGHT - 2 * _PAD)

    marks = []
    if low <= baseline <= high:
        marks.append(f'<line x1="{_PAD}" y1="{y(baseline):.1f}" x2="{_WIDTH - _PAD}" y2="{y(baseline):.1f}" '
                     'stroke="#999" stroke-dasharray="4 4"/>')
    marks.append(f'<text x="{_WIDTH - _PAD}" y="{_PAD - 8}" text-anchor="end" font-size="11" fill="#777">'
                 f'trivial baseline {baseline:.4f}{"" if low <= baseline <= high else " (off this scale)"}</text>')
    best_points, best = [], None
    for t, value, attempt in scored:
        if attempt["valid"] and (best is None or (value > best if greater_is_better else value < best)):
            if best is not None:
                best_points.append((x(t), y(best)))
            best = value
            best_points.append((x(t), y(best)))
    if best_points:
        best_points.append((x(end), best_points[-1][1]))
        points = " ".join(f"{px:.1f},{py:.1f}" for px, py in best_points)
        marks.append(f'<polyline points="{points}" fill="none" stroke="#176b2c" stroke-width="1.5"/>')
    for t, value, attempt in scored:
        colour = "#176b2c" if attempt["valid"] else "#d08a00"
        label = html.escape(f"#{attempt['index']} {attempt['trainer']}: {value:.4f} ({attempt['verdict']})")
        marks.append(f'<circle cx="{x(t):.1f}" cy="{y(value):.1f}" r="4" fill="{colour}"><title>{label}</title></circle>')
    for t, attempt in finished:
        if attempt["cv_score"] is None:
            label = html.escape(f"#{attempt['index']} {attempt['trainer']}: {attempt['verdict']}")
            marks.append(f'<text x="{x(t):.1f}" y="{_HEIGHT - _PAD + 4}" text-anchor="middle" fill="#a61b1b" '
                         f'font-size="14">×<title>{label}</title></text>')
    ticks = "".join(f'<text x="{_PAD - 4}" y="{y(value) + 4:.1f}" text-anchor="end" font-size="10">{value:.4f}</text>'
                    for value in (low + margin, (low + high) / 2, high - margin))
    axes = (f'<line x1="{_PAD}" y1="{_HEIGHT - _PAD}" x2="{_WIDTH - _PAD}" y2="{_HEIGHT - _PAD}" stroke="#333"/>'
            f'<line x1="{_PAD}" y1="{_PAD}" x2="{_PAD}" y2="{_HEIGHT - _PAD}" stroke="#333"/>'
            f'<text x="{_WIDTH / 2}" y="{_HEIGHT - 10}" text-anchor="middle" font-size="12">seconds since start '
            f'(0 to {end:.0f}); line: best verified so far; ×: failed attempt</text>'
            f'<text x="12" y="{_HEIGHT / 2}" font-size="12" transform="rotate(-90 12 {_HEIGHT / 2})" '
            f'text-anchor="middle">CV {html.escape(metric)} ({"higher" if greater_is_better else "lower"} is better)</text>'
            + ticks)
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{_WIDTH}" height="{_HEIGHT}" '
            f'role="img" aria-label="CV score over time">{axes}{"".join(marks)}</svg>')


def attempt_table(attempts: list[dict[str, Any]]) -> str:
    header = "<tr><th>#</th><th>phase</th><th>trainer</th><th>params</th><th>CV score</th><th>verdict</th>" \
             "<th>seconds</th><th>rationale / notes / error</th></tr>"
    rows = []
    for attempt in attempts:
        classes = " ".join(["valid" if attempt["valid"] else "invalid", "best" if attempt["improved"] else ""])
        score = "–" if attempt["cv_score"] is None else f"{attempt['cv_score']:.4f}"
        params = json.dumps(attempt["spec"]["model"]["params"]) + (
            f" · {attempt['spec']['target_transform']['op']}" if attempt["spec"]["target_transform"] else "")
        details = [attempt["rationale"], *attempt["notes"]]
        if attempt["error"]:
            details.append(attempt["error"].strip().splitlines()[-1])
        rows.append(
            f'<tr class="{classes.strip()}"><td>{attempt["index"]}</td><td>{attempt["phase"]}</td>'
            f'<td>{html.escape(attempt["trainer"])}</td><td><code>{html.escape(params)}</code></td><td>{score}</td>'
            f'<td class="verdict">{html.escape(attempt["verdict"])}</td><td>{attempt["seconds"]:.1f}</td>'
            f'<td>{"<br>".join(html.escape(detail) for detail in details if detail)}</td></tr>'
        )
    return f"<table>{header}{''.join(rows)}</table>"


def tree_section(attempts: list[dict[str, Any]], metric: str) -> str:
    """The solution tree as nested lists: each node's action, model, CV score, status, plan and trick."""
    nodes = [attempt for attempt in attempts if "node_id" in attempt]
    if not nodes:
        return ""
    greater_is_better = metric_info(metric).greater_is_better
    valid = [node for node in nodes if node["valid"] and node["cv_score"] is not None]
    best = (max if greater_is_better else min)(valid, key=lambda node: node["cv_score"])["node_id"] if valid else None
    children: dict[Any, list[dict[str, Any]]] = {}
    for node in nodes:
        children.setdefault(node["parent_id"], []).append(node)

    def item(node: dict[str, Any]) -> str:
        score = "–" if node["cv_score"] is None else f"{node['cv_score']:.4f}"
        status = node.get("node_status", "valid" if node["valid"] else "buggy")
        classes = f"node-{status}" + (" node-best" if node["node_id"] == best else "")
        trick = node.get("trick")
        trick_text = ""
        if trick:
            origin = trick.get("competition") or trick.get("source") or ""
            trick_text = f"<br><small>trick {html.escape(str(trick['id']))}: {html.escape(trick.get('title') or '')}" \
                         f" ({html.escape(origin)})</small>"
        error = f"<br><small>{html.escape(node['error'].strip().splitlines()[-1])}</small>" if node["error"] else ""
        below = "".join(item(child) for child in children.get(node["node_id"], []))
        return (f'<li><span class="{classes}">#{node["node_id"]} {html.escape(node["action"])} · '
                f'{html.escape(node["trainer"])} · {score} · {html.escape(status)}</span> '
                f'<small>{html.escape(node["plan"])}</small>{trick_text}{error}'
                f'{f"<ul>{below}</ul>" if below else ""}</li>')

    roots = "".join(item(node) for node in children.get(None, []))
    return (f"<h2>Solution tree</h2><p><small>{len(nodes)} nodes; best verified node highlighted; struck through: "
            f"dead (still failing at the maximum debug depth).</small></p><ul class=\"tree\">{roots}</ul>")
