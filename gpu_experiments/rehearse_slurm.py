"""The cluster script under a real Slurm on this machine: sbatch, preemption by signal, requeue, resume.

``python -m gpu_experiments rehearse --config tiny-cpu --slurm --out DIR``

1. :class:`LocalSlurm` starts ``munged``, ``slurmctld`` and ``slurmd`` (Debian's
   ``slurm-wlm`` and ``munge``) for one node, this machine, from a generated
   ``slurm.conf``: every state, spool, log and socket file in a private
   temporary folder, private ports, a fresh munge key, and tasks bound to cores
   (``TaskPluginParam=Cores``) as on most GPU clusters.  The daemons are stopped
   again at the end whatever happens (an error, Ctrl-C, SIGTERM, SIGHUP).
2. Control job: ``srun`` without ``--cpus-per-task`` (the old train.sbatch line)
   inside a job of ``--cpus-per-task=C``: its task sees fewer CPUs than asked for,
   so the binding the fix is about is really enforced here.
3. ``gpu_experiments/slurm/train.sbatch`` itself is submitted with ``sbatch`` as
   a one-task job array (seed = array index 1), changed only through what it
   documents: sbatch options (``--cpus-per-task=C`` = all CPUs here,
   ``--gpus-per-node=0``, ``--output``) and its variables (``DEVICE=cpu``,
   ``PYTHON``, ``NPROC_PER_NODE=2``, ``RUNS``).
4. Once training is under way the harness sends ``scancel --batch
   --signal=USR1`` (what the script's ``--signal=B:USR1@300`` makes Slurm do
   before the time limit).  The script forwards the signal to the step, every
   rank saves a resume checkpoint at the next update boundary and exits, the
   script runs ``scontrol requeue``; the requeued job resumes and finishes.
   Slurm holds a requeued batch job for about two minutes (``BeginTime``); the
   harness releases it after 3 s (RELEASE_AFTER) with ``scontrol update JobId=...
   StartTime=now`` (not at once: a restart within the second of the requeue is
   refused with "Job credential revoked").
5. The same job again, not signalled: the uninterrupted reference.

``DIR/rehearsal.json``: ``slurm``, ``preempted_and_resumed``, ``resume_bitwise``
(every loss and gradient norm and every tensor of the final checkpoint, model
and AdamW state, equal bit for bit), the CPUs every rank reported
(``os.sched_getaffinity``, from the jobs' own output, kept as ``DIR/job-*.out``),
the control's CPUs and the timings.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from gpu_experiments import rehearse_nodes
from gpu_experiments.train import parse_affinity

ROOT = Path(__file__).resolve().parents[1]
SBATCH = ROOT / "gpu_experiments" / "slurm" / "train.sbatch"
TOOLS = ("munged", "slurmctld", "slurmd", "sbatch", "scontrol", "scancel", "squeue", "sinfo")
INSTALL = "apt-get install -y slurm-wlm munge"
NPROC = 2  # ranks of the rehearsal job (DDP, gloo)
PREEMPT_AFTER = 3  # updates logged before the signal is sent
RELEASE_AFTER = 3  # seconds between the requeue and releasing Slurm's ~2 min hold on the job
SEED = 1


class SlurmUnavailable(RuntimeError):
    """slurm-wlm / munge missing, or not root: bad input for the CLI (exit 2)."""


def missing_tools() -> list[str]:
    return [t for t in TOOLS if shutil.which(t) is None]


def check_available() -> None:
    miss = missing_tools()
    if miss:
        raise SlurmUnavailable(f"--slurm needs slurm-wlm and munge ({', '.join(miss)} not found); "
                               f"install them with `{INSTALL}` (Debian/Ubuntu)")
    if os.geteuid() != 0:
        raise SlurmUnavailable("--slurm starts slurmd, which must run as root here; run as root")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LocalSlurm:
    """munged + slurmctld + slurmd for this machine; a context manager that always stops them."""

    def __init__(self, say=print, keep_logs: Path | None = None):
        self.say = say
        self.keep_logs = keep_logs
        self.procs: dict[str, subprocess.Popen] = {}
        self.tmp: Path | None = None
        self.env: dict = {}
        self.node = socket.gethostname().split(".")[0]
        self.version = ""
        self.ncpus = 0

    # --------------------------------------------------------------- start
    def __enter__(self) -> "LocalSlurm":
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> bool:
        self.stop()
        return False

    def _spawn(self, name: str, cmd: list[str]) -> None:
        log = open(self.tmp / "log" / f"{name}.out", "w")
        self.procs[name] = subprocess.Popen(cmd, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, start_new_session=True)
        log.close()

    def _wait(self, what: str, pred, timeout: float) -> None:
        t0 = time.monotonic()
        while not pred():
            for name, p in self.procs.items():
                if p.poll() is not None:
                    raise RuntimeError(f"{name} exited with {p.returncode} while waiting for {what}:\n"
                                       + self.log_tail(name))
            if time.monotonic() - t0 > timeout:
                raise RuntimeError(f"timed out after {timeout:.0f} s waiting for {what}")
            time.sleep(0.2)

    def log_tail(self, name: str, n: int = 15) -> str:
        out = []
        for f in (self.tmp / "log" / f"{name}.out", self.tmp / "log" / f"{name}.log"):
            if f.exists():
                out += f.read_text(errors="replace").splitlines()[-n:]
        return "\n".join(out)

    def _start(self) -> None:
        # A short path: unix sockets (munge's, slurmstepd's in the spool) are limited to 108 bytes.
        self.tmp = Path(tempfile.mkdtemp(prefix="rh-slurm-"))
        self.tmp.chmod(0o755)  # munged: the socket's directories must be searchable by all
        for d in ("munge", "sock", "state", "spool", "log"):
            (self.tmp / d).mkdir()
        (self.tmp / "munge").chmod(0o700)
        key = self.tmp / "munge" / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        sock = self.tmp / "sock" / "munge.socket"
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SBATCH_", "SRUN_"))}
        self.env["SLURM_CONF"] = str(self.tmp / "slurm.conf")
        self._spawn("munged", ["munged", "--foreground", f"--key-file={key}", f"--socket={sock}",
                               f"--pid-file={self.tmp / 'munge' / 'munged.pid'}",
                               f"--log-file={self.tmp / 'log' / 'munged.log'}",
                               f"--seed-file={self.tmp / 'munge' / 'munged.seed'}"])
        self._wait("munged's socket", sock.exists, 20)
        hw = subprocess.run(["slurmd", "-C"], capture_output=True, text=True, env=self.env).stdout.splitlines()[0]
        hw_fields = dict(f.split("=", 1) for f in hw.split() if "=" in f)
        self.ncpus = int(hw_fields["CPUs"])
        node_hw = " ".join(f"{k}={hw_fields[k]}" for k in
                           ("CPUs", "Boards", "SocketsPerBoard", "CoresPerSocket", "ThreadsPerCore") if k in hw_fields)
        t = self.tmp
        conf = f"""# generated by gpu_experiments/rehearse_slurm.py: one node (this machine), private everything
