"""Where certify's compiled kernels spend their time, sampled in place by Linux ``perf``.

Cutting a kernel after each phase, or timing a phase in a harness of its own, misjudges
what the phase costs inside the row loop (benchmarks/README.md has two such cases).  This
samples the real run instead: it compiles the kernels into a fresh cache folder (numba
gives their machine code and symbol names only for code it compiled in this process),
warms them, then runs ``perf record -e cpu-clock`` on this process while stage A (or the
whole ``certify_batch``) runs over the same rows for a few seconds.  Each sample's
instruction address is attributed to the compiled function it falls in, and for the
function with the most samples the hottest instructions are printed with their
disassembly (``objdump``) and the share of samples on each, grouped in 128-byte blocks.
``--listing FILE`` writes that function's whole disassembly with each instruction's share,
to read a hot block in the code around it (a loop's head, its exit, what it reloads).

Usage: python benchmarks/kernel_profile.py [--L 64] [--spread 1.0] [--what stage_a|certify]
       [--seconds 3] [--top 12] [--out FILE] [--listing FILE]
Needs ``perf`` (Debian: linux-perf) allowed to sample this process (root, or
kernel.perf_event_paranoid ≤ 1) and ``objdump`` (binutils).  One thread.
"""
from __future__ import annotations

import argparse
import bisect
import collections
import ctypes
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WINDOW = 1 << 17        # at most this many bytes of machine code are taken as one function's


def _mapped_end(addr):
    # the end of the readable mapping of this process that holds addr (0: none), so that
    # reading a function's code never runs past its mapping
    with open("/proc/self/maps") as fh:
        for line in fh:
            lo, hi = (int(v, 16) for v in line.split()[0].split("-"))
            if lo <= addr < hi and line.split()[1].startswith("r"):
                return hi
    return 0


def _fail(msg):
    print(f"kernel_profile: {msg}", file=sys.stderr)
    sys.exit(2)


def _symbols(dispatchers):
    # start address -> function name, for every function in the dispatchers' libraries
    syms = {}
    for disp in dispatchers:
        for ov in disp.overloads.values():
            lib = ov.library
            for name in set(re.findall(r'define [^@]*@"?([^"( ]+)"?[(]', lib.get_llvm_str())):
                try:
                    a = lib.get_pointer_to_function(name)
                except Exception:       # declared, not compiled into this library
                    continue
                if a:
                    syms[a] = name
    return syms


def _short(name):
    # numba's mangled names: _ZN<len>module<len>function...; keep module.function
    parts = []
    s = name[3:] if name.startswith("_ZN") else name
    while s and s[0].isdigit():
        n = int(re.match(r"\d+", s).group())
        s = s[len(str(n)):]
        parts.append(s[:n])
        s = s[n:]
    return ".".join(parts[-2:]) if parts else name[:60]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--L", type=int, default=64, help="row length (default 64)")
    ap.add_argument("--spread", type=float, default=1.0, help="logit spread of the softmax rows (default 1.0)")
    ap.add_argument("--what", choices=("stage_a", "stage_b", "certify"), default="stage_a",
                    help="stage A alone (default), stage B alone on the rows stage A leaves open, "
                         "or the whole certify_batch")
    ap.add_argument("--function", help="show the hottest blocks of this function (a name as printed, "
                                       "e.g. theta_refine._mitm_row_on) instead of the one with most samples")
    ap.add_argument("--seconds", type=float, default=3.0, help="how long to sample (default 3)")
    ap.add_argument("--top", type=int, default=12, help="hottest 128-byte blocks to print (default 12)")
    ap.add_argument("--out", help="also write the report to this file")
    ap.add_argument("--listing", help="write the shown function's whole disassembly to this file, each "
                                      "instruction as: offset, share of all samples in %%, instruction")
    a = ap.parse_args(argv)
    for tool in ("perf", "objdump"):
        if shutil.which(tool) is None:
            _fail(f"needs `{tool}` on PATH")
    if "numba" in sys.modules:
        _fail("must be started before numba is imported (it compiles into a fresh cache folder)")
    cache = tempfile.mkdtemp(prefix="kernel_profile_")
    os.environ["NUMBA_CACHE_DIR"] = cache
    try:
        _profile(a, cache)
    finally:
        shutil.rmtree(cache, ignore_errors=True)


