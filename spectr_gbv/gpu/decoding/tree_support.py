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
Float arithmetic makes the tree's logits differ from the paths' a little (other shapes, other
kernels), so the tolerance is measured, not guessed: each path is also computed a second
legitimate way (its context cached, then the path fed as a chain), and the tree must agree
with the reference within :data:`PROBE_NOISE_FACTOR` times that noise floor plus
:data:`PROBE_FLOOR` (relative to the largest logit), and never worse than :data:`PROBE_CAP`;
its logits must also be infinite exactly where the reference's are (a restricted head's
``-inf`` outside its token subset). Measured on SmolLM2-135M (float32, 30 layers): noise floor
5.3e-5, tree 1.2e-4, a mask ignored 1.15, positions ignored 0.51 (relative to 1 + the largest absolute logit);
on the tiny test models: 3e-7, 0, and 0.2 to 0.5. Models whose ``config._attn_implementation`` is neither
``eager`` nor ``sdpa`` (e.g. ``flash_attention_2``, which takes no 4-D mask) are refused
without a probe.

References
----------
Miao et al., SpecInfer, ASPLOS 2024 (tree attention); transformers ``masking_utils``
(a 4-D mask is used as given); ECOSYSTEM.md B1 (positions of draft tokens).
"""

from __future__ import annotations

import weakref

import torch

from spectr_gbv.gpu.decoding.cache import RowCache, model_forward, model_vocab_size
from spectr_gbv.gpu.decoding.tree import TokenTree

#: Attention implementations that take a custom 4-D additive mask (transformers' names).
TREE_ATTENTION_IMPLEMENTATIONS: tuple[str, ...] = ("eager", "sdpa")
#: The tree's logits may differ from the paths' by this many times the noise floor (see the module docstring).
PROBE_NOISE_FACTOR = 16.0
#: ... plus this floor, relative to 1 + the largest absolute logit, by the model's dtype (float16, bfloat16: 1e-3).
PROBE_FLOOR: dict[torch.dtype, float] = {torch.float64: 1e-9, torch.float32: 1e-5}
PROBE_FLOOR_LOW_PRECISION = 1e-3
#: ... and never more than this (a mask or positions ignored moved the logits by 0.2 to 1.2 here).
PROBE_CAP = 0.05

_VERDICTS: weakref.WeakKeyDictionary[torch.nn.Module, bool] = weakref.WeakKeyDictionary()


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
        E.g. ``"the target model GPT2LMHeadModel does not score token trees correctly (...)"``.
    """
    return (
        f"the {role} model {type(model).__name__} does not score token trees correctly "
        "(custom 4-D attention masks refused or ignored)"
    )


def supports_tree_attention(model: torch.nn.Module) -> bool:
    """True when ``model`` scores a token tree exactly as it scores each path (probed once per model).

    Parameters
    ----------
    model : transformers causal LM
        In eval mode, on its device; not modified (the probe uses its own caches).

    Returns
    -------
    bool
        False when the attention implementation takes no 4-D mask, when the tree forward
        raises (``TypeError``, ``ValueError``, ``RuntimeError``, ``NotImplementedError``,
        ``IndexError``), or when any node's logits differ from the path's beyond the
        measured tolerance (module docstring). The verdict is cached for the model object.

    References
    ----------
    Miao et al., SpecInfer, ASPLOS 2024 (tree attention).
    """
    verdict = _VERDICTS.get(model)
    if verdict is None:
        verdict = _probe(model)
        _VERDICTS[model] = verdict
    return verdict


@torch.no_grad()
def _probe(model: torch.nn.Module) -> bool:
    impl = getattr(getattr(model, "config", None), "_attn_implementation", None)
    if impl is not None and impl not in TREE_ATTENTION_IMPLEMENTATIONS:
        return False

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
    except (TypeError, ValueError, RuntimeError, NotImplementedError, IndexError):
        return False
    nodes = tree.node_index()[0]  # [K, 3]
    err = noise = scale = 0.0
    for k in range(drafts.shape[1]):
        path = torch.cat([context[0], tree.tokens()[0, nodes[k]]])[None]
        ref = model_forward(model, path, _empty_cache(), torch.arange(path.shape[1], device=device)[None])[0, 2:]
        chain = RowCache(1, device)
        chain.forward(model, path[:, :2])
        again = chain.forward(model, path[:, 2:])[0]  # the same logits, computed another legitimate way
        ref, got, again = ref.float(), logits[nodes[k]].float(), again.float()
        finite = torch.isfinite(ref)  # a restricted head's -inf entries must match exactly
        if (
            not finite.any()
            or not torch.equal(finite, torch.isfinite(got))
            or not torch.equal(finite, torch.isfinite(again))
        ):
            return False
        err = max(err, float((got - ref)[finite].abs().max()))
        noise = max(noise, float((again - ref)[finite].abs().max()))
        scale = max(scale, float(ref[finite].abs().max()))
    floor = PROBE_FLOOR.get(logits.dtype, PROBE_FLOOR_LOW_PRECISION) * (1.0 + scale)
    return err <= min(PROBE_NOISE_FACTOR * noise + floor, PROBE_CAP * (1.0 + scale))


def _empty_cache() -> object:
    from transformers import DynamicCache

    return DynamicCache()
