"""Run a loaded model on token sequences and stream every attention row it uses to disk.

Capture: eager attention.  A forward hook on each selected self-attention module reads
the probabilities that module returns, the very tensor it multiplies with the values
(transformers' eager path: softmax of q·kᵀ·scaling + mask, in the model's dtype; for
GQA after the key/value heads are repeated, so every query head has its row).  What is
certified is θ of the exact normalisation of those stored probabilities (C7), i.e. of
the attention the float model actually applied; masked (causal) keys are exact zeros
and stay in the row as zero padding, which does not change θ (C6).

Memory: one batch of sequences is in flight, and each layer's rows leave for the file
as soon as its hook fires, so the peak is one layer's (B, H, L, L) tensor, whatever the
corpus length.  Sequences of equal length are batched without padding (no attention
mask, so no padded key can leak into a row).
"""
from __future__ import annotations

import sys
import time

import numpy as np

from .hf_model import Loaded, attention_modules


class Progress:
    """tqdm on a terminal; otherwise a plain line at every 10 % (logs, CI)."""

    def __init__(self, total: int, desc: str, enabled: bool):
        self.total, self.desc, self.done, self.enabled = total, desc, 0, enabled
        self.tty = enabled and sys.stderr.isatty()
        self.bar = None
        self.next_pct = 10
        self.t0 = time.perf_counter()
        if self.tty:
            from tqdm import tqdm
            self.bar = tqdm(total=total, unit="tok", desc=desc, file=sys.stderr, dynamic_ncols=True)

    def update(self, n: int) -> None:
        self.done += n
        if self.bar is not None:
            self.bar.update(n)
        elif self.enabled:
            pct = 100 * self.done // max(1, self.total)
            if pct >= self.next_pct or self.done == self.total:
                print(f"{self.desc}: {self.done}/{self.total} tokens ({pct}%), "
                      f"{time.perf_counter() - self.t0:.1f} s", file=sys.stderr, flush=True)
                self.next_pct = (pct // 10 + 1) * 10

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def plan_batches(seqs: list[np.ndarray], batch_size: int) -> list[list[int]]:
    """Consecutive sequences of equal length, at most batch_size per batch (order kept)."""
    out: list[list[int]] = []
    for s, ids in enumerate(seqs):
        if out and len(out[-1]) < batch_size and len(seqs[out[-1][0]]) == len(ids):
            out[-1].append(s)
        else:
            out.append([s])
    return out


def count_rows(seqs, layers, heads) -> int:
    return sum(len(s) for s in seqs) * len(layers) * len(heads)


def capture(ld: Loaded, seqs: list[np.ndarray], layers: list[int], heads: list[int], writer,
            bounds=None, batch_size: int = 8, device: str = "cpu", progress: bool = True) -> dict:
    """Forward every batch; write rows (order: batch, layer, sequence, head, query).

    ``bounds``: an object with ``add(layer, X)`` fed each sequence's float64 attention
    input (or None).  Returns counts for the run record.
    """
    import torch
    mods = attention_modules(ld)
    head_idx = torch.tensor(heads, dtype=torch.long)
    state = {"seq_ids": None, "X": {}}

    def pre_hook(layer):
        def f(_mod, args, kwargs):
            if bounds is not None:
                x = args[0] if args else kwargs["hidden_states"]
                state["X"][layer] = x.detach()
        return f

    def post_hook(layer):
        def f(_mod, _args, out):
            P = out[1] if isinstance(out, tuple) and len(out) > 1 else None
            B, L = len(state["seq_ids"]), len(seqs[state["seq_ids"][0]])
            if not (torch.is_tensor(P) and P.shape == (B, ld.n_heads, L, L)):
                raise RuntimeError(f"layer {layer}: the attention module returned no (batch, heads, L, L) "
                                   "probabilities; eager attention weights are needed (transformers ≥ 5)")
            rows = P.detach()[:, head_idx].to("cpu", torch.float64).numpy()     # (B, h, L, L)
            nh = len(heads)
            for b, s in enumerate(state["seq_ids"]):
                writer.add(rows[b].reshape(nh * L, L), layer=layer, head=np.repeat(heads, L),
                           query=np.tile(np.arange(L), nh), sequence=s, seqlen=L)
                if bounds is not None:
                    bounds.add(layer, state["X"][layer][b].to("cpu", torch.float64).numpy())
        return f

    hooks = []
    for i in layers:
        hooks.append(mods[i].register_forward_pre_hook(pre_hook(i), with_kwargs=True))
        hooks.append(mods[i].register_forward_hook(post_hook(i)))
    batches = plan_batches(seqs, batch_size)
    bar = Progress(sum(len(s) for s in seqs), "probe", progress)
    try:
        with torch.no_grad():
            for batch in batches:
                state["seq_ids"] = batch
                ids = torch.as_tensor(np.stack([seqs[s] for s in batch]), device=device)
                ld.model(input_ids=ids)
                state["X"].clear()
                bar.update(ids.numel())
    finally:
        for h in hooks:
            h.remove()
        bar.close()
    return {"sequences": len(seqs), "batches": len(batches), "tokens": int(sum(len(s) for s in seqs))}
