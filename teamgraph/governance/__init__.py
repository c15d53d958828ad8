"""Governance: sensitive operations, skills, the task board, commands, checked against the permission matrix.

What they enforce: docs/protocols.md, "Permissions" and docs/protocols.md, "Task board".

The permission matrix (``teamgraph/roles/matrix.py``) is the declarative table (levels,
role grants and limits, sensitive operations) with its YAML overrides; ``gate`` checks
every tool call against it;
``operations`` performs the governed acts, at once or after an approval; ``skills``,
``board``, ``admin`` and ``commands`` are the stores and executors the tools use.
"""
