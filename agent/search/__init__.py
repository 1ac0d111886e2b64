"""The solution tree search (AutoMind section 3.2, after AIDE): the loop (tree), its budget clock (clock), large
tables explored on a sample first (exploration), the drafts' expected time (fit_time), the finish (final: blends, stacks, the final fit), the journal of
nodes (the run's one record), the policy that picks the next action, the proposer protocol (TreeProposer;
WrappingProposer for a proposer around another) and the built-in proposer, repairs for failed nodes, blending and
tuning. The search is handed its evaluator and knows it by a protocol (TreeEvaluator): it never compiles or fits a
spec itself."""
