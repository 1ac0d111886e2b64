"""What the LLM is told, after AutoMind's draft, improve and debug prompts: who it is and the vocabulary it answers in
(the system prompt), the task as data (description, data profile, retrieved tricks, memories: the cached prefix, the
same for every call of a run), then the question: the action, a summary of the journal, and the node concerned.

Everything that comes from outside casebook (the task's description and column names, write-ups, papers, memories)
goes into documents, which kb.llm delimits as data; the questions hold only casebook's own records.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from agent.engine.steps import BUILTIN_STEPS, TARGET_OPS
from agent.engine.trainers import WRAPPER_PARAMS, Trainer, default_steps, trainer_facts
from agent.search.journal import Journal, Node
from kb.llm import Document
from retrieval.profile import TaskProfile

JOURNAL_LINES = 24  # nodes shown in a journal summary: the best ones and the latest ones
ERROR_CHARS = 1200  # of a failed node's error shown to a debug prompt

ROLE = (
    "You are the planner of casebook, a machine-learning engineering agent that solves a competition task by a tree "
    "search over solutions, as AutoMind does: drafts, improvements of one node, and repairs of failed nodes. casebook's "
    "engine cross-validates every solution you propose, computes the metric itself and verifies it; you propose, it "
    "measures. Answer with one JSON object and nothing else."
)


def system_prompt(trainers: Mapping[str, Trainer], *, code: bool) -> str:
    """The role and the recipe vocabulary: trainers with their default steps and tunable parameters, step ops with
    their parameters, target transforms; and the free-code answer when an executor can run it."""
    lines = [ROLE, "", "A solution is written in casebook's recipe vocabulary (answer kind \"spec\"):",
             "- trainer: one of the trainers below;",
             "- params_json: the trainer's parameters as a JSON object inside a string, e.g. \"{\\\"max_depth\\\": 4}\"; "
             f"\"{{}}\" for its defaults. Besides the model's own parameters: {', '.join(WRAPPER_PARAMS)};",
             "- steps: the preprocessing, a list of {\"op\": ..., \"params\": {...}} from the step catalogue, applied in "
             "order; null for the trainer's default steps;",
             f"- target_transform: null or one of {', '.join(TARGET_OPS)} (regression only).", "", "Trainers:"]
    for name, trainer in trainers.items():
        if name == "baseline":
            continue
        facts = trainer_facts(name)
        tunable = ", ".join(facts.search_space) or "its scikit-learn parameters"
        steps = " -> ".join(step.op for step in default_steps(trainer))
        lines.append(f"- {name} ({facts.family}): default steps {steps or 'none'}; parameters such as {tunable}")
    lines += ["", "Step catalogue (op: parameters with their defaults):"]
    for op, step in BUILTIN_STEPS.items():
        lines.append(f"- {op}: {json.dumps(dict(step.defaults), default=list) if step.defaults else 'no parameters'}")
    if code:
        lines += ["", "When the vocabulary cannot say what a plan needs, answer kind \"code\" instead: a plan for a "
                      "standalone Python script (you will be asked for the code afterwards), with its complexity from 1 "
                      "(a few lines) to 5 (many interacting parts)."]
    return "\n".join(lines)


def describe_profile(profile: TaskProfile) -> str:
    """The data profile: set-up, size, metric and each column's kind (column names come from the task's files)."""
    info = profile.metric_info
    lines = [f"task type: {profile.task_type} ({profile.modality})", f"target column: {profile.target}",
             f"id column: {profile.id_column}",
             f"metric: {profile.metric} ({'higher' if info.greater_is_better else 'lower'} is better"
             f"{', scored on probabilities' if info.needs_proba else ''})",
             f"training rows: {profile.n_rows}; feature columns: {len(profile.columns)}; "
             f"missing cells: {profile.missing_share:.1%}"]
    if profile.class_balance is not None:
        lines.append(f"rarest class: {profile.class_balance:.1%} of rows")
    if profile.positive_class is not None:
        lines.append(f"positive class: {profile.positive_class}")
    lines.append("columns (name: kind, distinct values, missing share):")
    lines += [f"- {column.name}: {column.kind}, {column.cardinality}, {column.missing_share:.0%}"
              for column in profile.columns[:200]]
    if len(profile.columns) > 200:
        lines.append(f"... and {len(profile.columns) - 200} more columns")
    return "\n".join(lines)


def describe_trick(trick_id: str, op: str, params: Mapping[str, Any], stage: str, origin: str, text: str) -> str:
    return (f"- id {trick_id}: recipe {op} {json.dumps(dict(params), default=list)} ({stage}; from {origin})\n"
            f"  {' '.join(text.split())[:400]}")


def task_documents(profile: TaskProfile, tricks: Sequence[str], memories: Sequence[str]) -> list[Document]:
    """The cached prefix: the task description, the data profile, the retrieved tricks and the memories."""
    documents = [Document("task description", profile.description or "(the task has no description.md)",
                          "description.md"),
                 Document("data profile", describe_profile(profile), "train.csv, test.csv")]
    if tricks:
        documents.append(Document("retrieved tricks", "Tricks retrieved from the knowledge base for this task, each "
                                                      "with the recipe casebook executes for it:\n" + "\n".join(tricks),
                                  "knowledge base"))
    if memories:
        documents.append(Document("memories", "What casebook remembers from similar tasks:\n" + "\n".join(memories),
                                  "case library"))
    return documents


# ---------------------------------------------------------------------------------------------- the journal


def describe_node(node: Node, profile: TaskProfile) -> str:
    candidate = node.candidate
    score = f"CV {profile.metric}={node.metric:.5g}" if node.metric is not None else "no CV score"
    parent = f" of node {node.parent_id}" if node.parent_id is not None else ""
    what = (f"blend of nodes {', '.join(map(str, node.members))}" if node.members else
            f"{candidate.trainer} params {json.dumps(dict(candidate.params), default=str)}")
    trick = f"; trick {node.trick.id} ({node.trick.op})" if node.trick is not None else ""
    failure = f"; failed: {node.error.strip().splitlines()[-1][:160]}" if node.error.strip() else ""
    return f"node {node.id} ({node.action}{parent}): {what}; {node.status}, {score}{trick}{failure}"


def journal_summary(journal: Journal, profile: TaskProfile) -> str:
    """The best nodes and the latest ones, one line each (AutoMind's summary of previous attempts)."""
    if not len(journal):
        return "No solution has been tried yet."
    ranked = sorted(journal.valid_nodes, key=lambda node: node.score, reverse=True)[: JOURNAL_LINES // 2]
    latest = list(journal)[-(JOURNAL_LINES - len(ranked)):]
    shown = sorted({node.id: node for node in [*ranked, *latest]}.values(), key=lambda node: node.id)
    best = journal.best()
    lines = [f"{len(journal)} nodes so far; best: " + (f"node {best.id}" if best is not None else "none verified")]
    lines += [describe_node(node, profile) for node in shown]
    return "\n".join(lines)


def describe_spec(node: Node) -> str:
    candidate = node.candidate
    return json.dumps({"trainer": candidate.trainer, "params": dict(candidate.params),
                       "steps": [step.to_dict() for step in candidate.steps or ()],
                       "target_transform": candidate.target_transform.op if candidate.target_transform else None},
                      default=str)


SPEC_FIELDS = ('{"kind": "spec", "rationale": "<your plan in one or two sentences>", "trainer": "...", '
               '"params_json": "{...}", "steps": [...] or null, "target_transform": null or "..."')
CODE_FIELDS = '{"kind": "code", "rationale": "<the plan>", "complexity": <1-5>}'


def draft_question(journal: Journal, profile: TaskProfile, *, menu: bool, code: bool) -> str:
    tricks = (', "tricks": [<ids of retrieved tricks this draft uses: those its columns and metric need>]' if menu
              else "")
    lines = ["Action: draft", "", journal_summary(journal, profile), "",
             "Propose a new draft solution: preferably a model family no draft uses yet, with the preprocessing this "
             "task's columns and metric need. Answer " + SPEC_FIELDS + tricks + "}."]
    if code:
        lines.append("Or, if the vocabulary cannot express the solution, answer " + CODE_FIELDS + ".")
    return "\n".join(lines)


def improve_question(node: Node, journal: Journal, profile: TaskProfile, menu: Sequence[str], *, code: bool,
                     spec: bool = True) -> str:
    """An improvement of `node`: one of the `menu` tricks, else one change of its spec; free code when `code`.
    A node that is a script (not `spec`) is improved with free code only."""
    lines = ["Action: improve", "", journal_summary(journal, profile), "",
             f"Improve node {node.id}: {describe_node(node, profile)}"]
    if not spec:
        return "\n".join([*lines, "Its script:", "```python", node.code, "```", "",
                          "Plan exactly one change of this script. Answer " + CODE_FIELDS + "."])
    lines += [f"Its solution: {describe_spec(node)}", ""]
    if menu:
        lines += ["Integrate exactly one of these retrieved tricks (not yet tried on this branch) into it:",
                  *menu, "",
                  'Answer {"kind": "trick", "trick": "<the id>", "rationale": "<why this trick, for this node>"}.']
    else:
        lines.append("Make exactly one atomic change to it (a parameter, a step, the target transform). Answer "
                     + SPEC_FIELDS + "} with the whole changed solution.")
    if code:
        lines.append("Or, if the improvement cannot be said in the vocabulary, answer " + CODE_FIELDS + ".")
    return "\n".join(lines)


def debug_question(node: Node, journal: Journal, profile: TaskProfile) -> str:
    error = node.error.strip() or node.output
    return "\n".join([
        "Action: debug", "", journal_summary(journal, profile), "",
        f"Node {node.id} failed: {describe_node(node, profile)}", f"Its solution: {describe_spec(node)}",
        f"How it failed ({node.failure or 'error'}): {error[-ERROR_CHARS:]}", "",
        "Repair exactly this failure, changing as little as possible. Answer " + SPEC_FIELDS + "} with the whole "
        "repaired solution.",
    ])
