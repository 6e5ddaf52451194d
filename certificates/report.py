"""Reports over one or more certificate folders: Markdown, self-contained HTML, PNG figures.

Several folders are compared in one report: their rows are concatenated, a folder without a
metadata array that another has gets the "no such metadata" value for it (so its rows form
the "(no layer metadata)" group instead of dropping the table), and ``source`` groups the
rows by the folder they came from.

Statistics are descriptive float64 summaries of certified numbers (medians of theta_lo,
fractions, quantiles); the curves drawn on the θ–p_max figure are the exact closed forms
of claims C4 and C5 (statements in the proofs/ claim registry): C4 (θ = 4m(1 − m) for
m ≥ 1/2) and, below 1/2, the lower envelope (C5: proven bound max(4m(1 − m), 1 − m²), and
the exact minimum sawtooth on [1/5, 1/2], proven for L ≤ 6 and conjectured in general).
"""
from __future__ import annotations

import base64
import html
import json
import os
import sys

import numpy as np

from .folder import CERT_DTYPES, close_width, read_arrays
from .inputs import InputError
from .outdir import REPORT_FILES, settle
from .probe_figure import absent, cell_text, grid_markdown, grids
from .readers import ReadError

GROUP_KEYS = ("run", "step", "layer", "head", "stack", "kind")    # the tables shown by default
SOURCE = "source"           # the pseudo-key "which folder": --by source
MISSING = (-1, "")          # what certify writes for a row whose input had no such metadata
NOT_GROUPS = ("entropy",)   # per-row floats, never a grouping


def fmt_theta(v: float) -> str:
    """θ bound for display; never prints 1 for a value below 1."""
    if not np.isfinite(v):
        return str(v)
    s = f"{v:.6g}"
    if v < 1 and float(s) >= 1:
        return f"1 − {1.0 - v:.3g}"            # 1 − v is exact for v ≥ 1/2 (Sterbenz)
    return s


def group_name(key, v) -> str:
    return f"(no {key} metadata)" if absent(np.asarray([v]))[0] else str(v)


def plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def source_names(dirs) -> list[str]:
    """Each folder's name (last path component) where no other folder has that name, else the
    path as given; a folder given twice gets " (2)", " (3)" … on its repeats."""
    names = [os.path.basename(os.path.normpath(str(d))) for d in dirs]
    out = [n if names.count(n) == 1 else str(d) for n, d in zip(names, dirs)]
    seen = {}
    for i, n in enumerate(out):
        seen[n] = seen.get(n, 0) + 1
        if seen[n] > 1:
            out[i] = f"{n} ({seen[n]})"
    return out


def _load_dir(d):
    """(cert, meta, summary) of one certificate folder; InputError (exit 2) when it is not one."""
    settle(d)                     # finish an install a killed certify journalled, or refuse while one runs
    # the same strict reading as verify's: a shadow or extra member is refused, not shown
    try:
        with open(os.path.join(d, "summary.json")) as f:
            s = json.load(f)
    except (OSError, ValueError, RecursionError) as exc:
        raise InputError(d, f"not a readable certificate folder ({type(exc).__name__}: {exc})") from None
    cp, mp = os.path.join(d, "certificates.npz"), os.path.join(d, "metadata.npz")
    try:
        c = read_arrays(cp, expected=CERT_DTYPES, keys=("theta_lo", "theta_hi", "gap_hi", "p_max", "regime"))
    except (ReadError, OSError) as exc:
        raise InputError(cp, str(exc)) from None
    meta = {}
    if os.path.exists(mp):
        try:
            meta = read_arrays(mp)
        except (ReadError, OSError) as exc:
            raise InputError(mp, str(exc)) from None
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


