"""Preprocessing and feature steps, by name, as they appear in a SolutionSpec.

A built-in step is defined by the Python source of its transformer (`SourceStep`): the engine
evaluates that source against agent.engine.runtime, and solution.py contains the very same source, so the
two cannot drift apart. Adding an op (target_encoding, tfidf_text, ...) is one more entry in
BUILTIN_STEPS; an op that needs a transformer class adds that class to agent.engine.runtime.

Steps receive a `CompileContext`: the column kinds, and the data a solution could read. Built-in
steps only read the kinds; the data is there so that anything a user plugs in sees what real code
would see — and so that the verifier can catch a step that learns from data it must not touch.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, runtime_checkable

import numpy as np
import pandas as pd

from agent.engine import runtime
from agent.engine.spec import SpecError, Step
from retrieval.metrics import CLASSIFICATION
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
        """Python source of the transformer, evaluated in agent.engine.runtime's namespace."""


def evaluate_source(source: str, **names: Any) -> Any:
    """Evaluate rendered model code against agent.engine.runtime, as solution.py does."""
    return eval(source, {**vars(runtime), **names})  # noqa: S307 - our own rendered source, never user text


@dataclass(frozen=True)
class SourceStep:
    """An op whose transformer is Python source; parameter names and defaults follow data/recipes.json."""

    name: str
    source: Callable[[Mapping[str, Any], CompileContext], str]
    defaults: Mapping[str, Any] = field(default_factory=dict)
    # Recipe parameters accepted only at their recipe default, so a recipe's full parameter set still compiles.
    fixed: Mapping[str, Any] = field(default_factory=dict)

    def render(self, params: Mapping[str, Any], context: CompileContext) -> str:
        return self.source(_with_defaults(self.name, self.defaults, params, self.fixed), context)

    def build(self, params: Mapping[str, Any], context: CompileContext) -> Any:
        return evaluate_source(self.render(params, context))


@dataclass(frozen=True)
class TargetOp:
    """A transform of the target around the model (fit on transformed y, predictions mapped back)."""

    name: str
    template: Callable[[Mapping[str, Any], str], str]  # (params, the model's source) -> source
    defaults: Mapping[str, Any] = field(default_factory=dict)

    def render(self, params: Mapping[str, Any], model_source: str) -> str:
        return self.template(_with_defaults(self.name, self.defaults, params), model_source)

    def wrap(self, params: Mapping[str, Any], model: Any) -> Any:
        return evaluate_source(self.render(params, "MODEL"), MODEL=model)


