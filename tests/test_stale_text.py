"""The text beside the code says what the code does (issue 22, 10)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from budget_hook.cli import main

ROOT = Path(__file__).resolve().parents[1]


def test_examples_readme_lists_every_example():
    listed = (ROOT / "examples" / "README.md").read_text(encoding="utf-8")
    for path in sorted((ROOT / "examples").glob("*.json")):
        assert f"`{path.name}`" in listed, path.name


def test_the_demo_script_states_the_count_the_cli_gives(capsys):
    assert main(["count", "--model", "gpt-4o", str(ROOT / "examples" / "agent_request.json")]) == 0
    tokens = json.loads(capsys.readouterr().out)["tokens"]
    assert f"{tokens:,}-token agent conversation" in (ROOT / "scripts" / "demo.sh").read_text(encoding="utf-8")


def test_the_config_comments_say_overrides_match_ids_unless_alias_matching_is_on():
    text = (ROOT / "litellm_config.yaml").read_text(encoding="utf-8")
    for line in text.splitlines():
        if re.search(r"#\s*(teams|keys):", line):
            assert "alias" not in line or "match_" in line, line
