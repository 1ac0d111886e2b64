"""Preprocessing and feature steps, by name, as they appear in a SolutionSpec.

A built-in step is defined by the Python source of its transformer (`SourceStep`): the engine
evaluates that source against agent.runtime, and solution.py contains the very same source, so the
two cannot drift apart. Adding an op (target_encoding, tfidf_text, ...) is one more entry in
BUILTIN_STEPS; an op that needs a transformer class adds that class to agent.runtime.

Steps receive a `CompileContext`: the column kinds, and the data a solution could read. Built-in
steps only read the kinds; the data is there so that anything a user plugs in sees what real code
would see — and so that the verifier can catch a step that learns from data it must not touch.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, runtime_checkable

import numpy as np
import pandas as pd

from agent import runtime
from agent.spec import SpecError, Step
from retrieval.profile import ColumnInfo


@dataclass(frozen=True, eq=False)
class CompileContext:
    task_type: str
    columns: tuple[ColumnInfo, ...]
    X: pd.DataFrame  # every training row the solution may read
    y: np.ndarray  # the encoded training target
    X_test: pd.DataFrame | None
    random_state: int

    def columns_of_kind(self, kind: str) -> list[str]:
        present = set(self.X.columns)
        return [column.name for column in self.columns if column.kind == kind and column.name in present]

    def with_data(self, *, X=None, y=None, X_test=None) -> CompileContext:
        """The same task with other data: how the verifier asks "would this step change if ...?"."""
        return replace(
            self,
            X=self.X if X is None else X,
            y=self.y if y is None else y,
            X_test=self.X_test if X_test is None else X_test,
        )


@runtime_checkable
class StepOp(Protocol):
    name: str

    def build(self, params: Mapping[str, Any], context: CompileContext) -> Any:
        """A scikit-learn transformer (DataFrame in, DataFrame out)."""


@runtime_checkable
class RenderableStep(StepOp, Protocol):
    def render(self, params: Mapping[str, Any], context: CompileContext) -> str:
        """Python source of the transformer, evaluated in agent.runtime's namespace."""


def evaluate_source(source: str, **names: Any) -> Any:
    """Evaluate rendered model code against agent.runtime, as solution.py does."""
    return eval(source, {**vars(runtime), **names})  # noqa: S307 - our own rendered source, never user text


@dataclass(frozen=True)
class SourceStep:
    name: str
    source: Callable[[Mapping[str, Any], CompileContext], str]
    defaults: Mapping[str, Any] = field(default_factory=dict)

    def render(self, params: Mapping[str, Any], context: CompileContext) -> str:
        unknown = set(params) - set(self.defaults)
        if unknown:
            raise SpecError(f"step {self.name!r} has no parameter {', '.join(sorted(unknown))}; it takes {sorted(self.defaults)}")
        return self.source({**self.defaults, **params}, context)

    def build(self, params: Mapping[str, Any], context: CompileContext) -> Any:
        return evaluate_source(self.render(params, context))


@dataclass(frozen=True)
class TargetOp:
    """A transform of the target around the model (fit on transformed y, predictions mapped back)."""

    name: str
    template: str  # Python source with {model} where the model's source goes

    def render(self, model_source: str) -> str:
        return self.template.format(model=model_source)

    def wrap(self, model: Any) -> Any:
        return evaluate_source(self.render("MODEL"), MODEL=model)


def _drop_kind(kind: str) -> Callable[[Mapping[str, Any], CompileContext], str]:
    return lambda params, context: f"on_columns('drop', {context.columns_of_kind(kind)!r})"


BUILTIN_STEPS: dict[str, SourceStep] = {
    step.name: step
    for step in (
        SourceStep("drop_id_columns", _drop_kind("id")),
        # Free text needs a text step (tfidf_text, ...); without one, the column is dropped, not mis-encoded.
        SourceStep("drop_text_columns", _drop_kind("text")),
        SourceStep("drop_columns", lambda p, c: f"on_columns('drop', {list(p['columns'])!r})", {"columns": ()}),
        SourceStep("datetime_parts", lambda p, c: f"DatetimeParts({c.columns_of_kind('datetime')!r})"),
        SourceStep("missing_indicators", lambda p, c: "AddMissingIndicators()"),
        SourceStep("impute_numeric", lambda p, c: f"on_columns(SimpleImputer(strategy={p['strategy']!r}), NUMERIC)",
                   {"strategy": "median"}),
        SourceStep("impute_categorical",
                   lambda p, c: f"on_columns(SimpleImputer(strategy='constant', fill_value={p['fill_value']!r}), CATEGORICAL)",
                   {"fill_value": "missing"}),
        SourceStep("one_hot",
                   lambda p, c: "on_columns(OneHotEncoder(handle_unknown='infrequent_if_exist', "
                                f"max_categories={p['max_categories']!r}, sparse_output=False, "
                                "feature_name_combiner=one_hot_name), CATEGORICAL)",
                   {"max_categories": 20}),
        SourceStep("ordinal_encoding",
                   lambda p, c: "on_columns(OrdinalEncoder(handle_unknown='use_encoded_value', unknown_value=-1, "
                                "encoded_missing_value=np.nan), CATEGORICAL)"),
        SourceStep("standard_scale", lambda p, c: "on_columns(StandardScaler(), NUMERIC)"),
    )
}

TARGET_OPS: dict[str, TargetOp] = {
    op.name: op
    for op in (TargetOp("log_target", "TransformedTargetRegressor(regressor={model}, func=np.log1p, inverse_func=np.expm1)"),)
}


def step_op(name: str, extra_steps: Mapping[str, StepOp] | None = None) -> StepOp:
    registry = {**BUILTIN_STEPS, **(extra_steps or {})}
    if name not in registry:
        raise SpecError(f"unknown step op {name!r}: known ops are {', '.join(sorted(registry))}")
    return registry[name]


def target_op(name: str) -> TargetOp:
    if name not in TARGET_OPS:
        raise SpecError(f"unknown target transform {name!r}: known transforms are {', '.join(sorted(TARGET_OPS))}")
    return TARGET_OPS[name]


def steps_named(*names: str) -> tuple[Step, ...]:
    """Steps with default parameters, by op name."""
    return tuple(Step(name) for name in names)