ClusterName=rehearsal
SlurmctldHost={self.node}(127.0.0.1)
SlurmctldPort={_free_port()}
SlurmdPort={_free_port()}
AuthType=auth/munge
AuthInfo=socket={sock}
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation={t / 'state'}
SlurmdSpoolDir={t / 'spool'}
SlurmctldPidFile={t / 'state' / 'slurmctld.pid'}
SlurmdPidFile={t / 'spool' / 'slurmd.pid'}
SlurmctldLogFile={t / 'log' / 'slurmctld.log'}
SlurmdLogFile={t / 'log' / 'slurmd.log'}
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/affinity
TaskPluginParam=Cores
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/builtin
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
JobAcctGatherType=jobacct_gather/none
MpiDefault=none
PlugStackConfig=/dev/null
ReturnToService=2
JobRequeue=1
KillWait=30
MinJobAge=3600
NodeName={self.node} NodeAddr=127.0.0.1 {node_hw} State=UNKNOWN
PartitionName=rehearsal Nodes={self.node} Default=YES MaxTime=INFINITE State=UP
"""
        (t / "slurm.conf").write_text(conf)
        self._spawn("slurmctld", ["slurmctld", "-D", "-i", "-f", str(t / "slurm.conf")])
        self._spawn("slurmd", ["slurmd", "-D", "-N", self.node, "-f", str(t / "slurm.conf")])
        self._wait("the node to be idle", lambda: self.run(["sinfo", "-h", "-N", "-o", "%T"], check=False)
                   .stdout.strip() == "idle", 90)
        self.version = self.run(["sinfo", "--version"]).stdout.strip()
        self.say(f"local Slurm up ({self.version}): node {self.node}, {self.ncpus} CPUs, state in {t}")

    # --------------------------------------------------------------- use
    def run(self, cmd: list[str], check: bool = True, env: dict | None = None) -> subprocess.CompletedProcess:
        res = subprocess.run(cmd, capture_output=True, text=True, env=env or self.env, timeout=60)
        if check and res.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd[:3])} ... failed (exit {res.returncode}): "
                               f"{(res.stderr or res.stdout).strip()[-800:]}")
        return res

    def job(self, jobid: str) -> dict:
        """``scontrol show job -o`` as a dict (empty when Slurm no longer knows the job)."""
        res = self.run(["scontrol", "show", "job", "-o", jobid], check=False)
        if res.returncode != 0:
            return {}
        return dict(f.split("=", 1) for f in res.stdout.split() if "=" in f)

    def wait_job(self, jobid: str, pred, what: str, timeout: float, out_file: Path | None = None) -> dict:
        t0 = time.monotonic()
        while True:
            j = self.job(jobid)
            if pred(j):
                return j
            state = j.get("JobState", "?")
            if state in ("FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE") \
                    or (state == "COMPLETED" and not pred(j)):
                tail = out_file.read_text(errors="replace").splitlines()[-25:] if out_file and out_file.exists() else []
                raise RuntimeError(f"job {jobid} ended {state} (exit {j.get('ExitCode')}) while waiting for "
                                   f"{what}:\n" + "\n".join(tail))
            if time.monotonic() - t0 > timeout:
                raise RuntimeError(f"timed out after {timeout:.0f} s waiting for job {jobid}: {what} "
                                   f"(state {state}, reason {j.get('Reason')})")
            for name, p in self.procs.items():
                if p.poll() is not None:
                    raise RuntimeError(f"{name} died (exit {p.returncode}):\n" + self.log_tail(name))
            time.sleep(0.2)

    # --------------------------------------------------------------- stop
    def stop(self) -> None:
        if self.procs.get("slurmctld") is not None and self.procs["slurmctld"].poll() is None:
            self.run(["scancel", "--quiet", "--user", str(os.geteuid())], check=False)
            t0 = time.monotonic()  # let the jobs' processes end before slurmd goes
            while time.monotonic() - t0 < 40:
                res = self.run(["squeue", "-h", "-o", "%i"], check=False)
                if res.returncode != 0 or not res.stdout.strip():
                    break
                time.sleep(0.5)
        for name in ("slurmd", "slurmctld", "munged"):
            p = self.procs.pop(name, None)
            if p is None or p.poll() is not None:
                continue
            p.terminate()
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(p.pid, signal.SIGKILL)  # the group start_new_session gave it
                except ProcessLookupError:
                    pass
                p.wait(timeout=10)
        if self.tmp is not None and self.tmp.exists():
            if self.keep_logs is not None:
                self.keep_logs.mkdir(parents=True, exist_ok=True)
                for f in list((self.tmp / "log").iterdir()) + [self.tmp / "slurm.conf"]:
                    if f.is_file():
                        shutil.copy(f, self.keep_logs / f.name)
            shutil.rmtree(self.tmp, ignore_errors=True)
            self.tmp = None


class Interrupted(BaseException):
    """SIGTERM/SIGHUP during the rehearsal (Ctrl-C is KeyboardInterrupt): the daemons are stopped first."""


def _raise_interrupt(signum, _frame):
    raise Interrupted(f"signal {signal.Signals(signum).name}")


def _metrics(run: Path) -> list[dict]:
    p = run / "metrics.jsonl"
    if not p.exists():
        return []
    return [json.loads(ln) for ln in p.read_text().splitlines() if ln.strip()]


def rehearse_slurm(name: str, out: Path, steps: int, command: str = "", keep_work: bool = False) -> dict:
    from gpu_experiments import config, data

    check_available()
    t_start = time.perf_counter()
    say = lambda msg: print(f"[{time.perf_counter() - t_start:6.1f} s] {msg}", flush=True)  # noqa: E731
    work = out / "work"
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    data.prepare_offline(work / "data")
    base = config.get_config(name)
    # The rehearsal's changes to the named config (all listed in rehearsal.json).  A bigger global
    # batch than tiny-cpu's makes one update take long enough to be interrupted in the middle.
    overrides = [f"data_dir={work / 'data'}", f"max_steps={steps}", f"lr_decay_steps={steps}",
                 f"ckpt_steps=0,{steps}", f"resume_every={max(1, steps // 3)}", "resume_keep=2",
                 f"eval_every={max(1, steps // 2)}", f"batch_tokens={8 * base.tokens_per_micro}", "log_every=1"]
    cfg = config.apply_overrides(base, overrides)
    accum = config.grad_accum_steps(cfg, NPROC)
    record = {"slurm": False, "preempted_and_resumed": False, "resume_bitwise": False}
    seconds = {}
    old_handlers = {s: signal.signal(s, _raise_interrupt) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        with LocalSlurm(say, keep_logs=work / "slurm-logs") as slurm:
            seconds["slurm_start"] = time.perf_counter() - t_start
            C = slurm.ncpus

            # --- control: the old srun line (no --cpus-per-task) in a job that asks for C CPUs
            ctl_out = work / "control.out"
            probe = f"{sys.executable} -c 'import os; print(\"control cpus\", len(os.sched_getaffinity(0)))'"
            jid = slurm.run(["sbatch", "--parsable", "--ntasks-per-node=1", f"--cpus-per-task={C}",
                             f"--output={ctl_out}", "--job-name=control", f"--wrap=srun {probe}"]).stdout.strip()
            slurm.wait_job(jid, lambda j: j.get("JobState") == "COMPLETED", "the control job", 120, ctl_out)
            m = re.search(r"control cpus (\d+)", ctl_out.read_text())
            control_cpus = int(m.group(1)) if m else None
            say(f"control: srun without --cpus-per-task in a job of {C} CPUs per task sees {control_cpus} CPU(s)")

            def submit(tag: str) -> tuple[str, str, Path, Path]:
                runs = work / tag
                env = dict(slurm.env, DEVICE="cpu", PYTHON=sys.executable, NPROC_PER_NODE=str(NPROC),
                           RUNS=str(runs),
                           PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
                env.pop("OMP_NUM_THREADS", None)  # the script's own default: CPUs per task / ranks
                cmd = ["sbatch", "--parsable", "--array=1", f"--cpus-per-task={C}", "--gpus-per-node=0",
                       f"--output={work / f'job-{tag}-%A_%a.out'}", f"--job-name={name}-{tag}", f"--chdir={ROOT}",
                       str(SBATCH), name, *overrides]
                array_id = slurm.run(cmd, env=env).stdout.strip().split(";")[0]
                task = f"{array_id}_{SEED}"
                return task, array_id, runs / f"seed-{SEED}", work / f"job-{tag}-{array_id}_{SEED}.out"

            # --- the job that is preempted, requeued and resumed
            t0 = time.perf_counter()
            task, array_id, run, job_out = submit("preempted")
            say(f"submitted train.sbatch as job array {array_id} (task {task}): {name}, {steps} updates, "
                f"{NPROC} ranks x accum {accum}, --cpus-per-task={C}")
            slurm.wait_job(task, lambda j: len(_metrics(run)) >= PREEMPT_AFTER, f"{PREEMPT_AFTER} updates", 600,
                           job_out)
            slurm.run(["scancel", "--batch", "--signal=USR1", task])
            sent_after = len(_metrics(run))
            say(f"sent SIGUSR1 to the batch script (scancel --batch --signal=USR1 {task}) after update {sent_after}")
            j = slurm.wait_job(task, lambda j: int(j.get("Restarts", 0)) >= 1 and j.get("JobState") == "PENDING",
                               "the requeue", 300, job_out)
            seconds["preempt_to_requeued"] = time.perf_counter() - t0
            held = j.get("StartTime")
            # Slurm revokes the last attempt's job credential; a restart within the same second is
            # refused ("Job credential revoked"), which is what its own hold guards against.
            slurm.wait_job(task, lambda j: "COMPLETING" not in j.get("JobState", "") and
                           j.get("Reason") == "BeginTime", "the last attempt to end", 120, job_out)
            time.sleep(RELEASE_AFTER)
            slurm.run(["scontrol", "update", f"JobId={j['JobId']}", "StartTime=now"])
            say(f"job requeued (Restarts=1, held until {held} by Slurm); released after {RELEASE_AFTER} s "
                "with StartTime=now")
            slurm.wait_job(task, lambda j: j.get("JobState") == "COMPLETED", "the resumed job to finish", 900,
                           job_out)
            seconds["preempted_job_total"] = time.perf_counter() - t0
            final = slurm.job(task)

            # --- the uninterrupted reference
            t0 = time.perf_counter()
            ref_task, _, ref_run, ref_out = submit("reference")
            slurm.wait_job(ref_task, lambda j: j.get("JobState") == "COMPLETED", "the reference job", 900, ref_out)
            seconds["reference_job"] = time.perf_counter() - t0
            say("uninterrupted reference job done")
            record["slurm"] = True
            record["slurm_version"] = slurm.version
            node_cpus = slurm.ncpus
    finally:
        for s, h in old_handlers.items():
            signal.signal(s, h)

    text = job_out.read_text(errors="replace")
    attempts = text.split("train.sbatch: job ")[1:]
    aff = [parse_affinity(a) for a in attempts]
    m_saved = re.search(r"got SIGUSR1: saved (\S+) after update (\d+)", text)
    preempted_at = int(m_saved.group(2)) if m_saved else None
    m_res = re.search(r"resumed from (\S+) \(step (\d+)", text)
    a, b = _metrics(run), _metrics(ref_run)
    ta = rehearse_nodes.read_tensors(run / f"step-{steps}") if (run / f"step-{steps}").exists() else {}
    tb = rehearse_nodes.read_tensors(ref_run / f"step-{steps}") if (ref_run / f"step-{steps}").exists() else {}
    import torch

    same_metrics = len(a) == len(b) == steps and \
        [(x["loss"], x["grad_norm"]) for x in a] == [(x["loss"], x["grad_norm"]) for x in b]
    same_tensors = bool(ta) and ta.keys() == tb.keys() and all(torch.equal(ta[k], tb[k]) for k in ta)
    resumed_from_resume_ckpt = bool(m_res) and "/resume/step-" in m_res.group(1) and preempted_at is not None \
        and int(m_res.group(2)) == preempted_at
    preempted_and_resumed = (len(attempts) == 2 and "caught SIGUSR1" in attempts[0]
                             and "requeueing job" in attempts[0] and "restart 1:" in attempts[1]
                             and resumed_from_resume_ckpt and preempted_at is not None and preempted_at < steps
                             and final.get("JobState") == "COMPLETED" and int(final.get("Restarts", 0)) == 1
                             and (run / "DONE").exists())
    affinity_ok = len(aff) == 2 and all(len(x) == NPROC and all(r["n_cpus"] == node_cpus for r in x) for x in aff)
    record.update({
        "config": name, "command": command, "torch": torch.__version__,
        "node_cpus": node_cpus, "sbatch_options": [f"--array={SEED}", f"--cpus-per-task={node_cpus}",
                                                   "--gpus-per-node=0", "--output=DIR/work/job-*.out"],
        "script_variables": {"DEVICE": "cpu", "PYTHON": "sys.executable", "NPROC_PER_NODE": NPROC,
                             "RUNS": "DIR/work/<tag>"},
        "overrides": [o for o in overrides if not o.startswith("data_dir=")], "steps": steps,
        "ranks": NPROC, "grad_accum_per_rank": accum, "parallel": cfg.parallel,
        "affinity": [[{k: r[k] for k in ("rank", "cpus", "n_cpus", "slurm_cpus_per_task")} for r in x] for x in aff],
        "affinity_ok": affinity_ok,
        "control_srun_without_cpus_per_task_cpus": control_cpus,
        "signal": "USR1 via scancel --batch (train.sbatch: --signal=B:USR1@300)",
        "signal_sent_after_update": sent_after, "preempted_at_update": preempted_at,
        "resumed_from": m_res.group(1).replace(str(out), "DIR") if m_res else None,
        "requeue_restarts": int(final.get("Restarts", 0)),
        "requeue_hold_released": f"scontrol update StartTime=now {RELEASE_AFTER} s after the requeue "
                                 "(instead of Slurm's BeginTime hold of ~2 min)",
        "preempted_and_resumed": preempted_and_resumed,
        "resume_bitwise": same_metrics and same_tensors, "resume_tensors_compared": len(ta),
        "losses": [x["loss"] for x in a], "losses_reference": [x["loss"] for x in b],
        "eval_losses": [x["eval_loss"] for x in a if x.get("eval_loss") is not None],
        "resume_checkpoints_left": sorted(p.name for p in (run / "resume").iterdir()) if (run / "resume").is_dir() else [],
        "seconds": seconds,
    })
    for f, dest in ((job_out, "job-preempted.out"), (ref_out, "job-reference.out"), (ctl_out, "job-control.out")):
        shutil.copy(f, out / dest)
    ok = record["preempted_and_resumed"] and record["resume_bitwise"] and affinity_ok
    if not keep_work and ok:
        shutil.rmtree(work)
    record["wall_seconds"] = time.perf_counter() - t_start
    tmp = out / "rehearsal.json.tmp"
    tmp.write_text(json.dumps(record, indent=1))
    os.replace(tmp, out / "rehearsal.json")
    say(f"preempted at update {preempted_at}, requeued, resumed: {preempted_and_resumed}; bitwise equal to the "
        f"uninterrupted job: {record['resume_bitwise']}; every rank saw {node_cpus} CPUs: {affinity_ok} "
        f"(control without the flag: {control_cpus}); wrote {out / 'rehearsal.json'}")
    return record
