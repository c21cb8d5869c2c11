"""PEP 517 shim: setuptools' backend, found where it is installed.

pip builds in an isolated environment from which the system's packages are
hidden; with nothing to download (requires = []) it works offline, and this
module then finds setuptools and wheel in that environment or, failing that,
in the system Python's site directories (Debian's python3-setuptools and
python3-wheel), and hands every hook to setuptools.build_meta unchanged.
"""
import site
import sys


def _setuptools():
    try:
        import setuptools.build_meta as backend
        import wheel  # noqa: F401  (setuptools' bdist_wheel needs it)
        return backend
    except ImportError:
        pass
    for d in site.getsitepackages([sys.base_prefix]) + ["/usr/lib/python3/dist-packages"]:
        if d not in sys.path:
            sys.path.append(d)
    try:
        import setuptools.build_meta as backend
        import wheel  # noqa: F401
    except ImportError as e:
        raise ImportError("building dlock needs setuptools and wheel (Debian: apt-get install "
                          "python3-setuptools python3-wheel): %s" % e) from e
    return backend


_backend = _setuptools()


def get_requires_for_build_wheel(config_settings=None):
    return []          # everything is here already: nothing to download


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def __getattr__(name):
    return getattr(_backend, name)


build_wheel = _backend.build_wheel
build_sdist = _backend.build_sdist
prepare_metadata_for_build_wheel = _backend.prepare_metadata_for_build_wheel
if hasattr(_backend, "build_editable"):
    build_editable = _backend.build_editable
    prepare_metadata_for_build_editable = _backend.prepare_metadata_for_build_editable
