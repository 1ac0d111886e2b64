"""Knowledge in the search: retrieved tricks become executable recipes (recipes, trick_mapping), and the knowledge
proposer drafts and improves nodes with them."""
