"""The read side: question -> candidates -> reranked -> selected -> envelope."""
