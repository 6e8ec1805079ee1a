"""Which behaviour a run of a workflow has: by the version its input names, else by patch markers.

0.1.0 is the baseline, version 1, with no patch. After the release every change to what a workflow does (its
commands, or their order) is a patch that gets the next version here, its old side in legacy.py, a migration
test and a retirement rule: the version policy in docs/changing-workflows.md. Never reuse a patch id or a
version number.
"""

from __future__ import annotations

CURRENT_VERSION = 1

# The version from which each patch's behaviour is on without a marker (none at the 0.1.0 baseline).
PATCH_VERSIONS: dict[str, int] = {}

