"""Writing output folders without ever losing a file.

Everything is written to a temporary folder first; only when all of it is complete are
the files moved into place.  A new folder is renamed into place in one step.  An existing
folder is only written into with ``--overwrite``, file by file, and only names that
certify itself wrote there before (listed in that folder's summary.json) may be replaced
or removed; any other file is left untouched.

Two runs, crashes, Ctrl-C and full disks:

* Lock.  Before any work certify takes ``flock(LOCK_EX | LOCK_NB)`` on ``.<name>.certify-lock``
  beside OUTDIR (``OUTDIR/.certify-lock`` when the parent is not writable and OUTDIR exists) and
  holds it until the install is done; a second certify into the same folder exits 2 at once.
  The lock file is unlinked on release.  Whoever gets the lock then checks that the path still
  names the file it locked (fstat against stat) and starts over otherwise, so an unlink cannot
  let two runs in.  The lock file is not content: it never makes OUTDIR "non-empty" and is never
  listed in summary.json.
* New OUTDIR: staged in ``.<name>.tmp-*`` beside it and renamed into place in one step, so a
  reader finds no folder or the complete one.
* ``--overwrite``: staged in ``OUTDIR/.certify-tmp-*``.  When that is complete, the install
  journal ``OUTDIR/.certify-install.json`` (temporary file, fsync, os.replace) names the staging
  folder, the files to move and the stale files to remove.  Then the files are moved, the stale
  ones removed, the staging folder deleted, and the journal deleted last.  A run killed before
  the journal is in place leaves the old files untouched (plus a staging folder that nothing
  reads); once the journal is in place the install is decided and is only ever rolled forward.
* How a reader sees either the old or the new folder: ``settle(OUTDIR)`` runs first, in certify
  (under its lock) and at the start of verify and report.  It finishes a journalled install
  (idempotent: files already moved are skipped) so the reader sees the new folder, and removes
  staging folders that a dead run left without a journal.  While a certify holds the lock it
  raises InputError instead, because the folder may be changing.  With nothing to do it only
  lists OUTDIR and stats the lock file.
* Ctrl-C: install and cleanup run with SIGINT held back (:func:`hold_sigint`), so an interrupt
  cannot stop them half way; an interrupt before the install leaves OUTDIR as it was.
* Full disk: :func:`open_memmap` reserves a mapped output's blocks before mapping it, so a full
  disk or a file-size limit is an OSError (exit 2) rather than a SIGBUS when a page is touched.
"""
from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import math
import os
import re
import shutil
import signal
import tempfile
import threading
import time
import zipfile

import numpy as np

from .inputs import InputError

# what a folder written before the "files" list existed contains (committed results)
LEGACY_FILES = ("certificates.npz", "metadata.npz", "summary.json")
# the files ``report`` writes and therefore owns (it removes stale ones among these only)
REPORT_FILES = ("report.md", "report.html", "stats.json", "theta_vs_pmax.png", "heatmap_layer_step.png",
                "concentration.png")
LOCK_INSIDE = ".certify-lock"              # the lock's name inside OUTDIR (parent not writable)
JOURNAL = ".certify-install.json"          # the install journal of an --overwrite run
JOURNAL_FORMAT = "certify-install/1"
STAGING_PREFIX = ".certify-tmp-"           # staging folders inside an existing OUTDIR
FULL_DISK = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)   # "cannot write more": exit 2, nothing changed
_MKDTEMP_TAIL = r"[a-z0-9_]{8}"            # the random part tempfile.mkdtemp appends


def ours(rel: str) -> bool:
    """Names certify may ever write; a summary.json listing anything else is not trusted for it."""
    return rel in LEGACY_FILES or re.fullmatch(r"certified-rows-\d+\.npy", rel) is not None or \
        rel in {"report/" + n for n in REPORT_FILES}


