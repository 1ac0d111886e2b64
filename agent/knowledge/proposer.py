"""The knowledge proposer (`agent solve --use-kb`): drafts and improvements made of retrieved tricks.

It drafts each model family with the retrieved tricks its columns and metric need (free text, dates,
composite ids; the loss the metric rewards), and improves a node with exactly one retrieved trick not yet
used on its branch (with probability `trick_prob`), else with a built-in change. A trick that improved another node
of the same model group in this run (on the folds it was scored on, `carried`) is tried first, whatever the coin.
Tricks run through the recipe catalogue (agent.knowledge.recipes); retrieved solution write-ups, papers and cards
alike. With the experience packs' measured effects (`trick_effects`), a node's retrieved tricks are taken in the
order measured on its model group, linear or trees (help first, harm last).

Ensembling and tuning are the engine's, with or without knowledge: every search ends with the final combination
(agent.search.tree), and the built-in proposer's Optuna study (agent.search.tuning) tunes a GBDT or forest node
once the other improvements are used up there. A retrieved ensembling trick is only named in the combination's
plan; a retrieved tuning trick (Optuna) is named in each trial's plan and brings the study forward: it starts
once the untried tricks are used up on the node, before the built-in changes are.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

from agent.candidate import AppliedTrick, SolutionCandidate
from agent.engine.trainers import Trainer, model_group, trainers_of
from agent.memory.experience import TrickEffects, order_by_effect
from agent.memory.proposer import TrickAdvice
from agent.search.builtin import (
    DRAFT_FAMILIES,
    TEXT_OPS,
    BuiltinTreeProposer,
    ChangeOrder,
    describe_score,
    drafted_families,
    may_draft,
    sized_note,
    target_note,
    with_text_features,
)
from agent.search.journal import IMPROVE, Journal, Node, candidate_key
from agent.search.protocols import Proposal, TreeProposer
from kb.recipes import NEEDS_PARAMS
from retrieval.profile import TaskProfile

# Ensembling tricks: the tree search ends every search by combining nodes on their out-of-fold predictions (a
# weighted average, a rank average (AUC) and a linear stack, agent.search.blending); such a trick is named in the plan.
BLEND_OPS = ("hill_climbing_ensemble", "average_ensemble", "rank_average_ensemble", "stacking_linear")
TUNE_OP = "optuna_search"  # a tuning trick: the built-in Optuna study (agent.search.tuning) comes earlier, named by it
# Tricks for a kind of column the task has (free text, dates, composite string ids) or for the metric (the loss it
# rewards): every knowledge draft takes them, since a model that drops or mangles those columns loses the signal
# they carry, and one fitted to another loss predicts another statistic (the mean under MAE). Every other trick
# enters as a single improvement, where one that does not beat its parent is dropped: composed into drafts
# untested, retrieved presets cost more than they gave (hpc: an XGBoost draft with a small-data preset scored
# log loss 0.600 against 0.455 at defaults; churn: HistGradientBoosting with early stopping 0.198 against 0.168).
NEEDED_OPS = ("tfidf_text", "tfidf_svd", "text_stats", "split_composite_string", "datetime_parts",
              "cyclical_encoding", "loss_for_metric")
# Monotone transforms of the features, which leave a tree's splits (so its predictions) unchanged.
TREE_INVARIANT_OPS = ("standard_scale", "quantile_transform", "log_features")
# A trick that improved a node by at least this share of its parent's metric on the folds scored (Journal.fold_gain)
# is carried to the other nodes of its model group first. In 145 pairs of one trick tried on two nodes of one group
# in the same run (the kb and both arms' runs of the fresh, fresh-nov29 and untouched-nov29 benches), the second try
# improved its parent in 20 of 26 pairs where the first had by this much, and in 22 of 119 where it had not.
CARRY_GAIN = 0.005




@dataclass(frozen=True)
class _Option:
    """A retrieved trick that the recipe catalogue can execute on this task."""

    trick: AppliedTrick
    recipe: Any  # agent.knowledge.recipes.Recipe
    score: float


class KnowledgeTreeProposer(TreeProposer):
    """Drafts and improvements composed from the tricks retrieved for the task (see the module docstring)."""

    def __init__(self, kb, trainers: Mapping[str, Trainer] | None = None, *, trick_prob: float = 0.5, k: int = 40,
                 retrieved: Sequence[Any] | None = None, families: Sequence[str] = DRAFT_FAMILIES,
                 trick_effects: TrickEffects | None = None, change_order: ChangeOrder | None = None):
        from agent.knowledge import (
            recipes,  # the executable recipe catalogue; imported here, when knowledge is asked for
        )

        self.recipes = recipes
        self.kb = kb
        self.builtin = BuiltinTreeProposer(trainers, families, change_order)
        self.trainers = self.builtin.trainers
        self.trick_prob = trick_prob
        self.k = k
        self._retrieved = list(retrieved) if retrieved is not None else None
        self.advice: TrickAdvice | None = None  # the case library's measured effects of tricks (use_memory)
        # Each trick op's mean gain per model group on the experience packs' nearest pool tasks
        # (agent.memory.experience.effects_near), None without a pack; and how many retrieved tricks it measured, on
        # any group, and moved in some group's order (run.json's experience record).
        self.trick_effects = trick_effects
        self.measured_tricks = 0
        self.reordered_tricks = 0
        self._options: list[_Option] | None = None
        self._reading: Future[list[_Option]] | None = None

    # ---- the tricks this task can use

    def options(self, profile: TaskProfile) -> list[_Option]:
        if self._options is None:
            self._options = self._read_knowledge(profile) if self._reading is None else self._reading.result()
        return self._options

    def _read_knowledge(self, profile: TaskProfile) -> list[_Option]:
        if self._retrieved is None:
            from retrieval.retriever import retrieve

            self._retrieved = retrieve(profile, k=self.k, kb=self.kb, executable=True)
        options = self._executable(profile, self._retrieved)
        if self.trick_effects is not None:
            measured = self.trick_effects.ops()
            self.measured_tricks = sum(option.recipe.op in measured for option in options)
            moved = set()
            for effects in self.trick_effects.by_group.values():
                ordered = order_by_effect(options, lambda option: option.recipe.op, effects)
                moved |= {after.trick.id for before, after in zip(options, ordered, strict=True) if before is not after}
            self.reordered_tricks = len(moved)
        return options

    def ordered_for(self, trainer: str, profile: TaskProfile) -> list[_Option]:
        """The retrieved tricks in experience's order for a node of this trainer: the ones that helped its model
        group on similar pool tasks first, the untried ones in retrieval order, the ones that hurt it last."""
        options = self.options(profile)
        if self.trick_effects is None:
            return options
        return order_by_effect(options, lambda option: option.recipe.op, self.trick_effects.for_trainer(trainer))

    def use_memory(self, advice: TrickAdvice) -> None:
        """Rank tricks by their measured effect on similar tasks (agent.memory): help first, harm last or skipped."""
        self.advice = advice

    def start_reading(self, profile: TaskProfile) -> None:
        """Retrieve and map the tricks on a worker thread: loading the embedding model and searching take seconds
        that would otherwise come out of the search's budget, while a candidate's CV runs in its own process."""
        if self._options is None and self._reading is None:
            pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="casebook-retrieval")
            self._reading = pool.submit(self._read_knowledge, profile)
            pool.shutdown(wait=False)  # the thread ends with its one job

    def reading(self) -> Future[list[_Option]] | None:
        return self._reading if self._reading is not None and not self._reading.done() else None

    def _card(self, profile: TaskProfile, ops: Sequence[str]) -> AppliedTrick | None:
        """The first retrieved trick whose recipe is one of `ops` (searches over nodes, which the tree runs)."""
        self.options(profile)
        trick = next((item.trick for item in self._retrieved
                      if item.trick.recipe and item.trick.recipe.get("op") in ops), None)
        return trick and AppliedTrick.of(trick, op=trick.recipe["op"], params=trick.recipe.get("params"))

    def blend_trick(self, profile: TaskProfile, journal: Journal) -> AppliedTrick | None:
        """The retrieved ensembling trick the search's final combination names (provenance: it blends anyway)."""
        return self._card(profile, BLEND_OPS)

    def _executable(self, profile: TaskProfile, retrieved: Sequence[Any]) -> list[_Option]:
        catalogue = self.recipes.catalogue()
        options, seen = [], set()
        for item in retrieved:
            trick = item.trick
            recipe_ref = dict(trick.recipe or {})  # a card's own, or compiled from the text at ingest (ingest.compile)
            if recipe_ref.get("op") not in catalogue:
                continue
            recipe = catalogue[recipe_ref["op"]]
            try:
                if not recipe.applies(profile):
                    continue
            except Exception:  # noqa: BLE001 - a recipe that cannot judge this task is not offered
                continue
            params, missing = recipe.for_task(recipe_ref.get("params"), profile)
            if recipe.op in NEEDS_PARAMS and recipe_ref.get("params") and not params:
                continue  # none of its parameters fits this task; at the op's defaults it would be another trick
            key = (recipe.op, repr(sorted(params.items())))
            if key in seen:
                continue
            seen.add(key)
            title = trick.title or trick.text[:80]
            if trick.recipe_confidence is not None:  # compiled from the text: say from which words
                title = f"{title}; compiled to {recipe.op} from its text: {trick.recipe_why}"
            title += f" ({missing})" if missing else ""
            applied = AppliedTrick.of(trick, title=title, op=recipe.op, params=params)
            options.append(_Option(applied, recipe, float(item.score)))
        return options

    def apply_option(self, option: _Option, candidate: SolutionCandidate) -> tuple[SolutionCandidate, str] | None:
        """The candidate with the trick's recipe applied, and a note when the trick's own parameters did not fit."""
        note = ""
        try:
            changed = option.recipe.apply(candidate, option.trick.params or None)
        except Exception as error:  # noqa: BLE001 - params the recipe refuses: retry at its defaults
            try:
                changed = option.recipe.apply(candidate, None)
            except Exception:  # noqa: BLE001 - a recipe that cannot change this candidate is skipped
                return None
            note = f" (at the recipe's defaults: {str(error).splitlines()[0][:120]})"
        if changed.trainer not in self.trainers or candidate_key(changed, self.trainers) == candidate_key(
                candidate, self.trainers):
            return None
        return changed, note

    # ---- draft: a model family with the tricks its columns and metric need

    def draft(self, profile: TaskProfile, journal: Journal, rng: random.Random) -> Proposal | None:
        if not journal.draft_nodes:  # the reference: the first family at defaults, evaluated while knowledge is read
            self.start_reading(profile)
            plain = self.builtin.draft(profile, journal, rng)
            return plain and replace(plain, plan=f"{plain.plan} (the reference draft, evaluated while the knowledge "
                                                   "base is read)")
        needed = [option for option in self.options(profile) if option.recipe.op in NEEDED_OPS]
        drafted = drafted_families(journal)
        for family in self.builtin.families:
            if family in drafted:
                continue
            candidate, used = self.builtin.base_candidate(family, profile), []
            for option in needed:  # what the columns call for (text, dates, composite ids), in every draft
                if option.recipe.op in {o.recipe.op for o, _ in used}:
                    continue
                result = self.apply_option(option, candidate)
                if result is not None:
                    candidate = result[0]
                    used.append((option, result[1]))
            text_note = ""
            if not {o.recipe.op for o, _ in used} & set(TEXT_OPS):  # the built-in drafts' text features, as in no-KB
                candidate, text_note = with_text_features(candidate, profile)
            if not may_draft(journal, candidate, self.trainers):
                continue
            name, why = family.replace("_", " "), f" {sized_note(candidate, profile)}{target_note(candidate)}{text_note}"
            if not used:
                return Proposal(candidate, f"draft: {name}{why} (no retrieved trick is about a kind of column or the "
                                           "metric this task has)")
            reasons = "; ".join(f"{o.recipe.op}{note} from {o.trick.describe()}" for o, note in used)
            trick = replace(used[0][0].trick, related=tuple(o.trick.id for o, _ in used[1:]),
                            related_kinds=tuple(o.trick.source_kind for o, _ in used[1:]),
                            op="+".join(o.recipe.op for o, _ in used))
            return Proposal(candidate, f"draft: {name}{why} with the retrieved tricks its columns and metric need — "
                                       f"{reasons}",
                            trick)
        return None

    # ---- improve: one trick, or a built-in change

    def carried(self, node: Node, profile: TaskProfile, journal: Journal) -> dict[str, tuple[float, Node]]:
        """The tricks that improved a node of `node`'s model group in this run by at least CARRY_GAIN on the folds it
        was scored on, even when it stopped early or ran over time there: trick id -> (its best gain, that node)."""
        group, greater = model_group(node.candidate.trainer), profile.metric_info.greater_is_better
        found: dict[str, tuple[float, Node]] = {}
        for child in journal:
            if child.action != IMPROVE or child.trick is None or child.members \
                    or model_group(child.candidate.trainer) != group:
                continue
            gain = journal.fold_gain(child, greater)
            if gain is not None and gain >= CARRY_GAIN and gain > found.get(child.trick.id, (0.0, None))[0]:
                found[child.trick.id] = (gain, child)
        return found

    def improve(self, node: Node, profile: TaskProfile, journal: Journal, rng: random.Random) -> Proposal | None:
        carried = self.carried(node, profile, journal)
        if carried:  # measured on this task: ahead of the coin and of the built-in changes
            proposal = self.improve_with_trick(node, profile, journal, rng, carried, only_carried=True)
            if proposal is not None:
                return proposal
        if rng.random() < self.trick_prob:
            proposal = self.improve_with_trick(node, profile, journal, rng, carried)
            if proposal is not None:
                return proposal
        # Built-in changes, then tricks; the engine's tuning once both are used up (a tuning trick starts it sooner).
        return (self.builtin.change(node, profile, journal)
                or self.improve_with_trick(node, profile, journal, rng, carried)
                or self.builtin.tune(node, profile, journal, rng))

    def improve_with_trick(self, node: Node, profile: TaskProfile, journal: Journal, rng: random.Random | None = None,
                           carried: Mapping[str, tuple[float, Node]] | None = None, *,
                           only_carried: bool = False) -> Proposal | None:
        """One retrieved trick not yet used on the node's branch; with `only_carried`, one of the `carried` ones."""
        used, ineffective = journal.tricks_on_branch(node)
        carried = carried or {}
        # Experience's order for the node's model group (without a pack, retrieval's), but what the task needs
        # comes first (the reference draft was made without it), then what improved the group's nodes in this run
        # (measured here, it outranks similar tasks' measurements), and a trick that already failed to beat its parent
        # on other branches goes behind the ones not yet tried: it is still allowed here (AutoMind's rule is per
        # branch), just not first.
        failures = {}
        for child in journal:
            if child.action == IMPROVE and child.trick is not None and not child.members \
                    and not journal.beats_parent(child):
                failures[child.trick.id] = failures.get(child.trick.id, 0) + 1
        # The case library's advice (agent.memory): measured help first, known harm last or skipped.
        advice = self.advice.for_trainer(node.candidate.trainer) if self.advice is not None else None
        options = self.ordered_for(node.candidate.trainer, profile)
        skipped = advice.skipped(option.trick for option in options
                                 if option.trick.id not in used | ineffective | set(carried)) \
            if advice is not None else ()
        for option in sorted(options, key=lambda option: (
                option.trick.op not in NEEDED_OPS, -carried.get(option.trick.id, (0.0,))[0],
                advice.order(option.trick) if advice else (1, 0.0), failures.get(option.trick.id, 0))):
            if option.trick.id in used or option.trick.id in ineffective or option.trick in skipped:
                continue
            if only_carried and option.trick.id not in carried:
                continue
            result = self.apply_option(option, node.candidate)
            if result is None or journal.has(candidate_key(result[0], self.trainers), self.trainers):
                continue
            if result[0].trainer != node.candidate.trainer:  # another model family is a draft's job, not a change
                continue
            if option.recipe.op in TREE_INVARIANT_OPS and node.candidate.trainer in trainers_of("forest", "gbdt"):
                continue  # the same trees again: a wasted step
            changed, note = result
            plan = (f"improve node {node.id} ({node.candidate.trainer}, {describe_score(node, profile)}): apply "
                    f"{option.recipe.op}{note} as {option.trick.describe()} suggests")
            if option.trick.id in carried:
                gain, source = carried[option.trick.id]
                folds = len(source.evidence.fold_values)
                plan += (f" (carried: it improved node {source.id} ({source.candidate.trainer}) by {gain:.1%} on the "
                         f"{'fold' if folds == 1 else f'{folds} folds'} it was scored on)")
            plan += advice.note(option.trick, skipped) if advice is not None else ""
            return Proposal(changed, plan, option.trick)
        # A retrieved tuning trick brings the engine's Optuna study forward, after the untried tricks (it is for when
        # the features are settled): the study is the built-in one, and the trials are the engine's nodes, not the
        # trick's (the plan names it).
        tuning = self._card(profile, (TUNE_OP,))
        return self.builtin.tune(node, profile, journal, rng, tuning) if tuning is not None else None

    def observe(self, node: Node) -> None:
        """A verified node: the Optuna study that asked for it learns its score."""
        self.builtin.observe(node)

    def debug(self, node: Node, profile: TaskProfile, journal: Journal, rng: random.Random) -> Proposal | None:
        """Repairs read the failure, with or without knowledge: the built-in diagnosis."""
        return self.builtin.debug(node, profile, journal, rng)
