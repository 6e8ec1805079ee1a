"""The legacy fence: code that exists only so that runs started by older code replay and finish.

Empty at the 0.1.0 baseline: every pre-release behaviour was folded into version 1. A post-release patch
(docs/changing-workflows.md) puts its old side here, or lists where it stays inline in `INLINE` under its patch
id, so this module is the one list of what the next drain removes.
"""

from __future__ import annotations

# Old sides that stay inline, by patch: where, and why they did not move. Delete each with its patch.
INLINE: dict[str, list[str]] = {}

# Kept for old runs but tied to no patch (no workflow command depends on them); each goes when no run that used
# it can still be open or read: past retention plus the longest approval wait.
UNVERSIONED: list[str] = []