def write_npz(path, arrays: dict, files: dict | None = None):
    """An .npz (uncompressed, like numpy.savez) from in-memory arrays and finished .npy files.

    Names are written as given, so an array called ``file`` or ``allow_pickle`` is fine.
    """
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED, allowZip64=True) as z:
        for name, fpath in (files or {}).items():
            z.write(fpath, arcname=name + ".npy")
        for name, a in arrays.items():
            with z.open(name + ".npy", "w", force_zip64=True) as f:
                np.lib.format.write_array(f, np.asanyarray(a), allow_pickle=False)


def open_memmap(path, dtype, shape):
    """A new .npy file at path, mapped for writing, with its data blocks reserved on disk first.

    numpy's own open_memmap makes a sparse file: on a full disk (or a full tmpfs) the
    kernel then cannot give a page when it is first written and the process dies of
    SIGBUS.  posix_fallocate reserves the blocks now, so a full disk or RLIMIT_FSIZE is
    an OSError naming path.  The file is byte for byte what numpy's "w+" mode writes.
    """
    dtype, shape = np.dtype(dtype), tuple(int(n) for n in shape)
    header = {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False, "shape": shape}
    nbytes = dtype.itemsize * math.prod(shape)
    try:
        with open(path, "wb") as f:
            try:
                np.lib.format.write_array_header_1_0(f, header)
            except ValueError:              # a header over 64 KiB needs format 2.0
                np.lib.format.write_array_header_2_0(f, header)
            f.flush()
            if nbytes:
                try:
                    os.posix_fallocate(f.fileno(), f.tell(), nbytes)
                except OSError as exc:
                    if exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
                        raise
                    f.truncate(f.tell() + nbytes)   # cannot reserve here: a sparse file, as numpy makes
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror, path) from None
    return np.lib.format.open_memmap(path, mode="r+")


def previous_files(outdir: str):
    """Files (relative paths) that an earlier certify wrote in outdir, or None if it did not."""
    try:
        with open(os.path.join(outdir, "summary.json")) as f:
            s = json.load(f)
    except (OSError, ValueError):
        return None
    if not isinstance(s, dict) or not str(s.get("format", "")).startswith("attention-theta-certificates/"):
        return None
    files = s.get("files")
    if isinstance(files, list):
        return {x for x in files if isinstance(x, str) and ours(x)}
    return set(LEGACY_FILES) | {"report/" + n for n in REPORT_FILES}


# ---------------------------------------------------------------- Ctrl-C
@contextlib.contextmanager
def hold_sigint():
    """Hold Ctrl-C back while a step runs that must not stop half way (install, cleanup).

    Yields a list that gets an entry for each Ctrl-C meanwhile; the caller decides whether
    to raise KeyboardInterrupt afterwards.  Only the main thread may set signal handlers,
    and a handler not set from Python cannot be put back: then this holds nothing back.
    """
    got = []
    old = signal.getsignal(signal.SIGINT) if threading.current_thread() is threading.main_thread() else None
    if old is None:
        yield got
        return
    signal.signal(signal.SIGINT, lambda *_: got.append(1))
    try:
        yield got
    finally:
        signal.signal(signal.SIGINT, old)


def checkpoint(interrupted) -> None:
    """Raise the Ctrl-C that :func:`hold_sigint` held back while a kernel ran.

    The certify and verify kernels run one chunk at a time with SIGINT held: numba compiles
    a kernel on its first call, and a KeyboardInterrupt raised inside LLVM's ctypes callbacks
    is swallowed ("Exception ignored …") and can end the process by SIGINT instead of exit 130.
    A chunk is at most 2^20 entries, so the interrupt waits a fraction of a second (or one
    compilation).
    """
    if interrupted:
        raise KeyboardInterrupt


# ---------------------------------------------------------------- the lock
def _writable(folder: str) -> bool:
    return os.access(folder, os.W_OK)


def _lock_places(outdir: str):
    """(beside, inside): the two places certify's lock for outdir can be."""
    out = os.path.realpath(outdir)      # the same lock whichever path or link names the folder
    parent, name = os.path.split(out)
    return os.path.join(parent, "." + name + ".certify-lock"), os.path.join(out, LOCK_INSIDE)


