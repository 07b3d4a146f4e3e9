r"""Does a model score a token tree correctly? A one-time probe, so tree scoring is chosen automatically.

Tree scoring (:mod:`spectr_gbv.gpu.decoding.tree`) hands the model a custom 4-D attention mask
and explicit ``position_ids``. A model that refuses them raises; worse, one that silently
ignores them (an attention implementation that builds its own causal mask, a model that
derives positions from the cache length) returns wrong target laws, and a verifier fed wrong
laws is not lossless. So before a decoder scores a tree with a model, :func:`supports_tree_attention`
checks, once per model object, that the model's logits on a small tree equal its logits on
each root-to-leaf path fed as a plain sequence; otherwise the decoder falls back to flat
scoring (one batch row per draft, the model's own causal path).

The probe: a 2-token context in a cache, then a tree of 6 nodes over 3 levels (the root, two
children, a grandchild under each child and one more under the first), fed in one forward
with the ancestor mask; reference: each of the three paths as one sequence without a cache.
Float arithmetic makes the tree's log-probabilities differ from the paths' a little (other
shapes, other kernels), so the tolerance is stated from the model's dtype and measured: each
path is also computed a second legitimate way (its context cached, then the path fed as a
chain), and the tree's log-probs must agree with the reference's within

.. math::
    \mathrm{tol} = \min\{16\,\mathrm{noise} + 64\,\varepsilon_{\mathrm{dtype}}\,(1 + s),\; 0.1\,(1 + s)\}

(:data:`PROBE_NOISE_FACTOR`, :data:`PROBE_ULPS`, :data:`PROBE_CAP`), s the largest absolute
logit and :math:`\varepsilon` the dtype's machine epsilon (``torch.finfo(dtype).eps``: 64 ulps
of the largest logit: 7.6e-6 relative in float32, 0.0625 in float16; in bfloat16 the cap, 0.1
relative, which is 12.8 bfloat16 ulps); the log-probs must also be infinite exactly where the
reference's are (a restricted head's ``-inf`` outside its token subset). The model runs in
eval mode during the probe (its mode is restored after), and the reference is computed twice:
a model whose two identical forwards differ by more than 64 ulps (a layer that is random in
eval mode too) is refused with that reason, not blamed on masks; a smaller difference (a
nondeterministic GPU kernel) counts into the noise. Measured on SmolLM2-135M (float32, 30 layers):
noise floor 5.3e-5, tree 1.2e-4, a mask ignored 1.15, positions ignored 0.51 (relative to 1 +
the largest absolute logit); on the tiny test models, tree against path, in ulps of the dtype
at the largest logit: float32 up to 2.4, bfloat16 up to 1.5, float16 up to 2.9; a mask ignored
35 (bfloat16) to 2.2e6 (float32) ulps, i.e. 0.27 to 0.42 relative, positions ignored 0.9 to
1.2 relative. A failure is reported with its cause (:class:`TreeProbe`): the attention
implementation, the exception the tree forward raised, a random forward, or the size of the
difference: below :data:`PROBE_CAP` relative it looks like rounding (numerics), above it like a
mask or positions ignored. Models whose ``config._attn_implementation`` is neither ``eager``
nor ``sdpa`` (e.g. ``flash_attention_2``, which takes no 4-D mask) are refused without a
probe.

References
----------
Miao et al., SpecInfer, ASPLOS 2024 (tree attention); transformers ``masking_utils``
(a 4-D mask is used as given); ECOSYSTEM.md B1 (positions of draft tokens).
"""

from __future__ import annotations

import math
import warnings
import weakref
from dataclasses import dataclass

import torch

from spectr_gbv.gpu.decoding.cache import RowCache, model_forward, model_vocab_size
from spectr_gbv.gpu.decoding.guards import TrainingModeWarning, eval_mode
from spectr_gbv.gpu.decoding.tree import TokenTree

#: Attention implementations that take a custom 4-D additive mask (transformers' names).
TREE_ATTENTION_IMPLEMENTATIONS: tuple[str, ...] = ("eager", "sdpa")
#: The tree's log-probs may differ from the paths' by this many times the noise floor (module docstring) ...
PROBE_NOISE_FACTOR = 16.0
#: ... plus this many ulps of the model's dtype at the largest absolute logit (``torch.finfo(dtype).eps`` each) ...
PROBE_ULPS = 64.0
#: ... and never more than this, relative to 1 + the largest absolute logit (a mask or positions ignored moved
#: the log-probs by 0.27 to 1.2 relative on the models measured); larger failures are reported as masks, smaller
#: ones as numerics.
PROBE_CAP = 0.1

