"""The solution tree search (AutoMind section 3.2, after AIDE): the journal of nodes, the policy that picks the next
action, the proposer protocol (TreeProposer; WrappingProposer for a proposer around another) and the built-in
proposer, repairs for failed nodes, blending and tuning."""
