"""Capabilities are never listed, and the admin surface is closed by default.

Several sessions are compacted through the gateway with the real engine; their saved outputs'
capabilities (the folders on disk) must appear in no listing or report (JSON routes,
`factrail inspect` as text and JSON), while the outputs route serves an output by its
capability alone. The session routes always want a key: configured, or made at the first start
and kept 0600 beside the state.
"""

from __future__ import annotations

import os
import re
import secrets
import stat
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr

from factrail.cli import main
from factrail.gateway.factory import create_app, default_engine, with_admin_key
from factrail.session.keys import header_key
from factrail.settings import Settings
from factrail.stores import admin_key, open_state_store
from factrail.stores.paths import sanitise_name
from tests.test_session import chat

SESSIONS = 4
NAME = re.compile(r"[A-Za-z0-9_.-]+")
"""What a folder of the outputs can be named: any such run of what the surface shows is tried."""
OUTPUT_URL = re.compile(r"/v1/factrail/outputs/([0-9a-f]{32})/([A-Za-z0-9_.-]+)")


def strings(value: Any) -> Iterator[str]:
    """Every string in a JSON value, keys included."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield k
            yield from strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from strings(v)
    elif value is not None:
        yield str(value)


def holds_any(value: Any, capabilities: set[str]) -> list[str]:
    """The strings of `value` that hold one of `capabilities`."""
    return [s for s in strings(value) if any(c in s for c in capabilities)]


@dataclass
class Compacted:
    settings: Settings
    client: TestClient
    sessions: list[str]
    """The session keys, one per client session id."""
    capabilities: set[str]
    """The folder of every saved output on disk."""
    urls: list[tuple[str, str]]
    """(capability, id) of every output a forwarded note names."""
    key: str


@pytest.fixture
def compacted(tmp_path: Path) -> Iterator[Compacted]:
    """`SESSIONS` sessions compacted through a gateway with no admin key configured."""
    settings = Settings(
        state_url=f"sqlite://{tmp_path / 'state' / 'state.db'}",
        trigger_tokens=6000,
        trigger_percent=0.0,
        price_profile="none",
        outputs_dir=str(tmp_path / "outputs"),
    )
    (tmp_path / "state").mkdir()
    sent: list[bytes] = []

    def upstream(request: httpx.Request) -> httpx.Response:
        sent.append(request.content)
        return httpx.Response(200, json={"choices": []})

    app = create_app(
        settings,
        client=httpx.AsyncClient(transport=httpx.MockTransport(upstream)),
        state=open_state_store(settings.state_url),
        engine_factory=default_engine,
    )
    with TestClient(app) as client:
        names = [f"harvest-{i}" for i in range(SESSIONS)]
        for name in names:
            body = {"model": "gpt-4o", "messages": chat(30)}
            r = client.post("/v1/chat/completions", json=body, headers={"x-factrail-session": name})
            assert r.headers["x-factrail"] == "compacted"
        key = admin_key.read(settings)
        assert key is not None
        folders = {p.name for p in (tmp_path / "outputs").iterdir() if p.is_dir()}
        urls = [(m[1], m[2]) for body in sent for m in OUTPUT_URL.finditer(body.decode())]
        assert len(folders) == SESSIONS and urls
        yield Compacted(settings, client, [header_key(n) for n in names], folders, urls, key)


def admin(key: str) -> dict[str, str]:
    return {"authorization": f"Bearer {key}"}


def bare(settings: Settings) -> TestClient:
    """A gateway with no engine in front of an upstream that is never called."""
    upstream = httpx.AsyncClient(transport=httpx.MockTransport(lambda _: httpx.Response(500)))
    return TestClient(create_app(settings, client=upstream, engine_factory=lambda *_: None))


def test_listings_and_reports_hold_no_capability(compacted: Compacted) -> None:
    c = compacted
    listed = c.client.get("/v1/factrail/sessions", headers=admin(c.key))
    assert listed.status_code == 200
    assert sorted(s["session"] for s in listed.json()["sessions"]) == sorted(c.sessions)
    assert holds_any(listed.json(), c.capabilities) == []
    for session in c.sessions:
        got = c.client.get(f"/v1/factrail/sessions/{session}", headers=admin(c.key))
        assert got.status_code == 200
        data = got.json()
        results = data["history"][0]["results"]
        assert results and all(r["saved"] and r["id"] and r["tool"] for r in results)
        assert all(r["original_chars"] > r["kept_chars"] for r in results)
        assert all("[factrail omitted" in r["note"] for r in results)
        assert holds_any(data, c.capabilities) == []


def test_factrail_inspect_prints_no_capability(
    compacted: Compacted, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("FACTRAIL_STATE_URL", compacted.settings.state_url)
    capsys.readouterr()
    outputs: list[str] = []
    for args in (["--list"], ["--list", "--json"]):
        assert main(["inspect", *args]) == 0
        outputs.append(capsys.readouterr().out)
    for session in compacted.sessions:
        for args in ([session], [session, "--json"]):
            assert main(["inspect", *args]) == 0
            outputs.append(capsys.readouterr().out)
    assert all(c not in out for out in outputs for c in compacted.capabilities)
    assert "saved" in outputs[2] and "[factrail omitted" in outputs[2]


def test_no_output_is_harvested_from_what_the_admin_surface_shows(compacted: Compacted) -> None:
    """With the admin key, a caller reads every listing and report, then asks the outputs
    route for each result under everything those hold: nothing is served. The capability a
    session's own note names serves it."""
    c = compacted
    harvested = 0
    listed = c.client.get("/v1/factrail/sessions", headers=admin(c.key)).json()
    for row in listed["sessions"]:
        data = c.client.get(f"/v1/factrail/sessions/{row['session']}", headers=admin(c.key))
        shown = set(strings(data.json())) | set(strings(row))
        ids = [r["id"] for h in data.json()["history"] for r in h["results"]]
        folders = {t for s in shown for t in NAME.findall(s) if sanitise_name(t) == t}
        got = sum(
            c.client.get(f"/v1/factrail/outputs/{folder}/{ids[0]}").status_code == 200
            for folder in folders | {row["session"]}
        )
        got += sum(c.client.get(f"/v1/factrail/outputs/{i}").status_code == 200 for i in ids)
        harvested += got > 0
    assert harvested == 0
    print(f"outputs harvested without a capability: {harvested} of {len(listed['sessions'])}")
    capability, tool_use_id = c.urls[0]
    assert capability in c.capabilities
    whole = c.client.get(f"/v1/factrail/outputs/{capability}/{tool_use_id}")
    assert whole.status_code == 200 and "line 0 of output" in whole.text
    assert (
        c.client.get(f"/v1/factrail/outputs/{secrets.token_hex(16)}/{tool_use_id}").status_code
        == 404
    )
    assert c.client.get(f"/v1/factrail/outputs/{c.sessions[0]}/{tool_use_id}").status_code == 404
    assert c.client.get(f"/v1/factrail/outputs/{tool_use_id}").status_code == 400


