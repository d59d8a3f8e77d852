"""The C kernels built and checked against their Python on Python 3.11, 3.12 and 3.13 (`make
test-matrix`, part of `make test`).

For each version found (`pythonX.Y` on PATH, else pyenv's newest X.Y, else /usr/bin): a venv in
`.venv-matrix/X.Y` with the test requirements (made once), the extension built from
`factrail/core/_speedups.c` with warnings as errors, a copy of `factrail/` holding it, and the
kernel parity tests and the pinned `apply` outcomes run on that copy with the extension
required: a build that failed or fell back to Python fails the run. An absent interpreter is
skipped with a message. Nothing is written to the source tree.

Usage: `.venv/bin/python tests/core/kernel_matrix.py [3.12 ...]`
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HOME = ROOT / ".venv-matrix"
VERSIONS = ("3.11", "3.12", "3.13")
JOBS = 2
"""Versions checked at once (the machine's two cores)."""
REQUIREMENTS = (
    "pytest>=8",
    "pytest-asyncio>=0.23",  # pyproject.toml's pytest options name it
    "hypothesis>=6.100",
    "pyahocorasick>=2.1",
    "setuptools>=77",
    "orjson>=3.9",  # factrail.policy.taint (test_apply_pinned reads a corpus through it)
    "redis>=5.0",  # tests/conftest.py's Redis fixture
)
TESTS = (
    "tests/core/test_kernels.py",
    "tests/core/test_kernels_facts.py",
    "tests/core/test_kernels_pool.py",
    "tests/core/test_kernels_untracked.py",
    "tests/core/test_tokens.py",
    "tests/core/test_redact.py",
    "tests/core/test_redact_families.py",
    "tests/core/test_apply_pinned.py",
)
"""The kernels against their Python (redaction's `anchors_in` in test_redact.py), and the pinned
`apply` outcomes on both paths."""


class Failed(Exception):
    """A step failed; the message says which and shows its output."""


def _run(
    cmd: list[str], what: str, cwd: Path | None = None, env: dict[str, str] | None = None
) -> str:
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, env=env)
    if done.returncode != 0:
        raise Failed(f"{what} failed:\n{done.stdout[-4000:]}{done.stderr[-4000:]}")
    out: str = done.stdout
    return out


def _log(cmd: list[str], what: str, cwd: Path, env: dict[str, str]) -> str:
    """`_run`, answering what the command wrote to both streams."""
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, env=env)
    log = f"{done.stdout[-4000:]}{done.stderr[-4000:]}"
    if done.returncode != 0:
        raise Failed(f"{what} failed:\n{log}")
    return log


def _version_of(exe: str) -> str | None:
    try:
        done = subprocess.run(
            [exe, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except OSError:
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def find(version: str) -> str | None:
    """An interpreter of `version` that runs (a pyenv shim without that version does not)."""
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"

    def patch(p: Path) -> tuple[int, ...]:
        return tuple(int(n) for n in re.findall(r"\d+", p.parents[1].name))

    installed = sorted(pyenv.glob(f"{version}.*/bin/python{version}"), key=patch, reverse=True)
    for exe in (
        shutil.which(f"python{version}"),
        *map(str, installed),
        f"/usr/bin/python{version}",
        f"/usr/local/bin/python{version}",
    ):
        if exe and _version_of(exe) == version:
            return exe
    return None


def _venv(version: str, exe: str) -> Path:
    """`.venv-matrix/X.Y`'s python, the venv (re)made when its interpreter or requirements
    changed."""
    home = HOME / version
    python = home / "bin" / "python"
    stamp = home / ".installed"
    want = "\n".join((exe, *REQUIREMENTS))
    if python.exists() and stamp.exists() and stamp.read_text() == want:
        return python
    _run([exe, "-m", "venv", "--clear", str(home)], f"{version}: making the venv")
    pip = [str(python), "-m", "pip", "--disable-pip-version-check", "install", "--quiet"]
    _run([*pip, "--upgrade", "pip"], f"{version}: upgrading pip")
    _run([*pip, *REQUIREMENTS], f"{version}: installing {' '.join(REQUIREMENTS)}")
    stamp.write_text(want)
    return python


def _build(version: str, python: Path) -> Path:
    """A copy of `factrail/` holding the extension built for `python`; its folder for
    PYTHONPATH."""
    home = HOME / version
    config = "import sysconfig as s; print(*map(s.get_config_var, ('EXT_SUFFIX', 'CFLAGS')))"
    got = _run([str(python), "-c", config], f"{version}: reading its build config")
    suffix, _, cflags = got.strip().partition(" ")
    built = home / "build" / "factrail" / "core" / f"_speedups{suffix}"
    built.unlink(missing_ok=True)
    # the interpreter's own flags (a CFLAGS variable replaces them), every warning an error
    env = {**os.environ, "CFLAGS": f"{cflags} -Werror"}
    cmd = [str(python), "setup.py", "--quiet", "build_ext", "--force"]
    cmd += ["--build-lib", str(home / "build"), "--build-temp", str(home / "tmp")]
    log = _log(cmd, f"{version}: building the extension", cwd=ROOT, env=env)
    if not built.exists():  # an optional extension that fails to build is only a warning
        raise Failed(f"{version}: the extension did not build (warnings are errors):\n{log}")
    src = home / "src"
    shutil.rmtree(src, ignore_errors=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.so", "*.pyd")
    shutil.copytree(ROOT / "factrail", src / "factrail", ignore=ignore)
    shutil.copy2(built, src / "factrail" / "core" / built.name)
    return src


def check(version: str) -> str:
    """Build and test one version; a one-line summary."""
    exe = find(version)
    if exe is None:
        return f"{version}: SKIPPED, no python{version} found (PATH, pyenv, /usr/bin)"
    start = time.monotonic()
    python = _venv(version, exe)
    src = _build(version, python)
    env = {**os.environ, "PYTHONPATH": str(src), "FACTRAIL_REQUIRE_NATIVE": "1"}
    env.pop("FACTRAIL_PURE_PYTHON", None)
    probe = "from factrail.core import _speedups, kernels as k; print(_speedups.__file__)"
    probe += "; print(k.describe())"
    # -P: the source tree (the cwd) is not on sys.path, so `factrail` is the copy
    loaded = _run([str(python), "-P", "-c", probe], f"{version}: loading", cwd=ROOT, env=env)
    where, _, path = loaded.strip().partition("\n")
    if not where.startswith(str(src)) or not path.startswith("native ("):
        raise Failed(f"{version}: the C kernels did not load from {src}: {loaded}")
    cmd = [str(python), "-P", "-m", "pytest", "-q", "-p", "no:cacheprovider", *TESTS]
    out = _run(cmd, f"{version}: the kernel parity tests", cwd=ROOT, env=env)
    tally = out.strip().splitlines()[-1] if out.strip() else ""
    return f"{version}: {exe}, native, {tally} ({time.monotonic() - start:.0f} s in all)"


def _summary(version: str) -> tuple[str, bool]:
    """`check`'s line, or what failed; and whether it failed."""
    try:
        return check(version), False
    except Failed as e:
        return f"{version}: FAILED: {e}", True


def main() -> int:
    """Every version, two at a time (each in its own folders; the work is in child processes),
    reported in order."""
    versions = sys.argv[1:] or list(VERSIONS)
    failed = False
    with ThreadPoolExecutor(max_workers=JOBS) as pool:
        for line, bad in pool.map(_summary, versions):
            print(line, flush=True)
            failed = failed or bad
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