def merge_metadata(metas, sizes) -> dict:
    """Concatenate the folders' metadata over the union of their keys.  A folder without a key
    gets what certify writes for an input without it (-1 for numbers, "" for text, NaN for the
    descriptive entropy); a key that is text in one folder and numbers in another becomes text."""
    meta = {}
    for k in sorted(set().union(*(set(m) for m in metas))):
        kinds = {m[k].dtype.kind for m in metas if k in m}
        numeric = kinds <= set("biuf")
        fill = np.nan if k in NOT_GROUPS else -1 if numeric else ""
        parts = [m[k] if k in m else np.full(n, fill) for m, n in zip(metas, sizes)]
        if not numeric:
            parts = [p.astype(str) for p in parts]
        try:
            meta[k] = np.concatenate(parts)
        except (ValueError, TypeError):
            pass
    return meta


def load_dirs(dirs):
    """(cert, meta, summaries, source) of several OUTDIRs, rows concatenated in the order given;
    source is the index in dirs of each row's folder (``--by source``; a carried metadata array
    that happens to be called "source" is not what that groups by)."""
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
    sizes = [c["theta_lo"].size for c in certs]
    meta = merge_metadata(metas, sizes)
    source = np.repeat(np.arange(len(dirs)), sizes)
    return cert, meta, sums, source


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
    def q(a, p):
        return float(np.quantile(a, p)) if a.size else float("nan")

    def mean(a):
        return float(np.mean(a)) if a.size else float("nan")

    lo = cert["theta_lo"][idx]
    ent = meta["entropy"][idx] if "entropy" in meta else np.array([])
    ent = ent[np.isfinite(ent)]                   # a folder without entropy contributes none
    pm = cert["p_max"][idx]
    return {"rows": int(idx.size), "median_theta_lo": q(lo, 0.5), "median_1_minus_theta_lo": q(1.0 - lo, 0.5),
            "frac_theta_lo_ge_0.99": mean(lo >= 0.99),
            "closed_or_dominant_frac": mean(cert["regime"][idx] != 2),
            "dominant_frac": mean(cert["regime"][idx] == 0),
            "p_max_q10": q(pm, .1), "p_max_q50": q(pm, .5), "p_max_q90": q(pm, .9),
            "entropy_q10": q(ent, .1), "entropy_q50": q(ent, .5), "entropy_q90": q(ent, .9)}


def groups(key, vals) -> dict:
    """{group name: row indices} in the order of the sorted values, rows without a value last."""
    u, inv = np.unique(vals, return_inverse=True)
    order = np.argsort(inv.ravel(), kind="stable")
    parts = np.split(order, np.cumsum(np.bincount(inv.ravel(), minlength=u.size))[:-1])
    named, none = {}, []
    for v, idx in zip(u, parts):
        name = group_name(key, v)
        if name == f"(no {key} metadata)":
            none.append(idx)
        else:
            named.setdefault(name, []).append(idx)
    if none:
        named[f"(no {key} metadata)"] = none
    return {g: np.sort(np.concatenate(ix)) for g, ix in named.items()}


def table_keys(meta, by=None, reportdir="REPORTDIR", dirs=()) -> list[str]:
    """The tables to show: by as given (InputError for a key no folder carries), else every
    present key of GROUP_KEYS."""
    if by is None:
        return [k for k in GROUP_KEYS if k in meta]
    keys = []
    for k in by:
        if k in keys:
            continue
        if k != SOURCE and (k not in meta or k in NOT_GROUPS):
            have = ", ".join([SOURCE] + sorted(x for x in meta if x not in NOT_GROUPS))
            hint = " (it is one of the folders: put --by after them)" if str(k) in map(str, dirs) else ""
            why = "a per-row number, not a grouping" if k in NOT_GROUPS else \
                f"no folder carries such metadata{hint}"
            raise InputError(reportdir, f"--by {k}: {why}; possible keys: {have}")
        keys.append(k)
    return keys


