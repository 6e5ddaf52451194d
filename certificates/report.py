"""Reports over one or more certificate directories: Markdown, self-contained HTML, PNG figures.

Statistics are descriptive float64 summaries of certified numbers (medians of theta_lo,
fractions, quantiles); the curves drawn on the θ–p_max figure are the exact closed forms
of claims C4 and C5 (statements in the proofs/ claim registry): C4 (θ = 4m(1 − m) for
m ≥ 1/2) and, below 1/2, the lower envelope (C5: proven bound max(4m(1 − m), 1 − m²), and
the exact minimum sawtooth on [1/5, 1/2], proven for L ≤ 6 and conjectured in general).
"""
from __future__ import annotations

import base64
import json
import os
import sys
import zipfile

import numpy as np

from .inputs import InputError
from .outdir import REPORT_FILES

GROUP_KEYS = ("run", "step", "layer", "head")
MISSING = (-1, "")          # what certify writes for a row whose input had no such metadata


def fmt_theta(v: float) -> str:
    """θ bound for display; never prints 1 for a value below 1."""
    if not np.isfinite(v):
        return str(v)
    s = f"{v:.6g}"
    if v < 1 and float(s) >= 1:
        return f"1 − {1.0 - v:.3g}"            # 1 − v is exact for v ≥ 1/2 (Sterbenz)
    return s


def group_name(key, v) -> str:
    return f"(no {key} metadata)" if v in MISSING or str(v) in ("-1", "") else str(v)


def _load_dir(d):
    """(cert, meta, summary) of one certificate folder; InputError (exit 2) when it is not one."""
    try:
        with open(os.path.join(d, "summary.json")) as f:
            s = json.load(f)
        with np.load(os.path.join(d, "certificates.npz"), allow_pickle=False) as z:
            c = {k: np.asarray(z[k]) for k in ("theta_lo", "theta_hi", "p_max", "regime")}
        mp = os.path.join(d, "metadata.npz")
        meta = {}
        if os.path.exists(mp):
            with np.load(mp, allow_pickle=False) as z:
                meta = {k: np.asarray(z[k]) for k in z.files}
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as exc:
        raise InputError(d, f"not a readable certificate folder ({type(exc).__name__}: {exc})") from None
    tol = s.get("tolerance") if isinstance(s, dict) else None
    if not (isinstance(tol, (int, float)) and not isinstance(tol, bool) and np.isfinite(tol) and tol >= 0):
        raise InputError(os.path.join(d, "summary.json"), "not a certify summary (no finite 'tolerance')")
    n = c["theta_lo"].shape
    if len(n) != 1 or any(a.shape != n for a in c.values()) or c["regime"].dtype.kind not in "iu" or \
            any(c[k].dtype.kind != "f" for k in ("theta_lo", "theta_hi", "p_max")):
        raise InputError(os.path.join(d, "certificates.npz"), "arrays are not the certificate format")
    if c["regime"].size and not np.isin(c["regime"], (0, 1, 2)).all():
        raise InputError(os.path.join(d, "certificates.npz"), "regime values outside 0, 1, 2")
    meta = {k: v for k, v in meta.items() if v.shape == n and v.dtype.kind in "biufU"}
    return c, meta, s


def load_dirs(dirs):
    """Concatenate certificates, metadata and summaries of several OUTDIRs."""
    certs, metas, sums = [], [], []
    for d in dirs:
        c, m, s = _load_dir(d)
        certs.append(c)
        metas.append(m)
        sums.append(s)
    cert = {k: np.concatenate([c[k] for c in certs]) for k in certs[0]}
    if cert["theta_lo"].size == 0:
        raise InputError(dirs[0], "no certified rows")
    cert["regime"] = cert["regime"].astype(np.int64)
    keys = set.intersection(*(set(m) for m in metas))
    meta = {}
    for k in keys:
        try:
            meta[k] = np.concatenate([m[k] for m in metas])
        except ValueError:
            pass
    return cert, meta, sums


