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