def _profile(a, cache):
    sys.path.insert(0, str(ROOT))
    import numba
    import numpy as np

    from benchmarks.certify_throughput import rows
    from certificates.pipeline import FLIPS, MITM_K, SWAP_ROUNDS, TOPK, certify_batch
    from numerics import theta_fused as tf
    from numerics import theta_refine as trf
    numba.set_num_threads(1)
    n = max(1, (1 << 20) // a.L)
    R = rows(n, a.L, spread=a.spread)
    f = np.full(n, -1, np.int8)
    M = np.empty((n, a.L), np.uint8)
    cols = np.empty((6, n))
    state = np.empty(n, np.int8)

    t0 = time.perf_counter()
    tf.stage_a(R, f, FLIPS, 0.5 * 1e-6 ** 0.5, 1e-6, M, cols, state)   # certify's stop
    op = np.flatnonzero(state == 2)
    if a.what == "stage_b" and op.size == 0:
        _fail("stage A closes every row here: nothing for stage B")
    Ro = np.ascontiguousarray(R[op])

    def work():
        if a.what == "stage_a":
            tf.stage_a(R, f, FLIPS, 0.5 * 1e-6 ** 0.5, 1e-6, M, cols, state)
        elif a.what == "stage_b":         # certify's stage B call, on fresh copies of the bounds
            lo, hi, glo, ghi = (cols[c, op].copy() for c in range(4))
            trf.stage_b_rows(Ro, TOPK, SWAP_ROUNDS, 0.25 * 1e-6 ** 0.5, min(MITM_K, a.L), FLIPS + 2, 1e-6,
                             lo, hi, glo, ghi, np.ascontiguousarray(M[op]))
        else:
            certify_batch(R, 1e-6)

    work()                                              # compile
    work()
    t1 = time.perf_counter()
    work()
    once = time.perf_counter() - t1
    data = os.path.join(cache, "perf.data")
    pr = subprocess.Popen(["perf", "record", "-q", "-e", "cpu-clock", "-F", "10000", "-p", str(os.getpid()),
                           "-o", data], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    time.sleep(0.5)
    if pr.poll() is not None:
        _fail("perf record did not start: " + pr.stderr.read().decode(errors="replace").strip()[-300:])
    reps = 0
    end = time.perf_counter() + a.seconds
    while time.perf_counter() < end:
        work()
        reps += 1
    pr.send_signal(signal.SIGINT)
    pr.wait(timeout=60)
    syms = _symbols([tf._stage_a_ser, trf._stage_b_quick_ser, trf._stage_b_ser])
    if not syms:
        _fail("no compiled functions found (were the kernels loaded from a cache?)")
    ips = subprocess.run(["perf", "script", "-i", data, "-F", "ip"], capture_output=True, text=True)
    if ips.returncode != 0:
        _fail("perf script failed: " + ips.stderr.strip()[-300:])
    starts = sorted(syms)
    # a function's extent: up to the next known function, its mapping's end, or WINDOW
    ends = {a: min(a + WINDOW, nxt, _mapped_end(a) or a) for a, nxt in zip(starts, starts[1:] + [1 << 64])}
    per_fn = collections.Counter()
    per_ip = collections.Counter()
    total = 0
    for line in ips.stdout.split():
        try:
            ip = int(line, 16)
        except ValueError:
            continue
        total += 1
        k = bisect.bisect_right(starts, ip) - 1
        if k >= 0 and ip < ends[starts[k]]:
            per_fn[starts[k]] += 1
            per_ip[ip] += 1
        else:
            per_fn[None] += 1
    if total == 0:
        _fail("perf recorded no samples")
    rows_done = op.size if a.what == "stage_b" else n
    out = [f"{a.what}, L = {a.L}, spread {a.spread}: {rows_done} rows, {once / rows_done * 1e9:.0f} ns a row "
           f"unsampled, "
           f"{reps} runs sampled, {total} samples (compile and warm-up {t1 - t0:.0f} s)", "",
           "share  function"]
    for start, c in per_fn.most_common(12):
        out.append(f"{100 * c / total:5.1f}%  {'(outside the compiled kernels)' if start is None else _short(syms[start])}")
    hot = next((s for s, _ in per_fn.most_common() if s is not None
                and (a.function is None or _short(syms[s]) == a.function)), None)
    if a.function is not None and hot is None:
        _fail(f"no samples in {a.function}")
    if hot is not None:
        code = ctypes.string_at(hot, ends[hot] - hot)
        blob = os.path.join(cache, "hot.bin")
        with open(blob, "wb") as fh:
            fh.write(code)
        dis = subprocess.run(["objdump", "-D", "-b", "binary", "-m", "i386:x86-64", blob],
                             capture_output=True, text=True).stdout
        ins = {}
        for ln in dis.splitlines():
            m = re.match(r"\s+([0-9a-f]+):\t[0-9a-f ]+\t(.*)", ln)
            if m:
                ins[int(m.group(1), 16)] = m.group(2).strip()
        blocks = collections.Counter()
        for ip, c in per_ip.items():
            if hot <= ip < ends[hot]:
                blocks[(ip - hot) // 128] += c
        out += ["", f"hottest 128-byte blocks of {_short(syms[hot])} (offset, share of all samples; "
                    "instructions with ≥ 0.2 %):"]
        for b, c in sorted(blocks.most_common(a.top)):
            out.append(f"+{b * 128:#07x}  {100 * c / total:5.1f}%")
            for off in sorted(o for o in ins if b * 128 <= o < (b + 1) * 128):
                s = per_ip.get(hot + off, 0)
                if s >= 0.002 * total:
                    out.append(f"    {off:#07x} {100 * s / total:5.2f}%  {ins[off]}")
        if a.listing:
            Path(a.listing).write_text("".join(f"{off:#07x} {100 * per_ip.get(hot + off, 0) / total:7.3f}  {ins[off]}\n"
                                               for off in sorted(ins)))
    text = "\n".join(out)
    print(text)
    if a.out:
        Path(a.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
