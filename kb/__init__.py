"""casebook's knowledge base: tricks from winners' write-ups and papers, labelled and searchable.

    >>> import kb
    >>> base = kb.open()                      # $CASEBOOK_HOME or ./.casebook
    >>> base.search("encode high-cardinality categoricals", k=5, stage="feature engineering")
    >>> base.tricks_for_label("General Machine Learning / Classification", k=10)
"""

from kb.config import bundled_knowledge
from kb.records import STAGES, ScoredTrick, Trick
from kb.store import KnowledgeBase


def open(home=None) -> KnowledgeBase:  # noqa: A001 - mirrors sqlite_utils.Database / chromadb style
    """Open (creating if needed) the knowledge base in `home`."""
    return KnowledgeBase(home)


__all__ = ["KnowledgeBase", "STAGES", "ScoredTrick", "Trick", "bundled_knowledge", "open"]