def test_the_admin_routes_are_closed_without_the_key_even_when_none_is_configured(
    compacted: Compacted,
) -> None:
    c = compacted
    assert not c.settings.admin_key.get_secret_value()
    refused = [
        {},
        {"authorization": "Bearer"},
        {"authorization": "Bearer wrong"},
        {"authorization": f"Bearer {c.key[:-1]}"},
        {"authorization": f"Bearer {c.key}x"},
        {"authorization": f"Basic {c.key}"},
        {"authorization": c.key},
        {"x-api-key": c.key},
        {"cookie": f"key={c.key}"},
    ]
    for path in ("/v1/factrail/sessions", f"/v1/factrail/sessions/{c.sessions[0]}"):
        for headers in refused:
            r = c.client.get(path, headers=headers)
            assert r.status_code == 401, (path, headers)
            assert r.json()["error"]["type"] == "authentication_error"
            assert r.json()["error"]["code"] == "invalid_admin_key"
            assert r.headers["www-authenticate"] == "Bearer"
        assert c.client.get(f"{path}?key={c.key}").status_code == 401
        for spelled in (f"Bearer {c.key}", f"bearer  {c.key} ", f"BEARER\t{c.key}"):
            assert c.client.get(path, headers={"authorization": spelled}).status_code == 200


