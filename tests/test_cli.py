"""The `factrail` command: compact, outputs, eval (JSON, gate, report) and dataset."""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

import pytest

from factrail.cli import is_loopback, main
from factrail.core.formats.detect import parse_any
from factrail.settings import Settings

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "deploy-session.json"


def prose(doc_messages: list[Any]) -> list[tuple[str, str]]:
    return [(m.role, m.text) for m in doc_messages]


def test_compact_writes_the_same_format_keeps_prose_and_is_idempotent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out.json"
    assert main(["compact", str(EXAMPLE), "--out", str(out), "--trigger-tokens", "20000"]) == 0
    line = capsys.readouterr().out
    assert line.startswith("factrail: compacted: tokens ")
    assert "remaining), tier " in line and "calls reduced" in line
    before = parse_any(EXAMPLE.read_bytes(), filename=EXAMPLE.name)
    after = parse_any(out.read_bytes(), filename=out.name)
    assert json.loads(out.read_text())["model"] == "gpt-4o"
    assert prose(after.messages) == prose(before.messages)
    assert len(out.read_bytes()) < len(EXAMPLE.read_bytes())
    again = tmp_path / "again.json"
    assert main(["compact", str(out), "--out", str(again), "--trigger-tokens", "20000"]) == 0
    assert "unchanged" in capsys.readouterr().out
    assert again.read_bytes() == out.read_bytes()


