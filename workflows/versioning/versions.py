"""Which behaviour a run of a workflow has: by the version its input names, else by patch markers.

0.1.0 is the baseline, version 1: every pre-release behaviour change was folded into it, with no patch. After the
release, a change to what a workflow does (its commands, or their order) is a patch, by the policy in
docs/changing-workflows.md:
- it gets the next version: an entry `"<patch-id>": N` in PATCH_VERSIONS, CURRENT_VERSION = N, and a line in
  that page's version table;
- the workflow asks `has("<patch-id>", request.workflow_version)`, which the first patch adds here: true when the
  input's version is at least the patch's (a prompt started by `AgentClient` or a parent workflow names
  CURRENT_VERSION in its input, which is in history, so the choice replays with no marker), and, for an input
  without a version (a raw-SDK start), what a `workflow.patched("<patch-id>")` marker says;
- its old side goes in workflows/versioning/legacy.py (or is listed there), with the retirement rule below;
- a record-then-replay test proves the migration: a run recorded with the old side, replayed by the new code.

A patch's old side is deleted (its "drain") only when no run without the patch can still be replayed: none is
open (check with a visibility query on the workflow type and start time; a prompt may wait for approval for days)
and none closed within the namespace's retention (a query on a closed run replays it). While unversioned runs
that recorded the marker may still be open, call `workflow.deprecate_patch(id)` in its place. Never reuse a patch
id or a version number.
"""

from __future__ import annotations

CURRENT_VERSION = 1

# The version from which each patch's behaviour is on without a marker (none at the 0.1.0 baseline).
PATCH_VERSIONS: dict[str, int] = {}

