"""The LLM proposer (`agent solve --llm MODEL`): drafts, improvements and repairs written by an LLM, after AutoMind.

Each step asks the LLM with the task as data (description, data profile, the retrieved tricks the knowledge
proposer can execute, memories when given: kb.llm's cached prefix) and a summary of the journal:
  - **draft**: a new solution in the recipe vocabulary, with the retrieved tricks its columns and metric need. The
    first draft is the offline proposer's reference (the first family at defaults), evaluated while the knowledge
    base is read, as without the LLM;
  - **improve**: exactly one retrieved trick not yet tried on the node's branch, chosen by the LLM from the ones
    whose recipe changes the node (or, without tricks left, one atomic change of the spec);
  - **debug**: a repair of the failure the node shows (its error and the verifier's reason).
Answers are checked against the catalogue (agent.llm.answers). With a free-code coder (agent.llm.coder), a draft or
an improvement may instead be a plan for a script, which the coder writes and runs in the sandboxed executor. After
the coder's `max_refusals` scripts (2) were refused (by the static check, the audit hook or the kernel), the rest of the run
asks for specs of the catalogue only, and the next plan says why: a model that keeps writing what the sandbox
refuses would otherwise spend the run on it.

**Time.** The search tells the proposer its deadline before each proposal (`set_deadline`): every LLM call, and
every step a code plan runs, ends before it (kb.llm's `deadline`).

**Fallback.** When the LLM gives no usable answer (its retries used up, the budget spent, an answer still malformed
after one re-ask), the step is the offline proposer's (the knowledge proposer, or the built-in one), and the plan and
the trace say why. After `max_failures` failed steps in a row, or a failure that will not pass (no key, an unknown
model, the budget spent), the rest of the run is offline. A run never fails because the LLM did.

**Metering.** `take_usage()` returns what the LLM did towards the next node recorded (a StepUsage: usage, answer kind,
fallback): agent.solve writes it to each node's trace line; `usage_record()` is run.json's `llm` section.
"""

from __future__ import annotations

import json
import random
from collections import Counter, deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from agent.candidate import AppliedTrick, SolutionCandidate
from agent.knowledge.proposer import KnowledgeTreeProposer
from agent.llm import prompts
from agent.llm.answers import CODE, SPEC, TRICK, CodeAnswer, SpecAnswer, kind_of, read_code_plan, read_spec, read_trick
from agent.llm.coder import FreeCoder
from agent.memory.proposer import MemoryTreeProposer
from agent.search.builtin import DRAFT_FAMILIES, describe_score
from agent.search.journal import Journal, Node, candidate_key
from agent.search.protocols import FREE_CODE, Proposal, StepUsage, TreeProposer, WrappingProposer
from kb.llm import LLMAnswerError, LLMClient, LLMError, Usage
from retrieval.profile import TaskProfile

MAX_FAILURES = 3  # failed LLM steps in a row before the rest of the run is offline


@dataclass(frozen=True)
class _MenuItem:
    """A retrieved trick the LLM may choose for an improvement, with the node as that trick would change it."""

    trick: AppliedTrick
    candidate: SolutionCandidate
    note: str  # when the trick's own parameters did not fit and the recipe's defaults were used


@dataclass(frozen=True)
class _Draft:
    """A spec answer to a draft, with the retrieved tricks applied to it (in the order applied)."""

    spec: SpecAnswer
    tricks: tuple[AppliedTrick, ...]


@dataclass
class _Pending:
    """What happened since the last node was taken."""

    mark: Usage
    answer: str | None = None
    fallbacks: list[str] = field(default_factory=list)


