"""The seed card's "agentic AutoML" loop: a seed population, then reflection rounds, each candidate verified.

    from agent.seedloop import AgenticAutoML, Dataset, SequenceProposer, SolutionCandidate
    run = AgenticAutoML(SequenceProposer([SolutionCandidate("linear"), SolutionCandidate("xgboost")]),
                        max_iterations=8, patience=3, cv=5).solve(Dataset.from_frame(df, target="Attrition"))
    print(run.summary())

Kept for its API and as a benchmark arm; it scores candidates with the same evaluator as the tree search.
"""

from agent.candidate import AttemptRecord, EngineeringRun, SolutionCandidate
from agent.engine.dataset import Dataset
from agent.seedloop.loop import AgenticAutoML, CandidateProposer, SequenceProposer
from agent.seedloop.variation import VariationProposer
from agent.verify.findings import Verdict
from agent.verify.verifier import DeterministicVerifier, Verifier

__all__ = [
    "AgenticAutoML", "AttemptRecord", "CandidateProposer", "Dataset", "DeterministicVerifier", "EngineeringRun",
    "SequenceProposer", "SolutionCandidate", "Verdict", "Verifier", "VariationProposer",
]