def envelope(m):
    """Exact minimum of θ given p_max = m where known (C4, C5), else the proven bound."""
    m = np.asarray(m, dtype=float)
    th = np.maximum(4 * m * (1 - m), 1 - m * m)                       # C5, proven for all L
    d = np.full_like(m, np.nan)
    d = np.where((m >= 2 / 7) & (m < 1 / 3), 4 * m - 1, d)
    d = np.where((m >= 7 / 27) & (m < 2 / 7), (6 * m - 1) / 5, d)
    d = np.where((m >= 1 / 5) & (m < 7 / 27), (1 - 3 * m) / 2, d)
    saw = np.where(np.isnan(d), th, 1 - d * d)
    return np.where(m >= 1 / 3, 4 * m * (1 - m), saw)


def group_stats(cert, meta, idx):
    q = lambda a, p: float(np.quantile(a, p)) if a.size else float("nan")   # noqa: E731
    lo = cert["theta_lo"][idx]
    ent = meta["entropy"][idx] if "entropy" in meta else np.array([])
    pm = cert["p_max"][idx]
    return {"rows": int(idx.size), "median_theta_lo": q(lo, 0.5), "median_1_minus_theta_lo": q(1.0 - lo, 0.5),
            "frac_theta_lo_ge_0.99": float(np.mean(lo >= 0.99)),
            "closed_or_dominant_frac": float(np.mean(cert["regime"][idx] != 2)),
            "dominant_frac": float(np.mean(cert["regime"][idx] == 0)),
            "p_max_q10": q(pm, .1), "p_max_q50": q(pm, .5), "p_max_q90": q(pm, .9),
            "entropy_q10": q(ent, .1), "entropy_q50": q(ent, .5), "entropy_q90": q(ent, .9)}


def tables(cert, meta):
    n = cert["theta_lo"].size
    out = {"all": {"all": group_stats(cert, meta, np.arange(n))}}
    for k in GROUP_KEYS:
        if k in meta:
            vals = meta[k]
            out[k] = {group_name(k, v): group_stats(cert, meta, np.flatnonzero(vals == v)) for v in np.unique(vals)}
    return out


def _fig_scatter(cert, path):
    import matplotlib.pyplot as plt
    rng = np.random.default_rng(0)
    n = cert["p_max"].size
    idx = rng.choice(n, size=min(n, 20000), replace=False) if n > 20000 else np.arange(n)
    fig, ax = plt.subplots(figsize=(6, 4.2))
    ax.scatter(cert["p_max"][idx], cert["theta_lo"][idx], s=3, alpha=0.4, c="tab:blue", label="rows (θ_lo)")
    m = np.linspace(1e-3, 1, 2000)
    ax.plot(m[m >= .5], 4 * m[m >= .5] * (1 - m[m >= .5]), "k-", lw=1.5, label="θ = 4m(1−m), m ≥ 1/2 (C4)")
    ml = m[m < .5]
    ax.plot(ml, envelope(ml), "r-", lw=1.2, label="min θ given m (C5 envelope)")
    ax.set_xlabel("p_max"), ax.set_ylabel("θ lower bound"), ax.set_ylim(-0.02, 1.02)
    ax.legend(fontsize=7, loc="lower left")
    fig.tight_layout(), fig.savefig(path, dpi=110), plt.close(fig)


