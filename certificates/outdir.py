"""Writing output folders without ever losing a file.

Everything is written to a temporary folder first; only when all of it is complete are
the files moved into place.  A new folder is renamed into place in one step.  An existing
folder is only written into with ``--overwrite``, file by file, and only names that
certify itself wrote there before (listed in that folder's summary.json) may be replaced
or removed; any other file is left untouched.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import zipfile

import numpy as np

from .inputs import InputError

FORMAT = "attention-theta-certificates/1"
# what a folder written before the "files" list existed contains (committed results)
LEGACY_FILES = ("certificates.npz", "metadata.npz", "summary.json")
# the files ``report`` writes and therefore owns (it removes stale ones among these only)
REPORT_FILES = ("report.md", "report.html", "stats.json", "theta_vs_pmax.png", "heatmap_layer_step.png",
                "concentration.png")


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


class Staging:
    """A temporary folder next to (or inside) OUTDIR; ``install`` moves its files into place."""

    def __init__(self, outdir: str, overwrite: bool, what: str = "OUTDIR"):
        self.out = os.path.abspath(outdir)
        self.created = None
        if os.path.exists(self.out) and not os.path.isdir(self.out):
            raise InputError(outdir, f"{what} exists and is not a directory")
        self.existing = os.path.isdir(self.out)
        self.prev = previous_files(self.out) if self.existing else None
        if self.existing and os.listdir(self.out) and not overwrite:
            raise InputError(outdir, f"{what} exists and is not empty; nothing changed (--overwrite replaces "
                                     "only the files certify wrote there)")
        try:
            if self.existing:
                self.tmp = tempfile.mkdtemp(prefix=".certify-tmp-", dir=self.out)
            else:
                parent = os.path.dirname(self.out)
                top = parent
                while not os.path.exists(top):
                    self.created, top = top, os.path.dirname(top)
                os.makedirs(parent, exist_ok=True)
                self.tmp = tempfile.mkdtemp(prefix="." + os.path.basename(self.out) + ".tmp-", dir=parent)
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(self.tmp, 0o777 & ~umask)    # mkdtemp makes 0700; OUTDIR gets the usual mode
        except OSError as exc:
            self._remove_created()
            raise InputError(outdir, f"cannot write here ({exc.strerror or exc})") from None

    def path(self, *parts):
        return os.path.join(self.tmp, *parts)

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
        """Move the staged files into OUTDIR; remove only stale files that certify wrote earlier."""
        names = self.written()
        if not self.existing:
            os.rename(self.tmp, self.out)
            return names
        for rel in names:
            dst = os.path.join(self.out, rel)
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            os.replace(os.path.join(self.tmp, rel), dst)
        for rel in sorted((self.prev or set()) - set(names)):
            p = os.path.join(self.out, rel)
            if os.path.isfile(p) and not os.path.islink(p):
                os.remove(p)
        shutil.rmtree(self.tmp, ignore_errors=True)
        return names

    def abort(self):
        shutil.rmtree(self.tmp, ignore_errors=True)
        self._remove_created()

    def _remove_created(self):
        if self.created and os.path.isdir(self.created):
            shutil.rmtree(self.created, ignore_errors=True)
