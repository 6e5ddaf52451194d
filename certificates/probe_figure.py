"""A layer × head view of a probe's certificates: OUT/report/layer_head.png and layer_head.md.

The shared report groups rows by layer and by head separately; a probe has both, and
the interesting structure (which heads of which layers attend to one token) shows only
in the grid.  Two panels: the median certified upper bound on the gap 1 − θ (gap_hi, so
"θ is at least 1 − this" for half the rows), and the share of rows in the dominant-atom
regime (C4: θ = 4m(1 − m) exactly).  Descriptive float64 statistics of certified numbers.
A median gap below certify's tolerance only says where the witness search stopped, not
anything about the attention, so such cells share one colour and read "≤tol".
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np


def _tolerance(cert_dir: Path) -> float:
    tol = json.loads((cert_dir / "summary.json").read_text()).get("tolerance", 0.0)
    return max(float(tol), 2.0 ** -50)  # certify's closing floor


def layer_head_tables(cert_dir: Path):
    with np.load(cert_dir / "certificates.npz") as z:
        gap, regime = z["gap_hi"], z["regime"]
    with np.load(cert_dir / "metadata.npz") as m:
        layer, head = m["layer"], m["head"]
    layers, heads = np.unique(layer), np.unique(head)
    med = np.full((layers.size, heads.size), np.nan)
    dom = np.full_like(med, np.nan)
    for a, li in enumerate(layers):
        for b, hi in enumerate(heads):
            sel = (layer == li) & (head == hi)
            if sel.any():
                med[a, b] = np.median(gap[sel])
                dom[a, b] = np.mean(regime[sel] == 0)
    return layers, heads, med, dom


def write_layer_head(cert_dir: Path, report_dir: Path) -> list[str]:
    """Write the figure and the Markdown table; returns the file names written."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import LogNorm
    layers, heads, med, dom = layer_head_tables(cert_dir)
    tol = _tolerance(cert_dir)
    shown = np.where(med <= tol, tol, med)   # one colour for every cell at or below the tolerance
    fig, axes = plt.subplots(1, 2, figsize=(3 + 0.5 * heads.size * 2, 1.5 + 0.4 * layers.size))
    pos = shown[np.isfinite(shown)]
    norm = LogNorm(vmin=pos.min(), vmax=pos.max()) if pos.size and pos.min() < pos.max() else None
    panels = ((shown, f"median certified gap 1 − θ (gap_hi), floored at the tolerance {tol:g}\n"
                      "(darkest = ≤ tolerance: there the search stopped)", norm, "viridis"),
              (dom, "share of dominant rows (p_max ≥ 1/2, C4)", None, "magma"))
    for ax, (data, title, nrm, cmap) in zip(axes, panels):
        im = ax.imshow(data, aspect="auto", cmap=cmap, norm=nrm, interpolation="nearest")
        ax.set_xticks(range(heads.size), [str(h) for h in heads], fontsize=7)
        ax.set_yticks(range(layers.size), [str(l) for l in layers], fontsize=7)
        ax.set_xlabel("head")
        ax.set_ylabel("layer")
        ax.set_title(title, fontsize=9)
        fig.colorbar(im, ax=ax)
    fig.tight_layout()
    fig.savefig(report_dir / "layer_head.png", dpi=110)
    plt.close(fig)
    lines = ["# Layer × head", "", "Median certified gap 1 − θ (gap_hi) / share of dominant rows, per layer "
             f"(rows) and head (columns). ≤tol: the median gap is at most certify's tolerance {tol:g}, "
             "where the witness search stopped; it says nothing finer about the attention.", "", "| layer | " + " | ".join(f"head {h}" for h in heads) + " |",
             "|---|" + "---|" * heads.size]
    for a, li in enumerate(layers):
        cells = [("≤tol" if med[a, b] <= tol else f"{med[a, b]:.3g}") + f" / {dom[a, b]:.2f}"
                 if np.isfinite(med[a, b]) else "–" for b in range(heads.size)]
        lines.append(f"| {li} | " + " | ".join(cells) + " |")
    lines += ["", "![layer × head](layer_head.png)", ""]
    (report_dir / "layer_head.md").write_text("\n".join(lines))
    return ["layer_head.png", "layer_head.md"]
