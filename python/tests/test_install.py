"""pip install ./python, offline, as a user on Debian does it: into a venv
that sees Debian's setuptools (--no-build-isolation), and into a bare venv
with pip's build isolation (the in-tree shim finds the system's setuptools);
then the installed package takes a lock."""

import os
import shutil
import subprocess
import sys

import pytest

from conftest import PYDIR

CHECK = r"""
import sys, dlock
assert dlock.__file__.startswith(sys.prefix), dlock.__file__
with dlock.Client(sys.argv[1]) as c, c.lock("py:installed") as l:
    assert l.held()
print("ok", dlock.__version__)
"""


@pytest.mark.parametrize("mode", ["no-build-isolation", "isolated"])
def test_pip_install_offline(mode, tmp_path, url):
    src = tmp_path / "src"
    shutil.copytree(PYDIR, src, ignore=shutil.ignore_patterns(
        "tests", "build", "*.egg-info", "__pycache__"))
    venv = tmp_path / "venv"
    args = [sys.executable, "-m", "venv", str(venv)]
    if mode == "no-build-isolation":
        args.append("--system-site-packages")
    subprocess.run(args, check=True)
    env = dict(os.environ, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    env.pop("PYTHONPATH", None)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q"]
    if mode == "no-build-isolation":
        pip.append("--no-build-isolation")
    res = subprocess.run(pip + [str(src)], env=env, capture_output=True, text=True,
                         cwd=str(tmp_path))
    assert res.returncode == 0, res.stdout + res.stderr
    out = subprocess.run([str(venv / "bin" / "python"), "-c", CHECK, url], env=env,
                         capture_output=True, text=True, cwd=str(tmp_path))
    assert out.returncode == 0 and out.stdout.startswith("ok 0."), out.stdout + out.stderr


def test_versions_agree():
    """The package's version is the C library's it was written with."""
    import re
    import dlock
    src = os.path.dirname(PYDIR)
    with open(os.path.join(src, "include", "dlock", "dlock.h")) as f:
        c_version = re.search(r'#define DLOCK_VERSION_STRING "([^"]+)"', f.read()).group(1)
    with open(os.path.join(PYDIR, "pyproject.toml")) as f:
        py_version = re.search(r'^version = "([^"]+)"', f.read(), re.M).group(1)
    assert dlock.__version__ == py_version == c_version
    assert dlock.library_version.split(".")[:2] == c_version.split(".")[:2]