def tables(cert, meta, keys=None, source=None, source_labels=None):
    """{table: {group: stats}}: "all", then one table per key (default: the present GROUP_KEYS);
    key "source" groups by source (folder index) named by source_labels."""
    n = cert["theta_lo"].size
    out = {"all": {"all": group_stats(cert, meta, np.arange(n))}}
    for k in ([g for g in GROUP_KEYS if g in meta] if keys is None else keys):
        if k == SOURCE:
            labels = source_labels or [str(i) for i in range(int(source.max()) + 1)]
            counts = np.bincount(source, minlength=len(labels))
            out[k] = {labels[i]: group_stats(cert, meta, idx)
                      for i, idx in enumerate(np.split(np.arange(n), np.cumsum(counts)[:-1]))}
        elif k in meta:
            out[k] = {g: group_stats(cert, meta, idx) for g, idx in groups(k, meta[k]).items()}
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
    has = ~(absent(meta["layer"]) | absent(meta["step"]))     # rows of a folder without either: no cell
    if not has.any():
        return False
    import matplotlib.pyplot as plt
    lay, stp, lo = meta["layer"][has], meta["step"][has], cert["theta_lo"][has]
    layers, steps = np.unique(lay), np.unique(stp)
    H = np.full((layers.size, steps.size), np.nan)
    for a, la in enumerate(layers):
        for b, s in enumerate(steps):
            sel = (lay == la) & (stp == s)
            if sel.any():
                H[a, b] = np.median(lo[sel])
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
    if "step" not in meta or absent(meta["step"]).all():
        return False
    import matplotlib.pyplot as plt
    runs = np.unique(meta["run"]) if "run" in meta else [None]
    has = ~absent(meta["step"])               # rows without a step are not on this axis
    fig, ax = plt.subplots(1, 2, figsize=(8, 3.4))
    for r in runs:
        sel_r = has if r is None else has & (meta["run"] == r)
        if not sel_r.any():
            continue
        steps = np.unique(meta["step"][sel_r])
        pm = [np.median(cert["p_max"][sel_r & (meta["step"] == s)]) for s in steps]
        ax[0].plot(steps, pm, "o-", label=group_name("run", r) if r is not None else "rows")
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


def _grid_section(cert, meta, tol):
    """The layer × head grids (one per stack/kind) as Markdown lines and HTML, or ([], [])."""
    gs, left_out = grids(cert["gap_hi"], cert["regime"], meta)
    if not gs:
        return [], []
    tol = close_width(tol)
    intro = (f"Median certified gap 1 − θ (gap_hi) / share of dominant rows (p_max ≥ 1/2, C4), per layer "
             f"(rows) and head (columns), over the rows of every folder. ≤tol: the median gap is at most the "
             f"tolerance {tol:g}, where the witness search stopped; it says nothing finer about the attention.")
    if left_out:
        intro += f" {plural(left_out, 'row')} without a layer or head value are not in the grid."
    md = ["\n## Layer × head\n", intro]
    out = [f"<h2>Layer × head</h2><p>{_esc(intro)}</p>"]
    from matplotlib import colormaps
    cmap = colormaps["viridis"]
    for title, rows, layers, heads, med, dom in gs:
        if title:
            md.append(f"\n### {_md(title)} ({plural(rows, 'row')})\n")
            out.append(f"<h3>{_esc(title)} ({plural(rows, 'row')})</h3>")
        else:
            md.append("")
        md += grid_markdown([_md(str(v)) for v in layers], [_md(str(h)) for h in heads], med, dom, tol)
        g = np.log10(np.clip(med, tol, None))
        lo, hi = (np.nanmin(g), np.nanmax(g)) if np.isfinite(g).any() else (0.0, 1.0)
        out.append("<table><tr><th>layer \\ head</th>" + "".join(f"<th>{_esc(str(h))}</th>" for h in heads) + "</tr>")
        for a, la in enumerate(layers):
            cells = []
            for b in range(heads.size):
                if not np.isfinite(med[a, b]):
                    cells.append("<td>–</td>")
                    continue
                r, gr, bl, _ = cmap(float((g[a, b] - lo) / (hi - lo)) if hi > lo else 0.0)
                ink = "#fff" if 0.299 * r + 0.587 * gr + 0.114 * bl < 0.5 else "#000"
                cells.append(f"<td style='background:#{int(r * 255):02x}{int(gr * 255):02x}{int(bl * 255):02x};"
                             f"color:{ink}'>{cell_text(med[a, b], dom[a, b], tol)}</td>")
            out.append(f"<tr><th>{_esc(str(la))}</th>" + "".join(cells) + "</tr>")
        out.append("</table>")
    out.append("<p>Cell colour: log of the median gap (darkest: at or below the tolerance).</p>")
    return md, out