def lock_path(outdir: str) -> str:
    """The lock file certify uses for outdir: beside it, or inside it when only that is writable."""
    beside, inside = _lock_places(outdir)
    if os.path.isdir(os.path.dirname(beside)) and not _writable(os.path.dirname(beside)) and \
            os.path.isdir(os.path.dirname(inside)):
        return inside
    return beside


def _busy(outdir, path):
    return InputError(outdir, f"another certify is writing {outdir} (lock file {path}); nothing changed, "
                              "try again when it has finished")


def _flock(fd, how) -> bool:
    """flock without waiting; a few short retries ride out a reader's momentary check (settle)."""
    for attempt in range(5):
        try:
            fcntl.flock(fd, how | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if attempt < 4:
                time.sleep(0.02)
    return False


class Lock:
    """certify's exclusive lock on one OUTDIR (see the module docstring)."""

    def __init__(self, outdir: str):
        self.outdir, self.path, self.fd = outdir, lock_path(outdir), None

    def acquire(self):
        """Take the lock or raise InputError (held by another run); OSError if it cannot be made."""
        for _ in range(100):
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            try:
                if not _flock(fd, fcntl.LOCK_EX):
                    raise _busy(self.outdir, self.path)
                try:
                    same = os.path.samestat(os.fstat(fd), os.stat(self.path))
                except FileNotFoundError:
                    same = False
            except BaseException:
                os.close(fd)
                raise
            if same:
                self.fd = fd
                return self
            os.close(fd)   # its holder unlinked it as we waited: what we hold locks nothing now
        raise _busy(self.outdir, self.path)

    def release(self):
        if self.fd is None:
            return
        try:
            os.unlink(self.path)       # still held: a run waiting on this inode sees it go and retries
        except OSError:
            pass                       # a leftover lock file is harmless: the next run reuses it
        finally:
            os.close(self.fd)
            self.fd = None


def _held(path: str) -> bool:
    """True if a running certify holds the lock file at path (no file: nobody does)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        return False
    finally:
        os.close(fd)                   # closing drops the shared lock at once


# ---------------------------------------------------------------- journal, settle
def _fsync_dir(folder: str):
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass                           # some file systems cannot sync a folder; the rename stands
    finally:
        os.close(fd)


def _safe_rel(rel) -> bool:
    return isinstance(rel, str) and rel != "" and not os.path.isabs(rel) and \
        os.path.normpath(rel) == rel and ".." not in rel.split(os.sep)


def _write_journal(out: str, journal: dict):
    tmp = os.path.join(out, JOURNAL + ".tmp")
    with open(tmp, "w") as f:
        json.dump(journal, f, indent=1)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, os.path.join(out, JOURNAL))   # the moment the install is decided
    _fsync_dir(out)


def _read_journal(out: str):
    path = os.path.join(out, JOURNAL)
    try:
        with open(path) as f:
            j = json.load(f)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise InputError(path, f"cannot read the install journal ({exc}); nothing changed") from None
    ok = isinstance(j, dict) and j.get("format") == JOURNAL_FORMAT and isinstance(j.get("staging"), str) and \
        re.fullmatch(re.escape(STAGING_PREFIX) + _MKDTEMP_TAIL, j["staging"]) is not None and \
        isinstance(j.get("move"), list) and all(_safe_rel(r) for r in j["move"]) and \
        isinstance(j.get("remove"), list) and all(isinstance(r, str) and ours(r) for r in j["remove"])
    if not ok:
        raise InputError(path, "is not a certify install journal; nothing changed (move it away)")
    return j


def _roll_forward(out: str, j: dict):
    """Carry out a journalled install; safe to repeat after a crash at any point of it."""
    tmp = os.path.join(out, j["staging"])
    touched = {out}
    for rel in j["move"]:
        src, dst = os.path.join(tmp, rel), os.path.join(out, rel)
        if os.path.lexists(src):       # not moved yet (a repeat skips those that were)
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            os.replace(src, dst)
            touched.add(os.path.dirname(dst))
    for rel in j["remove"]:
        p = os.path.join(out, rel)
        if os.path.isfile(p) and not os.path.islink(p):
            os.remove(p)
    shutil.rmtree(tmp, ignore_errors=True)
    for d in sorted(touched):
        _fsync_dir(d)                  # the moves are on disk before the journal goes
    os.remove(os.path.join(out, JOURNAL))
    _fsync_dir(out)


def _leftovers(folder: str, prefix: str):
    """Staging folders named prefix + mkdtemp's tail in folder (dead runs' ones, under the lock)."""
    pat = re.compile(re.escape(prefix) + _MKDTEMP_TAIL)
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    return [os.path.join(folder, n) for n in names if pat.fullmatch(n)
            and os.path.isdir(os.path.join(folder, n)) and not os.path.islink(os.path.join(folder, n))]


def _finish(out: str):
    """With the lock held: finish a journalled install, remove what dead runs left."""
    if os.path.isdir(out):
        j = _read_journal(out)
        if j is not None:
            _roll_forward(out, j)
        if os.path.lexists(os.path.join(out, JOURNAL + ".tmp")):     # died while writing the journal
            os.remove(os.path.join(out, JOURNAL + ".tmp"))
        for d in _leftovers(out, STAGING_PREFIX):
            shutil.rmtree(d, ignore_errors=True)
    parent, name = os.path.split(out)
    for d in _leftovers(parent, "." + name + ".tmp-"):          # a new OUTDIR's staging
        shutil.rmtree(d, ignore_errors=True)


def settle(outdir: str) -> None:
    """Call before reading a certificate folder: afterwards it is the old or the new one, whole.

    Finishes an install that a killed certify left journalled (roll forward) and removes
    staging folders that dead runs left.  Raises InputError (one line) while a certify
    holds the folder's lock.  With nothing to do it only lists the folder and checks
    whether a lock file exists; it writes nothing then.
    """
    out = os.path.abspath(outdir)
    try:
        names = set(os.listdir(out))
    except OSError:
        names = set()                  # no folder (yet): only a running certify matters
    for path in _lock_places(outdir):
        if _held(path):
            raise _busy(outdir, path)
    pat = re.compile(re.escape(STAGING_PREFIX) + _MKDTEMP_TAIL)
    if JOURNAL not in names and JOURNAL + ".tmp" not in names and not any(pat.fullmatch(n) for n in names):
        return
    try:
        lock = Lock(outdir).acquire()
    except OSError as exc:
        if JOURNAL in names:
            raise InputError(os.path.join(out, JOURNAL), f"an install that was cut short cannot be finished "
                             f"here ({exc.strerror or exc}); run certify on {outdir} again") from None
        return                         # only leftovers, which no reader looks at
    try:
        with hold_sigint():
            _finish(out)
    finally:
        lock.release()


# ---------------------------------------------------------------- staging
class Staging:
    """A temporary folder next to (or inside) OUTDIR; ``install`` moves its files into place.

    Holds certify's lock on OUTDIR from construction until install or abort.
    """

    def __init__(self, outdir: str, overwrite: bool, what: str = "OUTDIR"):
        self.out = os.path.abspath(outdir)
        self.created = self.tmp = self.lock = None
        self.existing, self.prev, self.committed = False, None, False
        if os.path.exists(self.out) and not os.path.isdir(self.out):
            raise InputError(outdir, f"{what} exists and is not a directory")
        with hold_sigint() as interrupted:      # lock and temp folder exist together or not at all
            try:
                self._open(outdir, overwrite, what)
                if interrupted:
                    raise KeyboardInterrupt
            except BaseException:
                self._undo()
                raise

    def _open(self, outdir, overwrite, what):
        parent = os.path.dirname(self.out)
        try:
            top = parent
            while not os.path.exists(top):
                self.created, top = top, os.path.dirname(top)
            os.makedirs(parent, exist_ok=True)          # the lock lives beside OUTDIR
            self.lock = Lock(outdir).acquire()
        except OSError as exc:
            raise InputError(outdir, f"cannot write here ({exc.strerror or exc})") from None
        _finish(self.out)             # a dead run's install is finished before we look at OUTDIR
        self.existing = os.path.isdir(self.out)
        self.prev = previous_files(self.out) if self.existing else None
        if self.existing and [n for n in os.listdir(self.out) if n != LOCK_INSIDE] and not overwrite:
            raise InputError(outdir, f"{what} exists and is not empty; nothing changed (--overwrite replaces "
                                     "only the files certify wrote there)")
        try:
            if self.existing:
                self.tmp = tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=self.out)
            else:
                self.tmp = tempfile.mkdtemp(prefix="." + os.path.basename(self.out) + ".tmp-", dir=parent)
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(self.tmp, 0o777 & ~umask)    # mkdtemp makes 0700; OUTDIR gets the usual mode
        except OSError as exc:
            raise InputError(outdir, f"cannot write here ({exc.strerror or exc})") from None

    def path(self, *parts):
        return os.path.join(self.tmp, *parts)

    def open_memmap(self, path, mode, dtype, shape):
        """numpy.lib.format.open_memmap's signature ("w+" only), with the disk space reserved first."""
        if mode != "w+":
            raise ValueError(f"Staging.open_memmap makes new files only, not mode {mode!r}")
        return open_memmap(path, dtype, shape)

    def written(self):
        out = []
        for root, _, names in os.walk(self.tmp):
            out += [os.path.relpath(os.path.join(root, n), self.tmp) for n in names]
        return sorted(out)

    def check_owned(self, names):
        """Refuse (exit 2, nothing changed) to replace a file in OUTDIR that certify did not write."""
        if not self.existing:
            return
        owned = self.prev or set()
        for rel in names:
            if os.path.lexists(os.path.join(self.out, rel)) and rel not in owned:
                raise InputError(os.path.join(self.out, rel), "exists and was not written by certify; "
                                 "refusing to replace it (move it away first)")

    def install(self):
        """Move the staged files into OUTDIR; remove only stale files that certify wrote earlier.

        Ctrl-C is held back meanwhile: the install finishes, and the run counts as done.
        """
        names = self.written()
        with hold_sigint():
            if not self.existing:
                os.rename(self.tmp, self.out)           # one step: no folder, or the whole one
                self.committed = True
                self._undo()
                return names
            journal = {"format": JOURNAL_FORMAT, "staging": os.path.basename(self.tmp), "move": names,
                       "remove": sorted((self.prev or set()) - set(names))}
            _write_journal(self.out, journal)
            self.committed = True
            try:
                _roll_forward(self.out, journal)
            except OSError as exc:
                where = f"{exc.filename}: " if exc.filename else ""
                raise InputError(self.out, f"the install stopped half way ({where}{exc.strerror or exc}); "
                                           f"certify or verify on it finishes it") from None
            finally:
                self._undo()
        return names

    def abort(self):
        """Remove what this run staged (unless its install was already decided) and let go of OUTDIR."""
        with hold_sigint():
            self._undo()

    def _undo(self):
        if self.lock is not None:          # the staged files exist only while we hold the lock
            if not self.committed:
                if self.tmp:
                    shutil.rmtree(self.tmp, ignore_errors=True)
                if self.existing:
                    with contextlib.suppress(OSError):
                        os.remove(os.path.join(self.out, JOURNAL + ".tmp"))
            self.lock.release()
            self.lock = None
        if not self.committed:
            self._remove_created()

    def _remove_created(self):
        """Remove the folders made to hold OUTDIR, as far as they are empty (another run may use them)."""
        if not self.created:
            return
        d = os.path.dirname(self.out)
        while True:
            try:
                os.rmdir(d)
            except OSError:
                return
            if d == self.created:
                return
            d = os.path.dirname(d)
