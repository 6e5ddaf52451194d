"""The Python API of probe: ``certificates.probe(model, inputs)`` on a loaded transformers model.

The same capture as ``python -m certificates probe`` (certificates/probe_capture.py), the
same input validation (a problem the command line reports as exit 2 raises ValueError
here with the same one-line message), rows in memory instead of OUT/rows.npz.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from .inputs import InputError

if TYPE_CHECKING:
    from transformers import PreTrainedModel


@dataclass(frozen=True)
class ProbeResult:
    """Captured attention rows, their metadata and (unless ``certify=False``) their certificates.

    ``rows`` (n, L) float64: each row the probabilities an attention module multiplied with
    its values, widened exactly from the model's dtype and zero-padded on the right to the
    widest row (``seqlen`` is the row's own width; zero padding does not change θ, C6).
    ``layer``, ``head``, ``query``, ``sequence`` (index along the inputs' batch axis),
    ``seqlen``: int32; ``stack`` ("encoder"/"decoder") and ``kind`` ("self"/"cross"):
    strings.  ``certificates``: :class:`certificates.Certificates` of ``rows`` (bounds on θ of
    the exact normalisation of each stored row), or None.
    """
    rows: np.ndarray
    layer: np.ndarray
    head: np.ndarray
    query: np.ndarray
    sequence: np.ndarray
    seqlen: np.ndarray
    stack: np.ndarray
    kind: np.ndarray
    certificates: Any
    model_type: str

    def __len__(self) -> int:
        return int(self.rows.shape[0])

    def metadata(self) -> dict[str, np.ndarray]:
        """The per-row columns, e.g. for ``np.savez('rows.npz', rows=r.rows, **r.metadata())``."""
        return {k: getattr(self, k) for k in ("layer", "head", "query", "sequence", "seqlen", "stack", "kind")}


def _indices(sel: Sequence[int] | None, n: int | None, what: str) -> list[int] | None:
    from .probe_cli import parse_index_list
    if sel is None:
        return None
    sel = [sel] if isinstance(sel, int) else list(sel)
    if not all(isinstance(i, (int, np.integer)) and not isinstance(i, bool) for i in sel):
        raise InputError(what, f"{sel!r}: need integers")
    return parse_index_list(",".join(str(int(i)) for i in sel), n or 1 << 30, what)


def probe(model: PreTrainedModel, inputs: Mapping[str, Any] | Any, *, layers: Sequence[int] | None = None,
          heads: Sequence[int] | None = None,
          batch_size: int = 8, max_sequences: int | None = None, certify: bool = True,
          tolerance: float = 1e-6, device: str = "cpu", progress: bool = False) -> ProbeResult:
    """Capture every attention row ``model`` uses on ``inputs`` and certify it.

    model: a transformers ``PreTrainedModel`` in eval mode, loaded with
    ``attn_implementation="eager"`` (other kernels return no weights).  Any architecture
    whose modeling code declares its attention modules (``_can_record_outputs``).
    inputs: a dict of named arrays or tensors passed as keyword arguments, all with the same
    leading batch axis (``input_ids``, ``pixel_values``, ``input_features``,
    ``decoder_input_ids``, ``attention_mask``, ...; as ``--model-inputs``), or token ids: an
    integer array/tensor (tokens,) or (batch, tokens), or a list of 1-D id arrays (sequences
    of different lengths run in separate batches; none is padded).
    layers, heads: which to keep (0-based; default all) in every (stack, kind).
    certify: also run :func:`certificates.certify` on the rows (``tolerance``, ``device``).

    Precision contract: the rows are the float tensors the modules returned and multiplied
    with their values (softmax of the scores plus mask in the model's dtype), widened exactly
    to float64; masked keys are exact zeros; rows of queries a 0/1 ``attention_mask`` (or an
    encoder–decoder's ``decoder_attention_mask``) marks as padding are left out.  The
    certificates bound θ of the exact normalisation ``p/Σp`` of each stored row, rounded
    outward.  Floating inputs are cast to the model's dtype, integers to int64.

    Raises ValueError (one line) for a model that cannot be captured, invalid inputs, inputs
    the model's forward rejects, or rows certify refuses.  torch's thread count follows the
    free cores during the forward passes and is restored afterwards.
    """
    try:
        return _probe(model, inputs, layers, heads, batch_size, max_sequences, certify, tolerance, device,
                      progress)
    except InputError as exc:
        raise ValueError(str(exc)) from None


def _probe(model, inputs, layers, heads, batch_size, max_sequences, do_certify, tolerance, device, progress):
    from transformers import PreTrainedModel

    from . import hf_model
    from .probe_capture import CaptureError, ForwardError, batches_from_arrays, batches_from_sequences, capture
    from .probe_rows import RowsCollector
    if not isinstance(model, PreTrainedModel):
        raise InputError("model", f"a {type(model).__name__}; need a transformers PreTrainedModel")
    if model.training:
        raise InputError("model", "is in training mode (dropout would change the weights it returns); "
                                  "call model.eval() first")
    if not (isinstance(batch_size, int) and batch_size >= 1):
        raise InputError("batch_size", f"{batch_size!r}: need a positive integer")
    if max_sequences is not None and not (isinstance(max_sequences, int) and max_sequences >= 1):
        raise InputError("max_sequences", f"{max_sequences!r}: need a positive integer")
    ld = hf_model.describe(model)
    where = "inputs"
    if isinstance(inputs, Mapping):
        arrays = {k: hf_model.as_numpy(v, k, where) for k, v in inputs.items()}
        if max_sequences:
            arrays = {k: v[:max_sequences] if v.ndim else v for k, v in arrays.items()}
        arrays = hf_model.check_model_inputs(ld, arrays, where)
        batches, unit = batches_from_arrays(arrays, batch_size), "sequences"
    else:
        if isinstance(inputs, (list, tuple)) and inputs and all(np.ndim(hf_model.as_numpy(s, "ids", where)) == 1
                                                                for s in inputs):
            seqs = [s for x in inputs for s in hf_model.sequences_from_array(hf_model.as_numpy(x, "ids", where),
                                                                             where)]
        else:
            seqs = hf_model.sequences_from_array(hf_model.as_numpy(inputs, "input_ids", where), where)
        seqs = seqs[:max_sequences] if max_sequences else seqs
        hf_model.check_ids(seqs, ld.vocab_size, where)
        longest = max(len(s) for s in seqs)
        if ld.max_positions is not None and longest > ld.max_positions:
            raise InputError(where, f"{longest} tokens exceed the model's {ld.max_positions} positions")
        if ld.forward_params and "input_ids" not in ld.forward_params:
            raise InputError(where, f"{type(model).__name__} takes no input_ids; pass a dict of its inputs")
        batches, unit = batches_from_sequences(seqs, batch_size), "tokens"
    layers = _indices(layers, ld.n_layers, "layers")
    heads = _indices(heads, ld.n_heads, "heads")
    sink = RowsCollector()
    try:
        capture(ld, batches, layers, heads, sink, None, device=ld.device, progress=progress, unit=unit)
    except CaptureError as exc:
        raise InputError(type(model).__name__, f"{exc}; {hf_model.INSTEAD}" if exc.instead else str(exc)) \
            from None
    except ForwardError as exc:
        raise InputError(where, f"the model rejected the inputs ({hf_model._first_line(exc.exc)})") from None
    if sink.written == 0:
        raise InputError(where, "no attention row was captured (every query masked?)")
    rows, meta = sink.result()
    certs = None
    if do_certify:
        from .api import certify
        certs = certify(rows, tolerance, device=device)
    return ProbeResult(rows=rows, **meta, certificates=certs, model_type=ld.model_type)
