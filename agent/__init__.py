"""casebook's ML engineering agent: task set-up, the classical engine and the seed loop.

    from agent import AgenticAutoML, Dataset, SequenceProposer, SolutionCandidate
    run = AgenticAutoML(SequenceProposer(seed=[SolutionCandidate("linear"), ...])).solve(
        Dataset.from_frame(df, target="Attrition"))
    print(run.summary())
"""

from agent.engine import Dataset
from agent.loop import (
    AgenticAutoML,
    AttemptRecord,
    CandidateProposer,
    EngineeringRun,
    SequenceProposer,
    SolutionCandidate,
)
from agent.proposer import VariationProposer
from agent.verifier import DeterministicVerifier, Verdict, Verifier

__all__ = [
    "AgenticAutoML", "AttemptRecord", "CandidateProposer", "Dataset", "DeterministicVerifier", "EngineeringRun",
    "SequenceProposer", "SolutionCandidate", "Verdict", "Verifier", "VariationProposer",
]