class LLMProposer(WrappingProposer):
    """A proposer whose drafts, improvements and repairs come from an LLM, around `offline` (its `inner`), which takes
    over when the LLM fails."""

    def __init__(self, client: LLMClient, offline: TreeProposer, *, recall: Any = None, coder: FreeCoder | None = None,
                 code_off: str | None = None, max_failures: int = MAX_FAILURES):
        super().__init__(offline)
        self.client = client
        self.recall = recall  # agent.memory's Recall (anything with to_dict()), or lines of text; None: no memories
        self.coder = coder  # None: spec answers only
        self._no_coder = code_off  # why there is no coder (the machine cannot isolate scripts), if that is why
        self.max_failures = max_failures
        self.failures = 0  # failed steps in a row
        self.disabled: str | None = None  # why the rest of the run is offline
        self.answers: Counter[str] = Counter()
        self.fallbacks: list[str] = []
        self._pending = _Pending(client.usage)
        self._steps: deque[StepUsage] = deque()  # the usage of proposals made, not yet taken by a recorded node
        self._documents: list | None = None
        self._code_off_told = False  # whether a plan has said why free code is off

    @property
    def coding(self) -> bool:
        """Whether answers may be free code: a coder, not yet off for refused scripts."""
        return self.coder is not None and self.coder.off is None

    @property
    def code_off(self) -> str | None:
        """Why the LLM may not (or no longer) write scripts, if it may not."""
        return self.coder.off if self.coder is not None else self._no_coder

    def set_deadline(self, deadline: float) -> None:
        """No LLM call, and no step of a code plan, runs past `deadline` (the search's)."""
        self.client.deadline = deadline
        if self.coder is not None:
            self.coder.deadline = deadline
        super().set_deadline(deadline)

    @property
    def knowledge(self) -> KnowledgeTreeProposer | None:
        """The knowledge proposer: the offline one, or the one under it (the case library's wraps it)."""
        return self.inner.find(KnowledgeTreeProposer)

    # ---- the three actions

    def draft(self, profile: TaskProfile, journal: Journal, rng: random.Random) -> Proposal | None:
        def offline() -> Proposal | None:
            return self.inner.draft(profile, journal, rng)

        if not journal.draft_nodes:  # the reference draft, while the knowledge base is read
            return self._emit(offline())
        return self._step(lambda: self._draft(profile, journal), offline)

    def improve(self, node: Node, profile: TaskProfile, journal: Journal, rng: random.Random) -> Proposal | None:
        def offline() -> Proposal | None:  # the offline proposers change specs, not scripts
            return None if node.candidate.trainer == FREE_CODE else self.inner.improve(node, profile, journal, rng)

        if node.members or (self.coder is not None and self.coder.wrote(node) and not self.coding):
            return self._emit(offline())  # a combination is the search's own; a script needs free code
        return self._step(lambda: self._improve(node, profile, journal), offline)

    def debug(self, node: Node, profile: TaskProfile, journal: Journal, rng: random.Random) -> Proposal | None:
        def offline() -> Proposal | None:  # the offline proposers repair specs, not scripts
            return None if node.candidate.trainer == FREE_CODE else self.inner.debug(node, profile, journal, rng)

        if self.coder is not None and self.coder.wrote(node) and not self.coding:
            return self._emit(offline())
        return self._step(lambda: self._debug(node, profile, journal), offline)

    def observe(self, node: Node) -> None:
        if self.coder is not None:
            self.coder.observe(node)
        super().observe(node)

    # ---- metering

    def take_usage(self) -> StepUsage:
        """What the LLM did towards the next node the search records: the proposals' usage in the order they were
        made (a search evaluating a batch records its nodes in that order); for a node that is no proposal of
        this proposer's (a blend), what was spent since the last one."""
        return self._steps.popleft() if self._steps else self._flush()

    def _emit(self, proposal: Proposal | None) -> Proposal | None:
        """The proposal, its usage queued for take_usage; without one, the usage goes on into the next."""
        if proposal is not None:
            self._steps.append(self._flush())
        return proposal

    def _flush(self) -> StepUsage:
        pending = self._pending
        self._pending = _Pending(self.client.usage)
        return StepUsage(self.client.usage - pending.mark, pending.answer, "; ".join(pending.fallbacks) or None)

    def usage_record(self) -> dict[str, Any]:
        """run.json's `llm` section."""
        return {**self.client.record(), "answers": dict(self.answers), "fallbacks": len(self.fallbacks),
                "fallback_reasons": sorted(set(self.fallbacks))[:20], "offline_since": self.disabled,
                "refused_scripts": len(self.coder.refusals) if self.coder is not None else 0,
                "free_code_off": self.code_off}

    # ---- one step: ask, else fall back

    def _step(self, ask: Callable[[], tuple[Proposal | None, str]],
              offline: Callable[[], Proposal | None]) -> Proposal | None:
        reason = self.disabled
        if reason is None:
            try:
                proposal, kind = ask()
            except LLMError as error:
                reason = str(error)
                self.failures += 1
                if error.permanent or self.failures >= self.max_failures:
                    self.disabled = reason if error.permanent else \
                        f"{self.failures} LLM steps failed in a row, the last: {reason}"
            else:
                self.failures = 0
                self.answers[kind] += 1
                self._pending.answer = kind
                return self._emit(proposal)
        self.fallbacks.append(reason)
        self._pending.fallbacks.append(reason)
        proposal = offline()
        return self._emit(proposal and replace(proposal, plan=f"{proposal.plan} [offline proposer: the LLM gave no "
                                                              f"usable answer ({reason})]"))

    def _ask(self, profile: TaskProfile, question: str, validate: Callable[[Mapping[str, Any]], Any]) -> Any:
        return self.client.ask(prompts.system_prompt(self.trainers, code=self.coding),
                               self._task_documents(profile), question, validate=validate).value

    def _asker(self, profile: TaskProfile) -> Callable[[str, Callable[[Mapping[str, Any]], Any]], Any]:
        """`_ask` for the coder: the same system prompt and documents, so its calls share the cached prefix."""
        return lambda question, validate: self._ask(profile, question, validate)

    def _task_documents(self, profile: TaskProfile) -> list:
        """The cached prefix, built once so that every call of the run shares it byte for byte."""
        if self._documents is None:
            tricks = [prompts.describe_trick(item.trick.id, item.recipe.op, item.trick.params, item.recipe.stage,
                                             self._origin(item.trick), self._trick_text(item.trick))
                      for item in self._options(profile)]
            self._documents = prompts.task_documents(profile, tricks, self._memories())
        return self._documents

    def _options(self, profile: TaskProfile) -> list:
        return self.knowledge.options(profile) if self.knowledge is not None else []

    def _trick_text(self, trick: AppliedTrick) -> str:
        stored = self.knowledge.kb.get(trick.id) if self.knowledge is not None else None
        return stored.text if stored is not None else trick.title

    @staticmethod
    def _origin(trick: AppliedTrick) -> str:
        where = f"competition {trick.competition}" if trick.competition else trick.source or "the knowledge base"
        return f"{trick.source_kind or 'trick'}, {where}"

    def _memories(self) -> list[str]:
        """The memories as lines: the recall given, else the case library's (when its proposer is under this one)."""
        library = self.inner.find(MemoryTreeProposer)
        recall = self.recall if self.recall is not None else library.recall if library is not None else None
        if recall is None or getattr(recall, "empty", False):
            return []
        if hasattr(recall, "to_dict"):
            return [json.dumps(recall.to_dict(), default=str, indent=1)]
        return [str(line) for line in recall]

    def _best_trainer(self, journal: Journal) -> str:
        """The trainer of the best single solution so far (an unknown trainer's stand-in)."""
        ranked = sorted((node for node in journal.valid_nodes if not node.members
                         and node.candidate.trainer in self.trainers), key=lambda node: node.score, reverse=True)
        if ranked:
            return ranked[0].candidate.trainer
        return next(name for name in (*DRAFT_FAMILIES, *self.trainers) if name in self.trainers)

    def _new(self, candidate: SolutionCandidate, journal: Journal) -> SolutionCandidate:
        """The candidate, unless the journal has it already (then the answer is refused and re-asked)."""
        key = candidate_key(candidate, self.trainers)
        same = next((node for node in journal if candidate_key(node.candidate, self.trainers) == key), None)
        if same is not None:
            raise LLMAnswerError(f"that solution is node {same.id} already; propose a different one")
        return candidate

    def _plan(self, head: str, rationale: str, notes: Sequence[str] = ()) -> str:
        if self.code_off is not None and not self._code_off_told:
            notes, self._code_off_told = [*notes, self.code_off], True
        plan = f"{head} — LLM {self.client.model}: {rationale or '(no rationale given)'}"
        return plan + "".join(f" [note: {note}]" for note in notes)

    # ---- the three actions

    def _draft(self, profile: TaskProfile, journal: Journal) -> tuple[Proposal | None, str]:
        options = {item.trick.id: item for item in self._options(profile)}
        coding = self.coding

        def validate(data: Mapping[str, Any]) -> Any:
            kind = kind_of(data, (SPEC, CODE) if coding else (SPEC,))
            if kind == CODE:
                return read_code_plan(data)
            answer = read_spec(data, self.trainers, self._best_trainer(journal), profile.task_type, list(options))
            candidate, used = answer.candidate, []
            for trick_id in answer.tricks:
                changed = self.knowledge.apply_option(options[trick_id], candidate)
                if changed is not None:
                    candidate = changed[0]
                    used.append(options[trick_id].trick)
            return _Draft(replace(answer, candidate=self._new(candidate, journal)), tuple(used))

        question = prompts.draft_question(journal, profile, menu=bool(options), code=coding)
        answer = self._ask(profile, question, validate)
        if not isinstance(answer, _Draft):
            return self.coder.draft(answer, profile, journal, self._asker(profile), self.client.model), CODE
        spec, used = answer.spec, answer.tricks
        head = f"draft: {spec.candidate.trainer.replace('_', ' ')}"
        trick = None
        if used:  # one trick with the others composed with it, as the knowledge proposer's drafts record them
            head += " with " + "; ".join(f"{t.op} from {t.describe()}" for t in used)
            trick = replace(used[0], related=tuple(t.id for t in used[1:]),
                            related_kinds=tuple(t.source_kind for t in used[1:]), op="+".join(t.op for t in used))
        return Proposal(spec.candidate, self._plan(head, spec.rationale, spec.notes), trick), SPEC

    def _improve(self, node: Node, profile: TaskProfile, journal: Journal) -> tuple[Proposal | None, str]:
        coding = self.coding
        script = self.coder is not None and self.coder.wrote(node)  # a script is improved with free code only
        menu = {} if script else self._menu(node, profile, journal)
        allowed = () if script else (TRICK,) if menu else (SPEC,)
        allowed += (CODE,) if coding else ()
        head = f"improve node {node.id} ({node.candidate.trainer}, {describe_score(node, profile)})"

        def validate(data: Mapping[str, Any]) -> Any:
            kind = kind_of(data, allowed)
            if kind == CODE:
                return read_code_plan(data, list(menu))
            if kind == TRICK:
                return read_trick(data, list(menu))
            answer = read_spec(data, self.trainers, self._best_trainer(journal), profile.task_type)
            return replace(answer, candidate=self._new(answer.candidate, journal))

        lines = [f"- id {item.trick.id}: recipe {item.trick.op}" for item in menu.values()]
        answer = self._ask(profile, prompts.improve_question(node, journal, profile, lines, code=coding,
                                                             spec=not script), validate)
        if isinstance(answer, SpecAnswer):
            return Proposal(answer.candidate, self._plan(head, answer.rationale, answer.notes)), SPEC
        if isinstance(answer, CodeAnswer):
            trick = menu[answer.trick].trick if answer.trick is not None else None
            return self.coder.improve(answer, node, profile, journal, self._asker(profile), self.client.model,
                                      trick), CODE
        item = menu[answer.trick]
        plan = self._plan(f"{head}: apply {item.trick.op}{item.note} as {item.trick.describe()} suggests",
                          answer.rationale)
        return Proposal(item.candidate, plan, item.trick), TRICK

    def _menu(self, node: Node, profile: TaskProfile, journal: Journal) -> dict[str, _MenuItem]:
        """The retrieved tricks not yet tried on the node's branch whose recipe changes it into a new solution of the
        same model family (another family is a draft's job)."""
        used, ineffective = journal.tricks_on_branch(node)
        menu = {}
        for option in self._options(profile):
            if option.trick.id in used or option.trick.id in ineffective or option.trick.id in menu:
                continue
            changed = self.knowledge.apply_option(option, node.candidate)  # None: the recipe cannot change the node
            if changed is None or changed[0].trainer != node.candidate.trainer:
                continue
            if journal.has(candidate_key(changed[0], self.trainers), self.trainers):
                continue
            menu[option.trick.id] = _MenuItem(option.trick, *changed)
        return menu

    def _debug(self, node: Node, profile: TaskProfile, journal: Journal) -> tuple[Proposal | None, str]:
        if self.coder is not None and self.coder.wrote(node):
            return self.coder.debug(node, profile, journal, self._asker(profile), self.client.model), CODE

        def validate(data: Mapping[str, Any]) -> SpecAnswer:
            answer = read_spec(data, self.trainers, self._best_trainer(journal), profile.task_type)
            return replace(answer, candidate=self._new(answer.candidate, journal))

        answer = self._ask(profile, prompts.debug_question(node, journal, profile), validate)
        head = f"debug node {node.id} ({node.candidate.trainer})"
        return Proposal(answer.candidate, self._plan(head, answer.rationale, answer.notes)), SPEC
