"""Scoring correctness figures and docs/CORRECTNESS.md: ``python -m bench.correctness``."""
