"""Which code a run of a workflow gets: the version policy (versions.py), the legacy fence (legacy.py) and Worker
Versioning's pinned and auto-upgrade classes (deployment.py)."""
