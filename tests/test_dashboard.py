"""The Grafana dashboard, the alerts and the metrics reference name only metrics the gateway
exports."""

from __future__ import annotations

import json
import re
from pathlib import Path

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from factrail.gateway.metrics import Metrics

ROOT = Path(__file__).resolve().parents[1]
DASHBOARD = ROOT / "deploy/grafana/dashboards/factrail.json"
METRIC = re.compile(r"\bfactrail_[a-z_]+")
SUFFIXES = ("_total", "_bucket", "_sum", "_count", "_created")


def exported() -> set[str]:
    """Every sample name the gateway's registry can export, with its family's name."""
    text = generate_latest(Metrics().registry).decode()
    names = set()
    for family in text_string_to_metric_families(text):
        names.add(family.name)
        names.update(f"{family.name}{suffix}" for suffix in SUFFIXES)
    return names


def test_every_metric_the_dashboard_queries_is_exported() -> None:
    panels = json.loads(DASHBOARD.read_text(encoding="utf-8"))["panels"]
    queried = {
        name
        for panel in panels
        for target in panel.get("targets", [])
        for name in METRIC.findall(target.get("expr", ""))
    }
    assert "factrail_upstream_cache_misses_total" in queried
    assert queried - exported() == set()


def test_every_metric_the_alerts_and_the_reference_name_is_exported() -> None:
    for doc in ("docs/operations.md", "docs/metrics.md"):
        named = set(METRIC.findall((ROOT / doc).read_text(encoding="utf-8")))
        assert "factrail_cache_breaks_total" in named, doc
        assert named - exported() == set(), doc
