"""``rehearse`` and ``benchmarks/gpu_smoke.py`` command lines: bad input, the CPU path."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from gpu_experiments import rehearse, rehearse_nodes
from gpu_experiments.__main__ import main

ROOT = Path(__file__).resolve().parents[1]


def _exit(argv):
    """Exit status and stderr of the in-process CLI."""
    import contextlib
    import io
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            rc = main(argv)
        except SystemExit as exc:
            rc = exc.code
    return rc, err.getvalue()


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only path")
def test_gpu_smoke_refuses_cpu_with_one_clear_line():
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")
    res = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu_smoke.py")], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "no CUDA device" in lines[0] and "rehearse" in lines[0]
    assert res.stdout == ""


def test_gpu_smoke_device_peaks():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import gpu_smoke
    finally:
        sys.path.pop(0)
    assert gpu_smoke.bf16_peak("NVIDIA H100 80GB HBM3") == 989.0
    assert gpu_smoke.bf16_peak("NVIDIA H100 PCIe") == 756.0  # PCIe listed before the generic H100
    assert gpu_smoke.bf16_peak("NVIDIA H200") == 989.0
    assert gpu_smoke.bf16_peak("NVIDIA A100-SXM4-80GB") == 312.0
    assert gpu_smoke.bf16_peak("Some Future GPU") is None  # MFU is then reported as n/a, never guessed
    assert gpu_smoke.main(["--steps", "1"]) == 2


def test_rehearse_bad_input(tmp_path, monkeypatch):
    rc, msg = _exit(["rehearse", "--config", "nope", "--out", str(tmp_path / "a")])
    assert rc == 2 and "unknown config 'nope'" in msg
    rc, msg = _exit(["rehearse", "--config", "tiny-cpu", "--out", str(tmp_path / "a"), "--steps", "1"])
    assert rc == 2 and "--steps must be >= 2" in msg
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "rehearsal.json").write_text("{}")
    rc, msg = _exit(["rehearse", "--config", "tiny-cpu", "--out", str(tmp_path / "old")])
    assert rc == 2 and "already holds a rehearsal" in msg
    (tmp_path / "file").write_text("x")
    rc, msg = _exit(["rehearse", "--config", "tiny-cpu", "--out", str(tmp_path / "file")])
    assert rc == 2 and "not a directory" in msg
    monkeypatch.setattr(rehearse, "available_bytes", lambda: 2**30)
    rc, msg = _exit(["rehearse", "--config", "gpt2-774m", "--out", str(tmp_path / "big")])
    assert rc == 2 and "GiB of free memory" in msg and "1.0 GiB available" in msg
    assert not (tmp_path / "big").exists()  # nothing written on refusal
    with pytest.raises(SystemExit) as exc:  # argparse: --nnodes is 1 or 2
        main(["rehearse", "--config", "tiny-cpu", "--out", str(tmp_path / "a"), "--nnodes", "3"])
    assert exc.value.code == 2


def test_every_rehearse_option_has_help():
    res = subprocess.run([sys.executable, "-m", "gpu_experiments", "rehearse", "--help"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0
    for opt in ("--config", "--out", "--steps", "--nnodes", "--slurm", "--threads", "--keep-work"):
        block = res.stdout.split(opt, 1)[1].split("\n  --", 1)[0]
        assert len(block.split()) > 2, f"{opt} has no help text"


def test_sbatch_launch_line_is_what_the_rehearsal_runs():
    line = rehearse_nodes.launch_line()
    for part in ("srun", '--cpus-per-task="$CPUS_PER_TASK"', "torch.distributed.run", "--rdzv_backend=c10d",
                 '--nnodes="$SLURM_JOB_NUM_NODES"', '--rdzv_endpoint="$MASTER_ADDR:$MASTER_PORT"',
                 "--signals-to-handle=SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR1", "-m gpu_experiments train",
                 '--device "$DEVICE"'):
        assert part in line
    text = rehearse_nodes.SBATCH.read_text()
    assert 'DEVICE=${DEVICE:-cuda}' in text  # the cluster default stays CUDA
    for directive in ("--nodes=1", "--ntasks-per-node=1", "--signal=B:USR1@", "--requeue", "--open-mode=append"):
        assert f"#SBATCH {directive}" in text
    assert 'scontrol requeue "$SLURM_JOB_ID"' in text


def _fake_slurm(tmp_path):
    """A srun that prints its arguments and a scontrol for `show hostnames`: what the script passes."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "srun").write_text('#!/bin/sh\nfor a in "$@"; do echo "ARG $a"; done\n')
    (bindir / "scontrol").write_text("#!/bin/sh\necho node-a\n")
    for f in bindir.iterdir():
        f.chmod(0o755)
    return bindir


