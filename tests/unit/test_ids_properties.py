"""Properties of the id rule and of principals (issue 41), over generated conversation ids, AG-UI thread ids and
principal ids: reserved prefixes in any case, `user:`/`role:` forms, trailing newlines, IdP formats (`auth0|x`,
`google-oauth2|x`, emails, URLs). No caller's id is a derived workflow's id; no principal decides as another."""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter, ValidationError

from durable_agent.agent.identity import Identity, grant, may_decide, principal_problem
from durable_agent.agent.ids import RESERVED_PREFIXES, caller_id_problem, reserved, schedule_run_id
from durable_agent.agent.period_budgets import LEDGER_ID_PREFIX, ledger_id, ledger_principal
from durable_agent.agent.period_budgets import principal_problem as budget_principal_problem
from durable_agent.api.config import ApiKey
from durable_agent.api.schemas import Identifier

ID_CHARS = "abcXYZ019._:@-|+ /\n\t~é"
PREFIXES = [*RESERVED_PREFIXES, "DAGENT-", "Temporal-Sys", "dagent-budget-user:", "dagent-run-", "user:", "role:",
            "auth0|", "google-oauth2|", "samlp|acme|", "https://idp.example/", "conv-", "prompt-", ""]
SUFFIXES = ["", "\n", " ", "\t", "-2026-11-28T01:40:00Z", ".call_r1_0"]


def _ids() -> st.SearchStrategy[str]:
    body = st.text(alphabet=ID_CHARS, max_size=40) | st.text(max_size=20) | st.just("a" * 250)
    return st.builds(lambda p, b, s: p + b + s, st.sampled_from(PREFIXES), body, st.sampled_from(SUFFIXES))


IDENTIFIER = TypeAdapter(Identifier)


def _control(text: str) -> bool:
    return any(unicodedata.category(char) == "Cc" for char in text)


@given(_ids())
@settings(max_examples=400)
def test_no_caller_id_is_a_derived_id(value: str) -> None:
    """Whatever a conversation id or AG-UI thread id a caller sends: accepted only outside every derived
    namespace (ledgers, schedule runs, Temporal's own), and the Python rule agrees with the API's schema."""
    accepted = caller_id_problem(value) is None
    try:
        IDENTIFIER.validate_python(value)
        schema_ok = True
    except ValidationError:
        schema_ok = False
    assert accepted == (schema_ok and not reserved(value)), value
    if accepted:
        assert "\n" not in value and not value.lower().startswith(("dagent-", "temporal-sys")), value
        assert not value.startswith(LEDGER_ID_PREFIX) and not value.startswith(schedule_run_id(""))
        assert ledger_principal(value) is None


@given(_ids(), _ids())
@settings(max_examples=400)
def test_a_principal_decides_only_as_itself(principal: str, other: str) -> None:
    """An id that can authenticate (an API key's principal, a token's subject) is one person: named as a user
    it is itself only, a `user:` entry for anyone else never lets it decide, and four-eyes knows it as owner
    however the owner is written."""
    try:
        ApiKey(principal=principal, key="0123456789abcdef-key")
        loads = True
    except ValidationError:
        loads = False
    assert loads == (principal_problem(principal) is None), principal
    if not loads:
        assert principal == "" or principal.startswith(("user:", "role:")) or _control(principal)
        return
    me = Identity.of(principal, ["finance"])
    if grant(me, [f"user:{other}"]) is not None:
        assert other == principal
    if grant(me, [other]) is not None and not other.startswith("role:"):
        assert other in (principal, f"user:{principal}")
    assert grant(me, [f"user:{principal}"]) == f"user:{principal}"
    for owner in (principal, f"user:{principal}"):
        refusal = may_decide(me, ["role:finance"], owner=owner, four_eyes=True)
        assert refusal is not None and "four-eyes" in refusal, (principal, owner)


@given(_ids(), _ids())
@settings(max_examples=400)
def test_every_person_has_one_ledger_of_their_own(first: str, second: str) -> None:
    """A budget can be set for any IdP id (`auth0|eve`): its ledger id is reserved, within Temporal's id limit,
    and names it alone."""
    for name in (first, second):
        principal = f"user:{name}"
        if budget_principal_problem(principal) is not None:
            assert name == "" or len(name.encode()) > 255 or _control(name), name
            continue
        workflow_id = ledger_id(principal)
        assert reserved(workflow_id) and len(workflow_id) <= 1000
        assert ledger_principal(workflow_id) == principal
    if first != second:
        assert ledger_id(f"user:{first}") != ledger_id(f"user:{second}")
        assert ledger_id(f"user:{first}") != ledger_id(f"conversation:{first}")


@pytest.mark.parametrize("value", ["dagent-budget-user:bob", "temporal-sys-scheduler:x", "abc\n", "TEMPORAL-SYS",
                                   "dagent-run-x-2026-11-28T01:40:00Z"])
def test_examples_from_the_review_are_refused(value: str) -> None:
    assert caller_id_problem(value) is not None
