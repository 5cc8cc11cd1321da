"""The package installs both ways the README says, and each installed copy is the one imported:
`pip install ./python` (into a virtual environment that sees Debian's setuptools; no network)
and `cmake --install` (DESTDIR; its directory is on Debian python3's path). Importing it loads no
torch. No mount needed."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO

IMPORT_CHECK = ("import sys, tipfs; assert 'torch' not in sys.modules; "
                "assert tipfs.DisclosingSampler and tipfs.HintStream; print(tipfs.__file__)")


def test_pip_install_into_a_virtual_environment(tmp_path):
    env_dir = tmp_path / "venv"
    made = subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(env_dir)],
                          capture_output=True, text=True)
    if made.returncode != 0:
        pytest.fail(f"python3 -m venv failed (setup.sh installs python3-venv): {made.stderr}")
    python = env_dir / "bin" / "python"
    source = tmp_path / "source"  # a copy, so the build leaves nothing in the repository
    subprocess.run(["cp", "-r", str(REPO / "python"), str(source)], check=True)
    done = subprocess.run([str(python), "-m", "pip", "install", "--no-build-isolation",
                           "--no-index", "--quiet", str(source)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    where = subprocess.run([str(python), "-c", IMPORT_CHECK], capture_output=True, text=True,
                           cwd=tmp_path, check=True).stdout.strip()
    assert where.startswith(str(env_dir)), where
    assert (Path(where).parent / "py.typed").exists()


def cache_value(build: Path, name: str) -> str:
    for line in (build / "CMakeCache.txt").read_text().splitlines():
        if line.startswith(name + ":"):
            return line.split("=", 1)[1]
    raise AssertionError(f"{name} not in {build}/CMakeCache.txt")


def test_cmake_install_puts_it_where_debians_python_finds_it(tmp_path):
    build = Path(os.environ.get("TIPFS_BUILD_DIR", str(REPO / "build")))
    if not (build / "CMakeCache.txt").exists():
        pytest.fail(f"no configured build at {build} (set TIPFS_BUILD_DIR)")
    prefix = cache_value(build, "CMAKE_INSTALL_PREFIX")
    site = Path(prefix) / cache_value(build, "TIPFS_PYTHON_INSTALL_DIR")
    paths = subprocess.run(["/usr/bin/python3", "-c", "import sys; print('\\n'.join(sys.path))"],
                           capture_output=True, text=True, check=True).stdout.split()
    assert str(site) in paths, f"{site} is not on Debian python3's path"
    staged = tmp_path / "stage"
    subprocess.run(["cmake", "--install", str(build), "--component", "python"], check=True,
                   capture_output=True, env=dict(os.environ, DESTDIR=str(staged)))
    installed = staged / site.relative_to("/")
    assert (installed / "tipfs" / "__init__.py").exists()
    assert (installed / "tipfs" / "loader.py").exists()
    where = subprocess.run(["/usr/bin/python3", "-c", IMPORT_CHECK], capture_output=True,
                           text=True, cwd=tmp_path, check=True,
                           env=dict(os.environ, PYTHONPATH=str(installed))).stdout.strip()
    assert where == str(installed / "tipfs" / "__init__.py")
