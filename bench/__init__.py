"""Offline benchmarks for teamgraph and its baselines (`python -m bench [--quick]`)."""