_VERDICTS: weakref.WeakKeyDictionary[torch.nn.Module, TreeProbe] = weakref.WeakKeyDictionary()


@dataclass(frozen=True)
class TreeProbe:
    """Outcome of the tree-attention probe of one model (:func:`probe_tree_attention`).

    Attributes
    ----------
    ok : bool
        True when the model scores token trees exactly as paths (within ``tolerance``).
    cause : str
        ``""`` when ok, else one of ``"attention"`` (an implementation without 4-D masks),
        ``"raised"`` (the tree forward raised), ``"random"`` (two identical forwards differ),
        ``"infinite"`` (infinite log-probs where the paths' are finite, or back),
        ``"numerics"`` (a difference below :data:`PROBE_CAP` relative: rounding of the dtype)
        or ``"masks"`` (a larger difference: the mask or the position ids are ignored).
    reason : str
        One clause for an error message ("" when ok).
    error, noise, scale, tolerance : float
        Largest absolute difference of the log-probs, tree against path and second way against
        path, the largest absolute logit s, and the tolerance applied (0 when the comparison
        did not run).
    dtype : torch.dtype or None
        Dtype of the model's logits.
    """

    ok: bool
    cause: str = ""
    reason: str = ""
    error: float = 0.0
    noise: float = 0.0
    scale: float = 0.0
    tolerance: float = 0.0
    dtype: torch.dtype | None = None


def tree_attention_refusal(model: torch.nn.Module, role: str) -> str:
    """The clause an error message gives for ``model`` failing :func:`supports_tree_attention`.

    Parameters
    ----------
    model : torch.nn.Module
    role : str
        ``"target"`` or ``"draft"`` (named in the text).

    Returns
    -------
    str
        E.g. ``"the target model LlamaForCausalLM does not score token trees correctly (its log-probs
        on a tree differ from its log-probs on each path by 2.3 (0.27 relative), far above rounding:
        it ignores the custom 4-D attention mask or the position ids)"``.
    """
    probe = probe_tree_attention(model)
    return f"the {role} model {type(model).__name__} does not score token trees correctly ({probe.reason})"


def supports_tree_attention(model: torch.nn.Module) -> bool:
    """True when ``model`` scores a token tree exactly as it scores each path (probed once per model).

    Parameters
    ----------
    model : transformers causal LM
        On its device; not modified (the probe uses its own caches and runs the model in eval
        mode, restoring its mode after).

    Returns
    -------
    bool
        ``probe_tree_attention(model).ok``: False when the attention implementation takes no
        4-D mask, when the tree forward raises (``TypeError``, ``ValueError``,
        ``RuntimeError``, ``NotImplementedError``, ``IndexError``), when two identical forwards
        differ, or when any node's log-probs differ from the path's beyond the tolerance
        (module docstring). The verdict is cached for the model object.

    References
    ----------
    Miao et al., SpecInfer, ASPLOS 2024 (tree attention).
    """
    return probe_tree_attention(model).ok


def probe_tree_attention(model: torch.nn.Module) -> TreeProbe:
    """The probe's full outcome for ``model``: verdict, cause and the measured differences (cached).

    Parameters
    ----------
    model : transformers causal LM
        On its device; run in eval mode during the probe (its mode is restored after).

    Returns
    -------
    TreeProbe

    References
    ----------
    Miao et al., SpecInfer, ASPLOS 2024 (tree attention).
    """
    probe = _VERDICTS.get(model)
    if probe is None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", TrainingModeWarning)  # the mode is the decoder's to warn about
            with eval_mode({"probed": model}, "the tree-attention probe"):
                probe = _probe(model)
        _VERDICTS[model] = probe
    return probe


