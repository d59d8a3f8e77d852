"""What a wheel built from the checkout installs: the `factrail` package alone (the deployable
`app/` module stays in the checkout), with its licences and its type marker."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--quiet",
         "--wheel-dir", str(out), str(ROOT)],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        pytest.fail(f"pip wheel failed: {done.stderr[-2000:]}")
    (built,) = out.glob("factrail-*.whl")
    return built


def test_the_wheel_installs_factrail_alone(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/", 1)[0] for n in names}
    assert tops == {"factrail", f"{wheel.name.split('-')[0]}-{wheel.name.split('-')[1]}.dist-info"}
    assert "factrail/gateway/factory.py" in names
    assert "factrail/py.typed" in names
    assert not any(n.startswith("app/") for n in names)


def test_the_wheel_carries_both_licences(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    assert any(n.endswith("LICENSE-MIT") for n in names)
    assert any(n.endswith("LICENSE-APACHE") for n in names)


def test_the_deployable_module_serves_the_package_gateway() -> None:
    text = (ROOT / "app" / "main.py").read_text()
    assert "from factrail.gateway import create_app" in text
    assert "app = create_app()" in text
