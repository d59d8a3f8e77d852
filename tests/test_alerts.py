"""The alerts of docs/operations.md as they ship: `deploy/prometheus/alerts.yml` (loaded by the
compose Prometheus) and the Kubernetes base's PrometheusRule.

`promtool` (Debian's `prometheus` package; `make promtool` installs it where apt-get can run)
checks the rules and the compose Prometheus's configuration and runs the rules' unit tests
(`deploy/prometheus/alerts.test.yml`); without it those tests skip, unless
FACTRAIL_REQUIRE_PROMTOOL=1 (`.ci/run`) makes them fail. The rest needs nothing installed: the
docs' table, the rules file and the PrometheusRule say the same, and the rules name only metrics
the gateway exports.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.test_dashboard import METRIC, exported
from tests.test_deploy import K8S, one, render

ROOT = Path(__file__).resolve().parents[1]
PROMETHEUS = ROOT / "deploy" / "prometheus"
ALERTS = PROMETHEUS / "alerts.yml"
ALERTS_TEST = PROMETHEUS / "alerts.test.yml"
CONFIG = PROMETHEUS / "prometheus.yml"
COMPOSE = ROOT / "deploy" / "compose.yaml"
OPERATIONS = ROOT / "docs" / "operations.md"
SEVERITIES = {"critical", "warning"}
"""`critical` is a page, `warning` a ticket."""
ROW = re.compile(r"^\| `(Factrail\w+)` \| `(.+?)` \| (\S+) \| (\w+) \| .+ \|$")
"""A row of the alerts table in docs/operations.md: name, expression, `for`, severity, why."""


def load(path: Path) -> Any:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def rules() -> dict[str, dict[str, Any]]:
    """The alerting rules of alerts.yml, by name."""
    found: dict[str, dict[str, Any]] = {}
    for group in load(ALERTS)["groups"]:
        for rule in group["rules"]:
            assert rule["alert"] not in found, f"{rule['alert']} twice"
            found[rule["alert"]] = rule
    return found


def documented() -> dict[str, tuple[str, str, str]]:
    """The alerts docs/operations.md lists: expression, `for` and severity, by name."""
    text = OPERATIONS.read_text(encoding="utf-8")
    section = text[text.index("## What to alert on") :]
    section = section[: section.index("\n## ")] if "\n## " in section else section
    found: dict[str, tuple[str, str, str]] = {}
    for line in section.splitlines():
        match = ROW.match(line)
        if match:
            name, expr, for_, severity = match.groups()
            assert name not in found, f"{name} twice in the docs"
            found[name] = (expr.replace("\\|", "|"), for_, severity)
    return found


def normalised(expr: str) -> str:
    return " ".join(expr.split())


# -- without promtool ----------------------------------------------------------------------------


def test_the_docs_and_the_rules_name_the_same_alerts_with_the_same_thresholds() -> None:
    docs, shipped = documented(), rules()
    assert len(docs) >= 9, "the docs' alerts table is read"
    assert set(docs) == set(shipped)
    for name, (expr, for_, severity) in docs.items():
        rule = shipped[name]
        assert normalised(expr) == normalised(rule["expr"]), name
        assert for_ == rule["for"], name
        assert severity == rule["labels"]["severity"], name


def test_each_rule_waits_is_graded_and_says_what_to_turn() -> None:
    known = exported() | {"up"}
    for name, rule in rules().items():
        assert re.fullmatch(r"\d+[smh]", rule["for"]), name
        assert rule["labels"]["severity"] in SEVERITIES, name
        annotations = rule["annotations"]
        assert set(annotations) == {"summary", "description"}, name
        assert annotations["summary"] and len(annotations["description"]) > 80, name
        named = set(METRIC.findall(rule["expr"])) | set(re.findall(r"\bup\b", rule["expr"]))
        assert named, name
        assert named <= known, f"{name}: {named - known}"


def test_the_prometheus_rule_carries_the_rules_file_s_groups() -> None:
    docs = render(K8S)
    rule = one(docs, "PrometheusRule")
    assert rule["metadata"]["labels"]["app.kubernetes.io/part-of"] == "factrail"
    assert rule["spec"]["groups"] == load(ALERTS)["groups"]


def test_the_compose_prometheus_loads_the_rules() -> None:
    config = load(CONFIG)
    (rule_file,) = config["rule_files"]
    prometheus = load(COMPOSE)["services"]["prometheus"]
    config_arg = next(a for a in prometheus["command"] if a.startswith("--config.file="))
    config_in_container = Path(config_arg.split("=", 1)[1])
    mounts = {}
    for volume in prometheus["volumes"]:
        source, target, *_ = volume.split(":")
        mounts[target] = source
    assert mounts[str(config_in_container)] == "./prometheus/prometheus.yml"
    rules_in_container = config_in_container.parent / rule_file
    assert (COMPOSE.parent / mounts[str(rules_in_container)]).resolve() == ALERTS


def test_every_alert_is_tested_silent_and_firing() -> None:
    silent: set[str] = set()
    firing: set[str] = set()
    suite = load(ALERTS_TEST)
    assert suite["rule_files"] == [ALERTS.name]
    for case in suite["tests"]:
        for check in case.get("alert_rule_test", []):
            (firing if check["exp_alerts"] else silent).add(check["alertname"])
    assert silent == firing == set(rules())


# -- with promtool -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        if os.environ.get("FACTRAIL_REQUIRE_PROMTOOL") == "1":
            pytest.fail(
                "FACTRAIL_REQUIRE_PROMTOOL=1 but promtool is not installed:"
                " `make promtool` (apt-get install prometheus)"
            )
        pytest.skip("promtool not installed (`make promtool`, or apt-get install prometheus)")
    return found


def run(promtool: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [promtool, *args], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False
    )


def test_promtool_checks_the_rules(promtool: str) -> None:
    done = run(promtool, "check", "rules", str(ALERTS.relative_to(ROOT)))
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {len(rules())} rules found" in done.stdout


def test_promtool_checks_the_compose_prometheus_config(promtool: str) -> None:
    done = run(promtool, "check", "config", str(CONFIG.relative_to(ROOT)))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS: 1 rule files found" in done.stdout


def test_promtool_runs_the_rules_unit_tests(promtool: str) -> None:
    """Each alert silent at its threshold and firing past it, once its `for:` has run."""
    done = run(promtool, "test", "rules", str(ALERTS_TEST.relative_to(ROOT)))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


def test_promtool_tests_fail_when_a_threshold_drifts(promtool: str, tmp_path: Path) -> None:
    """The unit tests hold the thresholds: the same tests against a rules file whose fail-open
    threshold is doubled no longer pass."""
    text = ALERTS.read_text(encoding="utf-8")
    drifted = text.replace("[5m])) > 0.01\n", "[5m])) > 0.02\n", 1)
    assert drifted != text
    (tmp_path / ALERTS.name).write_text(drifted, encoding="utf-8")
    (tmp_path / ALERTS_TEST.name).write_text(ALERTS_TEST.read_text(encoding="utf-8"))
    done = run(promtool, "test", "rules", str(tmp_path / ALERTS_TEST.name))
    assert done.returncode != 0
    assert "FactrailFailingOpen" in done.stdout + done.stderr
