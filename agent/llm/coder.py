"""Free code (answer kind "code"), after AutoMind's self-adaptive coding: for what the recipe vocabulary cannot say.

The planner answers a plan with a complexity score from 1 to 5. Below `threshold` the script is written in one
pass; from it on, the plan is split into steps, and each step's code is appended to the script so far, checked
(agent.execution.free_code.check_script: syntax, network, processes, dynamic code) and run confined in the plan's own
folder (execute_script, with the task's files written by write_inputs), its error fed back, retried up to
`attempts` times; a step that still fails abandons the plan (an LLMAnswerError: the step falls back to the offline
proposer). The last step, and a one-pass script, are only checked: the tree search runs the whole script and scores
it itself (Evaluator.evaluate_script: out-of-fold predictions on the engine's folds, a leakage probe), so a claimed
or hard-coded score cannot pass, and a script that fails there is a buggy node the next debug step repairs.

Scripts are run only by agent.execution.free_code, in a fresh interpreter whose environment holds no key.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from agent.candidate import AppliedTrick, SolutionCandidate
from agent.engine.dataset import Dataset
from agent.engine.spec import ValidationSpec
from agent.execution.free_code import (
    REFUSED_BEFORE_RUNNING,
    SCRIPT_CONTRACT,
    check_script,
    execute_script,
    is_refusal,
    write_inputs,
)
from agent.execution.sandbox import Limits, error_tail, last_line
from agent.llm.answers import CodeAnswer, rationale_of
from agent.llm.prompts import ERROR_CHARS, describe_node, describe_spec, journal_summary
from agent.search.journal import Journal, Node
from agent.search.protocols import FREE_CODE, Proposal
from kb.llm import LLMAnswerError, LLMError
from retrieval.profile import TaskProfile

COMPLEXITY_THRESHOLD = 3  # plans scored this complex or more are written step by step
MAX_ATTEMPTS = 3  # tries of one step (the first and two fixes) before the plan is abandoned
MAX_STEPS = 5
MIN_STEP_SECONDS = 5.0  # a step run needs at least this much of the budget left
MAX_REFUSED_SCRIPTS = 2  # refused scripts in a run before free code is off for the rest of it
LIBRARIES = "numpy, pandas, scikit-learn, scipy, xgboost, lightgbm and catboost"

Ask = Callable[[str, Callable[[Mapping[str, Any]], Any]], Any]  # (question, validate) -> validated answer
_FENCE = re.compile(r"^\s*```(?:python)?\s*\n(.*?)\n?```\s*$", re.DOTALL)


@dataclass
class FreeCoder:
    """Writes a code plan's script with the LLM; runs intermediate steps confined in `folder`/plan-<n>. No proposer
    itself: the LLM proposer (agent.llm.proposer) hands it the plan the LLM answered and an `Ask` on its own prompt."""

    dataset: Dataset
    folder: Path
    limits: Limits  # each step run's; its time is cut to what `deadline` leaves
    validation: ValidationSpec
    deadline: float = math.inf  # time.monotonic() value: the search's end
    allow_unisolated: bool = False  # run step scripts where the OS offers no isolation (--allow-unisolated-code)
    threshold: int = COMPLEXITY_THRESHOLD
    attempts: int = MAX_ATTEMPTS
    plans: int = 0  # plans written so far (their folders' numbers)
    max_refusals: int = MAX_REFUSED_SCRIPTS
    refusals: list[str] = field(default_factory=list)  # why each refused script (or step) was refused, in order

    @staticmethod
    def wrote(node: Node) -> bool:
        return node.candidate.trainer == FREE_CODE

    @property
    def off(self) -> str | None:
        """Why free code is off for the rest of the run (`max_refusals` scripts refused), or None."""
        if len(self.refusals) < self.max_refusals:
            return None
        return f"free code is off for the rest of the run: {len(self.refusals)} scripts were refused (the last: " \
               f"{self.refusals[-1][:200]})"

    def observe(self, node: Node) -> None:
        """Count a node's script that the sandbox refused (the tree ran it)."""
        if self.wrote(node) and not node.valid and is_refusal(node.error):
            self.refusals.append(f"node {node.id}: {last_line(node.error)}")

    def _checked(self, data: Mapping[str, Any], prefix: str = "") -> str:
        """checked(), counting the scripts the static check refuses; FreeCodeOff (not re-asked) at the limit."""
        try:
            return checked(data, prefix)
        except ScriptRefused as refusal:
            self.refusals.append(str(refusal))
            if self.off is not None:
                raise FreeCodeOff(self.off) from None
            raise

    # ---- the three actions

    def draft(self, plan: CodeAnswer, profile: TaskProfile, journal: Journal, ask: Ask, model: str) -> Proposal:
        script, how = self.write(plan, profile, journal, ask)
        return self._proposal(f"draft: free code ({how})", plan, script, model)

    def improve(self, plan: CodeAnswer, node: Node, profile: TaskProfile, journal: Journal, ask: Ask, model: str,
                trick: AppliedTrick | None = None) -> Proposal:
        script, how = self.write(plan, profile, journal, ask, node)
        head = f"improve node {node.id} ({node.candidate.trainer}) with free code ({how})"
        if trick is not None:
            head += f", integrating {trick.describe()}"
        return self._proposal(head, plan, script, model, trick)

    def debug(self, node: Node, profile: TaskProfile, journal: Journal, ask: Ask, model: str) -> Proposal:
        question = "\n".join([
            "Action: debug code", "", journal_summary(journal, profile), "",
            f"Node {node.id}'s script failed ({node.failure or 'error'}): {(node.error.strip() or node.output)[-ERROR_CHARS:]}",
            "The script:", "```python", node.code, "```", "", SCRIPT_CONTRACT, "",
            'Fix exactly this failure. Answer {"rationale": "<what was wrong>", "code": "<the whole fixed script>"}.'])
        rationale, script = ask(question, lambda answer: (rationale_of(answer), self._checked(answer)))
        return self._proposal(f"debug node {node.id} (free code)", CodeAnswer(rationale, 1), script, model)

    # ---- writing a script

    def write(self, plan: CodeAnswer, profile: TaskProfile, journal: Journal, ask: Ask,
              base: Node | None = None) -> tuple[str, str]:
        """The plan's script, and how it was written ("one pass", "4 steps")."""
        self.plans += 1
        context = [journal_summary(journal, profile), "", f"The plan: {plan.rationale}"]
        if base is not None and self.wrote(base):
            context += [f"It improves node {base.id}'s script:", "```python", base.code, "```"]
        elif base is not None:
            context += [f"It improves node {base.id} ({describe_node(base, profile)}), whose solution in casebook's "
                        f"vocabulary is {describe_spec(base)}."]
        context += ["", SCRIPT_CONTRACT, f"Libraries: {LIBRARIES} and the standard library."]
        if plan.complexity < self.threshold:
            question = "\n".join(["Action: write code", "", *context, "",
                                  'Write the whole script. Answer {"code": "<the script>"}.'])
            return ask(question, self._checked), "one pass"
        steps = ask("\n".join(["Action: split the plan", "", *context, "",
                               f"Split the plan into 2 to {MAX_STEPS} steps, each a part of the script that runs after "
                               "the ones before it (e.g. load and prepare the data; build features; fit per fold and "
                               'write the out-of-fold predictions; fit on all rows and write the test predictions). '
                               'Answer {"steps": ["<step 1>", "<step 2>", ...]}.']), _steps)
        return self._stepwise(steps, context, ask), f"{len(steps)} steps"

    def _stepwise(self, steps: Sequence[str], context: Sequence[str], ask: Ask) -> str:
        script, folder = "", self.folder / f"plan-{self.plans}"
        listed = [f"{number}. {step}" for number, step in enumerate(steps, start=1)]
        for index in range(len(steps)):
            feedback, last = "", index == len(steps) - 1
            for _ in range(self.attempts):
                question = "\n".join([f"Action: write step {index + 1} of {len(steps)}", "", *context, "",
                                      "The steps:", *listed, "",
                                      "The script so far (it runs):" if script else "Nothing is written yet.",
                                      *(["```python", script, "```"] if script else []),
                                      *([f"Your last code for this step failed: {feedback}"] if feedback else []),
                                      "", f"Write the code of step {index + 1} only, to be appended to the script so "
                                          'far. Answer {"code": "<the code of this step>"}.'])
                code = ask(question, lambda answer, prefix=script: self._checked(answer, prefix=prefix))
                candidate = f"{script}\n\n{code}".strip("\n") + "\n"
                if last:  # the search runs and scores the whole script
                    return candidate
                outcome = self._run(candidate, folder)
                if outcome.ok:
                    script = candidate
                    break
                feedback = f"the script up to step {index + 1} ended in {outcome.status}: {error_tail(outcome.error)}"
                if is_refusal(outcome.error):
                    self.refusals.append(f"step {index + 1}: {last_line(outcome.error)}")
                    if self.off is not None:
                        raise FreeCodeOff(self.off)
            else:
                raise LLMAnswerError(f"free code abandoned: step {index + 1} of {len(steps)} still failed after "
                                     f"{self.attempts} tries ({feedback[:300]})")
        raise AssertionError("unreachable: the last step returns")

    def _run(self, script: str, folder: Path):
        seconds = min(self.limits.time_seconds, self.deadline - time.monotonic())
        if seconds < MIN_STEP_SECONDS:
            raise LLMAnswerError("free code abandoned: the time budget has no room to run its steps")
        if not (folder / "task.json").is_file():
            write_inputs(self.dataset, folder, self.validation)
        return execute_script(script, folder, replace(self.limits, time_seconds=seconds),
                              allow_unisolated=self.allow_unisolated)

    @staticmethod
    def _proposal(head: str, plan: CodeAnswer, script: str, model: str,
                  trick: AppliedTrick | None = None) -> Proposal:
        rationale = plan.rationale or "(no rationale given)"
        plan_text = f"{head} — LLM {model}: {rationale} (complexity {plan.complexity})"
        return Proposal(SolutionCandidate(FREE_CODE, {}, plan_text, ()), plan_text, trick, script=script)


