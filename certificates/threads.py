"""When certify runs the threaded kernels: a policy that reads the machine's load.

numerics/ has no thread policy and does no I/O: its kernels take ``parallel=`` and this
module decides it (it reads /proc on Linux).  Only speed depends on the choice: every row
is computed on its own, so results are bit-identical for any thread count (tests check it).
"""
from __future__ import annotations

import os
import threading
import time

import numba

PAR_MIN = 1 << 18   # entries from which the threaded forms run (below, thread wake-ups cost more)
LOAD_AWARE = True   # threaded forms only while a core is idle (see threaded(); tests switch it off)


def others_running():
    """Tasks runnable on this machine right now besides the calling thread and the
    threads numba started, or None where that cannot be read (no Linux /proc).

    The kernel's count of runnable tasks (/proc/loadavg, 4th field) minus this process's
    threads in state R that Python does not know (numba's OpenMP workers keep spinning
    for a few milliseconds after a parallel region: not someone else's load) and minus the
    calling thread.  This process's other Python threads count: a helper thread hashing
    the input beside the kernels keeps a core busy.
    """
    try:
        with open("/proc/loadavg") as f:
            running = int(f.read().split()[3].split("/")[0])
        known = {t.native_id for t in threading.enumerate()}
        me = threading.get_native_id()
        ours = 0
        for t in os.listdir("/proc/self/task"):
            tid = int(t)
            if tid in known and tid != me:
                continue
            try:
                with open(f"/proc/self/task/{t}/stat") as f:
                    st = f.read()
            except OSError:             # the thread ended meanwhile
                continue
            ours += st[st.rindex(")") + 2] == "R"
        return max(running - ours, 0)
    except (OSError, ValueError, IndexError):
        return None


_SEEN = [-1.0, None]     # (monotonic time, others_running()) of the last reading


def _others_recent(max_age=0.02):
    """others_running(), read again only after max_age seconds: a reading costs ≈ 60 µs
    (a few /proc files), and stage A and stage B of one batch ask within milliseconds."""
    now = time.monotonic()
    if now - _SEEN[0] > max_age:
        _SEEN[0], _SEEN[1] = now, others_running()
    return _SEEN[1]


def cpu_count():
    """CPUs this process may run on (its affinity mask where the platform has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def threaded(R):
    """Use the threaded drivers only for large batches and while a core is idle.

    Idle means that other processes keep fewer than cores − 1 CPUs busy at this moment
    (:func:`others_running`).  On an oversubscribed machine a parallel region waits for its
    slowest thread, and measured up to 2–4× slower than the serial loop on a shared 2-core
    machine.  The 1-minute load average is only the fallback where /proc is missing: it
    counts this process's own recent work, so a long single-threaded run kept turning the
    threads off on an otherwise idle machine.
    """
    return R.size >= PAR_MIN and threaded_rows(R.shape[0], 1)


def threaded_rows(n, min_rows):
    """The rule of :func:`threaded` for a batch of n independent rows of any cost: threads
    from min_rows rows on, while a core is free."""
    if n < min_rows or numba.get_num_threads() < 2:
        return False
    if not LOAD_AWARE:
        return True
    others = _others_recent()
    if others is not None:
        return others <= cpu_count() - 2
    try:
        return os.getloadavg()[0] < cpu_count() - 1
    except OSError:                     # no load average on this platform
        return True
