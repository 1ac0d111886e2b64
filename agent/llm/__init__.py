"""The LLM path: an anthropic-backed proposer and coder (AutoMind), with the offline proposer as fallback."""
