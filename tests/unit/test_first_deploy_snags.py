"""A first-deploy snag of issue 40 (shared/reviews/ecosystem-turn4.md §3): the README's rollout snippet as written.
(One search-attribute list everywhere: tests/temporal/test_search_attribute_check.py.)"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


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
