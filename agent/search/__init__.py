"""The solution tree search (AutoMind section 3.2, after AIDE): the journal of nodes, the policy that picks the next
action, the proposer protocols and the built-in proposer, repairs for failed nodes, blending and tuning."""
