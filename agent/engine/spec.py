"""A solution as data: preprocessing steps, model, target transform and validation scheme, to and from JSON."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


class SpecError(ValueError):
    """A solution spec that is malformed or names an unknown step or model."""


@dataclass(frozen=True)
class Step:
    op: str
    params: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"op": self.op, "params": dict(self.params)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Step:
        return cls(data["op"], dict(data.get("params") or {}))


@dataclass(frozen=True)
class ModelSpec:
    name: str  # a trainer name
    params: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "params": dict(self.params)}


@dataclass(frozen=True)
class ValidationSpec:
    scheme: str = "kfold"  # shuffled K folds, stratified for classification
    n_splits: int = 5
    seed: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"scheme": self.scheme, "n_splits": self.n_splits, "seed": self.seed}


@dataclass(frozen=True)
class SolutionSpec:
    steps: tuple[Step, ...]
    model: ModelSpec
    target_transform: Step | None = None  # a target op (e.g. log_target) applied around the model
    validation: ValidationSpec = ValidationSpec()

    def to_dict(self) -> dict[str, Any]:
        return {
            "steps": [step.to_dict() for step in self.steps],
            "model": self.model.to_dict(),
            "target_transform": self.target_transform.to_dict() if self.target_transform else None,
            "validation": self.validation.to_dict(),
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SolutionSpec:
        try:
            return cls(
                steps=tuple(Step.from_dict(step) for step in data.get("steps", [])),
                model=ModelSpec(data["model"]["name"], dict(data["model"].get("params", {}))),
                target_transform=Step.from_dict(data["target_transform"]) if data.get("target_transform") else None,
                validation=ValidationSpec(**data.get("validation", {})),
            )
        except (KeyError, TypeError) as error:
            raise SpecError(f"malformed solution spec ({error!r}): expected steps, model.name, validation") from error

    @classmethod
    def from_json(cls, text: str) -> SolutionSpec:
        return cls.from_dict(json.loads(text))


def replace_step(steps: Sequence[Step], old: str, new: Step) -> tuple[Step, ...]:
    return tuple(new if step.op == old else step for step in steps)


# Imputation, encoding and scaling: feature steps sit before the first of these, so their new columns are encoded too.
ENCODING_OPS = ("missing_indicators", "impute_numeric", "impute_categorical", "target_encoding", "one_hot",
                "ordinal_encoding", "native_categorical", "standard_scale")


def insert_before(steps: Sequence[Step], new: Sequence[Step], before: Sequence[str]) -> tuple[Step, ...]:
    """`new` steps placed before the first step named in `before` (at the end when there is none)."""
    steps = list(steps)
    index = next((i for i, step in enumerate(steps) if step.op in before), len(steps))
    return tuple(steps[:index] + list(new) + steps[index:])
