"""The store: the alias and everything behind it.

The alias's index template, search pipelines and the concrete index with its ``_meta``
(``alias.AliasStore``), the versioned chunks with their hidden list and flip (``versions``), the
locks that keep writers and a reindex apart (``locking``) and the bulk writer (``bulk``). It
imports nothing of ``osrag.ingest``, ``osrag.admin`` or ``osrag.search``: they all stand on it.
"""