def _fig_heatmap(cert, meta, path, tol):
    if not ("layer" in meta and "step" in meta):
        return False
    import matplotlib.pyplot as plt
    layers, steps = np.unique(meta["layer"]), np.unique(meta["step"])
    H = np.full((layers.size, steps.size), np.nan)
    for a, la in enumerate(layers):
        for b, s in enumerate(steps):
            sel = (meta["layer"] == la) & (meta["step"] == s)
            if sel.any():
                H[a, b] = np.median(cert["theta_lo"][sel])
    # Medians sit within 1e-6 of 1 for diffuse rows, where a linear colour scale only shows an
    # offset; the colour is log10 of the gap 1 − median θ_lo instead (lower = closer to 1).
    # Below the tolerance the gap only says where the witness search stopped, not anything
    # about the attention: those cells share one colour and read "≤ tol".
    floor = max(tol, 1e-17)
    G = np.log10(np.clip(1.0 - H, floor, None))
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    im = ax.imshow(G, aspect="auto", origin="lower", cmap="viridis_r")
    if H.size <= 150:
        for (a, b), v in np.ndenumerate(H):
            if np.isfinite(v):
                txt = "≤tol" if 1 - v <= floor else f"{v:.4f}" if v < 0.9999 else f"1−{1 - v:.0e}"
                ax.text(b, a, txt, ha="center", va="center",
                        fontsize=6, color="white" if G[a, b] > np.nanmedian(G) else "black")
    ax.set_xticks(range(steps.size), [str(s) for s in steps], rotation=45, fontsize=7)
    ax.set_yticks(range(layers.size), [str(v) for v in layers], fontsize=6)
    ax.set_xlabel("checkpoint (step)"), ax.set_ylabel("layer")
    below = np.isfinite(H) & (1 - H <= floor)
    note = "\nevery cell ≤ tolerance: below it the gap shows where the search stopped" if below[np.isfinite(H)].all() \
        else "\ncells marked ≤tol: below the tolerance the gap shows where the search stopped"
    ax.set_title("median θ_lo by layer × checkpoint" + (note if below.any() else ""), fontsize=9)
    fig.colorbar(im, ax=ax, label=f"log10(1 − median θ_lo), floored at the tolerance {tol:g}")
    fig.tight_layout(), fig.savefig(path, dpi=110), plt.close(fig)
    return True


def _fig_concentration(cert, meta, path):
    if "step" not in meta:
        return False
    import matplotlib.pyplot as plt
    runs = np.unique(meta["run"]) if "run" in meta else [None]
    fig, ax = plt.subplots(1, 2, figsize=(8, 3.4))
    for r in runs:
        sel_r = np.ones(meta["step"].size, bool) if r is None else meta["run"] == r
        steps = np.unique(meta["step"][sel_r])
        pm = [np.median(cert["p_max"][sel_r & (meta["step"] == s)]) for s in steps]
        ax[0].plot(steps, pm, "o-", label=str(r) if r is not None else "rows")
        if "entropy" in meta:
            en = [np.median(meta["entropy"][sel_r & (meta["step"] == s)]) for s in steps]
            ax[1].plot(steps, en, "o-")
    ax[0].set_xlabel("step"), ax[0].set_ylabel("median p_max"), ax[0].legend(fontsize=7)
    ax[1].set_xlabel("step"), ax[1].set_ylabel("median entropy (nats)")
    fig.tight_layout(), fig.savefig(path, dpi=110), plt.close(fig)
    return True


COLS = ["rows", "median_theta_lo", "median_1_minus_theta_lo", "frac_theta_lo_ge_0.99", "dominant_frac",
        "closed_or_dominant_frac", "p_max_q10", "p_max_q50", "p_max_q90", "entropy_q10", "entropy_q50",
        "entropy_q90"]


def _cell(c, v):
    if c == "rows":
        return str(v)
    if c == "median_theta_lo":
        return fmt_theta(v)
    return f"{v:.3g}" if c == "median_1_minus_theta_lo" else f"{v:.6g}"


def _md_table(name, rows):
    lines = [f"| {name} | " + " | ".join(COLS) + " |", "|" + "---|" * (len(COLS) + 1)]
    for g, st in rows.items():
        lines.append(f"| {g} | " + " | ".join(_cell(c, st[c]) for c in COLS) + " |")
    return "\n".join(lines)


