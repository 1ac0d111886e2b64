"""Repairs for the debug step: read why a node failed and change its spec accordingly, rather than retry it.

Each rule takes one `Failure` (the node's candidate, its steps, the verdict's failure kind and findings, the error
text, the task profile and the trainers) and returns a `Repair` or None; the first rule, in `_RULES` order, whose
repair changes the candidate wins. Rules decide from the records (the failure kind, the findings' step and op);
only the rules that recognise library and engine error messages read the text.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from agent.candidate import SolutionCandidate
from agent.engine.spec import Step, insert_before, replace_step
from agent.engine.trainers import Trainer, steps_for, trainer_facts
from agent.execution.sandbox import last_line
from agent.search.journal import Node, candidate_key
from agent.verify.findings import LEAKAGE, MEMORY, NON_FINITE, NOT_BETTER, RUN_FAILURES, TIMEOUT, Finding
from retrieval.profile import TaskProfile

_LINE_LIMIT = 160  # characters of an error's last line quoted in a diagnosis
# The encoders a repair swaps between.
ENCODERS = ("one_hot", "ordinal_encoding", "target_encoding")
# Where a step's code shows up in a traceback: the op's name and the classes that implement it.
_STEP_MARKERS = {
    "one_hot": ("OneHotEncoder", "_encoders.py"),
    "ordinal_encoding": ("OrdinalCodes",),
    "target_encoding": ("TargetEncoder", "_target_encoder"),
    "datetime_parts": ("DatetimeParts", "_as_datetime"),
    "missing_indicators": ("AddMissingIndicators",),
    "impute_numeric": ("SimpleImputer", "_impute"),
    "impute_categorical": ("SimpleImputer", "_impute"),
    "standard_scale": ("StandardScaler", "_data.py"),
}


@dataclass(frozen=True, eq=False)
class Failure:
    """Why a node failed, as the repair rules read it."""

    candidate: SolutionCandidate  # the node's candidate
    steps: tuple[Step, ...]  # its preprocessing
    ops: tuple[str, ...]  # the steps' ops, in order
    kind: str | None  # the verdict's failure kind (agent.verify.findings.FAILURES); None if the verifier did not say
    findings: tuple[Finding, ...]  # the findings behind the verdict
    # What the verifier said and the end of the traceback, for the rules that read error messages of the libraries
    # and the engine (e.g. "could not convert string to float").
    text: str
    profile: TaskProfile
    trainers: Mapping[str, Trainer]

    @classmethod
    def of(cls, node: Node, profile: TaskProfile, trainers: Mapping[str, Trainer]) -> Failure:
        steps = tuple(node.candidate.steps or ())
        return cls(node.candidate, steps, tuple(step.op for step in steps), node.failure, node.findings,
                   f"{node.output}\n{node.error}", profile, trainers)

    @property
    def lowered(self) -> str:
        return self.text.lower()

    @property
    def run_failed(self) -> bool:
        """Its run ended badly (an error, a timeout, out of memory, a crash), as opposed to a poor or leaky result."""
        return self.kind in RUN_FAILURES

    @property
    def leaks(self) -> tuple[Finding, ...]:
        return tuple(finding for finding in self.findings if finding.leak)


@dataclass(frozen=True)
class Repair:
    diagnosis: str  # what went wrong and what the repair changes, in words (the debug node's plan)
    candidate: SolutionCandidate  # the repaired candidate


Rule = Callable[[Failure], "Repair | None"]


def diagnose(node: Node, profile: TaskProfile, trainers: Mapping[str, Trainer]) -> tuple[str, SolutionCandidate] | None:
    """Read the failure (the verdict's kind and findings, the error text, the step it came from) and repair the spec:
    (diagnosis, repaired candidate), from the first rule whose repair changes the candidate."""
    failure = Failure.of(node, profile, trainers)
    for rule in _RULES:
        repair = rule(failure)
        if repair is not None and candidate_key(repair.candidate) != candidate_key(failure.candidate):
            return repair.diagnosis, repair.candidate
    return None


def _leak(failure: Failure) -> Repair | None:
    """Drop the step the verifier's first leak finding names."""
    leak = failure.leaks[0] if failure.kind == LEAKAGE and failure.leaks else None
    if leak is None or leak.step is None:
        return None
    kept = tuple(step for position, step in enumerate(failure.steps, start=1) if position != leak.step)
    return Repair(f"the verifier found that step {leak.step} ({leak.op}) leaks; drop it",
                  replace(failure.candidate, steps=kept))


def _unknown_parameter(failure: Failure) -> Repair | None:
    base, text = failure.candidate, failure.text
    match = re.search(r"op '(\w+)' has no parameter ([\w, ]+?);", text) or re.search(
        r"op '(\w+)': (\w+)=.*? is not supported", text)
    if match:
        op, names = match.group(1), {name.strip() for name in match.group(2).split(",")}
        fixed = tuple(Step(step.op, {k: v for k, v in step.params.items() if k not in names}) if step.op == op else step
                      for step in failure.steps)
        return Repair(f"step {op} rejects parameter(s) {', '.join(sorted(names))}; drop them",
                      replace(base, steps=fixed))
    match = re.search(r"unexpected keyword argument '(\w+)'", text) or re.search(
        r"[Ii]nvalid parameter '?(\w+)'?", text)
    if match and match.group(1) in base.params:
        name = match.group(1)
        params = {k: v for k, v in base.params.items() if k != name}
        return Repair(f"the model rejects parameter {name}; drop it", replace(base, params=params))
    match = re.search(r"The '(\w+)' parameter of \w+ must be", text)
    if match and match.group(1) in base.params:
        name = match.group(1)
        return Repair(f"the model rejects the value of {name}; back to its default",
                      replace(base, params={k: v for k, v in base.params.items() if k != name}))
    return None


def _unknown_op(failure: Failure) -> Repair | None:
    base, text = failure.candidate, failure.text
    match = re.search(r"unknown step op '(\w+)'", text)
    if match:
        op = match.group(1)
        return Repair(f"step op {op} does not exist; drop that step",
                      replace(base, steps=tuple(s for s in failure.steps if s.op != op)))
    match = re.search(r"unknown target transform '(\w+)'", text)
    if match:
        return Repair(f"target transform {match.group(1)} does not exist; model the raw target",
                      replace(base, target_transform=None))
    match = re.search(r"unknown trainer '(\w+)'", text)
    if match:
        fallback = "hist_gradient_boosting"
        return Repair(f"trainer {match.group(1)} does not exist; use {fallback} with its own preprocessing",
                      SolutionCandidate(fallback, {}, "", steps_for(fallback, failure.trainers), base.target_transform))
    return None


def _too_big(failure: Failure) -> Repair | None:
    lowered = failure.lowered
    memory = (failure.kind == MEMORY or "memoryerror" in lowered or "unable to allocate" in lowered
              or "killed by signal" in lowered)
    if not memory:
        return None
    if "one_hot" in failure.ops:
        return Repair("out of memory with one-hot columns (too many levels); ordinal codes instead",
                      replace(failure.candidate, steps=replace_step(failure.steps, "one_hot", Step("ordinal_encoding"))))
    return _smaller_model("out of memory", failure.candidate, failure.trainers)


def _timeout(failure: Failure) -> Repair | None:
    if failure.kind != TIMEOUT and "timed out" not in failure.lowered:
        return None
    return _smaller_model("timed out", failure.candidate, failure.trainers)


def _smaller_model(why: str, base: SolutionCandidate, trainers: Mapping[str, Trainer]) -> Repair | None:
    facts = trainer_facts(base.trainer)
    rounds = facts.rounds_param
    if rounds is not None:
        current = int(base.params.get(rounds, facts.default_rounds))
        if current > 25:
            params = {**base.params, rounds: max(current // 3, 25)}
            rate = facts.learning_rate_param
            change = f"{rounds} {current} -> {params[rounds]}"
            if rate is not None:
                old = float(base.params.get(rate, facts.default_learning_rate))
                params[rate] = round(min(old * 3, 0.3), 4)
                change += f", {rate} {old} -> {params[rate]}"
            return Repair(f"{why}; a third of the rounds at a higher learning rate ({change})",
                          replace(base, params=params))
    if base.trainer != "hist_gradient_boosting":
        return Repair(f"{why}; histogram gradient boosting is the fastest learner here",
                      SolutionCandidate("hist_gradient_boosting", {}, "", steps_for("hist_gradient_boosting", trainers),
                                        base.target_transform))
    return None


def _non_numeric(failure: Failure) -> Repair | None:
    markers = ("could not convert string to float", "dtypes for data must be", "cannot use median strategy",
               "cannot use mean strategy", "non-numeric", "dtype='object'", "unsupported dtype", "dtype: object")
    if not any(marker in failure.lowered for marker in markers):
        return None
    base, steps, ops = failure.candidate, failure.steps, failure.ops
    if any(op in ops for op in ENCODERS) and "datetime_parts" not in ops and failure.profile.columns_of_kind("datetime"):
        return Repair("a date column reaches the model as text; split dates into parts",
                      replace(base, steps=insert_before(steps, [Step("datetime_parts")], ENCODERS)))
    if base.trainer == "linear":
        new = [Step("impute_categorical"), Step("one_hot")]
        fix = "impute and one-hot encode the categorical columns"
    else:
        new = [Step("ordinal_encoding")]
        fix = "encode the categorical columns as ordinal codes"
    new = [step for step in new if step.op not in ops]
    if not new:
        return None
    where = ("standard_scale",) if "standard_scale" in ops else ()
    return Repair(f"text values reach a numeric step or the model (\"{_quote(failure.text, markers)}\"); {fix}",
                  replace(base, steps=insert_before(steps, new, where)))


def _missing_values(failure: Failure) -> Repair | None:
    lowered = failure.lowered
    if "contains nan" not in lowered and "input contains nan" not in lowered and "missing values" not in lowered:
        return None
    new = [step for step in (Step("impute_numeric"), Step("impute_categorical")) if step.op not in failure.ops]
    if not new:
        return None
    return Repair("the model does not accept missing values; impute them first",
                  replace(failure.candidate, steps=insert_before(failure.steps, new, (*ENCODERS, "standard_scale"))))


def _failing_step(failure: Failure) -> Repair | None:
    """A step whose code the traceback passes through, deepest last: drop it (keeping at least one encoder)."""
    base, steps, ops, text = failure.candidate, failure.steps, failure.ops, failure.text
    if not steps or not failure.run_failed:
        return None
    best, best_position = None, -1
    for index, op in enumerate(ops):
        for marker in (op, *_STEP_MARKERS.get(op, ())):
            position = text.rfind(marker)
            if position > best_position:
                best, best_position = index, position
    if best is None:
        return None
    op = ops[best]
    kept = tuple(step for position, step in enumerate(steps) if position != best)
    if op in ENCODERS and not any(o in ENCODERS for o in ops if o != op):
        replacement = "one_hot" if op != "one_hot" else "ordinal_encoding"
        return Repair(f"step {best + 1} ({op}) raised; {replacement} instead",
                      replace(base, steps=replace_step(steps, op, Step(replacement))))
    return Repair(f"step {best + 1} ({op}) raised ({last_line(text, _LINE_LIMIT)}); drop it", replace(base, steps=kept))


def _not_better(failure: Failure) -> Repair | None:
    base = failure.candidate
    if failure.kind not in (NON_FINITE, NOT_BETTER) and not failure.run_failed:
        return None
    if base.target_transform is not None:
        return Repair("no usable score with the target transform; model the raw target",
                      replace(base, target_transform=None))
    fallback = "hist_gradient_boosting" if base.trainer != "hist_gradient_boosting" else "random_forest"
    if fallback not in failure.trainers:
        return None
    return Repair(f"{base.trainer} gives no usable score ({last_line(failure.text, _LINE_LIMIT)}); try {fallback} "
                  "with its own preprocessing",
                  SolutionCandidate(fallback, {}, "", steps_for(fallback, failure.trainers), None))


# In this order: the first rule whose repair changes the candidate is the repair.
_RULES: tuple[Rule, ...] = (_leak, _unknown_parameter, _unknown_op, _too_big, _timeout, _non_numeric,
                            _missing_values, _failing_step, _not_better)


def _quote(text: str, markers: Sequence[str]) -> str:
    for line in text.splitlines():
        if any(marker in line.lower() for marker in markers):
            return line.strip()[:120]
    return last_line(text, _LINE_LIMIT)