def test_compact_below_the_trigger_writes_the_input_back_byte_for_byte(tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    assert main(["compact", str(EXAMPLE), "--out", str(out)]) == 0
    assert out.read_bytes() == EXAMPLE.read_bytes()


def test_compact_saves_outputs_privately_and_names_them(tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    args = ["compact", str(EXAMPLE), "--out", str(out), "--trigger-tokens", "20000"]
    assert main([*args, "--save-outputs", "--session", "demo"]) == 0
    text = out.read_text()
    ids = sorted(set(_saved_ids(text)))
    assert ids
    store = Settings().output_store()
    assert store is not None
    cap = store.capability("demo")
    for oid in ids:
        folder, _, name = oid.partition("/")
        assert folder == cap
        p = store.root / folder / f"{name}.txt"
        assert stat.S_IMODE(p.stat().st_mode) == 0o600
        assert stat.S_IMODE(p.parent.stat().st_mode) == 0o700
    assert str(store.root) not in text and "demo/" not in text


def _saved_ids(text: str) -> list[str]:
    import re

    return re.findall(r"`factrail outputs get ([0-9a-f]{32}/[^`]+)`", text)


def test_outputs_get_and_expire(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out.json"
    args = ["compact", str(EXAMPLE), "--out", str(out), "--trigger-tokens", "20000"]
    assert main([*args, "--save-outputs", "--session", "demo"]) == 0
    capsys.readouterr()
    first = _saved_ids(out.read_text())[0]
    store = Settings().output_store()
    assert store is not None
    saved = store.get(first)
    assert saved
    assert main(["outputs", "get", first]) == 0
    assert capsys.readouterr().out == saved
    # the URL a note names works too
    assert main(["outputs", "get", f"http://127.0.0.1:8080/v1/factrail/outputs/{first}"]) == 0
    assert capsys.readouterr().out == saved
    # and the route alone, as a gateway's note names it (`factrail outputs get` prints it)
    assert main(["outputs", "get", f"/v1/factrail/outputs/{first}"]) == 0
    assert capsys.readouterr().out == saved
    assert main(["outputs", "get", "../../etc/passwd"]) == 1
    assert "no saved output" in capsys.readouterr().err
    assert main(["outputs", "expire", "--days", "30"]) == 0
    assert json.loads(capsys.readouterr().out) == {"removed": 0}


def test_compact_claude_jsonl_round_trips(tmp_path: Path) -> None:
    lines = []
    for i in range(12):
        tid = f"toolu_{i:02d}"
        lines.append(
            {
                "type": "assistant",
                "message": {
                    "id": f"msg_{i}",
                    "role": "assistant",
                    "content": [
                        {
                            "type": "tool_use",
                            "id": tid,
                            "name": "Bash",
                            "input": {"command": f"curl -sv http://svc{i}/health"},
                        },
                    ],
                },
            }
        )
        body = "\n".join(f"log line {j} request req-{i:03d}{j:04d} ok" for j in range(300))
        lines.append(
            {
                "type": "user",
                "message": {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": tid, "content": body}],
                },
            }
        )
    src = tmp_path / "s.jsonl"
    src.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    out = tmp_path / "o.jsonl"
    assert main(["compact", str(src), "--out", str(out), "--trigger-tokens", "20000"]) == 0
    got = [json.loads(x) for x in out.read_text().splitlines() if x.strip()]
    assert len(got) == len(lines)
    assert len(out.read_text()) < len(src.read_text())
    assert [g["message"]["content"][0]["type"] for g in got] == [
        x["message"]["content"][0]["type"] for x in lines
    ]


def test_compact_reports_a_missing_file(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compact", "/nonexistent/x.json"]) == 1
    assert capsys.readouterr().err.startswith("factrail: /nonexistent/x.json")


def test_eval_json_has_the_documented_keys(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["eval", "--synthetic", "2", "--seed", "0", "--json", "-"]) == 0
    result = json.loads(capsys.readouterr().out)
    for key in ("transcripts", "cuts", "facts", "kept", "rate", "kept_erase", "rate_erase",
                "reduction", "reduction_erase", "tokens_remaining"):  # fmt: skip
        assert key in result["totals"], key
    assert set(result["strategies"]) >= {"rails", "erase", "clear-oldest", "mask", "none"}
    for s in result["strategies"].values():
        assert {"facts", "kept", "rate", "reduction", "tokens_remaining"} <= set(s["totals"])
    assert result["sim"] is None
    assert result["totals"]["tokens_remaining"] == pytest.approx(1 - result["totals"]["reduction"])


def test_eval_gate_passes_and_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    low = tmp_path / "low.json"
    low.write_text(json.dumps({"rate": 0.5, "reduction": 0.5, "tolerance": 0.005}))
    assert main(["eval", "--synthetic", "2", "--gate", str(low)]) == 0
    assert "GATE PASS" in capsys.readouterr().out
    high = tmp_path / "high.json"
    high.write_text(json.dumps({"rate": 1.0, "reduction": 0.99, "tolerance": 0.005}))
    assert main(["eval", "--synthetic", "2", "--gate", str(high)]) == 1
    assert "GATE FAIL" in capsys.readouterr().out


def test_eval_gates_the_simulated_bill(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`--sim-strategy` picks the simulation's strategies apart from the cuts'; a baseline
    written from a simulated run gates the bill and passes on the same run."""
    baseline = tmp_path / "baseline.json"
    run = ["eval", "--synthetic", "2", "--sim", "--sim-strategy", "rails"]
    assert main([*run, "--write-baseline", str(baseline), "--json", "-"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert set(result["sim_strategies"]) == {"rails"}
    assert set(result["strategies"]) >= {"rails", "erase", "clear-oldest", "mask", "none"}
    assert result["sim_prices"] == {"profile": "anthropic", "cache_ttl_s": None, "model": ""}
    written = json.loads(baseline.read_text())
    assert set(written["sim"]) == {"0.8", "1", "1.2", "1.5"}
    assert main([*run, "--gate", str(baseline)]) == 0
    out = capsys.readouterr().out
    assert "PASS billed" in out and "GATE PASS" in out
    assert main(["eval", "--synthetic", "2", "--gate", str(baseline)]) == 1
    assert "FAIL the baseline gates the simulated bill" in capsys.readouterr().out
    assert main([*run, "--price", "openai", "--gate", str(baseline)]) == 1
    assert "simulated under" in capsys.readouterr().out


def test_eval_rejects_an_unknown_sim_strategy(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["eval", "--synthetic", "1", "--sim", "--sim-strategy", "nope"]) == 1
    assert "unknown strategies: ['nope']" in capsys.readouterr().err


def test_eval_report_and_dataset(tmp_path: Path) -> None:
    report = tmp_path / "report"
    assert main(["eval", "--synthetic", "2", "--report", str(report)]) == 0
    assert (report / "report.md").read_text().count("rails") >= 1
    out = tmp_path / "ds"
    assert main(["dataset", "--synthetic", "2", "--out", str(out)]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert sum(manifest["counts"].values()) > 0
    assert stat.S_IMODE(out.stat().st_mode) == 0o700
    assert main(["dataset", "--synthetic", "2", "--out", str(out)]) == 1


@pytest.mark.parametrize(
    "host", ["127.0.0.1", "127.1.2.3", "localhost", "LocalHost.", "::1", "[::1]"]
)
def test_loopback_addresses(host: str) -> None:
    assert is_loopback(host)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "10.0.0.5", "example.com", "", "192.168.1.1"])
def test_other_addresses_are_not_loopback(host: str) -> None:
    assert not is_loopback(host)


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """Where `factrail serve` would have run the gateway (uvicorn is never started)."""
    import factrail.gateway.factory

    calls: list[tuple[str, int]] = []
    monkeypatch.setattr(
        factrail.gateway.factory, "serve", lambda host, port, workers=1: calls.append((host, port))
    )
    monkeypatch.delenv("FACTRAIL_ADMIN_KEY", raising=False)
    return calls


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.20", "gateway.example"])
def test_serve_refuses_a_public_bind_without_the_admin_key(
    host: str, served: list[tuple[str, int]], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["serve", "--host", host]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"factrail: FACTRAIL_ADMIN_KEY='' is not allowed with --host {host}")
    assert err.count("\n") == 1 and "at least 16 characters" in err
    assert served == []


def test_serve_binds_loopback_without_a_key_and_anything_with_one(
    served: list[tuple[str, int]], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert main(["serve"]) == 0
    assert main(["serve", "--host", "localhost", "--port", "9000"]) == 0
    monkeypatch.setenv("FACTRAIL_ADMIN_KEY", "   ")  # blank is malformed, not "no key"
    assert main(["serve", "--host", "0.0.0.0"]) == 2
    monkeypatch.setenv("FACTRAIL_ADMIN_KEY", "adm-" + "x1" * 5)  # too short for a public bind
    assert main(["serve", "--host", "0.0.0.0"]) == 2
    assert main(["serve", "--host", "127.0.0.1"]) == 0
    monkeypatch.setenv("FACTRAIL_ADMIN_KEY", "adm-" + "x1" * 12)
    assert main(["serve", "--host", "0.0.0.0"]) == 0
    assert served == [
        ("127.0.0.1", 8080),
        ("localhost", 9000),
        ("127.0.0.1", 8080),
        ("0.0.0.0", 8080),
    ]


def test_settings_check_reports_every_problem_or_where_they_came_from(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "factrail.toml"
    path.write_text("[factrail]\ntrigger_tokens = 90000\n", encoding="utf-8")
    monkeypatch.setenv("FACTRAIL_CONFIG", str(path))
    assert main(["settings", "--check"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("settings ok: ") and f"the file {path}" in out and out.count("\n") == 1
    monkeypatch.setenv("FACTRAIL_EGRESS", "Full")
    monkeypatch.setenv("FACTRAIL_TAINT_TOOL", "mcp__crm__")
    assert main(["settings", "--check"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "factrail: FACTRAIL_TAINT_TOOL=<hidden> is not a setting: did you mean"
        " FACTRAIL_TAINT_TOOLS?",
        "factrail: FACTRAIL_EGRESS='Full' is not allowed: one of full, metadata",
    ]
    monkeypatch.delenv("FACTRAIL_EGRESS")
    monkeypatch.delenv("FACTRAIL_TAINT_TOOL")
    assert main(["settings", "--check", "--host", "0.0.0.0"]) == 2
    assert "FACTRAIL_ADMIN_KEY='' is not allowed with --host 0.0.0.0" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv",
    [
        ["serve"],
        ["settings"],
        ["compact", "missing.json"],
        ["eval", "--synthetic", "1"],
        ["dataset", "--synthetic", "1", "--out", "x"],
        ["outputs", "expire"],
        ["inspect", "--list"],
    ],
)
def test_every_command_refuses_bad_settings_with_one_line(
    argv: list[str],
    served: list[tuple[str, int]],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("FACTRAIL_JUDGE", "tevv")
    monkeypatch.setenv("FACTRAIL_EGRESS", "metadata ")
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and served == []
    assert err.startswith("factrail: FACTRAIL_JUDGE='tevv' is not allowed: one of rules,")
    assert err.rstrip().endswith("(and 1 more: `factrail settings --check` lists them all)")
