"""numba's disk cache must follow every file of numerics/, not only the kernel's own.

Each test copies numerics/ to a temporary folder and runs a small program on the copy in
fresh processes: a kernel of theta_kernels.py that calls trusted.exact_sum is compiled and
cached, then trusted.py is changed so that exact_sum gives another value.  numba alone
keys the cache on theta_kernels.py and would load the old machine code (the control
below shows it does); with numerics.jitcache the next process recompiles and sees the
change.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

PROGRAM = r"""
import json, sys
import numpy as np
if sys.argv[1] == "no-locator-classes":     # a numba without the classes jitcache extends
    from numba.core import caching
    caching.CacheImpl._locator_classes = tuple(caching.CacheImpl._locator_classes)
import numerics                            # installs jitcache's locators
from numerics import jitcache
mode = jitcache.mode()
if sys.argv[1] == "numba-alone":            # the control: take them out again
    from numba.core import caching
    caching.CacheImpl._locator_classes[:] = [
        c for c in caching.CacheImpl._locator_classes if not c.__name__.startswith("PackageStamped")]
    mode = "numba alone"
from numerics import theta_kernels as tk
x = np.array([0.3, 0.25, 0.2, 0.125]); q1 = x.copy(); mk = np.zeros(4, np.uint8)
D = tk.big_greedy_tail(x, q1, 0.3, 0, mk, np.empty(4, np.int64), np.empty(4, np.int64),
                       np.empty(8, np.int64), np.empty(4))
st = tk.big_greedy_tail.stats
from numba import config
print(json.dumps({"mode": mode, "D": D, "hits": sum(st.cache_hits.values()),
                  "misses": sum(st.cache_misses.values()), "cache_dir": config.CACHE_DIR}))
"""


def _copy(tmp_path):
    dst = tmp_path / "numerics"
    shutil.copytree(ROOT / "numerics", dst, ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "prog.py").write_text(PROGRAM)
    return dst


def _run(tmp_path, variant, cache_dir=None):
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR", "PYTHONPATH")}
    env["PYTHONPATH"] = str(tmp_path)
    if cache_dir is not None:
        env["NUMBA_CACHE_DIR"] = str(cache_dir)
    out = subprocess.run([sys.executable, str(tmp_path / "prog.py"), variant], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def _change_exact_sum(pkg):
    # exact_sum(a) now returns 0·Σa: the small atoms' total t_s of big_greedy_tail becomes 0
    p = pkg / "trusted.py"
    s = p.read_text()
    i = s.index("def exact_sum(")
    j = s.index("\n    return s\n", i)
    p.write_text(s[:j] + "\n    return 0.0 * s\n" + s[j + len("\n    return s\n"):])


@pytest.mark.parametrize("variant", ["stamped", "stamped NUMBA_CACHE_DIR", "no-locator-classes"])
def test_a_change_in_another_numerics_file_reaches_the_cached_kernel(tmp_path, variant):
    # in-tree caches, a user's NUMBA_CACHE_DIR, and the fallback for a numba without the
    # locator classes
    pkg = _copy(tmp_path)
    cache = tmp_path / "user-cache" if variant != "stamped" else None
    first = _run(tmp_path, variant, cache)
    again = _run(tmp_path, variant, cache)
    assert first["mode"] == ("folder" if variant == "no-locator-classes" else "stamped")
    assert (first["misses"], again["hits"], again["misses"]) == (1, 1, 0)   # it is cached
    assert again["D"] == first["D"]
    _change_exact_sum(pkg)
    after = _run(tmp_path, variant, cache)
    assert after["misses"] == 1 and after["hits"] == 0
    assert after["D"] != first["D"]
    if variant == "no-locator-classes":
        assert Path(first["cache_dir"]).parent == cache
        assert after["cache_dir"] != first["cache_dir"]
    if variant == "stamped NUMBA_CACHE_DIR":              # the user's folder holds the cache
        assert Path(first["cache_dir"]) == cache and any(cache.rglob("*.nbi"))
        assert not (pkg / "__pycache__").exists() or not any((pkg / "__pycache__").glob("*.nbi"))


def test_control_numba_alone_keeps_the_stale_kernel(tmp_path):
    # the hazard jitcache removes, shown on the same change: without it the old code runs
    pkg = _copy(tmp_path)
    first = _run(tmp_path, "numba-alone")
    _change_exact_sum(pkg)
    after = _run(tmp_path, "numba-alone")
    assert first["mode"] == "numba alone"
    assert after["hits"] == 1 and after["D"] == first["D"]
