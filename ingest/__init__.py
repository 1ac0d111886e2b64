"""Reading solution write-ups and papers into tricks for the knowledge base."""

from ingest.pipeline import FileOutcome, IngestSummary, ingest

__all__ = ["FileOutcome", "IngestSummary", "ingest"]
