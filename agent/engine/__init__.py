"""The classical engine: a solution as data (spec), the steps and trainers it names, the dataset, compiling a spec
into a scikit-learn pipeline (and into source for solution.py), fitting and cross-validating it, and the sandbox
each candidate runs in. `runtime` is the library every solution.py carries."""
