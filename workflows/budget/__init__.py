"""Budgets: a prompt's own token and cost limits (limits.py), the period budgets' ledger workflow (ledger.py), a
prompt's gate to its ledgers (gate.py) and how clients and activities reach a ledger (access.py)."""
