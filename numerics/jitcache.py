"""numba's on-disk cache for numerics/, invalidated when any numerics source changes.

numba keys a cached kernel on the contents of the one file that defines it.  The kernels
here inline or call functions from other files of this package (stage A's row loop in
theta_fused.py inlines the trusted steps of trusted.py and the exchange of
theta_kernels.py), so after an edit, a ``git pull`` or an upgrade that changes only
trusted.py, numba would load the old compiled row loop and run the old trusted steps
with the new ones around it: certificates that depend on how the cache was filled, not
on the commit.

:func:`install` puts a cache locator in front of numba's own for the functions defined
in numerics/: the same cache folders numba would use, but each kernel's source stamp is
numba's stamp of its own file *and* a SHA-256 of every .py file in numerics/, so any
change in the package recompiles every kernel of it once.  Functions outside numerics/
are left to numba.  It relies on numba's locator classes (``numba.core.caching``); where
a numba version lacks them, every cache of the process goes to a folder named by that
digest instead (``NUMBA_CACHE_DIR`` or numba's user cache folder, then
``numerics-<digest>``).
"""
from __future__ import annotations

import functools
import hashlib
import os

PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


@functools.lru_cache(maxsize=None)
def _digest(stamps):
    h = hashlib.sha256()
    for name, _, _ in stamps:
        h.update(name.encode())
        h.update(b"\0")
        with open(os.path.join(PACKAGE_DIR, name), "rb") as f:
            h.update(hashlib.sha256(f.read()).digest())
    return h.hexdigest()


def package_digest() -> str:
    """SHA-256 over the names and contents of numerics/*.py (re-read when one changes)."""
    names = sorted(n for n in os.listdir(PACKAGE_DIR) if n.endswith(".py"))
    stamps = []
    for n in names:
        st = os.stat(os.path.join(PACKAGE_DIR, n))
        stamps.append((n, st.st_mtime_ns, st.st_size))
    return _digest(tuple(stamps))


def _ours(py_file) -> bool:
    try:
        return os.path.dirname(os.path.abspath(py_file)) == PACKAGE_DIR
    except (TypeError, ValueError):
        return False


def _package_stamped(base):
    class Locator(base):
        @classmethod
        def from_function(cls, py_func, py_file):
            if not _ours(py_file):
                return None
            return super().from_function(py_func, py_file)

        def get_source_stamp(self):
            return (super().get_source_stamp(), package_digest())

    Locator.__name__ = Locator.__qualname__ = "PackageStamped" + base.__name__.lstrip("_")
    return Locator


_installed = []


def install() -> None:
    """Put the package-stamped locators first in numba's list (once per process)."""
    if _installed:
        return
    from numba.core import caching
    impl = getattr(caching, "CacheImpl", None) or getattr(caching, "_CacheImpl", None)
    bases = []
    for name in ("UserProvidedCacheLocator", "InTreeCacheLocator", "UserWideCacheLocator"):
        base = getattr(caching, name, None) or getattr(caching, "_" + name, None)
        if base is not None:
            bases.append(base)
    if impl is None or len(bases) != 3 or not isinstance(getattr(impl, "_locator_classes", None), list):
        # no locator classes to extend: send every cache of this process to a folder named
        # by the package digest (a numerics change then starts from an empty folder)
        from numba import config
        from numba.misc.appdirs import AppDirs
        root = config.CACHE_DIR or AppDirs(appname="numba", appauthor=False).user_cache_dir
        config.CACHE_DIR = os.path.join(root, "numerics-" + package_digest()[:16])
        _installed.append("folder")
        return
    impl._locator_classes[:0] = [_package_stamped(b) for b in bases]
    _installed.append("stamped")


def mode() -> str:
    """'stamped' (package-wide stamps), 'folder' (the fallback) or 'not installed'."""
    return _installed[0] if _installed else "not installed"
