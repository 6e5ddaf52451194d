"""A layer × head view of certificates: OUT/report/layer_head.png and layer_head.md for a probe,
and the same grid inside ``report`` (report.md / report.html) for any rows with layer and head.

The shared report groups rows by layer and by head separately; a probe has both, and
the interesting structure (which heads of which layers attend to one token) shows only
in the grid.  Two panels: the median certified upper bound on the gap 1 − θ (gap_hi, so
"θ is at least 1 − this" for half the rows), and the share of rows in the dominant-atom
regime (C4: θ = 4m(1 − m) exactly).  Descriptive float64 statistics of certified numbers.
A median gap below certify's tolerance only says where the witness search stopped, not
anything about the attention, so such cells share one colour and read "≤tol".

Rows that carry ``stack`` (encoder/decoder) or ``kind`` (self/cross) get one grid per
combination: layer 0 of an encoder and layer 0 of a decoder are different modules.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from .folder import CERT_DTYPES, close_width, read_arrays
from .readers import npz_members

SPLIT_KEYS = ("stack", "kind")      # one grid per combination of these, when the rows carry them


def _tolerance(cert_dir: Path) -> float:
    tol = json.loads((cert_dir / "summary.json").read_text()).get("tolerance", 0.0)
    return close_width(tol)


def absent(vals: np.ndarray) -> np.ndarray:
    """Which rows have no value for this column: certify writes -1 (numbers) or "" (text) for a
    row whose input had no such array; NaN and "-1" count as absent too."""
    vals = np.asarray(vals)
    if vals.dtype.kind == "U":
        return (vals == "") | (vals == "-1")
    if vals.dtype.kind == "f":
        return (vals == -1) | np.isnan(vals)
    if vals.dtype.kind in "iu":
        return vals == -1
    return np.zeros(vals.shape, bool)


def _cells(codes: np.ndarray, n_cells: int):
    """Row indices of each cell code 0 … n_cells − 1 (one stable sort, not a mask per cell)."""
    order = np.argsort(codes, kind="stable")
    return np.split(order, np.cumsum(np.bincount(codes, minlength=n_cells))[:-1])


def grid(gap: np.ndarray, regime: np.ndarray, layer: np.ndarray, head: np.ndarray):
    """(layers, heads, median gap_hi, dominant share) per layer × head cell; NaN where no row."""
    layers, li = np.unique(layer, return_inverse=True)
    heads, hi = np.unique(head, return_inverse=True)
    med = np.full((layers.size, heads.size), np.nan)
    dom = np.full_like(med, np.nan)
    codes = li.ravel() * heads.size + hi.ravel()
    for c, idx in enumerate(_cells(codes, med.size)):
        if idx.size:
            a, b = divmod(c, heads.size)
            med[a, b] = np.median(gap[idx])
            dom[a, b] = np.mean(regime[idx] == 0)
    return layers, heads, med, dom


def grids(gap: np.ndarray, regime: np.ndarray, meta: dict):
    """One grid per stack/kind combination present (one grid when neither key is there).

    Returns (grids, left_out): grids is a list of (title, rows, layers, heads, med, dom), title
    "" for the single grid; left_out counts rows without a layer or head value (a folder that
    had no such array), which have no cell.  [] when the rows carry no layer or no head.
    """
    if "layer" not in meta or "head" not in meta:
        return [], 0
    keep = ~(absent(meta["layer"]) | absent(meta["head"]))
    split = [k for k in SPLIT_KEYS if k in meta]
    kept = np.flatnonzero(keep)
    parts = {"": kept}
    if split:
        uniq = [np.unique(meta[k][kept], return_inverse=True) for k in split]
        codes = np.zeros(kept.size, np.int64)
        for u, inv in uniq:
            codes = codes * u.size + inv.ravel()
        cu, cinv = np.unique(codes, return_inverse=True)
        parts = {}
        for c, idx in zip(cu, _cells(cinv.ravel(), cu.size)):
            words = []
            for k, (u, _) in reversed(list(zip(split, uniq))):
                c, j = divmod(int(c), u.size)
                words.append(_name(k, u[j]))
            title = " · ".join(reversed(words))
            parts[title] = np.sort(np.concatenate([parts.get(title, kept[:0]), kept[idx]]))
    out = []
    for title, idx in parts.items():
        if idx.size:
            out.append((title, int(idx.size),
                        *grid(gap[idx], regime[idx], meta["layer"][idx], meta["head"][idx])))
    return out, int(keep.size - keep.sum())


def _name(key, v) -> str:
    return f"no {key}" if absent(np.asarray([v]))[0] else f"{key} {v}"


def cell_text(med: float, dom: float, tol: float) -> str:
    if not np.isfinite(med):
        return "–"
    return ("≤tol" if med <= tol else f"{med:.3g}") + f" / {dom:.2f}"


def grid_markdown(layers, heads, med, dom, tol) -> list[str]:
    lines = ["| layer | " + " | ".join(f"head {h}" for h in heads) + " |", "|---|" + "---|" * len(heads)]
    for a, li in enumerate(layers):
        lines.append(f"| {li} | " + " | ".join(cell_text(med[a, b], dom[a, b], tol) for b in range(len(heads))) + " |")
    return lines


def layer_head_tables(cert_dir: Path):
    c = read_arrays(cert_dir / "certificates.npz", expected=CERT_DTYPES, keys=("gap_hi", "regime"))
    m = read_arrays(cert_dir / "metadata.npz", keys=("layer", "head"))
    return grid(c["gap_hi"], c["regime"], m["layer"], m["head"])


def _read_grids(cert_dir: Path):
    c = read_arrays(cert_dir / "certificates.npz", expected=CERT_DTYPES, keys=("gap_hi", "regime"))
    mp = cert_dir / "metadata.npz"
    meta = read_arrays(mp, keys=("layer", "head"))
    meta.update(read_arrays(mp, keys=[k for k in SPLIT_KEYS if k in npz_members(mp)]))  # when present
    meta = {k: v for k, v in meta.items() if k in ("layer", "head") or v.shape == c["gap_hi"].shape}
    gs, _ = grids(c["gap_hi"], c["regime"], meta)
    if not gs:                     # no row has both values: the whole folder in one grid, as it is
        gs = [("", int(c["gap_hi"].size), *grid(c["gap_hi"], c["regime"], meta["layer"], meta["head"]))]
    return gs


def write_layer_head(cert_dir: Path, report_dir: Path) -> list[str]:
    """Write the figure and the Markdown table; returns the file names written."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import LogNorm
    cert_dir, report_dir = Path(cert_dir), Path(report_dir)
    gs = _read_grids(cert_dir)
    tol = _tolerance(cert_dir)
    n_heads = max(g[3].size for g in gs)
    n_layers = sum(g[2].size for g in gs)
    fig, axes = plt.subplots(len(gs), 2, figsize=(3 + 0.5 * n_heads * 2, 1.5 * len(gs) + 0.4 * n_layers),
                             squeeze=False)
    for (title, _, layers, heads, med, dom), row in zip(gs, axes):
        shown = np.where(med <= tol, tol, med)   # one colour for every cell at or below the tolerance
        pos = shown[np.isfinite(shown)]
        norm = LogNorm(vmin=pos.min(), vmax=pos.max()) if pos.size and pos.min() < pos.max() else None
        where = f"{title}: " if title else ""
        panels = ((shown, (f"{where}median certified gap 1 − θ (gap_hi), floored at the tolerance {tol:g}\n"
                           "(darkest = ≤ tolerance: there the search stopped)"), norm, "viridis"),
                  (dom, f"{where}share of dominant rows (p_max ≥ 1/2, C4)", None, "magma"))
        for ax, (data, text, nrm, cmap) in zip(row, panels):
            im = ax.imshow(data, aspect="auto", cmap=cmap, norm=nrm, interpolation="nearest")
            ax.set_xticks(range(heads.size), [str(h) for h in heads], fontsize=7)
            ax.set_yticks(range(layers.size), [str(v) for v in layers], fontsize=7)
            ax.set_xlabel("head")
            ax.set_ylabel("layer")
            ax.set_title(text, fontsize=9)
            fig.colorbar(im, ax=ax)
    fig.tight_layout()
    fig.savefig(report_dir / "layer_head.png", dpi=110)
    plt.close(fig)
    lines = ["# Layer × head", "", ("Median certified gap 1 − θ (gap_hi) / share of dominant rows, per layer "
                                    f"(rows) and head (columns). ≤tol: the median gap is at most certify's "
                                    f"tolerance {tol:g}, where the witness search stopped; it says nothing finer "
                                    "about the attention."), ""]
    for title, rows, layers, heads, med, dom in gs:
        if title:
            lines += [f"## {title} ({rows} rows)", ""]
        lines += grid_markdown(layers, heads, med, dom, tol) + [""]
    lines += ["![layer × head](layer_head.png)", ""]
    (report_dir / "layer_head.md").write_text("\n".join(lines))
    return ["layer_head.png", "layer_head.md"]
