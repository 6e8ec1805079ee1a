"""Who decides a pending call: one identity model for the CLI, the client, the API, raw signals and tokens.

A decision is taken by a *person* (a user id, e.g. `alice`), who holds *roles* (e.g. `finance`). A tool's
approval policy names who may decide in `Approval.approvers`, each entry either a user or a role:

- `user:alice` names the person whose id is `alice`;
- `role:finance` names everyone who holds the role `finance` (never a person whose id is `finance`);
- a bare name (`alice`) is a user: the same as `user:alice`. Roles must be written `role:...`.

The record of a decision keeps the person (`Decision.by`) and the entry through which they were
allowed (`Decision.via`, e.g. `role:finance`).

Pure functions, no I/O and no Temporal imports: the workflow (through the sandbox), the API, the client's
pending list and the CLI all call the same ones.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

USER_PREFIX = "user:"
ROLE_PREFIX = "role:"
FOUR_EYES_REFUSAL = "the prompt's own user may not approve its calls (four-eyes rule)"

ApproverKind = Literal["user", "role"]


@dataclass(frozen=True)
class Identity:
    """A person who decides: their user id and the roles they hold (as verified by whoever vouches for them:
    the API's authentication, a signed decision token, or, without decision keys, the caller's own word)."""

    id: str | None
    roles: frozenset[str] = field(default_factory=frozenset)

    @classmethod
    def of(cls, person: str | None, roles: Iterable[str] = ()) -> Identity:
        return cls(person, frozenset(roles))


@dataclass(frozen=True)
class Approver:
    """One entry of a policy's `approvers`: a user or a role."""

    kind: ApproverKind
    name: str

    def __str__(self) -> str:
        return f"{self.kind}:{self.name}"


def parse_approver(entry: str) -> Approver:
    """`user:alice` / `role:finance` / a bare `alice` (a user)."""
    if entry.startswith(ROLE_PREFIX):
        return Approver("role", entry.removeprefix(ROLE_PREFIX))
    return Approver("user", entry.removeprefix(USER_PREFIX))


def person_problem(by: str | None) -> str | None:
    """Why `by` cannot name the person who decides (a role is never a decider), or None."""
    if by is None:
        return None
    if by.startswith(ROLE_PREFIX):
        return f"{by!r} names a role; a decision is taken by a person (give a user id)"
    if not person_id(by):
        return "the decider's user id is empty"
    return None


def principal_problem(principal: str) -> str | None:
    """Why an authenticated id (an API key's principal, a token's subject) cannot be a principal, or None. Any
    other string is one person, exactly: but `user:alice` would decide as `alice` and `role:x` reads as a role,
    so ids with those prefixes are refused where they enter (config load, token verification)."""
    if not principal:
        return "a principal id must not be empty"
    if principal.startswith((USER_PREFIX, ROLE_PREFIX)):
        return (f"principal id {principal!r} begins with {USER_PREFIX!r} or {ROLE_PREFIX!r}, which name approver "
                "entries: it would decide as another person")
    if any(unicodedata.category(char) == "Cc" for char in principal):
        return f"principal id {principal!r} holds a control character"
    return None


def person_id(by: str | None) -> str | None:
    """The user id `by` names: `user:alice` and `alice` are both `alice`."""
    return by.removeprefix(USER_PREFIX) if by is not None else None


def grant(identity: Identity, approvers: list[str] | None) -> str | None:
    """The approver entry through which `identity` may decide (`user:alice`, `role:finance`), `*` when the
    policy names nobody (anyone the front door lets through may decide), or None when they may not."""
    if not approvers:
        return "*"
    person = person_id(identity.id)
    for entry in approvers:
        approver = parse_approver(entry)
        if approver.kind == "user" and person is not None and approver.name == person:
            return str(approver)
    for entry in approvers:
        approver = parse_approver(entry)
        if approver.kind == "role" and approver.name in identity.roles:
            return str(approver)
    return None


def names(identity: Identity, approvers: list[str] | None) -> bool:
    """Whether a policy's `approvers` name this person or one of their roles (an empty list names nobody):
    what lets someone see and decide a call of another user's prompt without a global role."""
    return bool(approvers) and grant(identity, approvers) is not None


def may_decide(identity: Identity, approvers: list[str] | None, *, owner: str | None = None,
               four_eyes: bool = False, approving: bool = True) -> str | None:
    """Why `identity` may not decide a call with these `approvers`, or None when they may. With `four_eyes`,
    the prompt's own user (`owner`) may reject but not approve."""
    problem = person_problem(identity.id)
    if problem is not None:
        return problem
    if grant(identity, approvers) is None:
        who = identity.id or "an anonymous caller"
        return f"{who} may not decide this call; approvers: {describe(approvers)}"
    if four_eyes and approving and owner is not None and person_id(identity.id) == person_id(owner):
        return FOUR_EYES_REFUSAL
    return None


def describe(approvers: list[str] | None) -> str:
    """Who may decide, for a one-line refusal: `user:alice, role:finance` (bare names shown as users)."""
    if not approvers:
        return "anyone allowed to decide the prompt's calls"
    return ", ".join(str(parse_approver(entry)) for entry in approvers)
