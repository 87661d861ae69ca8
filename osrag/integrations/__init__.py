"""Framework adapters: LangChain, LlamaIndex and Haystack retrievers over the one query path.

Each lives in its own module behind its own extra (``osrag[langchain]``, ``osrag[llamaindex]``,
``osrag[haystack]``) and is a thin shell over ``SearchClient.search``: the envelope's passages
become the framework's documents, with ``metadata.passage_metadata`` on each.
"""