class ScriptRefused(LLMAnswerError):
    """The static check refused the script an answer makes (re-asked once, with the reason)."""


class FreeCodeOff(LLMError):
    """Too many scripts were refused: the plan is abandoned, and the step falls back (never re-asked)."""


def checked(data: Mapping[str, Any], prefix: str = "") -> str:
    """The answer's code, if the script it makes (`prefix` + code) passes check_script; ScriptRefused when it does
    not, LLMAnswerError when the answer holds no code."""
    code = data.get("code")
    if not isinstance(code, str) or not code.strip():
        raise LLMAnswerError('the answer has no code: answer {"code": "<python source>"}')
    fenced = _FENCE.match(code)
    code = fenced.group(1) if fenced else code
    problems = check_script(f"{prefix}\n\n{code}" if prefix else code)  # line numbers of the script as it will be
    if problems:
        raise ScriptRefused(f"the code was {REFUSED_BEFORE_RUNNING}: {'; '.join(problems)}")
    return code


def _steps(data: Mapping[str, Any]) -> list[str]:
    steps = data.get("steps")
    if not isinstance(steps, list) or not 2 <= len(steps) <= MAX_STEPS or not all(isinstance(s, str) and s.strip()
                                                                                    for s in steps):
        raise LLMAnswerError(f"steps must be a list of 2 to {MAX_STEPS} descriptions")
    return [" ".join(step.split()) for step in steps]
