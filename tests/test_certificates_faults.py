"""certify under faults: Ctrl-C, kill -9 during the install, two runs at once, a full disk.

Every case ends with OUTDIR either exactly as before or (after outdir.settle / the next
certify) exactly what a clean run writes; never a mix, never a leftover temp folder.
The subprocess tests run ``python -m certificates`` on small inputs (L = 64 float32 rows).
"""
import fcntl
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import time
import zipfile

import numpy as np
import pytest

from certificates import outdir
from certificates.__main__ import main
from certificates.certify_files import run_certify
from certificates.inputs import InputError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
L = 64


def _rows(n, seed=0):
    """n rows of length L that sum to 1 (normalised in float64, stored as float32)."""
    r = np.random.default_rng(seed).random((n, L))
    return (r / r.sum(1, keepdims=True)).astype(np.float32)


def _save(path, n, seed=0):
    np.save(path, _rows(n, seed))
    return str(path)


def _listing(d):
    """relative path → bytes of every file under d (hidden ones included)."""
    out = {}
    for root, _, files in os.walk(d):
        for f in files:
            p = os.path.join(root, f)
            with open(p, "rb") as fh:
                out[os.path.relpath(p, d)] = fh.read()
    return out


def _env():
    return {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}


def _cli(*args, **kw):
    """python -m certificates ARGS in a subprocess; returns the CompletedProcess."""
    return subprocess.run([sys.executable, "-m", "certificates", *map(str, args)], cwd=ROOT, env=_env(),
                          capture_output=True, text=True, timeout=120, **kw)


