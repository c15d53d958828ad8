"""Scripts that generate parts of the README and the docs site from the code.

``python -m docs.gen_graph`` redraws the README's picture of the team graph; the
docs site's generated pages (the ``Policy`` and CLI references, the benchmarks) are
written by ``docs/hooks.py`` while ``mkdocs build`` runs.
"""
