"""The Claude Code plugin under the real engine: `claude plugin validate plugin` and
`claude plugin test plugin` (its hooks driven by Claude Code's testing kit against a scripted
fake `factrail`, every failure mode included). Skipped, saying why, without Node or without
Claude Code pinned in `plugin/node_modules` (`make node-deps`)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.integration.claude_code import CLAUDE, offline_env
from tests.integration.processes import ROOT

pytestmark = [
    pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed"),
    pytest.mark.skipif(
        not CLAUDE.exists(),
        reason="Claude Code is not pinned in plugin/node_modules (run `make node-deps`)",
    ),
]


def claude(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = offline_env(home, CLAUDE_CODE_ENABLE_FUNCTION_HOOKS="1")
    return subprocess.run(
        [str(CLAUDE), *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )


def test_plugin_validates(tmp_path: Path) -> None:
    done = claude("plugin", "validate", "plugin", home=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "Validation passed" in out
    assert "error TS" not in out
    for hook in ("session.start", "tool.call", "skill.prompt", "command.run{command=factrail}",
                 "session.compact", "turn.start", "turn.complete"):  # fmt: skip
        assert hook in out


def test_plugin_tests_pass_under_the_engine(tmp_path: Path) -> None:
    done = claude("plugin", "test", "plugin", home=tmp_path)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-4000:]
    passed = re.search(r"(\d+) pass", out)
    failed = re.search(r"(\d+) fail", out)
    assert passed is not None and int(passed.group(1)) >= 40, out[-2000:]
    assert failed is not None and int(failed.group(1)) == 0, out[-4000:]
