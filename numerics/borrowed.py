"""Borrowed array views for hot row loops: the same data, shape and strides, no owner.

Every array numba builds inside a compiled function (``R[i]``, a slice, an argument handed
to an inlined helper) carries a pointer to its owner's reference count, and numba counts
each such view in and out with an atomic increment and decrement (``NRT_incref`` /
``NRT_decref``, a locked instruction each).  In stage A's row loop at L = 64 that was 17 % of
the samples under ``perf`` (the two locked instructions were the hottest two of the run).
A view made by :func:`borrow` has no owner pointer (its meminfo is NULL), so the views made
from it are counted by a test of a null pointer and nothing else.

Only speed changes: the same loads and stores run, so every result is bit-identical (on
the benchmark's softmax rows, every certify_batch output array of L = 16, 64, 256 and
spreads 0.3–8 matched the previous commit's to the bit; the torch-twin tests compare
every mask and bound with an implementation that borrows nothing).

The one rule, which is what makes it safe: borrow an array only for as long as something
else keeps it alive — the arguments of the calling function (their caller holds them
until it returns), never an array allocated in the same function, which numba may free
after its last named use.
"""
from __future__ import annotations

from numba.core import cgutils
from numba.extending import intrinsic
from numba.np.arrayobj import make_array


@intrinsic
def borrow(typingctx, a):
    """A view of array ``a`` (any dtype, layout and rank) without an owner: see the module
    docstring for the rule that keeps it valid."""
    def codegen(context, builder, sig, args):
        src = make_array(sig.args[0])(context, builder, args[0])
        view = make_array(sig.return_type)(context, builder)
        view.meminfo = cgutils.get_null_value(view.meminfo.type)
        view.parent = cgutils.get_null_value(view.parent.type)
        view.nitems = src.nitems
        view.itemsize = src.itemsize
        view.data = src.data
        view.shape = src.shape
        view.strides = src.strides
        return view._getvalue()
    return a(a), codegen
