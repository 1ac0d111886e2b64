"""Verification beyond "it ran": leakage and data-usage probes (probes), the records they produce (findings), and
the deterministic verifier that turns evidence into a verdict (verifier)."""
