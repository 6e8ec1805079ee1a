"""Helpers importable by worker subprocesses in tests (`PYTHONPATH=<repo root>`, `tests.support.*`)."""