def _with_defaults(
    op: str, defaults: Mapping[str, Any], params: Mapping[str, Any], fixed: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    fixed = fixed or {}
    unknown = set(params) - set(defaults) - set(fixed)
    if unknown:
        known = sorted({*defaults, *fixed})
        raise SpecError(f"op {op!r} has no parameter {', '.join(sorted(unknown))}; it takes {known or 'none'}")
    for name, value in fixed.items():
        if name in params and _normalised(params[name]) != _normalised(value):
            raise SpecError(f"op {op!r}: {name}={params[name]!r} is not supported yet; only {value!r}")
    return {**defaults, **{name: value for name, value in params.items() if name in defaults}}


def _normalised(value: Any) -> Any:
    return list(value) if isinstance(value, (list, tuple)) else value


def _choice(op: str, name: str, value: Any, allowed: tuple[Any, ...]) -> Any:
    if value not in allowed:
        raise SpecError(f"op {op!r}: {name}={value!r} is not supported; use one of {list(allowed)}")
    return value


_ID_TOKENS = re.compile(r"[_\W]+|(?<=[a-z])(?=[A-Z])")


def _id_columns(params: Mapping[str, Any], context: CompileContext) -> list[str]:
    """The profiled id column, plus columns named like ids (a name token in name_patterns) that are nearly unique."""
    patterns = {pattern.lower() for pattern in params["name_patterns"]}
    named = []
    for name in context.X.columns:
        tokens = {token.lower() for token in _ID_TOKENS.split(str(name)) if token}
        values = context.X[name]
        if tokens & patterns and values.nunique() >= params["unique_ratio"] * max(values.notna().sum(), 1):
            named.append(name)
    return [*context.columns_of_kind("id"), *(name for name in named if name not in context.columns_of_kind("id"))]


def _categorical(c: CompileContext) -> str:
    """The categorical-column selector: every non-numeric column, less the free-text ones (left to a text step)."""
    text = c.columns_of_kind("text")
    return f"CategoricalColumns({text!r})" if text else "CATEGORICAL"


def _codes_above(levels: Any) -> str:
    return "" if levels is None else f", codes_above={int(levels)!r}"


def _skip(c: CompileContext) -> str:
    text = c.columns_of_kind("text")
    return f", skip={tuple(text)!r}" if text else ""


def _impute_numeric(p: Mapping[str, Any], c: CompileContext) -> str:
    strategy = _choice("impute_numeric", "strategy", p["strategy"], ("median", "mean", "constant", "none"))
    if strategy == "none":  # for models that handle missing values themselves
        return "'passthrough'"
    return f"on_columns(SimpleImputer(strategy={strategy!r}, fill_value={p['fill_value']!r}), NUMERIC)"


def _impute_categorical(p: Mapping[str, Any], c: CompileContext) -> str:
    strategy = _choice("impute_categorical", "strategy", p["strategy"], ("constant", "most_frequent"))
    return f"on_columns(SimpleImputer(strategy={strategy!r}, fill_value={p['fill_value']!r}), {_categorical(c)})"


_TARGET_TYPES = {"binary": "binary", "multiclass": "multiclass", "regression": "continuous"}


def _folds_source(n_splits: int, context: CompileContext) -> str:
    splitter = "StratifiedKFold" if context.task_type in CLASSIFICATION else "KFold"
    return f"{splitter}({n_splits!r}, shuffle=True, random_state={context.random_state!r})"


def _log_target(p: Mapping[str, Any], model: str) -> str:
    offset = float(p["offset"])
    return (f"TransformedTargetRegressor(regressor={model}, transformer=ShiftedLog(offset={offset!r}), "
            "check_inverse=False)")


TEXT_STATS = ("n_chars", "n_words", "n_unique_words", "upper_ratio", "n_digits", "n_punct")


def _names(value: Any) -> list[str] | None:
    if value is None:
        return None
    return [value] if isinstance(value, str) else [str(name) for name in value]


def _pairs(value: Any) -> list[tuple[str, str]] | None:
    if value is None:
        return None
    pairs = [tuple(pair) for pair in value]
    if any(len(pair) != 2 for pair in pairs):
        raise SpecError(f"pairs must be [column, column] pairs, got {value!r}")
    return pairs


def _aggs(value: Any) -> tuple[str, ...]:
    allowed = ("mean", "std", "count", "min", "max", "median", "nunique", "first", "last", "sum")
    return tuple(_choice("group_stats", "aggs", agg, allowed) for agg in value)


def _stats(value: Any) -> tuple[str, ...]:
    return tuple(_choice("text_stats", "stats", stat, TEXT_STATS) for stat in value)


def _interaction_ops(value: Any) -> tuple[str, ...]:
    return tuple(_choice("numeric_interactions", "ops", op, ("sum", "difference", "product")) for op in value)


def _frequency_encoding(p: Mapping[str, Any], c: CompileContext) -> str:
    if p["fit_on"] != "train":
        raise SpecError(f"op 'frequency_encoding': fit_on={p['fit_on']!r} would count levels in the test set, which "
                        "leaks it into training; only fit_on='train' (counts from the rows the step is fitted on)")
    return (f"FrequencyEncoding(min_levels={int(p['min_levels'])!r}, normalize={bool(p['normalize'])!r}, "
            f"numeric={bool(p['numeric'])!r}, keep_original={bool(p['keep_original'])!r})")


def _tfidf_text(p: Mapping[str, Any], c: CompileContext) -> str:
    analyzer = _choice("tfidf_text", "analyzer", p["analyzer"], ("word", "char", "char_wb", "word+char"))
    output = _choice("tfidf_text", "output", p["output"], ("sparse", "dense"))
    return (f"TfidfText({c.columns_of_kind('text')!r}, analyzer={analyzer!r}, ngram_range={tuple(p['ngram_range'])!r}, "
            f"max_features={int(p['max_features'])!r}, min_df={p['min_df']!r}, sublinear_tf={bool(p['sublinear_tf'])!r}, "
            f"output={output!r})")


BUILTIN_STEPS: dict[str, SourceStep] = {
    step.name: step
    for step in (
        SourceStep("drop_id_columns", lambda p, c: f"on_columns('drop', {_id_columns(p, c)!r})",
                   {"unique_ratio": 0.99, "name_patterns": ("id", "uuid", "key")}),
        # Free text needs a text step (tfidf_text, ...); without one, the column is dropped, not mis-encoded.
        SourceStep("drop_text_columns", lambda p, c: f"on_columns('drop', {c.columns_of_kind('text')!r})"),
        SourceStep("drop_columns", lambda p, c: f"on_columns('drop', {list(p['columns'])!r})", {"columns": ()}),
        SourceStep("datetime_parts",
                   lambda p, c: f"DatetimeParts({c.columns_of_kind('datetime')!r}, parts={tuple(p['parts'])!r}, "
                                f"add_elapsed={bool(p['add_elapsed'])!r})",
                   {"parts": ("year", "month", "day", "dayofweek", "hour"), "add_elapsed": False},
                   fixed={"reference": "min"}),
        SourceStep("missing_indicators", lambda p, c: f"AddMissingIndicators(min_missing_frac={p['min_missing_frac']!r})",
                   {"min_missing_frac": 0.01}, fixed={"columns": "auto"}),
        SourceStep("impute_numeric", _impute_numeric, {"strategy": "median", "fill_value": 0}, fixed={"group_col": None}),
        SourceStep("impute_categorical", _impute_categorical, {"strategy": "constant", "fill_value": "__missing__"}),
        SourceStep("one_hot",
                   lambda p, c: f"on_columns(OneHotEncoder(handle_unknown={p['handle_unknown']!r}, "
                                f"max_categories={p['max_levels']!r}, min_frequency={p['min_frequency']!r}, "
                                f"sparse_output=False, feature_name_combiner=one_hot_name), {_categorical(c)})",
                   {"max_levels": 15, "min_frequency": 5, "handle_unknown": "infrequent_if_exist"}),
        SourceStep("ordinal_encoding",
                   lambda p, c: f"OrdinalCodes(order={_choice('ordinal_encoding', 'order', p['order'], ('frequency', 'lexical'))!r}, "
                                f"unknown_value={p['unknown_value']!r}, mappings={dict(p['mappings']) or None!r}{_skip(c)})",
                   {"mappings": {}, "order": "frequency", "unknown_value": -1}),
        # scikit-learn's TargetEncoder cross-fits on the training fold, so it never sees out-of-fold targets.
        # The target type comes from the task: left to guess, it reads integer prices as thousands of classes.
        SourceStep("target_encoding",
                   lambda p, c: f"on_columns(TargetEncoder(smooth={p['smoothing']!r}, cv={_folds_source(p['n_inner_folds'], c)}, "
                                f"target_type={_TARGET_TYPES[c.task_type]!r}), "
                                f"{_categorical(c)})",
                   {"smoothing": 10.0, "n_inner_folds": 5},
                   fixed={"min_levels": 50, "multiclass": "per_class", "noise": 0.0}),
        SourceStep("standard_scale", lambda p, c: f"on_columns(StandardScaler(with_mean={p['with_mean']!r}), NUMERIC)",
                   {"with_mean": True}),
        # ---- feature steps: each transformer learns only from the rows it is fitted on (see agent.engine.runtime).
        SourceStep("drop_constant_columns", lambda p, c: f"DropConstant(max_top_frequency={float(p['max_top_frequency'])!r})",
                   {"max_top_frequency": 0.999}),
        SourceStep("winsorize_features",
                   lambda p, c: f"Winsorize(lower_q={float(p['lower_q'])!r}, upper_q={float(p['upper_q'])!r})",
                   {"lower_q": 0.01, "upper_q": 0.99}),
        # Counts come from the fit rows only: fit_on="train_test" would read the test set, so it is refused.
        SourceStep("frequency_encoding", _frequency_encoding,
                   {"normalize": True, "min_levels": 10, "numeric": False, "keep_original": True, "fit_on": "train"}),
        SourceStep("rare_level_grouping",
                   lambda p, c: f"RareLevels(min_count={int(p['min_count'])!r}, other_label={str(p['other_label'])!r})",
                   {"min_count": 10, "other_label": "__rare__"}),
        SourceStep("cyclical_encoding", lambda p, c: f"CyclicalEncoding(periods={dict(p['periods'])!r})",
                   {"periods": {"hour": 24, "dayofweek": 7, "month": 12, "dayofyear": 365}}),
        SourceStep("split_composite_string",
                   lambda p, c: f"SplitComposite(column={p['column']!r}, sep={p['sep']!r}, regex={p['regex']!r}, "
                                f"add_group_size={bool(p['add_group_size'])!r})",
                   {"column": None, "sep": "auto", "regex": None, "add_group_size": True}),
        SourceStep("group_stats",
                   lambda p, c: f"GroupStats(group_cols={_names(p['group_cols'])!r}, agg_cols={_names(p['agg_cols'])!r}, "
                                f"aggs={_aggs(p['aggs'])!r}, add_diff={bool(p['add_diff'])!r})",
                   {"group_cols": None, "agg_cols": None, "aggs": ("mean", "std", "count"), "add_diff": True}),
        # Sparse output for linear models and XGBoost; it comes last, after every other step (see agent.knowledge.recipes).
        SourceStep("tfidf_text", _tfidf_text,
                   {"analyzer": "word", "ngram_range": (1, 2), "max_features": 50000, "min_df": 2, "sublinear_tf": True,
                    "output": "sparse"}),
        SourceStep("tfidf_svd",
                   lambda p, c: f"TfidfSvd({c.columns_of_kind('text')!r}, n_components={int(p['n_components'])!r}, "
                                f"analyzer={_choice('tfidf_svd', 'analyzer', p['analyzer'], ('word', 'char', 'char_wb'))!r}, "
                                f"ngram_range={tuple(p['ngram_range'])!r}, max_features={int(p['max_features'])!r}, "
                                f"random_state={c.random_state!r})",
                   {"n_components": 64, "analyzer": "word", "ngram_range": (1, 2), "max_features": 20000}),
        SourceStep("text_stats", lambda p, c: f"TextStats({c.columns_of_kind('text')!r}, stats={_stats(p['stats'])!r})",
                   {"stats": TEXT_STATS}),
        SourceStep("numeric_ratios",
                   lambda p, c: f"NumericPairs('ratio', pairs={_pairs(p['pairs'])!r}, max_pairs={int(p['max_pairs'])!r}, "
                                f"eps={float(p['eps'])!r})",
                   {"pairs": None, "max_pairs": 20, "eps": 1e-06}),
        SourceStep("numeric_interactions",
                   lambda p, c: f"NumericPairs('interaction', pairs={_pairs(p['pairs'])!r}, max_pairs={int(p['max_pairs'])!r}, "
                                f"ops={_interaction_ops(p['ops'])!r})",
                   {"pairs": None, "ops": ("sum", "difference", "product"), "max_pairs": 20}),
        SourceStep("coordinate_rotation",
                   lambda p, c: f"CoordinateRotation(lat_col={p['lat_col']!r}, lon_col={p['lon_col']!r}, "
                                f"angles={tuple(float(a) for a in p['angles'])!r}, add_polar={bool(p['add_polar'])!r})",
                   {"lat_col": None, "lon_col": None, "angles": (15, 30, 45, 60), "add_polar": True}),
        SourceStep("quantile_transform",
                   lambda p, c: f"on_columns(SampleQuantileTransformer(output_distribution="
                                f"{_choice('quantile_transform', 'output_distribution', p['output_distribution'], ('normal', 'uniform'))!r}, "
                                f"n_quantiles={int(p['n_quantiles'])!r}, random_state={c.random_state!r}), NUMERIC)",
                   {"output_distribution": "normal", "n_quantiles": 1000}),
        SourceStep("log_features", lambda p, c: f"LogSkewed(skew_threshold={float(p['skew_threshold'])!r})",
                   {"skew_threshold": 0.75}, fixed={"method": "log1p"}),
        SourceStep("row_missing_count",
                   lambda p, c: f"RowMissing(add_fraction={bool(p['add_fraction'])!r}, count_zeros={bool(p['count_zeros'])!r})",
                   {"add_fraction": True, "count_zeros": False}),
        SourceStep("binning",
                   lambda p, c: f"Binning(columns={_names(p['columns'])!r}, n_bins={int(p['n_bins'])!r}, "
                                f"strategy={_choice('binning', 'strategy', p['strategy'], ('quantile', 'uniform'))!r})",
                   {"columns": None, "n_bins": 10, "strategy": "quantile"}),
        # Replaces ordinal_encoding for models that split on categories natively; the LightGBM/XGBoost
        # parameters of the recipe travel to the model (agent.knowledge.recipes), the step itself only sets the dtype.
        SourceStep("native_categorical",
                   lambda p, c: f"NativeCategories(max_levels={int(p['max_levels'])!r}{_skip(c)}"
                                f"{_codes_above(p['codes_above'])})",
                   {"max_levels": 250, "codes_above": None, "max_cat_to_onehot": 4, "cat_smooth": 10,
                    "min_data_per_group": 50}),
    )
}


def _power_target(p: Mapping[str, Any], model: str) -> str:
    method = _choice("power_target", "method", p["method"], ("yeo-johnson", "box-cox"))
    return f"TransformedTargetRegressor(regressor={model}, transformer=PowerTransformer(method={method!r}))"


TARGET_OPS: dict[str, TargetOp] = {
    op.name: op for op in (TargetOp("log_target", _log_target, {"offset": 1.0}),
                           TargetOp("power_target", _power_target, {"method": "yeo-johnson"}))
}


# Fit log(1 + y) and map predictions back: for metrics on a log or relative scale (RMSLE, MAPE). A target with
# negative values is shifted up first, its least value to 0 (runtime.ShiftedLog).
LOG_TARGET = Step("log_target")


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
