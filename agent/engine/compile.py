"""A SolutionSpec compiled two ways from one description: an unfitted scikit-learn pipeline (compile_spec) and
its Python source for solution.py (render_model). Ensembles of member specs are compiled the same way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sklearn.pipeline import Pipeline

from agent.engine import runtime
from agent.engine.dataset import Dataset
from agent.engine.spec import ModelSpec, SolutionSpec, ValidationSpec
from agent.engine.steps import BUILTIN_STEPS, CompileContext, RenderableStep, StepOp, step_op, target_op
from agent.engine.trainers import Trainer, lookup_trainer
from retrieval.metrics import CLASSIFICATION

# The model of a blend: params {"members": [member spec dicts], "weights": [...]}, and for a stack or a rank
# average also "intercept" and "link" (see agent.search.blending).
ENSEMBLE = "ensemble"


def compile_spec(
    spec: SolutionSpec,
    context: CompileContext,
    trainers: Mapping[str, Trainer],
    extra_steps: Mapping[str, StepOp] | None = None,
) -> Pipeline:
    """The spec as an unfitted pipeline: its steps, then the model (wrapped by the target transform)."""
    if spec.model.name == ENSEMBLE:
        members = [(f"m{index}", compile_spec(member, context, trainers, extra_steps))
                   for index, member in enumerate(ensemble_members(spec))]
        combiner, keywords = _combiner(spec, context.task_type in CLASSIFICATION)
        return Pipeline([("model", getattr(runtime, combiner)(members, **keywords))])
    model = lookup_trainer(spec.model.name, trainers)(spec.model.params, context.task_type, context.random_state)
    if spec.target_transform is not None:
        model = target_op(spec.target_transform.op).wrap(spec.target_transform.params, model)
    steps = [(f"{index}_{step.op}", step_op(step.op, extra_steps).build(step.params, context))
             for index, step in enumerate(spec.steps)]
    return Pipeline([*steps, ("model", model)])


def ensemble_spec(members: Sequence[SolutionSpec], weights: Sequence[float], validation: ValidationSpec, *,
                  intercept: float = 0.0, link: str | None = None) -> SolutionSpec:
    """A weighted blend of member solutions (probabilities averaged for classification, values for regression);
    with a `link`, members are combined in that space with an intercept (runtime.LinearStack)."""
    params: dict[str, Any] = {"members": [member.to_dict() for member in members],
                              "weights": [float(weight) for weight in weights]}
    if link is not None:
        params.update(intercept=float(intercept), link=link)
    return SolutionSpec((), ModelSpec(ENSEMBLE, params), None, validation)


def _combiner(spec: SolutionSpec, classification: bool) -> tuple[str, dict[str, Any]]:
    """The runtime class that combines an ensemble's members, and its keyword arguments besides the members."""
    params = spec.model.params
    weights = list(params["weights"])
    if "link" in params:
        return "LinearStack", {"weights": weights, "intercept": params["intercept"], "link": params["link"]}
    if classification:
        return "VotingClassifier", {"voting": "soft", "weights": weights}
    return "VotingRegressor", {"weights": weights}


def ensemble_members(spec: SolutionSpec) -> list[SolutionSpec]:
    return [SolutionSpec.from_dict(member) for member in spec.model.params["members"]] \
        if spec.model.name == ENSEMBLE else []


def model_names(spec: SolutionSpec) -> set[str]:
    """Every trainer a spec uses, its ensemble members' included."""
    members = ensemble_members(spec)
    return set().union(*(model_names(member) for member in members)) if members else {spec.model.name}


class NotRenderableError(ValueError):
    """A spec using a user-supplied trainer or step, which has no source to put in solution.py."""


def render_model(
    spec: SolutionSpec,
    dataset: Dataset,
    trainers: Mapping[str, Trainer],
    random_state: int,
    extra_steps: Mapping[str, StepOp] | None = None,
) -> str:
    """The pipeline's Python source, as compile_spec builds it."""
    if spec.model.name == ENSEMBLE:
        members = ",\n".join(f"(\"m{index}\", {render_model(member, dataset, trainers, random_state, extra_steps)})"
                             for index, member in enumerate(ensemble_members(spec)))
        combiner, keywords = _combiner(spec, dataset.classification)
        arguments = "".join(f", {name}={value!r}" for name, value in keywords.items())
        return f"Pipeline([(\"model\", {combiner}([\n{members}]{arguments}))])"
    context = dataset.compile_context(random_state)
    lines = []
    for index, step in enumerate(spec.steps):
        op = {**BUILTIN_STEPS, **(extra_steps or {})}.get(step.op)
        if not isinstance(op, RenderableStep):
            raise NotRenderableError(f"step {step.op!r} has no source to render; solution.py needs built-in steps")
        lines.append(f"(\"{index}_{step.op}\", {op.render(step.params, context)}),")
    trainer = lookup_trainer(spec.model.name, trainers)
    if not hasattr(trainer, "render"):
        raise NotRenderableError(f"trainer {spec.model.name!r} is a user factory; solution.py needs a built-in trainer")
    model = trainer.render(spec.model.params, dataset.task_type, random_state)
    if spec.target_transform is not None:
        model = target_op(spec.target_transform.op).render(spec.target_transform.params, model)
    lines.append(f"(\"model\", {model}),")
    body = "\n".join(f"        {line}" for line in lines)
    return f"Pipeline([\n{body}\n    ])"
