"""Run a loaded model on its inputs and stream every attention row it uses to a sink.

Which modules: exactly those whose outputs transformers itself collects for
``output_attentions`` (transformers/utils/output_capturing.py).  Each PreTrainedModel
(sub)model declares in ``_can_record_outputs`` which module classes produce
"attentions" and "cross_attentions": a class, a class-name suffix, or an
``OutputRecorder`` with ``target_class``/``class_name``, the output ``index`` holding the
weights (1 when not given) and an optional ``layer_name`` that the module's dotted name
must contain.  Below a nested PreTrainedModel its own declaration applies, not the
parent's.  :func:`find_sites` walks the module tree with those rules, and :func:`capture`
puts a forward hook on each site that reads ``output[index]`` (the whole output when it
is not a tuple; nothing when that element is None), as transformers' hook does.

What is captured: the tensor the module returns is the one it multiplied with its values
(transformers' eager path: softmax of the scores plus mask, after any soft-capping; most
eager paths take the softmax in float32 and cast it to the model's dtype; for grouped-query attention after the key/value heads are repeated, so
every query head has its row).  It is widened exactly to float64; what is certified is θ
of the exact normalisation of each stored row (C7), the attention the float model
applied.  Masked keys (causal, sliding window, padding) are exact zeros in the row and
stay there: zero entries do not change θ (C6).

Metadata: ``kind`` is "self" for an "attentions" site and "cross" for a
"cross_attentions" one.  ``stack``: in an encoder–decoder model (config
``is_encoder_decoder``) a site inside ``model.get_encoder()`` is "encoder", every other
one "decoder"; elsewhere a cross-attention site is "decoder", and a self-attention site is
"decoder" when its submodel's attention is causal (``is_causal`` of the module or, failing
that, ``is_decoder``), else "encoder" (BERT, ViT, a vision tower).  ``layer`` counts the
calls of one (stack, kind) in one forward pass, the index of transformers' own
``output_attentions`` tuple (so a layer shared by all blocks, as in ALBERT, still has
one layer per call).  ``query`` is the query position, ``sequence`` the input's index
along the batch, ``seqlen`` the row's own width (keys of that module) before the file's
zero padding.

Padded queries: with a (batch, tokens) 0/1 mask whose length is the module's query
count (``attention_mask`` for an encoder, a decoder-only model or an encoder–decoder's
encoder; ``decoder_attention_mask`` for an encoder–decoder's decoder, whose
cross-attention queries it also marks), the rows of masked queries are dropped: they are
no token's attention.  Padded keys stay in the kept rows: the model puts exact zeros there.

Memory: one batch is in flight, and each layer's rows leave for the sink as soon as its
hook fires, so the peak is one layer's (B, H, Lq, Lk) tensor, whatever the corpus length.
Token sequences of equal length are batched without padding.
"""
from __future__ import annotations

import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

ATTENTION_KEYS = {"attentions": "self", "cross_attentions": "cross"}


@dataclass(frozen=True)
class Site:
    """One module whose output transformers records as attention weights."""
    name: str            # dotted path in the model ("" is the model itself)
    module: object
    index: int           # which element of the module's output tuple holds the weights
    kind: str            # "self" or "cross"
    stack: str           # "encoder" or "decoder"
    owner: object        # the PreTrainedModel whose _can_record_outputs named it

    @property
    def owner_name(self) -> str:
        return type(self.owner).__name__


def _recorders(pm) -> list:
    """(kind, OutputRecorder) of a PreTrainedModel's attention keys, normalised as
    transformers' install_all_output_capturing_hooks does (class → index 1, str → class_name)."""
    from transformers.utils.output_capturing import OutputRecorder
    try:
        from transformers.utils.output_capturing import _CAN_RECORD_REGISTRY
        flags = _CAN_RECORD_REGISTRY.get(pm)
    except ImportError:          # the registry is private; the class attribute holds the same dict
        flags = getattr(type(pm), "_can_record_outputs", None) or {}
    out = []
    for key, kind in ATTENTION_KEYS.items():
        specs = flags.get(key)
        if specs is None:
            continue
        for s in specs if isinstance(specs, list) else [specs]:
            if not isinstance(s, OutputRecorder):
                s = OutputRecorder(target_class=None if isinstance(s, str) else s, index=1,
                                   class_name=s if isinstance(s, str) else None)
            out.append((kind, s))
    return out


def _matches(module, name: str, rec) -> bool:
    """transformers' test in recursively_install_hooks, for one module and one recorder."""
    hit = (rec.target_class is not None and isinstance(module, rec.target_class)) or \
          (rec.class_name is not None and name.endswith(rec.class_name))
    if hit and rec.layer_name is not None:
        hit = "." + rec.layer_name.strip(".") + "." in name + "."
    return hit


