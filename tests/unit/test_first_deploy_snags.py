"""The first-deploy snags of issue 40 (shared/reviews/ecosystem-turn4.md §2, §3), each with the check that would
have caught it: one search-attribute list everywhere, the README's rollout snippet as written."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from durable_agent.cli.devserver import SEARCH_ATTRIBUTES
from durable_agent.workers.search_attributes import required_search_attributes

ROOT = Path(__file__).resolve().parents[2]


def test_every_place_lists_the_same_search_attributes() -> None:
    required = required_search_attributes()
    assert set(required) == {"PromptState", "UserId", "ConversationId", "ParentPromptId"}
    assert SEARCH_ATTRIBUTES == required  # `dagent server`, the tests' servers
    setup = (ROOT / "deploy" / "temporal-setup.sh").read_text()
    default = re.search(r'SEARCH_ATTRIBUTES="\$\{SEARCH_ATTRIBUTES:-([^}]*)\}"', setup)
    assert default is not None
    assert dict(pair.split("=") for pair in default.group(1).split()) == required
    deploying = (ROOT / "docs" / "deploying.md").read_text()
    cloud = deploying.split("- **Temporal Cloud with an API key**")[1].split("\n- ")[0]
    assert [name for name in required if not re.search(rf"\b{name}\b", cloud)] == [], "the Cloud setup misses one"


def _bash_blocks(markdown: str) -> list[str]:
    return re.findall(r"```bash\n(.*?)```", markdown, flags=re.DOTALL)


def test_the_readme_rollout_runs_as_written() -> None:
    """Every `dagent deploy` line of the README knows its deployment: `--deployment`, or DAGENT_DEPLOYMENT_NAME
    exported before it (a `NAME=value command` prefix sets it for that one command only)."""
    [block] = [b for b in _bash_blocks((ROOT / "README.md").read_text()) if "dagent deploy" in b]
    exported: set[str] = set()
    deploy_lines = 0
    for line in block.splitlines():
        for command in re.split(r"&&|;|&(?!&)", line.split("#")[0]):
            words = shlex.split(command)
            if words[:1] == ["export"]:
                exported |= {word.split("=")[0] for word in words[1:]}
                continue
            while words and re.fullmatch(r"[A-Z_]+=\S*", words[0]):
                words = words[1:]
            if words[:2] == ["dagent", "deploy"]:
                deploy_lines += 1
                assert "--deployment" in words or "DAGENT_DEPLOYMENT_NAME" in exported, f"fails as written: {line}"
    assert deploy_lines >= 3
