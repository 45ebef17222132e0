"""Tiny git repositories for the build tests: an installable `sglang` and a reference config.

The `sglang` package builds with an in-tree PEP 517 backend that needs nothing from an
index (standard library only), so `pip install --no-deps --no-build-isolation --no-index`
of it takes about a second and works offline. Its version lives in `sglang/version.py`,
so a commit that changes the version string changes what is installed.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

PIP_ARGS = "--no-deps --no-build-isolation --no-index"

PYPROJECT = """\
[build-system]
requires = []
build-backend = "backend"
backend-path = ["."]

[project]
name = "sglang"
dynamic = ["version"]
"""

# A PEP 517 backend in 30 lines: a wheel holding sglang/*.py and its dist-info.
BACKEND = '''\
import base64, hashlib, pathlib, re, zipfile

def _version():
    text = pathlib.Path("sglang/version.py").read_text()
    return re.search(r"__version__ = \\"([^\\"]+)\\"", text).group(1)

def get_requires_for_build_wheel(config_settings=None):
    return []

def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    version = _version()
    name = f"sglang-{version}-py3-none-any.whl"
    info = f"sglang-{version}.dist-info"
    files = {str(p): p.read_bytes() for p in sorted(pathlib.Path("sglang").glob("*.py"))}
    metadata = f"Metadata-Version: 2.1\\nName: sglang\\nVersion: {version}\\n"
    files[f"{info}/METADATA"] = metadata.encode()
    files[f"{info}/WHEEL"] = (b"Wheel-Version: 1.0\\nGenerator: test\\n"
                              b"Root-Is-Purelib: true\\nTag: py3-none-any\\n")
    record = []
    with zipfile.ZipFile(pathlib.Path(wheel_directory) / name, "w") as wheel:
        for path, data in files.items():
            wheel.writestr(path, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            record.append(f"{path},sha256={digest},{len(data)}")
        record.append(f"{info}/RECORD,,")
        wheel.writestr(f"{info}/RECORD", "\\n".join(record) + "\\n")
    return name
'''


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                          text=True).stdout.strip()


def init_repo(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", "main")
    git(path, "config", "user.email", "test@example.invalid")
    git(path, "config", "user.name", "test")
    git(path, "config", "commit.gpgsign", "false")
    return path


def commit_all(repo: Path, message: str) -> str:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def set_version(repo: Path, version: str) -> None:
    (repo / "python" / "sglang" / "version.py").write_text(f'__version__ = "{version}"\n')


def make_sglang_repo(path: Path, version: str = "0.0.1") -> Path:
    """A checkout laid out like SGLang's (package under python/), one commit."""
    repo = init_repo(path)
    package = repo / "python" / "sglang"
    package.mkdir(parents=True)
    (repo / "python" / "pyproject.toml").write_text(PYPROJECT)
    (repo / "python" / "backend.py").write_text(BACKEND)
    (package / "__init__.py").write_text("from sglang.version import __version__\n")
    set_version(repo, version)
    (repo / ".gitignore").write_text("*.log\n__pycache__/\n")
    commit_all(repo, f"version {version}")
    return repo


def make_reference_repo(path: Path, policy: str = "fixed", noise: float = 0.0) -> Path:
    repo = init_repo(path)
    write_reference_config(repo, policy, noise)
    commit_all(repo, f"{policy} {noise}")
    return repo


def write_reference_config(repo: Path, policy: str, noise: float) -> None:
    (repo / "reference-build.toml").write_text(
        f'attention_policy = "{policy}"\ndraft_noise = {noise}\n')


# A backend that reports its pid in $SLOW_BACKEND_PID, then hangs: a build to interrupt.
SLOW_BACKEND = BACKEND.replace(
    "def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):\n",
    "def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):\n"
    "    import os, time\n"
    "    pathlib.Path(os.environ['SLOW_BACKEND_PID']).write_text(str(os.getpid()))\n"
    "    time.sleep(120)\n")


def make_slow_sglang_repo(path: Path) -> Path:
    repo = make_sglang_repo(path, "0.9.0")
    (repo / "python" / "backend.py").write_text(SLOW_BACKEND)
    commit_all(repo, "slow backend")
    return repo
