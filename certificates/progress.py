"""Progress with rows/s: a tqdm bar on a terminal, plain lines when stderr is piped.

Piped output gets one line every ``every`` seconds and a last line at the end, so a long
run in a log file or CI shows that it is alive and how fast it goes.  Timing is only
displayed; no verdict depends on it.
"""
from __future__ import annotations

import sys
import time


class Progress:
    def __init__(self, total: int, desc: str, enabled: bool = True, every: float = 10.0, file=None):
        self.total, self.desc, self.every = int(total), desc, every
        self.file = file or sys.stderr
        self.done, self.t0 = 0, time.monotonic()
        self.last = self.t0
        self.enabled = enabled
        self.bar = None
        if enabled and getattr(self.file, "isatty", lambda: False)():
            from tqdm import tqdm
            self.bar = tqdm(total=self.total, unit="row", desc=desc, file=self.file, unit_scale=True)

    def _line(self, final=False):
        dt = max(time.monotonic() - self.t0, 1e-9)
        pct = 100.0 * self.done / self.total if self.total else 100.0
        word = "done" if final else "rows"
        print(f"{self.desc}: {word} {self.done}/{self.total} ({pct:.1f}%), {self.done / dt:,.0f} rows/s, "
              f"{dt:.1f} s", file=self.file, flush=True)

    def update(self, k: int):
        self.done += int(k)
        if not self.enabled:
            return
        if self.bar is not None:
            self.bar.update(k)
            return
        now = time.monotonic()
        if now - self.last >= self.every:
            self.last = now
            self._line()

    def close(self):
        if not self.enabled:
            return
        if self.bar is not None:
            self.bar.close()
        elif time.monotonic() - self.t0 >= 1.0:   # short runs stay quiet when piped
            self._line(final=True)