def find_sites(model) -> list[Site]:
    """Every (module, kind) transformers would record as attention weights, in module order."""
    from transformers.modeling_utils import PreTrainedModel
    raw: list[tuple[str, object, int, str, object]] = []

    def walk(parent, name, recs, owner):
        # pre-order (a module before its children): the order of the blocks in the model
        for kind, rec in recs:
            if _matches(parent, name, rec):
                raw.append((name, parent, rec.index, kind, owner))
        for child_name, child in parent.named_children():
            if isinstance(child, PreTrainedModel):
                walk(child, f"{name}.{child_name}", _recorders(child), child)
            else:
                walk(child, f"{name}.{child_name}", recs, owner)

    walk(model, "", _recorders(model), model)
    enc_prefix = _encoder_prefix(model)
    causal_owner: dict[int, bool] = {}
    for _name, mod, _i, kind, owner in raw:
        if kind == "self":
            c = _causal(mod, owner)
            causal_owner[id(owner)] = causal_owner.get(id(owner), False) or c
    sites = []
    for name, mod, index, kind, owner in raw:
        if enc_prefix is not None:
            stack = "encoder" if (name + ".").startswith(enc_prefix + ".") else "decoder"
        elif kind == "cross":
            stack = "decoder"
        else:
            stack = "decoder" if causal_owner.get(id(owner)) else "encoder"
        sites.append(Site(name.lstrip("."), mod, index, kind, stack, owner))
    return sites


def _encoder_prefix(model) -> str | None:
    """The dotted name (leading dot) of an encoder–decoder model's encoder, else None."""
    if not getattr(model.config, "is_encoder_decoder", False):
        return None
    try:
        enc = model.get_encoder()
    except Exception:
        enc = None
    if enc is None or enc is model:
        return ".encoder" if hasattr(model, "encoder") else None
    for n, m in model.named_modules():
        if m is enc:
            return "." + n
    return None


def _causal(module, owner) -> bool:
    """Is this self-attention causal: the first ``is_causal`` (then ``is_decoder``) found on the
    module or below it, else the owner config's is_decoder."""
    for attr in ("is_causal", "is_decoder"):
        for m in module.modules():
            v = getattr(m, attr, None)
            if isinstance(v, bool):
                return v
    return bool(getattr(owner.config, "is_decoder", False))


def derive_spec(sites: list[Site]):
    """hf_model.ArchSpec of a single stack of blocks ``<layers>.<i>.<attn>``, i = 0 … n−1, else None."""
    from .hf_model import ArchSpec
    if not sites or any(s.kind != "self" for s in sites) or len({s.stack for s in sites}) != 1:
        return None
    prefixes, attns = set(), set()
    for i, s in enumerate(sites):
        parts = s.name.split(".")
        idx = [j for j, p in enumerate(parts) if p == str(i)]
        if not idx:
            return None
        j = idx[-1]
        prefixes.add(".".join(parts[:j]))
        attns.add(".".join(parts[j + 1:]))
    if len(prefixes) != 1 or len(attns) != 1 or "" in prefixes or "" in attns:
        return None
    return ArchSpec(prefixes.pop(), attns.pop(), causal=sites[0].stack == "decoder")


# ----------------------------------------------------------------------------- batches

@dataclass
class Batch:
    seq_ids: list[int]               # indices of these inputs along the batch axis (metadata `sequence`)
    arrays: dict                     # name → numpy array with leading axis len(seq_ids)
    units: int                       # progress units (tokens, or sequences for --model-inputs)


def plan_batches(seqs: list[np.ndarray], batch_size: int) -> list[list[int]]:
    """Consecutive sequences of equal length, at most batch_size per batch (order kept)."""
    out: list[list[int]] = []
    for s, ids in enumerate(seqs):
        if out and len(out[-1]) < batch_size and len(seqs[out[-1][0]]) == len(ids):
            out[-1].append(s)
        else:
            out.append([s])
    return out


def batches_from_sequences(seqs: list[np.ndarray], batch_size: int) -> list[Batch]:
    return [Batch(b, {"input_ids": np.stack([seqs[s] for s in b])}, sum(len(seqs[s]) for s in b))
            for b in plan_batches(seqs, batch_size)]


def batches_from_arrays(arrays: dict, batch_size: int) -> list[Batch]:
    n = next(iter(arrays.values())).shape[0]
    return [Batch(list(range(a, min(a + batch_size, n))), {k: v[a:a + batch_size] for k, v in arrays.items()},
                  min(a + batch_size, n) - a) for a in range(0, n, batch_size)]


