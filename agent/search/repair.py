"""Repairs for the debug step: read why a node failed and change its spec accordingly, rather than retry it."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from agent.candidate import SolutionCandidate
from agent.engine.spec import Step, insert_before, replace_step
from agent.engine.trainers import Trainer, steps_for, trainer_facts
from agent.search.journal import Node, candidate_key
from retrieval.profile import TaskProfile

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


def diagnose(node: Node, profile: TaskProfile, trainers: Mapping[str, Trainer]) -> tuple[str, SolutionCandidate] | None:
    """Read the failure (the verdict, the error text, the step it came from) and repair the spec."""
    base = node.candidate
    steps = tuple(base.steps or ())
    ops = [step.op for step in steps]
    text = f"{node.output}\n{node.error}"
    lowered = text.lower()
    for rule in _RULES:
        repair = rule(base, steps, ops, text, lowered, profile, trainers)
        if repair is not None and candidate_key(repair[1]) != candidate_key(base):
            return repair
    return None


_Rule = Callable[..., "tuple[str, SolutionCandidate] | None"]


def _leak(base, steps, ops, text, lowered, profile, trainers):
    match = re.search(r"leakage: step (\d+) \((\w+)\)", text)
    if not match:
        return None
    index, op = int(match.group(1)) - 1, match.group(2)
    kept = tuple(step for position, step in enumerate(steps) if position != index)
    return f"the verifier found that step {index + 1} ({op}) leaks; drop it", replace(base, steps=kept)


def _unknown_parameter(base, steps, ops, text, lowered, profile, trainers):
    match = re.search(r"op '(\w+)' has no parameter ([\w, ]+?);", text) or re.search(
        r"op '(\w+)': (\w+)=.*? is not supported", text)
    if match:
        op, names = match.group(1), {name.strip() for name in match.group(2).split(",")}
        fixed = tuple(Step(step.op, {k: v for k, v in step.params.items() if k not in names}) if step.op == op else step
                      for step in steps)
        return f"step {op} rejects parameter(s) {', '.join(sorted(names))}; drop them", replace(base, steps=fixed)
    match = re.search(r"unexpected keyword argument '(\w+)'", text) or re.search(
        r"[Ii]nvalid parameter '?(\w+)'?", text)
    if match and match.group(1) in base.params:
        name = match.group(1)
        params = {k: v for k, v in base.params.items() if k != name}
        return f"the model rejects parameter {name}; drop it", replace(base, params=params)
    match = re.search(r"The '(\w+)' parameter of \w+ must be", text)
    if match and match.group(1) in base.params:
        name = match.group(1)
        return (f"the model rejects the value of {name}; back to its default",
                replace(base, params={k: v for k, v in base.params.items() if k != name}))
    return None


def _unknown_op(base, steps, ops, text, lowered, profile, trainers):
    match = re.search(r"unknown step op '(\w+)'", text)
    if match:
        op = match.group(1)
        return f"step op {op} does not exist; drop that step", replace(base, steps=tuple(s for s in steps if s.op != op))
    match = re.search(r"unknown target transform '(\w+)'", text)
    if match:
        return f"target transform {match.group(1)} does not exist; model the raw target", replace(base, target_transform=None)
    match = re.search(r"unknown trainer '(\w+)'", text)
    if match:
        fallback = "hist_gradient_boosting"
        return (f"trainer {match.group(1)} does not exist; use {fallback} with its own preprocessing",
                SolutionCandidate(fallback, {}, "", steps_for(fallback, trainers), base.target_transform))
    return None


def _too_big(base, steps, ops, text, lowered, profile, trainers):
    memory = ("failed (memory)" in lowered or "memoryerror" in lowered or "unable to allocate" in lowered
              or "killed by signal" in lowered)
    if not memory:
        return None
    if "one_hot" in ops:
        return ("out of memory with one-hot columns (too many levels); ordinal codes instead",
                replace(base, steps=replace_step(steps, "one_hot", Step("ordinal_encoding"))))
    return _smaller_model("out of memory", base, trainers)


def _timeout(base, steps, ops, text, lowered, profile, trainers):
    if "failed (timeout)" not in lowered and "timed out" not in lowered:
        return None
    return _smaller_model("timed out", base, trainers)


def _smaller_model(why: str, base: SolutionCandidate, trainers) -> tuple[str, SolutionCandidate] | None:
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
            return f"{why}; a third of the rounds at a higher learning rate ({change})", replace(base, params=params)
    if base.trainer != "hist_gradient_boosting":
        return (f"{why}; histogram gradient boosting is the fastest learner here",
                SolutionCandidate("hist_gradient_boosting", {}, "", steps_for("hist_gradient_boosting", trainers),
                                  base.target_transform))
    return None


def _non_numeric(base, steps, ops, text, lowered, profile, trainers):
    markers = ("could not convert string to float", "dtypes for data must be", "cannot use median strategy",
               "cannot use mean strategy", "non-numeric", "dtype='object'", "unsupported dtype", "dtype: object")
    if not any(marker in lowered for marker in markers):
        return None
    if any(op in ops for op in ENCODERS) and "datetime_parts" not in ops and profile.columns_of_kind("datetime"):
        return ("a date column reaches the model as text; split dates into parts",
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
    return (f"text values reach a numeric step or the model (\"{_quote(text, markers)}\"); {fix}",
            replace(base, steps=insert_before(steps, new, where)))


def _missing_values(base, steps, ops, text, lowered, profile, trainers):
    if "contains nan" not in lowered and "input contains nan" not in lowered and "missing values" not in lowered:
        return None
    new = [step for step in (Step("impute_numeric"), Step("impute_categorical")) if step.op not in ops]
    if not new:
        return None
    return ("the model does not accept missing values; impute them first",
            replace(base, steps=insert_before(steps, new, (*ENCODERS, "standard_scale"))))


def _failing_step(base, steps, ops, text, lowered, profile, trainers):
    """A step whose code the traceback passes through, deepest last: drop it (keeping at least one encoder)."""
    if not steps or "failed (" not in lowered:
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
        return (f"step {best + 1} ({op}) raised; {replacement} instead",
                replace(base, steps=replace_step(steps, op, Step(replacement))))
    return f"step {best + 1} ({op}) raised ({_last_line(node_error=text)}); drop it", replace(base, steps=kept)


def _not_better(base, steps, ops, text, lowered, profile, trainers):
    if "non-finite cv score" not in lowered and "does not beat the trivial baseline" not in lowered \
            and "failed (" not in lowered:
        return None
    if base.target_transform is not None:
        return "no usable score with the target transform; model the raw target", replace(base, target_transform=None)
    fallback = "hist_gradient_boosting" if base.trainer != "hist_gradient_boosting" else "random_forest"
    if fallback not in trainers:
        return None
    return (f"{base.trainer} gives no usable score ({_last_line(text)}); try {fallback} with its own preprocessing",
            SolutionCandidate(fallback, {}, "", steps_for(fallback, trainers), None))


_RULES: tuple[_Rule, ...] = (_leak, _unknown_parameter, _unknown_op, _too_big, _timeout, _non_numeric,
                             _missing_values, _failing_step, _not_better)


def _last_line(node_error: str) -> str:
    lines = [line.strip() for line in node_error.strip().splitlines() if line.strip()]
    return (lines[-1] if lines else "unknown error")[:160]


def _quote(text: str, markers: Sequence[str]) -> str:
    for line in text.splitlines():
        if any(marker in line.lower() for marker in markers):
            return line.strip()[:120]
    return _last_line(text)