def write_report(dirs, reportdir, progress=True):
    """Write report.md, report.html (PNG figures embedded as base64), *.png and stats.json."""
    import matplotlib
    matplotlib.use("Agg")
    cert, meta, sums = load_dirs(dirs)
    tol = max(float(s.get("tolerance", 0.0)) for s in sums)
    if os.path.exists(reportdir) and not os.path.isdir(reportdir):
        raise InputError(reportdir, "REPORTDIR exists and is not a directory")
    try:
        os.makedirs(reportdir, exist_ok=True)
    except OSError as exc:
        raise InputError(reportdir, f"cannot create ({exc.strerror or exc})") from None
    figs = [("theta_vs_pmax.png", "θ lower bound against p_max", lambda p: _fig_scatter(cert, p) or True),
            ("heatmap_layer_step.png", "median θ_lo by layer × checkpoint",
             lambda p: _fig_heatmap(cert, meta, p, tol)),
            ("concentration.png", "concentration over checkpoints", lambda p: _fig_concentration(cert, meta, p))]
    made = []
    from tqdm import tqdm
    for name, title, fn in tqdm(figs, desc="report", disable=not progress or None, file=sys.stderr):
        p = os.path.join(reportdir, name)
        if fn(p):
            made.append((name, title))
        elif name in REPORT_FILES and os.path.isfile(p):
            os.remove(p)          # a stale figure of an earlier report: ours, so ours to remove
    tab = tables(cert, meta)
    n = cert["theta_lo"].size
    reg = np.bincount(cert["regime"], minlength=3)
    head = (f"# θ certificates\n\n{n} rows from {len(dirs)} certificate directories; "
            f"regimes: {reg[0]} dominant (exact, C4), {reg[1]} closed, {reg[2]} open. "
            f"Tolerance {tol:g}. All θ values are certified lower bounds (theta_lo); a value that would "
            f"round to 1 is shown as 1 − gap, and median_1_minus_theta_lo is the certified upper bound on the "
            f"gap 1 − θ. A row is closed when theta_hi − theta_lo ≤ max(tolerance, 2^-50); below the tolerance "
            f"the gap shows where the witness search stopped, not a property of the attention. Groups named "
            f"'(no … metadata)' are rows whose input file carried no such array.\n")
    md = [head]
    for key, rows in tab.items():
        md += [f"\n## By {key}\n", _md_table(key, rows)]
    for name, title in made:
        md.append(f"\n## {title}\n\n![{title}]({name})\n")
    with open(os.path.join(reportdir, "report.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    with open(os.path.join(reportdir, "stats.json"), "w") as f:
        json.dump(tab, f, indent=2)
    html = ["<!doctype html><html><head><meta charset='utf-8'><title>θ certificates</title>",
            "<style>body{font-family:sans-serif;max-width:70em;margin:auto}table{border-collapse:collapse;"
            "font-size:12px}td,th{border:1px solid #ccc;padding:2px 5px}</style></head><body>",
            f"<h1>θ certificates</h1><p>{head.split(chr(10), 2)[2]}</p>"]
    for key, rows in tab.items():
        html.append(f"<h2>By {key}</h2><table><tr><th>{key}</th>" + "".join(f"<th>{c}</th>" for c in COLS) + "</tr>")
        for g, st in rows.items():
            html.append(f"<tr><td>{g}</td>" + "".join(f"<td>{_cell(c, st[c])}</td>" for c in COLS) + "</tr>")
        html.append("</table>")
    for name, title in made:
        with open(os.path.join(reportdir, name), "rb") as f:
            b64 = base64.b64encode(f.read()).decode()
        html.append(f"<h2>{title}</h2><img alt='{title}' src='data:image/png;base64,{b64}'>")
    with open(os.path.join(reportdir, "report.html"), "w") as f:
        f.write("\n".join(html) + "</body></html>\n")
    return tab
