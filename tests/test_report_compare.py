"""`report` over several certificate folders (issue 21, item 6): tables kept when one folder
lacks a key, --by (source and metadata keys), the layer × head grid in report.md/.html (one per
stack/kind), plurals.  Folders are made with the certify command from small .npz row files."""
import json

import numpy as np

from certificates.__main__ import main


def _rows(n, L, seed):
    lg = np.random.default_rng(seed).normal(size=(n, L)) * 3.0
    e = np.exp(lg - lg.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


def _folder(tmp_path, name, n=24, seed=0, **meta):
    src = tmp_path / f"{name}.npz"
    np.savez(src, rows=_rows(n, 10, seed), **meta)
    out = tmp_path / name
    assert main(["certify", str(src), "-o", str(out), "--no-progress"]) == 0
    return out


def _report(*args):
    return main(["report", *map(str, args), "--no-progress"])


def _section(md, title):
    """The lines of report.md from '## title' up to the next '## ' heading."""
    lines = md.splitlines()
    start = lines.index(f"## {title}")
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    return lines[start:end]


def _cell(folder_list, layer, head, sel=None):
    """Median gap_hi and dominant share of the rows with this layer and head, over the folders."""
    gap, reg, lay, hd = [], [], [], []
    for f in folder_list:
        c, m = np.load(f / "certificates.npz"), np.load(f / "metadata.npz")
        gap.append(c["gap_hi"]), reg.append(c["regime"]), lay.append(m["layer"]), hd.append(m["head"])
    gap, reg, lay, hd = map(np.concatenate, (gap, reg, lay, hd))
    s = (lay == layer) & (hd == head)
    return f"{np.median(gap[s]):.3g} / {np.mean(reg[s] == 0):.2f}"


def test_tables_are_kept_when_one_folder_lacks_the_key(tmp_path):
    n = 24
    a = _folder(tmp_path, "a", n, 0, layer=np.arange(n) % 2, head=np.arange(n) % 3, step=np.full(n, 5))
    b = _folder(tmp_path, "b", n, 1)                       # no metadata at all
    assert _report(a, b, "-o", tmp_path / "rep") == 0
    md = (tmp_path / "rep" / "report.md").read_text()
    for key in ("layer", "head", "step"):
        sec = "\n".join(_section(md, f"By {key}"))
        assert f"| (no {key} metadata) | {n} |" in sec       # b's rows, named, not dropped
    assert "| 0 | 12 |" in "\n".join(_section(md, "By layer"))
    stats = json.loads((tmp_path / "rep" / "stats.json").read_text())
    assert stats["layer"]["(no layer metadata)"]["rows"] == n and stats["all"]["all"]["rows"] == 2 * n


def test_stack_and_kind_get_tables_by_default(tmp_path):
    n = 16
    a = _folder(tmp_path, "a", n, 2, stack=np.where(np.arange(n) < 10, "encoder", "decoder"),
                kind=np.where(np.arange(n) % 2 == 0, "self", "cross"))
    assert _report(a, "-o", tmp_path / "rep") == 0
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "| encoder | 10 |" in "\n".join(_section(md, "By stack"))
    assert "| cross | 8 |" in "\n".join(_section(md, "By kind"))


def test_by_source_groups_rows_by_folder_and_by_picks_the_tables(tmp_path):
    n = 20
    a = _folder(tmp_path, "a", n, 3, layer=np.arange(n) % 2)
    b = _folder(tmp_path, "b", 2 * n, 4, layer=np.arange(2 * n) % 2)
    rep = tmp_path / "rep"
    assert _report(a, b, "-o", rep, "--by", "source") == 0
    md = (rep / "report.md").read_text()
    sec = "\n".join(_section(md, "By source"))
    assert f"| a | {n} |" in sec and f"| b | {2 * n} |" in sec    # names: unique, so the folder's name
    assert "## By layer" not in md
    assert list(json.loads((rep / "stats.json").read_text())) == ["all", "source"]
    assert _report(a, b, "-o", rep, "--by", "layer,source") == 0
    assert list(json.loads((rep / "stats.json").read_text())) == ["all", "layer", "source"]


def test_by_source_names_folders_by_path_when_names_repeat(tmp_path):
    (tmp_path / "x").mkdir(), (tmp_path / "y").mkdir()
    a = _folder(tmp_path / "x", "certificates", 12, 5)
    b = _folder(tmp_path / "y", "certificates", 14, 6)
    assert _report(a, b, "-o", tmp_path / "rep", "--by", "source") == 0
    tab = json.loads((tmp_path / "rep" / "stats.json").read_text())["source"]
    assert {k: v["rows"] for k, v in tab.items()} == {str(a): 12, str(b): 14}


def test_by_an_unknown_key_is_one_line_exit_2_and_writes_nothing(tmp_path, capsys):
    a = _folder(tmp_path, "a", 12, 7, layer=np.arange(12) % 2)
    capsys.readouterr()
    assert _report(a, "-o", tmp_path / "rep", "--by", "layr") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "layr" in err and "layer" in err and "Traceback" not in err
    assert not (tmp_path / "rep").exists()


def test_report_has_the_layer_head_grid_over_all_folders(tmp_path):
    n = 36
    meta = {"layer": np.arange(n) % 2, "head": (np.arange(n) // 2) % 3}
    a = _folder(tmp_path, "a", n, 8, **meta)
    b = _folder(tmp_path, "b", n, 9, **meta)
    c = _folder(tmp_path, "c", 10, 10)                      # no layer/head: left out of the grid, said so
    rep = tmp_path / "rep"
    assert _report(a, b, c, "-o", rep) == 0
    md = (rep / "report.md").read_text()
    grid = "\n".join(_section(md, "Layer × head"))
    assert "| layer | head 0 | head 1 | head 2 |" in grid and "10 rows without a layer or head" in grid
    for la in (0, 1):
        row = f"| {la} | " + " | ".join(_cell([a, b], la, h) for h in range(3)) + " |"
        assert row in grid
    html = (rep / "report.html").read_text()
    assert "<h2>Layer × head</h2>" in html and _cell([a, b], 1, 2) in html


def test_one_grid_per_stack_and_kind(tmp_path):
    n = 12
    meta = {"layer": np.arange(n) % 2, "head": np.arange(n) % 2}
    a = _folder(tmp_path, "a", n, 11, stack=np.full(n, "encoder"), kind=np.full(n, "self"), **meta)
    b = _folder(tmp_path, "b", n, 12, stack=np.full(n, "decoder"), kind=np.full(n, "cross"), **meta)
    assert _report(a, b, "-o", tmp_path / "rep") == 0
    md = (tmp_path / "rep" / "report.md").read_text()
    grid = "\n".join(_section(md, "Layer × head"))
    assert "### stack decoder · kind cross (12 rows)" in grid and "### stack encoder · kind self (12 rows)" in grid
    enc = grid.split("### stack encoder · kind self")[1]
    assert f"| 1 | – | {_cell([a], 1, 1)} |" in enc               # the encoder's rows only
    html = (tmp_path / "rep" / "report.html").read_text()
    assert html.count("<h3>stack ") == 2


def test_layer_head_md_of_a_probe_splits_by_stack(tmp_path):
    from certificates.probe_figure import write_layer_head
    n = 16
    a = _folder(tmp_path, "a", n, 13, layer=np.arange(n) % 2, head=np.arange(n) % 2,
                stack=np.where(np.arange(n) < 8, "encoder", "decoder"))
    assert write_layer_head(a, tmp_path) == ["layer_head.png", "layer_head.md"]
    md = (tmp_path / "layer_head.md").read_text()
    assert "## stack decoder (8 rows)" in md and "## stack encoder (8 rows)" in md
    assert (tmp_path / "layer_head.png").stat().st_size > 1000


def test_plurals_of_folders(tmp_path):
    a = _folder(tmp_path, "a", 12, 14)
    b = _folder(tmp_path, "b", 1, 15)
    assert _report(a, "-o", tmp_path / "r1") == 0
    one = (tmp_path / "r1" / "report.md").read_text()
    assert "12 rows from 1 certificate folder;" in one
    assert _report(a, b, "-o", tmp_path / "r2") == 0
    two = (tmp_path / "r2" / "report.md").read_text()
    assert "13 rows from 2 certificate folders;" in two and "directories" not in two
    assert _report(b, "-o", tmp_path / "r3") == 0
    assert "1 row from 1 certificate folder;" in (tmp_path / "r3" / "report.md").read_text()


def test_stats_json_is_strict_json_even_for_empty_statistics(tmp_path, capsys):
    from certificates.outdir import write_npz
    x = np.full((2, 4), 0.25)
    write_npz(tmp_path / "a.npz", {"rows": x})
    assert main(["certify", str(tmp_path / "a.npz"), "-o", str(tmp_path / "o"), "--no-progress"]) == 0
    (tmp_path / "o" / "metadata.npz").unlink()       # an old folder without it: no entropy statistics
    assert main(["report", str(tmp_path / "o"), "-o", str(tmp_path / "r"), "--no-progress"]) == 0
    text = (tmp_path / "r" / "stats.json").read_text()
    assert '"entropy_q50": null' in text
    json.loads(text, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))   # NaN/Infinity refused
