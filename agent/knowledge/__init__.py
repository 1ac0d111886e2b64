"""Knowledge in the search: retrieved tricks become executable recipes (recipes: the recipe each trick carries, a
card's own or compiled from its text at ingest by ingest.compile), and the knowledge proposer drafts and improves
nodes with them."""
