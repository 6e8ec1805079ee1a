"""Benchmarks: Durable Agent vs a minimal hand-rolled Temporal agent loop (`python -m bench.run`)."""