def _esc(text) -> str:
    return html.escape(str(text), quote=True)


def _md(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _json_safe(v):
    """NaN (a statistic of no rows) as null, so stats.json is valid JSON for any reader."""
    if isinstance(v, dict):
        return {k: _json_safe(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_json_safe(x) for x in v]
    if isinstance(v, float) and not np.isfinite(v):
        return None
    return v


def write_report(dirs, reportdir, progress=True, by=None):
    """Write report.md, report.html (PNG figures embedded as base64), *.png and stats.json.

    by: the metadata keys (or "source", the folder) to tabulate, in this order; default every
    present key of GROUP_KEYS.  The layer × head grid is included whenever rows carry both."""
    import matplotlib
    matplotlib.use("Agg")
    cert, meta, sums, source = load_dirs(dirs)
    keys = table_keys(meta, by, reportdir, dirs)
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
    tab = tables(cert, meta, keys, source, source_names(dirs))
    n = cert["theta_lo"].size
    reg = np.bincount(cert["regime"], minlength=3)
    head = (f"# θ certificates\n\n{plural(n, 'row')} from {plural(len(dirs), 'certificate folder')}; "
            f"regimes: {reg[0]} dominant (exact, C4), {reg[1]} closed, {reg[2]} open. "
            f"Tolerance {tol:g}. All θ values are certified lower bounds (theta_lo); a value that would "
            f"round to 1 is shown as 1 − gap, and median_1_minus_theta_lo is the certified upper bound on the "
            f"gap 1 − θ. A row is closed when theta_hi − theta_lo ≤ max(tolerance, 2^-50); below the tolerance "
            f"the gap shows where the witness search stopped, not a property of the attention. Groups named "
            f"'(no … metadata)' are rows whose input file (or folder) carried no such array.\n")
    grid_md, grid_html = _grid_section(cert, meta, tol)
    md = [head]
    for key, rows in tab.items():
        md += [f"\n## By {_md(key)}\n", _md_table(_md(key), {_md(g): st for g, st in rows.items()})]
    md += grid_md
    for name, title in made:
        md.append(f"\n## {title}\n\n![{title}]({name})\n")
    with open(os.path.join(reportdir, "report.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    with open(os.path.join(reportdir, "stats.json"), "w") as f:
        json.dump(_json_safe(tab), f, indent=2, allow_nan=False)      # strict JSON: an empty quantile is null
    page = ["<!doctype html><html><head><meta charset='utf-8'><title>θ certificates</title>",
            ("<style>body{font-family:sans-serif;max-width:70em;margin:auto}table{border-collapse:collapse;"
             "font-size:12px}td,th{border:1px solid #ccc;padding:2px 5px}</style></head><body>"),
            f"<h1>θ certificates</h1><p>{_esc(head.split(chr(10), 2)[2])}</p>"]
    for key, rows in tab.items():
        page.append(f"<h2>By {_esc(key)}</h2><table><tr><th>{_esc(key)}</th>"
                    + "".join(f"<th>{c}</th>" for c in COLS) + "</tr>")
        for g, st in rows.items():
            page.append(f"<tr><td>{_esc(g)}</td>" + "".join(f"<td>{_cell(c, st[c])}</td>" for c in COLS) + "</tr>")
        page.append("</table>")
    page += grid_html
    for name, title in made:
        with open(os.path.join(reportdir, name), "rb") as f:
            b64 = base64.b64encode(f.read()).decode()
        page.append(f"<h2>{title}</h2><img alt='{title}' src='data:image/png;base64,{b64}'>")
    with open(os.path.join(reportdir, "report.html"), "w") as f:
        f.write("\n".join(page) + "</body></html>\n")
    return tab
