"""Deciding through the HTTP API, the parts without a server: which typed name the `--by` warning is about,
and a refusal's kind read from the problem type (an "already decided" refusal is not someone else's to take)."""

from __future__ import annotations

from durable_agent.cli.api_decisions import _given_decider, _problem


def test_only_a_typed_by_or_user_is_worth_a_warning() -> None:
    assert _given_decider(["approve", "p", "c", "--by", "bob"]) == ("--by", "bob")
    assert _given_decider(["reject", "p", "c", "--by=user:bob", "--reason", "no"]) == ("--by", "user:bob")
    assert _given_decider(["run", "pay", "--user", "bob", "--interactive"]) == ("--user", "bob")
    assert _given_decider(["approve", "p", "c"]) is None  # the default ($USER) was not typed
    assert _given_decider(["run", "--", "--by", "bob"]) is None  # after `--`: the prompt's text, not an option


def test_a_refusal_keeps_its_problem_type_as_its_kind() -> None:
    body = b'{"type": "https://x/problems/already-decided", "title": "Already decided", "detail": "already ' \
           b'decided (rejected by alice)", "status": 409}'
    assert _problem(409, body) == ("already decided (rejected by alice)", "already-decided")
    assert _problem(403, b'{"type": "https://x/problems/not-allowed", "title": "Not allowed"}') == (
        "Not allowed", "not-allowed")
    assert _problem(502, b"<html>bad gateway</html>") == ("the API answered 502", "decision-refused")
    assert _problem(409, b'{"type": "https://x/problems/made-up", "detail": "odd"}') == ("odd", "decision-refused")