def _popen(*args):
    return subprocess.Popen([sys.executable, "-m", "certificates", *map(str, args)], cwd=ROOT, env=_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _one_line(err):
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


def _certify_here(*args):
    return main(["certify", *map(str, args), "--no-progress"])


def _main(argv):
    """main(argv), with a KeyboardInterrupt that escapes it turned into a plain test failure."""
    try:
        return main(argv)
    except KeyboardInterrupt:
        return "KeyboardInterrupt escaped main"


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    """An input that takes certify a few seconds (so Ctrl-C lands while it works)."""
    return _save(tmp_path_factory.mktemp("big") / "big.npy", 150_000, seed=5)


# ---------------------------------------------------------------- 1. Ctrl-C
def _interrupt_when(proc, folder, prefix):
    """Send SIGINT while certify works through its rows: once its temp folder (a name in
    ``folder`` starting with ``prefix``) holds the per-row output arrays, which certify
    creates just before its loop over the rows, and before it writes certificates.npz.
    Waiting a fixed time after the folder appeared instead raced the end of that loop on
    a fast machine (the 150,000 rows take about 0.3 s there, and 0.3 s was the wait)."""
    t0 = time.monotonic()
    while True:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() - t0 < 60, "certify never started its loop over the rows"
        tmp = [n for n in os.listdir(folder) if n.startswith(prefix)]
        try:
            inside = os.listdir(os.path.join(folder, tmp[0])) if tmp else []
        except FileNotFoundError:
            inside = []
        if "witness.npy" in inside:
            assert "certificates.npz" not in inside, "certify was past its loop when first seen"
            break
        time.sleep(0.002)
    time.sleep(0.02)                           # into the loop (it takes a few tenths of a second)
    if proc.poll() is None:                    # (else it finished first: the caller's _interrupted retries)
        proc.send_signal(signal.SIGINT)
    return proc.communicate(timeout=60)


def _interrupted(start, folder, prefix, reset, tries=3):
    """(stdout, stderr, proc) of a certify run (start() makes the process) interrupted inside
    its loop.  A run that ends with exit 0 was not interrupted: the scheduler let it finish
    its loop before the signal landed (seen once on a loaded 2-core machine), a race of the
    test, not of certify; reset() puts the folders back and it is tried again."""
    for _ in range(tries):
        p = start()
        out, err = _interrupt_when(p, folder, prefix)
        if p.returncode != 0:
            return out, err, p
        reset()
    pytest.fail(f"certify finished its loop before the interrupt in {tries} runs")


def test_ctrl_c_into_a_new_folder_leaves_nothing(tmp_path, big):
    out = tmp_path / "out"
    stdout, err, p = _interrupted(lambda: _popen("certify", big, "-o", out, "--no-progress"), tmp_path,
                                  ".out.tmp-", lambda: shutil.rmtree(out))
    assert p.returncode == 130, err
    assert "interrupted" in _one_line(err) and "Traceback" not in err
    assert stdout == ""
    assert os.listdir(tmp_path) == []          # no OUTDIR, no temp folder, no lock file


def test_ctrl_c_during_overwrite_leaves_the_folder_byte_identical(tmp_path, big):
    out = tmp_path / "out"
    small = _save(tmp_path / "small.npy", 3000)
    state = {}

    def fresh():                               # the folder the overwrite starts from
        shutil.rmtree(out, ignore_errors=True)
        assert _certify_here(small, "-o", out) == 0
        (out / "notes.txt").write_text("mine")
        state["before"], state["parent"] = _listing(out), sorted(os.listdir(tmp_path))

    fresh()
    _, err, p = _interrupted(lambda: _popen("certify", big, "-o", out, "--overwrite", "--no-progress"), out,
                             ".certify-tmp-", fresh)
    before, parent = state["before"], state["parent"]
    assert p.returncode == 130, err
    assert "interrupted" in _one_line(err)
    assert _listing(out) == before
    assert sorted(os.listdir(tmp_path)) == parent


def test_ctrl_c_in_verify_and_report_is_exit_130(tmp_path, monkeypatch, capsys):
    import certificates.report
    import certificates.verify

    def interrupt(*a, **k):
        raise KeyboardInterrupt
    monkeypatch.setattr(certificates.verify, "run_verify", interrupt)
    monkeypatch.setattr(certificates.report, "write_report", interrupt)
    assert _main(["verify", str(tmp_path), "--no-progress"]) == 130
    assert "interrupted" in _one_line(capsys.readouterr().err)
    assert _main(["report", str(tmp_path), "-o", str(tmp_path / "r"), "--no-progress"]) == 130
    assert "interrupted" in _one_line(capsys.readouterr().err)
    assert not (tmp_path / "r").exists()


def test_ctrl_c_inside_probes_certify_ends_the_whole_probe(tmp_path, monkeypatch, capsys):
    """probe runs certify in-process; a Ctrl-C there is the probe's Ctrl-C (130, probe's cleanup)."""
    transformers = pytest.importorskip("transformers")
    torch = pytest.importorskip("torch")
    import certificates.certify_files
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(n_embd=16, n_layer=1, n_head=2, n_positions=16, vocab_size=32,
                                  bos_token_id=0, eos_token_id=1, pad_token_id=2)
    transformers.utils.logging.disable_progress_bar()
    transformers.AutoModel.from_config(cfg).save_pretrained(tmp_path / "model")
    np.save(tmp_path / "ids.npy", np.random.default_rng(0).integers(0, 32, size=(2, 8)))
    capsys.readouterr()

    def interrupt(*a, **k):
        raise KeyboardInterrupt
    monkeypatch.setattr(certificates.certify_files, "_certify_into", interrupt)
    out = tmp_path / "new" / "probe"
    rc = _main(["probe", str(tmp_path / "model"), "--input-ids", str(tmp_path / "ids.npy"), "-o", str(out),
               "--no-bounds", "--no-progress"])
    line = _one_line(capsys.readouterr().err)
    assert rc == 130 and "interrupted" in line and "refused" not in line
    assert not (tmp_path / "new").exists()     # OUT and the folder made for it are gone


# ---------------------------------------------------------------- 2. kill -9 during the install
# Runs certify in forked children, each SIGKILLed just before its k-th step on OUTDIR (a
# rename, replace or remove there, the staging folder's own files not counted), k = 0, 1, …
# until one run completes.  Prints "k exit-code" per trial.
KILL_DRIVER = r"""
import os, shutil, signal, sys, traceback
from certificates.certify_files import run_certify
mode, inp, old, trials = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
real = {name: getattr(os, name) for name in ("replace", "rename", "remove")}
at = {"out": None, "k": -1, "n": 0}

def counted(name):
    def step(path, *rest, **kw):
        target = os.path.abspath(rest[0] if rest else path)
        out = at["out"]
        if out and (target == out or target.startswith(out + os.sep)) and \
                not os.path.relpath(target, out).startswith(".certify-tmp-"):
            if at["n"] == at["k"]:
                os.kill(os.getpid(), signal.SIGKILL)
            at["n"] += 1
        return real[name](path, *rest, **kw)
    return step

for name in real:
    setattr(os, name, counted(name))
for k, out in enumerate(trials):
    if mode == "overwrite":
        shutil.copytree(old, out)
    else:
        os.makedirs(os.path.dirname(out))
    pid = os.fork()
    if pid == 0:
        at.update(out=os.path.abspath(out), k=k)
        code = 0
        try:
            run_certify([inp], out, overwrite=mode == "overwrite", progress=False, report=False)
        except BaseException:
            traceback.print_exc()
            code = 3
        os._exit(code)
    rc = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    print(k, rc, flush=True)
    if rc != -signal.SIGKILL:
        break
"""


def _drive_kills(mode, inp, old, trials):
    r = subprocess.run([sys.executable, "-c", KILL_DRIVER, mode, inp, str(old), *map(str, trials)], cwd=ROOT,
                       env=_env(), capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    codes = [int(line.split()[1]) for line in r.stdout.splitlines()]
    assert codes[-1] == 0 and all(c == -signal.SIGKILL for c in codes[:-1]), r.stdout + r.stderr
    return len(codes) - 1                      # trials that were killed


def _npz_members(path):
    with zipfile.ZipFile(path) as z:
        return {n: z.read(n) for n in z.namelist()}


def _summary(path):
    with open(path) as f:
        s = json.load(f)
    return {k: v for k, v in s.items() if k not in ("seconds", "argv")}


def _is_new(out, ref, foreign):
    """out holds what a clean certify writes (compared with ref) plus the foreign files, nothing else."""
    names = set(_listing(out))
    if names != set(_listing(ref)) | set(foreign):
        return False
    return all(_npz_members(os.path.join(out, n)) == _npz_members(os.path.join(ref, n))
               for n in ("certificates.npz", "metadata.npz")) and \
        _summary(os.path.join(out, "summary.json")) == _summary(os.path.join(ref, "summary.json")) and \
        all(open(os.path.join(out, n), "rb").read() == b for n, b in foreign.items())


def test_kill_9_at_every_step_of_an_overwrite_install(tmp_path):
    rows = _save(tmp_path / "rows.npy", 3000, seed=1)
    np.savez(tmp_path / "logits.npz", logits=np.random.default_rng(2).normal(size=(50, L)))
    old = tmp_path / "old" / "out"             # every folder is two levels down: same relative input paths
    run_certify([_save(tmp_path / "rows-old.npy", 2000, seed=3), str(tmp_path / "logits.npz")], str(old),
                progress=False)                # with report/ and certified-rows-1.npy, both stale later
    foreign = {"notes.txt": b"mine"}
    (old / "notes.txt").write_bytes(foreign["notes.txt"])
    ref = tmp_path / "ref" / "out"
    run_certify([rows], str(ref), progress=False, report=False)
    before = _listing(old)
    trials = [tmp_path / f"t{k}" / "out" for k in range(40)]
    killed = _drive_kills("overwrite", rows, old, trials)
    assert killed >= 1 + 3                     # the journal, then at least the three moves
    for k in range(killed):
        out = trials[k]
        journal = (out / ".certify-install.json").exists()
        assert journal == (k >= 1), k          # the journal is the first step
        if k == 2:                             # the next certify finishes the install, then runs
            run_certify([rows], str(out), progress=False, report=False, overwrite=True)
        else:
            outdir.settle(str(out))            # what verify and report do first
        if k == 0:
            assert _listing(out) == before, k
        else:
            assert _is_new(out, ref, foreign), k
        assert not [n for n in os.listdir(out) if n.startswith(".")], k
        assert os.listdir(out.parent) == ["out"], k        # the dead run's lock file went too


def test_kill_9_before_a_new_folder_is_renamed_into_place(tmp_path):
    rows = _save(tmp_path / "rows.npy", 2000)
    out = tmp_path / "t0" / "out"
    assert _drive_kills("new", rows, "-", [out, tmp_path / "t1" / "out"]) == 1
    assert not out.exists()                    # killed before the one rename: no folder at all
    assert any(n.startswith(".out.tmp-") for n in os.listdir(out.parent))
    assert _certify_here(rows, "-o", out) == 0     # the next certify clears the dead run's leftovers
    assert sorted(os.listdir(out.parent)) == ["out"]


# ---------------------------------------------------------------- 3. two certify runs at once
def _hold(path):
    fd = os.open(path, os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return fd


def test_certify_refuses_while_another_holds_the_lock(tmp_path, capsys):
    rows = _save(tmp_path / "rows.npy", 2000)
    out = tmp_path / "out"
    assert _certify_here(rows, "-o", out) == 0
    before = _listing(out)
    lock, lock_new = tmp_path / ".out.certify-lock", tmp_path / ".new.certify-lock"
    fds = [_hold(lock), _hold(lock_new)]
    try:
        assert _certify_here(rows, "-o", out, "--overwrite") == 2
        line = _one_line(capsys.readouterr().err)
        assert "another certify is writing" in line and str(lock) in line
        assert _listing(out) == before
        assert _certify_here(rows, "-o", tmp_path / "new") == 2       # a new folder: not created
        assert "another certify is writing" in _one_line(capsys.readouterr().err)
        with pytest.raises(InputError, match="another certify is writing"):
            outdir.settle(str(out))                # a reader is refused too while certify writes
    finally:
        for fd in fds:
            os.close(fd)
    os.remove(lock_new)
    assert sorted(os.listdir(tmp_path)) == [".out.certify-lock", "out", "rows.npy"]
    assert _certify_here(rows, "-o", out, "--overwrite") == 0
    assert sorted(os.listdir(tmp_path)) == ["out", "rows.npy"]       # the lock file goes on release


def test_lock_inside_outdir_when_the_parent_is_read_only(tmp_path, monkeypatch, capsys):
    rows = _save(tmp_path / "rows.npy", 2000)
    out = tmp_path / "out"
    out.mkdir()
    monkeypatch.setattr(outdir, "_writable", lambda folder: os.path.realpath(folder) != str(tmp_path))
    (out / ".certify-lock").write_bytes(b"")      # a dead run's lock file is not content
    assert _certify_here(rows, "-o", out) == 0
    files = json.loads((out / "summary.json").read_text())["files"]
    assert ".certify-lock" not in files and not (out / ".certify-lock").exists()
    before = _listing(out)
    fd = _hold(out / ".certify-lock")
    try:
        assert _certify_here(rows, "-o", out, "--overwrite") == 2
        assert "another certify is writing" in _one_line(capsys.readouterr().err)
    finally:
        os.close(fd)
    assert {k: v for k, v in _listing(out).items() if k != ".certify-lock"} == before


def test_two_certify_runs_at_once_one_wins(tmp_path):
    out = tmp_path / "out"
    a, b = _save(tmp_path / "a.npy", 4000, seed=1), _save(tmp_path / "b.npy", 4000, seed=2)
    assert _certify_here(a, "-o", out) == 0
    procs = [_popen("certify", x, "-o", out, "--overwrite", "--no-progress") for x in (a, b)]
    results = [(p.wait(timeout=120), p.communicate()[1]) for p in procs]
    assert sorted(rc for rc, _ in results) == [0, 2], results
    loser = [err for rc, err in results if rc == 2][0]
    assert "another certify is writing" in _one_line(loser)
    winner = [x for x, (rc, _) in zip((a, b), results) if rc == 0][0]
    inputs = json.loads((out / "summary.json").read_text())["inputs"]
    assert [os.path.basename(i["path"]) for i in inputs] == [os.path.basename(winner)]
    v = _cli("verify", out, "--no-progress")
    assert v.returncode == 0, v.stdout + v.stderr
    assert sorted(os.listdir(tmp_path)) == ["a.npy", "b.npy", "out"]


# ---------------------------------------------------------------- 4. full disk, file-size limit
def test_file_size_limit_is_exit_2_and_leaves_nothing(tmp_path):
    rows = _save(tmp_path / "rows.npy", 8000)      # certificates.npz alone is ~450 KiB
    (tmp_path / "o").mkdir()
    out = tmp_path / "o" / "out"

    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (256 << 10, 256 << 10))
    r = _cli("certify", rows, "-o", out, "--no-progress", preexec_fn=limit)
    assert r.returncode == 2, (r.returncode, r.stderr)
    line = _one_line(r.stderr)
    assert str(out) in line and "File too large" in line
    assert os.listdir(tmp_path / "o") == []


def test_full_disk_is_exit_2_and_leaves_nothing(tmp_path):
    rows = _save(tmp_path / "rows.npy", 60_000)    # ~4 MB of mapped outputs on a 2 MiB tmpfs
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    m = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mnt)], capture_output=True,
                       text=True)
    if m.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {m.stderr.strip() or m.returncode}")
    try:
        out = mnt / "out"
        r = _cli("certify", rows, "-o", out, "--no-progress")
        assert r.returncode == 2, (r.returncode, r.stderr)
        line = _one_line(r.stderr)
        assert str(out) in line and "No space left on device" in line
        assert os.listdir(mnt) == []
    finally:
        subprocess.run(["umount", str(mnt)], check=False)


def test_open_memmap_writes_what_numpy_writes(tmp_path):
    a = outdir.open_memmap(tmp_path / "a.npy", np.float64, (5, 3))
    b = np.lib.format.open_memmap(tmp_path / "b.npy", "w+", np.float64, (5, 3))
    for m in (a, b):
        m[:] = np.arange(15.0).reshape(5, 3)
        m.flush()
    del a, b
    assert (tmp_path / "a.npy").read_bytes() == (tmp_path / "b.npy").read_bytes()


def test_settle_with_nothing_to_do_writes_nothing(tmp_path):
    rows = _save(tmp_path / "rows.npy", 500)
    out = tmp_path / "out"
    assert _certify_here(rows, "-o", out) == 0
    before = sorted(os.listdir(tmp_path)), _listing(out)
    outdir.settle(str(out))
    outdir.settle(str(tmp_path / "missing"))
    assert (sorted(os.listdir(tmp_path)), _listing(out)) == before
