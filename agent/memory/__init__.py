"""The case library: positive and negative memories across tasks (Agent K's RAG+ and RAG-)."""
