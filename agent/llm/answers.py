"""The LLM's answers, checked against casebook's catalogue before anything runs.

A spec answer (kind "spec") follows the seed card's `AgentSolutionProposer` contract: `trainer`, `params_json`,
`rationale`. An unknown trainer becomes the best trainer so far and malformed parameters become {} (each correction
is a note in the plan); steps and target transforms must be the catalogue's (agent.engine.steps), or the answer is
refused with the reason, which kb.llm sends back once as a re-ask. So every spec that reaches the engine renders,
verifies and traces like any other.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agent.candidate import SolutionCandidate
from agent.engine.spec import Step
from agent.engine.steps import BUILTIN_STEPS, TARGET_OPS
from agent.engine.trainers import Trainer, steps_for
from kb.llm import LLMAnswerError
from retrieval.metrics import CLASSIFICATION

SPEC, TRICK, CODE = "spec", "trick", "code"
MAX_COMPLEXITY = 5


@dataclass(frozen=True)
class SpecAnswer:
    candidate: SolutionCandidate
    rationale: str
    notes: tuple[str, ...] = ()  # corrections made to the answer (unknown trainer, malformed params)
    tricks: tuple[str, ...] = ()  # ids of retrieved tricks the answer asks to apply (a draft's)


@dataclass(frozen=True)
class TrickAnswer:
    trick: str  # the id of one retrieved trick
    rationale: str


@dataclass(frozen=True)
class CodeAnswer:
    rationale: str  # the plan the script carries out
    complexity: int  # 1 (a few lines) to 5 (many interacting parts)
    trick: str | None = None  # the id of the one retrieved trick an improvement integrates, if it names one


def kind_of(data: Mapping[str, Any], allowed: Sequence[str]) -> str:
    kind = str(data.get("kind") or (TRICK if "trick" in data and TRICK in allowed else SPEC)).strip().lower()
    if kind not in allowed:
        raise LLMAnswerError(f"kind {kind!r} is not an answer here; use one of {', '.join(allowed)}")
    return kind


def rationale_of(data: Mapping[str, Any]) -> str:
    return " ".join(str(data.get("rationale") or "").split())[:600]


def params_of(value: Any) -> tuple[dict[str, Any], str | None]:
    """`params_json` as a dict: a JSON object (in a string or not); anything else is {} and a note saying so."""
    if value is None or value == "":
        return {}, None
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as error:
            return {}, f"params_json was not valid JSON ({error.msg}), so the trainer's defaults are used"
    if not isinstance(value, dict) or not all(isinstance(name, str) for name in value):
        return {}, f"params_json was {type(value).__name__}, not an object, so the trainer's defaults are used"
    return dict(value), None


def read_spec(data: Mapping[str, Any], trainers: Mapping[str, Trainer], best_trainer: str, task_type: str,
              menu: Sequence[str] = ()) -> SpecAnswer:
    """A spec answer as a SolutionCandidate; LLMAnswerError for steps, transforms or trick ids outside the catalogue."""
    notes = []
    trainer = str(data.get("trainer") or "").strip()
    if trainer not in trainers or trainer == "baseline":
        notes.append(f"the LLM named trainer {trainer!r}, which casebook does not have, so the best trainer so far "
                     f"({best_trainer}) is used")
        trainer = best_trainer
    params, note = params_of(data.get("params_json", data.get("params")))
    if note:
        notes.append(note)
    raw_steps = data.get("steps")
    steps = steps_for(trainer, trainers) if raw_steps is None else read_steps(raw_steps)
    tricks = tuple(str(item) for item in data.get("tricks") or ())
    unknown = [trick for trick in tricks if trick not in menu]
    if unknown:
        raise LLMAnswerError(f"tricks {unknown} are not among the retrieved tricks; use their ids as listed")
    transform = read_transform(data.get("target_transform"), task_type)
    rationale = rationale_of(data)
    return SpecAnswer(SolutionCandidate(trainer, params, rationale, steps, transform), rationale, tuple(notes), tricks)


def read_steps(value: Any) -> tuple[Step, ...]:
    if not isinstance(value, list):
        raise LLMAnswerError("steps must be a list of {\"op\": ..., \"params\": {...}} or null")
    steps = []
    for item in value:
        op, params = _op_and_params(item)
        if op not in BUILTIN_STEPS:
            raise LLMAnswerError(f"step {item!r} is not in the step catalogue; known ops: {', '.join(BUILTIN_STEPS)}")
        if not isinstance(params, dict):
            raise LLMAnswerError(f"step {op}: params must be an object")
        known = {*BUILTIN_STEPS[op].defaults, *BUILTIN_STEPS[op].fixed}
        unknown = sorted(set(params) - known)
        if unknown:
            raise LLMAnswerError(f"step {op} has no parameter {', '.join(unknown)}; it takes {sorted(known) or 'none'}")
        steps.append(Step(op, dict(params)))
    return tuple(steps)


def read_transform(value: Any, task_type: str) -> Step | None:
    if value in (None, "", "none", "null"):
        return None
    op, params = _op_and_params(value)
    if op not in TARGET_OPS:
        raise LLMAnswerError(f"target_transform {value!r} is not one of {', '.join(TARGET_OPS)} (or null)")
    if task_type in CLASSIFICATION:
        raise LLMAnswerError("a target transform is for regression; this is a classification task: use null")
    unknown = sorted(set(params) - set(TARGET_OPS[op].defaults))
    if unknown:
        raise LLMAnswerError(f"target transform {op} has no parameter {', '.join(unknown)}")
    return Step(op, dict(params))


def _op_and_params(value: Any) -> tuple[Any, Any]:
    """("op", {}) for a bare op name, (op, params) for {"op": ..., "params": ...}; (None, None) for anything else."""
    if isinstance(value, str):
        return value, {}
    if isinstance(value, dict):
        return value.get("op"), value.get("params") or {}
    return None, None


def read_trick(data: Mapping[str, Any], menu: Sequence[str]) -> TrickAnswer:
    trick = str(data.get("trick") or "").strip()
    if trick not in menu:
        raise LLMAnswerError(f"trick {trick!r} is not one of the listed tricks; choose exactly one of: "
                             f"{', '.join(menu)}")
    return TrickAnswer(trick, rationale_of(data))


def read_code_plan(data: Mapping[str, Any], menu: Sequence[str] = ()) -> CodeAnswer:
    trick = data.get("trick")
    if trick is not None and trick not in menu:
        raise LLMAnswerError(f"trick {trick!r} is not one of the listed tricks; name one of them or null")
    rationale = rationale_of(data)
    if not rationale:
        raise LLMAnswerError("a code answer needs its plan in \"rationale\"")
    try:
        complexity = int(data.get("complexity"))
    except (TypeError, ValueError):
        raise LLMAnswerError(f"complexity must be a whole number from 1 to {MAX_COMPLEXITY}") from None
    return CodeAnswer(rationale, min(max(complexity, 1), MAX_COMPLEXITY), trick)
