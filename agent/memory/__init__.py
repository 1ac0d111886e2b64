"""The case library: positive and negative memories across tasks (Agent K's RAG+ and RAG-).

- `records`: the frozen records and their JSON (a task's key and signature, `TaskMemory`, positive, solution and
  negative memories, and what a recall returns: `Recall`, `SimilarTask`, `Effect`, `PastError`);
- `change`: `Change`, the edit between two candidates a memory measured, made again on another candidate;
- `text`: a task in words (the description and structure texts its embeddings are made of) and a failure in one
  line (an error's class, message and key);
- `recall`: how a recall is scored (similar tasks ranked, effects weighted by similarity, repaired errors);
- `store`: `MemoryStore`, the sqlite tables and the chromadb collection of task embeddings, crash-safe;
- `recorder`: one solve's link to the library (`MemorySession`: the recall, a memory per node, the run's outcome);
- `proposer`: `MemoryTreeProposer`, the memories at work in the tree search;
- `experience`: experience packs (`ExperiencePack`, read, built and added to a home; `packs_in_use`, the portfolio's
  drafts for a task, the measured effects of tricks and the gains of built-in changes near it), `portfolio`: the
  greedy portfolio and its order, `portfolio_proposer`: `PortfolioProposer`, a task's first drafts from the packs'
  portfolio.

How `agent memory ...` lists what the library holds is cli/memory.py.
"""