@pytest.mark.parametrize("args,env,seed,out", [
    (["gpt2-774m"], {"SLURM_ARRAY_TASK_ID": "2"}, "2", "runs/gpt2-774m/seed-2"),
    (["gpt2-774m", "lr=1e-4"], {"SLURM_ARRAY_TASK_ID": "3", "RUNS": "/scratch/r"}, "3", "/scratch/r/seed-3"),
    (["gpt2-774m", "1", "runs/x", "lr=1e-4"], {}, "1", "runs/x"),
])
def test_sbatch_seed_from_the_job_array_or_the_arguments(tmp_path, args, env, seed, out):
    base = {"PATH": f"{_fake_slurm(tmp_path)}:{os.environ['PATH']}", "SLURM_JOB_NODELIST": "node-a",
            "SLURM_JOB_NUM_NODES": "1", "SLURM_JOB_ID": "4242", "SLURM_CPUS_PER_TASK": "64",
            "SLURM_GPUS_ON_NODE": "8"}
    res = subprocess.run(["bash", str(rehearse_nodes.SBATCH), *args], env=dict(base, **env), capture_output=True,
                         text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    got = [ln[4:] for ln in res.stdout.splitlines() if ln.startswith("ARG ")]
    assert got[got.index("--seed") + 1] == seed and got[got.index("--out") + 1] == out
    assert "--cpus-per-task=64" in got and "--nproc_per_node=8" in got
    assert ("lr=1e-4" in got) == ("lr=1e-4" in args)
    assert "OMP_NUM_THREADS=8," in res.stdout  # 64 CPUs per node task / 8 ranks
    no_seed = subprocess.run(["bash", str(rehearse_nodes.SBATCH), "gpt2-774m"], env=base, capture_output=True,
                             text=True, timeout=60)
    assert no_seed.returncode != 0 and "--array=1-3" in no_seed.stderr


def test_srun_stand_in_honours_cpus_per_task_and_refuses_the_rest(tmp_path):
    rehearse_nodes._shims(tmp_path / "bin")
    srun = str(tmp_path / "bin" / "srun")
    env = dict(os.environ, SLURM_JOB_NUM_NODES="2")
    # one write a task (a pipe keeps writes under PIPE_BUF whole; print's pieces from the two
    # tasks interleaved once: ' [0]', '01 [1]')
    show = ("import os; os.write(1, (os.environ['SLURM_NODEID'] + ' ' + str(sorted(os.sched_getaffinity(0)))"
            " + '\\n').encode())")
    if len(os.sched_getaffinity(0)) >= 2:
        res = subprocess.run([srun, "--kill-on-bad-exit=1", "--ntasks-per-node=1", "--cpus-per-task=1",
                              sys.executable, "-c", show], env=env, capture_output=True, text=True, timeout=60)
        assert res.returncode == 0, res.stderr
        cpus = sorted(os.sched_getaffinity(0))
        assert sorted(res.stdout.splitlines()) == [f"0 [{cpus[0]}]", f"1 [{cpus[1]}]"]  # one CPU each, apart
    for bad in (["--mpi=pmix"], ["--ntasks-per-node=2"], ["--cpus-per-task=999"], ["-c", "x"]):
        res = subprocess.run([srun, *bad, "true"], env=env, capture_output=True, text=True, timeout=60)
        assert res.returncode == 2 and res.stderr.startswith("srun stand-in: "), (bad, res.stderr)
    res = subprocess.run([srun, "--kill-on-bad-exit=1", "sh", "-c", 'test "$SLURM_NODEID" = 0 || exit 3; sleep 30'],
                         env=env, capture_output=True, text=True, timeout=20)
    assert res.returncode == 3  # node 1 failed, node 0 was killed instead of sleeping on
    res = subprocess.run([str(tmp_path / "bin" / "scontrol"), "requeue", "1"], capture_output=True, text=True)
    assert res.returncode == 2 and "not emulated" in res.stderr


def test_rehearse_slurm_bad_input(tmp_path, monkeypatch):
    from gpu_experiments import rehearse_slurm

    rc, msg = _exit(["rehearse", "--config", "tiny-cpu", "--slurm", "--nnodes", "2", "--out", str(tmp_path / "a")])
    assert rc == 2 and "--slurm runs one node" in msg
    rc, msg = _exit(["rehearse", "--config", "tiny-cpu", "--slurm", "--steps", "5", "--out", str(tmp_path / "a")])
    assert rc == 2 and "--steps must be >= 10" in msg
    monkeypatch.setattr(rehearse_slurm, "missing_tools", lambda: ["munged", "slurmctld"])
    rc, msg = _exit(["rehearse", "--config", "tiny-cpu", "--slurm", "--out", str(tmp_path / "a")])
    assert rc == 2 and "apt-get install -y slurm-wlm munge" in msg and len(msg.strip().splitlines()) == 1
    assert not (tmp_path / "a").exists()


@pytest.mark.slow
def test_rehearse_one_node_tiny_end_to_end(tmp_path):
    out = tmp_path / "r"
    res = subprocess.run([sys.executable, "-m", "gpu_experiments", "rehearse", "--config", "tiny-cpu", "--out",
                          str(out)], cwd=ROOT, capture_output=True, text=True, timeout=600,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert res.returncode == 0, res.stderr[-2000:]
    rec = json.loads((out / "rehearsal.json").read_text())
    assert rec["resume_bitwise"] and rec["state_sha256_uninterrupted"] == rec["state_sha256_resumed"]
    assert rec["n_params"] == rec["n_params_formula"] == 37_760
    assert rec["probe_rows"] == 2 * 2 and rec["certify_exit"] == 0 and rec["verify_exit"] == 0
    assert not (out / "work").exists() and {p.name for p in out.iterdir()} == {"rehearsal.json", "rows",
                                                                               "certificates"}


def test_gpu_smoke_code_path_runs_on_cpu(capsys):
    # the GPU-only lines of the script are the only ones this cannot reach
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import gpu_smoke
    finally:
        sys.path.pop(0)
    assert gpu_smoke.main(["--check-on-cpu", "tiny-cpu", "--micro-batch", "1", "--accum", "1", "--steps", "2"]) == 0
    out = capsys.readouterr().out
    assert "tokens/s" in out and "MFU n/a" in out and "probe:" in out and "memory model" in out
    assert gpu_smoke.main(["--check-on-cpu", "no-such-config"]) == 2
