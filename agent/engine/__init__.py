"""The classical engine: what a solution computes. A solution as data (spec), the steps and trainers it names, the
dataset, compiling a spec into a scikit-learn pipeline (and into source for solution.py), and fitting and
cross-validating it (each fold's fitted preprocessing kept in a fold cache between nodes). Where and how safely that runs is `agent.execution`'s job. `runtime` is the library every
solution.py carries."""
