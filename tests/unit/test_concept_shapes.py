"""One shape per concept (issue 39): an `ast` scan of the product packages counts the models that describe a
call's approval, and the classes that declare a prompt's identity, so a new copy fails here instead of growing
unseen (the review of turn 4 counted 10 approval shapes and 13 identity declarations).

What counts as an **approval shape** (a class of the product with declared fields):
- it declares two or more of the fields that describe a call's approval request, its wait or its decision
  (`APPROVAL_FIELDS`: `reason`, `approvers`, `requested_at`, `expires_at`, `expires_after(_seconds)`,
  `four_eyes`, `signed_decisions`, `decision`), as `Approval`, `ToolPending` or a notice that copies them did; or
- it is named *Pending* or *Waiting* and holds one approval shape or one record entry in a single field (a
  wrapper that adds context to one waiting call: `WaitingCall(entry, requirement)`, `PendingRow(call=...)`); or
- it inherits from an approval shape and adds the call (`tool_call_id`, `tool`, `input`): a new view of the
  waiting call. A subclass that adds other fields only (the API's `can_decide`, `context`, `links`) extends the
  view it inherits and is not a new shape; neither is a class that holds shapes in a list (a memo, a page, a
  sub-agent's report) or a planned call carrying its request (`CallNeedingApproval`).

What counts as a declaration of the **identity triple**: a class that itself declares all of `prompt_id`,
`user_id` and `conversation_id`, or `id`, `user_id` and `conversation_id` (a prompt's own record). A class
that inherits them (from `PromptRef`) or holds a `PromptRef` does not.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("agent", "workflows", "activities", "workers", "client", "api", "cli", "plugins")
APPROVAL_FIELDS = frozenset({"reason", "approvers", "requested_at", "expires_at", "expires_after",
                             "expires_after_seconds", "four_eyes", "signed_decisions", "decision"})
CALL_FIELDS = frozenset({"tool_call_id", "tool", "input"})
WAITING_WORDS = ("Pending", "Waiting")
TRIPLES = (frozenset({"prompt_id", "user_id", "conversation_id"}), frozenset({"id", "user_id", "conversation_id"}))
MAX_APPROVAL_SHAPES = 3
MAX_TRIPLE_DECLARATIONS = 3


@dataclass(frozen=True)
class Declared:
    """A class and what it declares itself."""

    where: str
    name: str
    bases: tuple[str, ...]
    fields: dict[str, ast.expr]  # field name -> its annotation


def _name(node: ast.expr) -> str:
    return node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""


def declared_classes(root: Path = ROOT) -> list[Declared]:
    found: list[Declared] = []
    for package in PRODUCT:
        for path in sorted((root / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.ClassDef):
                    fields = {item.target.id: item.annotation for item in node.body
                              if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)}
                    found.append(Declared(f"{path.relative_to(root)}:{node.lineno}", node.name,
                                          tuple(_name(base) for base in node.bases), fields))
    return found


def _single_of(annotation: ast.expr, names: set[str]) -> bool:
    """The annotation is one of `names` (or one of them | None), not a list or dict of them."""
    text = ast.unparse(annotation).replace("'", "").replace('"', "")
    parts = {part.strip() for part in text.split("|")} - {"None"}
    return len(parts) == 1 and parts <= names


def approval_shapes(classes: list[Declared]) -> list[Declared]:
    shapes = {c.name: c for c in classes if len(APPROVAL_FIELDS & c.fields.keys()) >= 2}
    while True:  # wrappers and views of a shape found so far, until no new one appears
        wrappers = {c.name: c for c in classes if c.name not in shapes and (
            (any(word in c.name for word in WAITING_WORDS)
             and any(_single_of(a, {*shapes, "ToolOutput"}) for a in c.fields.values()))
            or (set(c.bases) & shapes.keys() and CALL_FIELDS & c.fields.keys()))}
        if not wrappers:
            return sorted(shapes.values(), key=lambda c: c.where)
        shapes.update(wrappers)


def triple_declarations(classes: list[Declared]) -> list[Declared]:
    return [c for c in classes if any(triple <= c.fields.keys() for triple in TRIPLES)]


def _listing(classes: list[Declared]) -> str:
    return "\n".join(f"  {c.where} {c.name}" for c in classes)


def test_approval_is_described_by_at_most_three_models() -> None:
    shapes = approval_shapes(declared_classes())
    assert len(shapes) <= MAX_APPROVAL_SHAPES, (
        f"{len(shapes)} approval shapes (at most {MAX_APPROVAL_SHAPES}: the request, the pending view, the "
        f"decision); extend or compose one of them instead:\n{_listing(shapes)}")
    assert {"ApprovalRequest", "PendingApproval", "Decision"} <= {c.name for c in shapes}, _listing(shapes)


def test_the_identity_triple_is_declared_at_most_three_times() -> None:
    declared = triple_declarations(declared_classes())
    assert len(declared) <= MAX_TRIPLE_DECLARATIONS, (
        f"{len(declared)} classes declare user_id/conversation_id/prompt_id (at most {MAX_TRIPLE_DECLARATIONS}); "
        f"inherit or hold agent/models.py PromptRef instead:\n{_listing(declared)}")
    assert "PromptRef" in {c.name for c in declared}, _listing(declared)


def test_the_scan_sees_the_copies_it_is_meant_to_refuse() -> None:
    """The rules on classes written as the copies were (the turn-4 review's `WaitingCall`, `PendingRow`, a
    notice repeating the call's fields, a view redeclaring the triple), so a rule that stops seeing them fails."""
    source = '''
class Request:
    reason: str
    approvers: list[str] | None
class WaitingCall:
    entry: ToolOutput
    requirement: Request
class PendingRow:
    prompt_id: str
    user_id: str | None
    conversation_id: str | None
    call: PendingView
class PendingView(Request):
    tool_call_id: str
class Notice:
    reason: str
    four_eyes: bool
class Item(PendingView):
    can_decide: bool
class Memo:
    calls: list[PendingView]
'''
    classes = [Declared("x.py", node.name, tuple(_name(b) for b in node.bases),
                        {i.target.id: i.annotation for i in node.body
                         if isinstance(i, ast.AnnAssign) and isinstance(i.target, ast.Name)})
               for node in ast.parse(source).body if isinstance(node, ast.ClassDef)]
    assert {c.name for c in approval_shapes(classes)} == {"Request", "WaitingCall", "PendingRow", "PendingView",
                                                          "Notice"}
    assert [c.name for c in triple_declarations(classes)] == ["PendingRow"]
