"""Summed token cross-entropy without a float32 copy of the logits.

``F.cross_entropy(logits.float(), ...)`` (and autocast, which runs cross_entropy in
float32) materialises a float32 copy of the whole (tokens, vocab) logits, keeps
a float32 log-softmax for backward and makes two more float32 (tokens, vocab)
tensors in backward: about 16 bytes per logit at gpt2-774m's vocabulary, more
than a third of the activations of a micro-batch.

:func:`token_loss_sum` reads the logits in the model's dtype, ``chunk`` rows at a
time: each chunk is upcast to float32, its log-sum-exp, target logit and
gradient ``softmax - onehot`` are computed in float32, the loss is accumulated
in float64 and the gradient is stored once, in the logits' dtype (bf16 under
autocast: exactly what autograd would hand the bf16 ``lm_head`` output anyway).
Backward only scales that stored gradient in place.  Memory per token: one
gradient row in the model dtype, plus float32 work space for one chunk.

:func:`token_loss_sum_nograd` is the same reduction for evaluation (nothing stored).
"""
from __future__ import annotations

import torch

CHUNK_TOKENS = 1024  # rows of the logits upcast at a time (one gpt2-774m sequence)


def _chunk_loss(z: torch.Tensor, t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """float32 chunk ``z`` (n, V), targets ``t`` (n,): (sum of -log softmax[t] as float64, log-sum-exp)."""
    lse = torch.logsumexp(z, dim=-1)
    picked = z.gather(1, t.unsqueeze(1)).squeeze(1)
    return (lse - picked).double().sum(), lse


class _TokenLossSum(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits: torch.Tensor, targets: torch.Tensor, chunk: int) -> torch.Tensor:
        n = logits.shape[0]
        grad = torch.empty_like(logits)
        total = torch.zeros((), dtype=torch.float64, device=logits.device)
        for s in range(0, n, chunk):
            z = logits[s:s + chunk].to(torch.float32, copy=True)  # never the caller's storage
            t = targets[s:s + chunk]
            part, lse = _chunk_loss(z, t)
            total += part
            p = z.sub_(lse.unsqueeze(1)).exp_()  # softmax, in z's storage
            t1 = t.unsqueeze(1)
            p.scatter_(1, t1, p.gather(1, t1) - 1.0)  # - onehot (targets are unique per row)
            grad[s:s + chunk].copy_(p)
        ctx.save_for_backward(grad)
        return total

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, g: torch.Tensor):
        (grad,) = ctx.saved_tensors
        # In place: the stored gradient is needed by nobody else (no double backward).
        return grad.mul_(g.to(grad.dtype)), None, None


def token_loss_sum(logits: torch.Tensor, targets: torch.Tensor, chunk: int = CHUNK_TOKENS) -> torch.Tensor:
    """Sum over tokens of the cross-entropy; ``logits`` (..., V), ``targets`` (...) int64.

    Returns a float64 scalar; its gradient w.r.t. ``logits`` has the logits' dtype.
    """
    V = logits.size(-1)
    return _TokenLossSum.apply(logits.reshape(-1, V), targets.reshape(-1), chunk)


@torch.no_grad()
def token_loss_sum_nograd(logits: torch.Tensor, targets: torch.Tensor, chunk: int = CHUNK_TOKENS) -> torch.Tensor:
    V = logits.size(-1)
    logits, targets = logits.reshape(-1, V), targets.reshape(-1)
    total = torch.zeros((), dtype=torch.float64, device=logits.device)
    for s in range(0, logits.shape[0], chunk):
        total += _chunk_loss(logits[s:s + chunk].float(), targets[s:s + chunk])[0]
    return total