@torch.no_grad()
def _probe(model: torch.nn.Module) -> TreeProbe:
    impl = getattr(getattr(model, "config", None), "_attn_implementation", None)
    if impl is not None and impl not in TREE_ATTENTION_IMPLEMENTATIONS:
        return TreeProbe(
            False,
            "attention",
            f"its attention implementation {impl!r} takes no custom 4-D attention mask; "
            f"only {' and '.join(TREE_ATTENTION_IMPLEMENTATIONS)} do",
        )
    V = model_vocab_size(model)
    device = next(model.parameters()).device
    ids = [i % V for i in (1, 2, 3, 4, 5, 6, 7, 8)]
    context = torch.tensor([ids[:2]], device=device)
    # drafts of the tree: (4, 6), (5, 7), (4, 8): root 3, children 4 and 5, grandchildren 6, 8 (under 4), 7
    drafts = torch.tensor([[[ids[3], ids[5]], [ids[4], ids[6]], [ids[3], ids[7]]]], device=device)
    tree = TokenTree.from_drafts(drafts, root_tokens=torch.tensor([ids[2]], device=device))
    cache = RowCache(1, device)
    try:
        cache.forward(model, context)
        positions = cache.lengths[:, None] + tree.depths()
        logits = cache.forward_masked(
            model, tree.tokens(), tree.valid(), positions, tree.ancestors(), cache.physical_length
        )[0]
    except (TypeError, ValueError, RuntimeError, NotImplementedError, IndexError) as e:
        text = str(e).splitlines()[0][:200] if str(e) else ""
        said = f"a forward with a custom 4-D attention mask raised {type(e).__name__}: {text}"
        return TreeProbe(False, "raised", said)
    nodes = tree.node_index()[0]  # [K, 3]
    err = noise = repeat_diff = scale = 0.0
    for k in range(drafts.shape[1]):
        path = torch.cat([context[0], tree.tokens()[0, nodes[k]]])[None]
        plain = torch.arange(path.shape[1], device=device)[None]
        ref_logits = model_forward(model, path, _empty_cache(), plain)[0, 2:].float()
        repeat = model_forward(model, path, _empty_cache(), plain)[0, 2:]  # the very same forward again
        chain = RowCache(1, device)
        chain.forward(model, path[:, :2])
        again = chain.forward(model, path[:, 2:])[0]  # the same logits, computed another legitimate way
        ref, got, again, repeat = (
            torch.log_softmax(x.float(), dim=-1) for x in (ref_logits, logits[nodes[k]], again, repeat)
        )
        finite = torch.isfinite(ref)  # a restricted head's -inf entries must match exactly
        if finite.any():
            scale = max(scale, float(ref_logits[torch.isfinite(ref_logits)].abs().max()))
        if torch.equal(finite, torch.isfinite(repeat)) and finite.any():
            repeat_diff = max(repeat_diff, float((repeat - ref)[finite].abs().max()))
        elif finite.any():
            repeat_diff = math.inf
        if repeat_diff > PROBE_ULPS * torch.finfo(logits.dtype).eps * (1.0 + scale):
            return TreeProbe(
                False,
                "random",
                f"two identical forwards of the model differ (by {repeat_diff:.3g} in log-probs), more than "
                "rounding explains: a layer is random in eval mode (dropout that ignores model.eval()?), so no "
                "law of it can be verified; the masks were not tested",
                dtype=logits.dtype,
            )
        if (
            not finite.any()
            or not torch.equal(finite, torch.isfinite(got))
            or not torch.equal(finite, torch.isfinite(again))
        ):
            return TreeProbe(
                False,
                "infinite",
                "its log-probs on a tree are infinite or NaN where its log-probs on the same path are not "
                "(or the path's are all infinite)",
                dtype=logits.dtype,
            )
        err = max(err, float((got - ref)[finite].abs().max()))
        noise = max(noise, float((again - ref)[finite].abs().max()), repeat_diff)
    eps = torch.finfo(logits.dtype).eps
    cap = PROBE_CAP * (1.0 + scale)
    tolerance = min(PROBE_NOISE_FACTOR * noise + PROBE_ULPS * eps * (1.0 + scale), cap)
    measured = dict(error=err, noise=noise, scale=scale, tolerance=tolerance, dtype=logits.dtype)
    if err <= tolerance:
        return TreeProbe(True, **measured)
    rel, ulps = err / (1.0 + scale), err / (eps * (1.0 + scale))
    dtype = str(logits.dtype).replace("torch.", "")
    said = (
        f"its log-probs on a tree differ from its log-probs on each path by {err:.3g} ({rel:.2g} relative to "
        f"1 + the largest logit, {ulps:.3g} {dtype} ulps), above the tolerance {tolerance:.3g}"
    )
    if err < cap:
        reason = (
            f"{said}; a difference this small looks like {dtype} rounding (numerics), not ignored masks: "
            "run the model in float32, or with scoring='flat' and one prompt at a time"
        )
        return TreeProbe(False, "numerics", reason, **measured)
    reason = f"{said}; a difference this large means it ignores the custom 4-D attention mask or the position ids"
    return TreeProbe(False, "masks", reason, **measured)


def _empty_cache() -> object:
    from transformers import DynamicCache

    return DynamicCache()