def test_a_configured_key_is_used_and_no_file_is_made(tmp_path: Path) -> None:
    key = secrets.token_urlsafe(24)
    settings = Settings(state_url=f"sqlite://{tmp_path / 'state.db'}", admin_key=SecretStr(key))
    with bare(settings) as client:
        assert client.get("/v1/factrail/sessions").status_code == 401
        assert client.get("/v1/factrail/sessions", headers=admin(key)).status_code == 200
    assert not (tmp_path / admin_key.KEY_FILE).exists()


def test_the_key_file_is_private_reused_and_announced_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = Settings(state_url=f"sqlite://{tmp_path / 'state.db'}")
    seen = []
    for _ in range(3):  # three starts of the gateway on one state file
        with bare(settings) as client:
            key = admin_key.read(settings)
            assert key is not None
            assert client.get("/v1/factrail/sessions", headers=admin(key)).status_code == 200
            seen.append(key)
    assert len(set(seen)) == 1 and len(seen[0]) >= 43
    path = tmp_path / admin_key.KEY_FILE
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if "admin key" in line]
    assert lines == [
        f"factrail: admin key in {path}; pages at"
        f" http://127.0.0.1:8080/factrail/login?key={seen[0]}"
    ]


def test_the_login_line_names_where_the_gateway_is_served(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = Settings(state_url=f"sqlite://{tmp_path / 'state.db'}")
    keyed = with_admin_key(settings, "http://[::1]:9000")
    key = keyed.admin_key.get_secret_value()
    assert key == admin_key.read(settings)
    assert f"pages at http://[::1]:9000/factrail/login?key={key}" in capsys.readouterr().err
    assert with_admin_key(settings, "http://x:1").admin_key.get_secret_value() == key
    assert capsys.readouterr().err == ""  # said once: the file was there


def test_where_the_key_is_kept(tmp_path: Path) -> None:
    env = {"XDG_DATA_HOME": str(tmp_path / "data"), "HOME": str(tmp_path)}
    data = tmp_path / "data" / "factrail" / admin_key.KEY_FILE
    assert admin_key.key_file("sqlite:///srv/factrail/state.db", env) == Path(
        "/srv/factrail/admin.key"
    )
    assert admin_key.key_file("redis://cache:6379/0", env) == data
    assert admin_key.key_file("memory://", env) == data
    assert admin_key.key_file("sqlite://:memory:", env) == data
    assert admin_key.key_file("memory://", {}) is None
    default = Settings()  # the default state file is in the data folder: the key beside it
    assert admin_key.path_for(default, env) == data


def test_an_untrusted_key_file_is_never_used(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = Settings(state_url=f"sqlite://{tmp_path / 'state.db'}")
    path = tmp_path / admin_key.KEY_FILE
    planted = tmp_path / "planted"
    planted.write_text("x" * 43 + "\n")
    path.symlink_to(planted)
    key = admin_key.load_or_create(settings)
    assert key != "x" * 43 and admin_key.read(settings) is None
    path.unlink()
    path.write_text("short\n")
    assert admin_key.load_or_create(settings) != "short"
    path.unlink()
    path.write_text("y" * 43 + "\n")
    os.chmod(path, 0o644)
    assert admin_key.read(settings) == "y" * 43  # ours: tightened to 0600 and used
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_workers_starting_together_share_one_key(tmp_path: Path) -> None:
    settings = Settings(state_url=f"sqlite://{tmp_path / 'state.db'}")
    said: list[str] = []
    keys: list[str] = []
    start = threading.Barrier(8)

    def one() -> None:
        start.wait()
        keys.append(admin_key.load_or_create(settings, announce=lambda _, k: said.append(k)))

    threads = [threading.Thread(target=one) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(keys)) == 1 and said == keys[:1]
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_without_a_data_folder_the_key_lives_in_the_process(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for var in ("XDG_DATA_HOME", "HOME"):
        monkeypatch.delenv(var, raising=False)
    settings = Settings(state_url="memory://")
    key = admin_key.load_or_create(
        settings, announce=lambda p, k: print(admin_key.login_line(p, k, "http://h:1"))
    )
    assert len(key) >= 43 and admin_key.read(settings) is None
    assert "for this process only" in capsys.readouterr().out