class Progress:
    """tqdm on a terminal; otherwise a plain line at every 10 % (logs, CI)."""

    def __init__(self, total: int, desc: str, enabled: bool, unit: str = "tokens"):
        self.total, self.desc, self.done, self.enabled, self.unit = total, desc, 0, enabled, unit
        self.tty = enabled and sys.stderr.isatty()
        self.bar = None
        self.next_pct = 10
        self.t0 = time.perf_counter()
        if self.tty:
            from tqdm import tqdm
            self.bar = tqdm(total=total, unit=unit[:3], desc=desc, file=sys.stderr, dynamic_ncols=True)

    def update(self, n: int) -> None:
        self.done += n
        if self.bar is not None:
            self.bar.update(n)
        elif self.enabled:
            pct = 100 * self.done // max(1, self.total)
            if pct >= self.next_pct or self.done == self.total:
                print(f"{self.desc}: {self.done}/{self.total} {self.unit} ({pct}%), "
                      f"{time.perf_counter() - self.t0:.1f} s", file=sys.stderr, flush=True)
                self.next_pct = (pct // 10 + 1) * 10

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


# ----------------------------------------------------------------------------- threads

def free_cores() -> int | None:
    """Cores not kept busy by other tasks right now (certificates.threads' load reading),
    at least 1; None where the load cannot be read."""
    from . import threads
    others = threads.others_running()
    return None if others is None else max(1, threads.cpu_count() - others)


@contextmanager
def capture_threads():
    """torch's intra-op threads for the forward passes: no more than the free cores.

    A forward pass with more threads than free cores waits for its slowest thread at every
    operator; on a shared 2-core machine that made a MiniLM probe 10× slower.  Yields a
    function to call before each batch (the load changes); torch's setting is restored after.
    """
    import torch
    old = torch.get_num_threads()

    def adjust() -> None:
        free = free_cores()
        want = old if free is None else min(old, free)
        if torch.get_num_threads() != want:
            torch.set_num_threads(want)

    try:
        yield adjust
    finally:
        if torch.get_num_threads() != old:
            torch.set_num_threads(old)


# ----------------------------------------------------------------------------- capture

class CaptureError(Exception):
    """A site returned something probe cannot certify as rows (the message is one line).
    ``instead``: whether saving the weights oneself and certifying them is worth advising
    (not when the weights are not probabilities at all)."""

    def __init__(self, msg: str, instead: bool = True):
        super().__init__(msg)
        self.instead = instead


class ForwardError(Exception):
    """The model's forward pass raised (inputs it rejects); ``exc`` is its exception."""

    def __init__(self, exc: BaseException):
        super().__init__(str(exc))
        self.exc = exc


class _HookFailure(Exception):
    """Raised inside a hook, so that the forward's own errors can be told apart from ours."""

    def __init__(self, exc: BaseException):
        super().__init__(str(exc))
        self.exc = exc


def _query_mask_name(ld, site: Site) -> str | None:
    """The input whose 0/1 mask marks a site's real queries, or None: an encoder–decoder's
    decoder queries (self and cross) are decoder tokens, its encoder's are input tokens; in
    any other model attention_mask marks the tokens of its one stack, or of its decoder
    (a multimodal LM: not of the vision tower's patches)."""
    if ld.is_encoder_decoder:
        return "decoder_attention_mask" if site.stack == "decoder" else "attention_mask"
    if site.stack == "decoder" or len({s.stack for s in ld.sites}) <= 1:
        return "attention_mask"
    return None


def capture(ld, batches: list[Batch], layers: list[int] | None, heads: list[int] | None, sink,
            bounds=None, device: str = "cpu", progress: bool = True, unit: str = "tokens") -> dict:
    """Forward every batch; hand rows to ``sink.add(rows, layer=, head=, query=, sequence=,
    seqlen=, stack=, kind=)`` in the order batch, (stack, kind, layer) as called, sequence,
    head, query.

    ``layers``/``heads``: None for all.  ``bounds``: an object with ``add(layer, X)`` fed each
    sequence's float64 input of each selected self-attention layer (unpadded sequences only), or
    None.  Raises CaptureError for weights that are not (batch, heads, queries, keys)
    probabilities of a selected head, ForwardError (holding the model's exception) when the
    forward pass itself raises; an error inside a hook propagates as itself.  Returns counts
    for the run record.
    """
    import torch
    state: dict = {"batch": None, "calls": {}, "X": {}, "masks": {}, "stack": None}
    groups: dict = {}
    heads_arr = None if heads is None else np.asarray(heads)

    def pre_hook(site):
        def f(_mod, args, kwargs):
            x = args[0] if args else kwargs.get("hidden_states")
            state["X"][id(site.module)] = x
        return f

    def post_hook(site):
        def f(_mod, _args, out):
            try:
                P = out if not isinstance(out, tuple) else out[site.index]
                if P is None:            # transformers records nothing for this call either
                    return
                X = state["X"].pop(id(site.module), None)
                key = (site.stack, site.kind)
                layer = state["calls"].get(key, 0)
                state["calls"][key] = layer + 1
                if layers is not None and layer not in layers:
                    return
                _take(site, layer, P, X)
            except Exception as exc:        # ours, not the model's: told apart below
                raise _HookFailure(exc) from None
        return f

    def take_outputs(out):
        # older modeling code (ld.capture == "outputs"): the weights the forward returned
        # for output_attentions, one tensor a layer in each of its attention outputs
        for attr, stack, kind in (OUTPUT_GROUPS_ED if ld.is_encoder_decoder else OUTPUT_GROUPS):
            Ps = out.get(attr) if hasattr(out, "get") else None
            if Ps is None:
                continue
            if not isinstance(Ps, (tuple, list)):
                raise CaptureError(f"the output {attr} of {type(ld.model).__name__} is a {type(Ps).__name__}, "
                                   f"not one tensor a layer")
            if stack is None:          # decided once, on the first batch (see output_stack)
                state["stack"] = state.get("stack") or output_stack(Ps, ld.model, state["masks"].get("attention_mask"))
                stack = state["stack"]
            site = Site(f"output {attr}", None, 0, kind, stack, ld.model)
            for layer, P in enumerate(Ps):
                state["calls"][(stack, kind)] = layer + 1
                if P is not None and (layers is None or layer in layers):
                    _take(site, layer, P, None, check=True)

    def _take(site, layer, P, X, check=False):
        batch = state["batch"]
        B = len(batch.seq_ids)
        where = f"{site.name or type(site.module).__name__} ({site.stack} {site.kind}-attention, layer {layer})"
        if not (torch.is_tensor(P) and P.ndim == 4 and P.shape[0] == B and P.is_floating_point()):
            shape = tuple(P.shape) if torch.is_tensor(P) else type(P).__name__
            raise CaptureError(f"{where} returned attention weights of shape {shape}, not (batch={B}, heads, "
                               f"queries, keys) probabilities")
        _, H, Lq, Lk = P.shape
        if heads_arr is not None and heads_arr.max() >= H:
            raise CaptureError(f"--heads selects head {int(heads_arr.max())}, but {where} has {H} heads")
        hsel = np.arange(H) if heads_arr is None else heads_arr
        g = groups.setdefault((site.stack, site.kind), {"layers": set(), "heads": H, "queries": set(),
                                                        "keys": set()})
        g["layers"].add(layer)
        g["queries"].add(Lq)
        g["keys"].add(Lk)
        rows = P.detach()[:, torch.as_tensor(hsel, device=P.device)].to("cpu", torch.float64).numpy()
        qmask = state["masks"].get(_query_mask_name(ld, site))
        for b, s in enumerate(batch.seq_ids):
            q = np.arange(Lq)
            r = rows[b]                                              # (h, Lq, Lk)
            if qmask is not None and qmask.shape[1] == Lq:
                q = np.flatnonzero(qmask[b])
                r = r[:, q]
            if check:
                _check_probabilities(r, where)
            nh, nq = len(hsel), len(q)
            sink.add(r.reshape(nh * nq, Lk), layer=layer, head=np.repeat(hsel, nq), query=np.tile(q, nh),
                     sequence=s, seqlen=Lk, stack=site.stack, kind=site.kind)
            # C9 at this input: only for unpadded sequences, where the bound's unmasked map with
            # positions 0…L−1 is the map the model applied (padding shifts rotary positions)
            padded = qmask is not None and qmask.shape[1] == Lq and not qmask[b].all()
            if bounds is not None and site.kind == "self" and torch.is_tensor(X) and not padded:
                bounds.add(layer, X[b].detach().to("cpu", torch.float64).numpy())

    hooks = []
    for site in ld.sites:
        if bounds is not None and site.kind == "self":
            hooks.append(site.module.register_forward_pre_hook(pre_hook(site), with_kwargs=True))
        hooks.append(site.module.register_forward_hook(post_hook(site)))
    bar = Progress(sum(b.units for b in batches), "probe", progress, unit)
    extra = {"use_cache": False} if "use_cache" in ld.forward_params else {}
    if ld.capture == "outputs":
        extra["output_attentions"] = True
        if "return_dict" in ld.forward_params:
            extra["return_dict"] = True
    try:
        with torch.no_grad(), capture_threads() as adjust:
            for batch in batches:
                adjust()
                state.update(batch=batch, calls={}, X={},
                             masks={k: np.asarray(v) for k, v in batch.arrays.items()
                                    if k.endswith("attention_mask") and np.ndim(v) == 2})
                kwargs = {k: _to_torch(v, ld.dtype, device) for k, v in batch.arrays.items()}
                try:
                    out = ld.model(**kwargs, **extra)
                except _HookFailure as exc:
                    raise exc.exc from None
                except Exception as exc:
                    raise ForwardError(exc) from exc
                if ld.capture == "outputs":
                    take_outputs(out)
                if not state["calls"]:
                    raise CaptureError(f"no module returned attention weights during the forward pass of "
                                       f"{type(ld.model).__name__}")
                bar.update(batch.units)
    finally:
        for h in hooks:
            h.remove()
        bar.close()
    if layers is not None:
        seen = set().union(*(g["layers"] for g in groups.values())) if groups else set()
        missing = sorted(set(layers) - seen)
        if missing:
            raise CaptureError(f"--layers selects layer {missing[0]}, which no attention kind of this model has")
    return {"sequences": int(sum(len(b.seq_ids) for b in batches)), "batches": len(batches),
            unit: int(sum(b.units for b in batches)),
            "attention": [{"stack": s, "kind": k, "layers": sorted(g["layers"]), "heads": g["heads"],
                           "queries": sorted(g["queries"]), "keys": sorted(g["keys"])}
                          for (s, k), g in groups.items()]}


# the attention outputs of older modeling code read by capture (ld.capture == "outputs"):
# (output name, stack, kind); stack None: decided by output_stack
OUTPUT_GROUPS = (("attentions", None, "self"), ("cross_attentions", "decoder", "cross"))
OUTPUT_GROUPS_ED = (("encoder_attentions", "encoder", "self"), ("decoder_attentions", "decoder", "self"),
                    ("cross_attentions", "decoder", "cross"))


def output_stack(Ps, model, qmask=None) -> str:
    """The stack label of a single-stack model's self-attention read from its outputs (no
    modules to ask): "decoder" when in these tensors (one batch, every layer) each real query
    (``qmask``, (batch, queries) 0/1, when given: a padded query's row may be anything) puts
    exact zeros on every later key, else "encoder"; with no square tensor of two or more
    tokens to tell, the config's ``is_decoder``.  A label only: what is certified is the rows."""
    import torch
    sq = [P for P in Ps if torch.is_tensor(P) and P.ndim == 4 and P.shape[-1] == P.shape[-2] >= 2]
    if not sq:
        return "decoder" if getattr(model.config, "is_decoder", False) is True else "encoder"
    for P in sq:
        later = (torch.triu(P, 1) != 0).any(dim=-1).any(dim=1).cpu().numpy()     # (batch, queries)
        if qmask is not None and qmask.shape == later.shape:
            later &= qmask.astype(bool)
        if later.any():
            return "encoder"
    return "decoder"


def _check_probabilities(r: np.ndarray, where: str) -> None:
    """Weights read from a model's outputs must be probability rows (finite, ≥ 0, each summing
    to 1 within certify's default sum defect), as a softmax gives them: older modeling code
    sometimes returns other things under the name (ProphetNet's signed weights)."""
    from .inputs import DEFAULT_MAX_SUM_DEFECT
    if r.size == 0:
        return
    sums = r.sum(axis=-1)
    lo = float(r.min())
    if not (np.isfinite(sums).all() and lo >= 0 and float(np.abs(sums - 1).max()) <= DEFAULT_MAX_SUM_DEFECT):
        raise CaptureError(f"{where} returned weights that are not attention probabilities (least entry "
                           f"{lo:.3g}, row sums {float(sums.min()):.6g} to {float(sums.max()):.6g}): this model's "
                           f"output_attentions is not a softmax it applies, so probe cannot certify it",
                           instead=False)


def _to_torch(a: np.ndarray, float_dtype, device: str):
    """Integers as int64 (token ids, masks), booleans as bool, floats in the model's dtype."""
    import torch
    a = np.asarray(a)
    if a.dtype.kind == "b":
        return torch.as_tensor(a, device=device)
    if a.dtype.kind in "iu":
        return torch.as_tensor(a.astype(np.int64), device=device)
    return torch.as_tensor(a, device=device).to(float_dtype or torch.float32)
