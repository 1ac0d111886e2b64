"""A change between two candidates, as an edit that can be made again on another task's candidate (`Change`).

What a memory measured is a change: an improvement's parent -> node (what helped, or did not) and a debug step's
failed node -> repaired node (the repair tried first on the same failure elsewhere). `Change.between` reads it off
two candidates, `Change.apply` makes it on a third, `Change.op` names it in one word (the key its effects are
aggregated under) and `describe` says it in words for a plan.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from agent.candidate import SolutionCandidate
from agent.engine.spec import Step, insert_before

_MISSING = object()


def _steps(candidate: SolutionCandidate) -> tuple[Step, ...]:
    return tuple(candidate.steps or ())


@dataclass(frozen=True)
class Change:
    """What turned one candidate into another, as an edit that can be made again on another task's candidate:
    another model family (with its own preprocessing), steps added (before the op that followed them), removed or
    re-parametrised, model parameters set or dropped, another target transform."""

    trainer: str | None = None  # another model family; `steps` is then its whole preprocessing
    steps: tuple[Step, ...] | None = None
    params: Mapping[str, Any] = field(default_factory=dict)  # model parameters set to these values
    dropped_params: tuple[str, ...] = ()
    added: tuple[tuple[Step, str | None], ...] = ()  # (step, the op it came before; None: at the end)
    removed: tuple[str, ...] = ()
    altered: tuple[Step, ...] = ()  # steps kept, with these parameters
    target_changed: bool = False
    target_transform: Step | None = None

    @classmethod
    def between(cls, old: SolutionCandidate, new: SolutionCandidate) -> Change:
        target = (old.target_transform != new.target_transform, new.target_transform)
        if old.trainer != new.trainer:
            return cls(new.trainer, new.steps, dict(new.params), target_changed=True,
                       target_transform=new.target_transform)
        old_steps = {step.op: step for step in _steps(old)}
        new_steps = _steps(new)
        new_ops = [step.op for step in new_steps]
        added = tuple((step, next((op for op in new_ops[index + 1:] if op in old_steps), None))
                      for index, step in enumerate(new_steps) if step.op not in old_steps)
        altered = tuple(step for step in new_steps if step.op in old_steps and step != old_steps[step.op])
        params = {name: value for name, value in new.params.items() if old.params.get(name, _MISSING) != value}
        return cls(None, None, params, tuple(sorted(set(old.params) - set(new.params))), added,
                   tuple(op for op in old_steps if op not in new_ops), altered, *target)

    @property
    def ops(self) -> tuple[str, ...]:
        """The step ops the change needs in the candidate it is made on (removed or re-parametrised)."""
        return (*self.removed, *(step.op for step in self.altered))

    @property
    def op(self) -> str:
        """The change in one word, the key its measured effect is aggregated under: the op added (a recipe op, as a
        trick's), else the op re-parametrised, the op dropped, the target transform, the model parameters set,
        or the model family switched to."""
        if self.trainer is not None:
            return f"trainer:{self.trainer}"
        if self.added:
            return self.added[0][0].op
        if self.altered:
            return self.altered[0].op
        if self.removed:
            return f"drop:{self.removed[0]}"
        if self.target_changed:
            return self.target_transform.op if self.target_transform else "raw_target"
        if self.params or self.dropped_params:
            return "params:" + ",".join(sorted({*self.params, *self.dropped_params}))
        return "none"

    def describe(self) -> str:
        if self.trainer is not None:
            ops = ", ".join(step.op for step in self.steps or ()) or "no preprocessing"
            params = f" ({_params_text(self.params)})" if self.params else ""
            return f"switch to {self.trainer}{params} with {ops}"
        parts = [*(f"remove {op}" for op in self.removed),
                 *(f"add {step.op}" + (f" ({_params_text(step.params)})" if step.params else "")
                   for step, _ in self.added),
                 *(f"set {step.op} ({_params_text(step.params)})" for step in self.altered)]
        if self.params:
            parts.append(f"set {_params_text(self.params)}")
        if self.dropped_params:
            parts.append(f"drop parameter(s) {', '.join(self.dropped_params)}")
        if self.target_changed:
            parts.append(f"model {'the raw target' if self.target_transform is None else self.target_transform.op}")
        return "; ".join(parts) or "no change"

    def apply(self, candidate: SolutionCandidate) -> SolutionCandidate | None:
        """The same edit made on `candidate`; None when it does not fit (a step it removes or re-parametrises is
        missing there, or model parameters would land on another model family)."""
        if self.trainer is not None:
            return SolutionCandidate(self.trainer, dict(self.params), "", self.steps, self.target_transform)
        steps = list(_steps(candidate))
        ops = [step.op for step in steps]
        if any(op not in ops for op in self.ops):
            return None
        altered = {step.op: step for step in self.altered}
        steps = [altered.get(step.op, step) for step in steps if step.op not in self.removed]
        for step, before in self.added:
            if step.op not in {s.op for s in steps}:
                steps = list(insert_before(steps, [step], (before,) if before else ()))
        params = {**{k: v for k, v in candidate.params.items() if k not in self.dropped_params}, **self.params}
        target = self.target_transform if self.target_changed else candidate.target_transform
        return replace(candidate, params=params, steps=tuple(steps), target_transform=target)

    def to_dict(self) -> dict[str, Any]:
        return {"trainer": self.trainer, "steps": None if self.steps is None else [s.to_dict() for s in self.steps],
                "params": dict(self.params), "dropped_params": list(self.dropped_params),
                "added": [{"step": step.to_dict(), "before": before} for step, before in self.added],
                "removed": list(self.removed), "altered": [step.to_dict() for step in self.altered],
                "target_changed": self.target_changed,
                "target_transform": self.target_transform.to_dict() if self.target_transform else None}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Change:
        steps = data.get("steps")
        target = data.get("target_transform")
        return cls(data.get("trainer"), None if steps is None else tuple(Step.from_dict(s) for s in steps),
                   dict(data.get("params") or {}), tuple(data.get("dropped_params") or ()),
                   tuple((Step.from_dict(item["step"]), item.get("before")) for item in data.get("added") or ()),
                   tuple(data.get("removed") or ()), tuple(Step.from_dict(s) for s in data.get("altered") or ()),
                   bool(data.get("target_changed")), Step.from_dict(target) if target else None)


def _params_text(params: Mapping[str, Any]) -> str:
    return ", ".join(f"{name}={value}" for name, value in params.items())
