"""Reports over one or more certificate directories: Markdown, self-contained HTML, PNG figures.

Statistics are descriptive float64 summaries of certified numbers (medians of theta_lo,
fractions, quantiles); the curves drawn on the θ–p_max figure are the exact closed forms
of shared/MATH.md: C4 (θ = 4m(1 − m) for m ≥ 1/2) and, below 1/2, the lower envelope
(C5: proven bound max(4m(1 − m), 1 − m²), and the exact minimum sawtooth on [1/5, 1/2],
proven for L ≤ 6 and conjectured in general).
"""
from __future__ import annotations

import base64
import json
import os
import sys

import numpy as np

GROUP_KEYS = ("run", "step", "layer", "head")


def load_dirs(dirs):
    """Concatenate certificates, metadata and summaries of several OUTDIRs."""
    certs, metas, sums = [], [], []
    for d in dirs:
        with np.load(os.path.join(d, "certificates.npz")) as z:
            certs.append({k: z[k] for k in ("theta_lo", "theta_hi", "p_max", "regime")})
        mp = os.path.join(d, "metadata.npz")
        metas.append(dict(np.load(mp)) if os.path.exists(mp) else {})
        with open(os.path.join(d, "summary.json")) as f:
            sums.append(json.load(f))
    cert = {k: np.concatenate([c[k] for c in certs]) for k in certs[0]}
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
    return {"rows": int(idx.size), "median_theta_lo": q(lo, 0.5), "frac_theta_lo_ge_0.99": float(np.mean(lo >= 0.99)),
            "dominant_frac": float(np.mean(cert["regime"][idx] == 0)),
            "p_max_q10": q(pm, .1), "p_max_q50": q(pm, .5), "p_max_q90": q(pm, .9),
            "entropy_q10": q(ent, .1), "entropy_q50": q(ent, .5), "entropy_q90": q(ent, .9)}


def tables(cert, meta):
    n = cert["theta_lo"].size
    out = {"all": {"all": group_stats(cert, meta, np.arange(n))}}
    for k in GROUP_KEYS:
        if k in meta:
            vals = meta[k]
            out[k] = {str(v): group_stats(cert, meta, np.flatnonzero(vals == v)) for v in np.unique(vals)}
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


def _fig_heatmap(cert, meta, path):
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
    G = np.log10(np.clip(1.0 - H, 1e-17, None))
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    im = ax.imshow(G, aspect="auto", origin="lower", cmap="viridis_r")
    if H.size <= 150:
        for (a, b), v in np.ndenumerate(H):
            if np.isfinite(v):
                ax.text(b, a, f"{v:.4f}" if v < 0.9999 else f"1−{1 - v:.0e}", ha="center", va="center",
                        fontsize=6, color="white" if G[a, b] > np.nanmedian(G) else "black")
    ax.set_xticks(range(steps.size), [str(s) for s in steps], rotation=45, fontsize=7)
    ax.set_yticks(range(layers.size), [str(v) for v in layers], fontsize=6)
    ax.set_xlabel("checkpoint (step)"), ax.set_ylabel("layer")
    ax.set_title("median θ_lo by layer × checkpoint")
    fig.colorbar(im, ax=ax, label="log10(1 − median θ_lo)")
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


def _md_table(name, rows):
    cols = ["rows", "median_theta_lo", "frac_theta_lo_ge_0.99", "dominant_frac", "p_max_q10", "p_max_q50",
            "p_max_q90", "entropy_q10", "entropy_q50", "entropy_q90"]
    lines = [f"| {name} | " + " | ".join(cols) + " |", "|" + "---|" * (len(cols) + 1)]
    for g, st in rows.items():
        cells = [str(st[c]) if c == "rows" else f"{st[c]:.6g}" for c in cols]
        lines.append(f"| {g} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def write_report(dirs, reportdir, progress=True):
    """Write report.md, report.html (PNG figures embedded as base64), *.png and stats.json."""
    import matplotlib
    matplotlib.use("Agg")
    cert, meta, sums = load_dirs(dirs)
    os.makedirs(reportdir, exist_ok=True)
    figs = [("theta_vs_pmax.png", "θ lower bound against p_max", lambda p: _fig_scatter(cert, p) or True),
            ("heatmap_layer_step.png", "median θ_lo by layer × checkpoint", lambda p: _fig_heatmap(cert, meta, p)),
            ("concentration.png", "concentration over checkpoints", lambda p: _fig_concentration(cert, meta, p))]
    made = []
    from tqdm import tqdm
    for name, title, fn in tqdm(figs, desc="report", disable=not progress or None, file=sys.stderr):
        if fn(os.path.join(reportdir, name)):
            made.append((name, title))
    tab = tables(cert, meta)
    n = cert["theta_lo"].size
    reg = np.bincount(cert["regime"], minlength=3)
    head = (f"# θ certificates\n\n{n} rows from {len(dirs)} certificate directories; "
            f"regimes: {reg[0]} dominant (exact, C4), {reg[1]} closed, {reg[2]} open. "
            f"Tolerance {sums[0]['tolerance']:g}. All θ values are certified lower bounds (theta_lo).\n")
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
    cols = list(next(iter(tab["all"].values())))
    for key, rows in tab.items():
        html.append(f"<h2>By {key}</h2><table><tr><th>{key}</th>" + "".join(f"<th>{c}</th>" for c in cols) + "</tr>")
        for g, st in rows.items():
            html.append(f"<tr><td>{g}</td>" + "".join(f"<td>{st[c]:.6g}</td>" for c in cols) + "</tr>")
        html.append("</table>")
    for name, title in made:
        with open(os.path.join(reportdir, name), "rb") as f:
            b64 = base64.b64encode(f.read()).decode()
        html.append(f"<h2>{title}</h2><img alt='{title}' src='data:image/png;base64,{b64}'>")
    with open(os.path.join(reportdir, "report.html"), "w") as f:
        f.write("\n".join(html) + "</body></html>\n")
    return tab
