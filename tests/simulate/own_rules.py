"""A researcher's own rules, as the tests name them: ``tests.simulate.own_rules:ATTRIBUTE``.

* :class:`TreeRRS`: a Verifier subclass of RRS declaring ``structure = "draft_tree"`` (its law is
  RRS's; the exact simulator takes the structured path);
* :class:`OwnRuleB`: the same under a plain name, for ``registry.register``;
* :func:`sd_copy`: speculative sampling on draft 0 as a plain function (enumerable; claims
  lossless; reads one draft);
* :func:`accept_all`: keeps draft 0 whole and adds a token of p (lossy; claims lossless, wrongly);
* :func:`no_claim_sd`: :func:`sd_copy` without any declaration;
* :func:`gumbel_first`: rejects at once and samples the first token of p by Gumbel-max
  (lossless, but ``rng.gumbel`` cannot be enumerated: sampled only);
* ``NOT_A_RULE``: a number.
"""

from __future__ import annotations

import numpy as np

from spectr_gbv.examples.own_rules import first_draft_sd
from spectr_gbv.reference.rrs import RecursiveRejectionVerifier


class TreeRRS(RecursiveRejectionVerifier):
    """RRS (SpecInfer) under a user's name, declaring its draft-tree reading shape."""

    name = "tree_rrs"
    structure = "draft_tree"


class OwnRuleB(RecursiveRejectionVerifier):
    """RRS registered under a new name (``registry.register(OwnRuleB)``)."""

    name = "own_rule_b"
    structure = "draft_tree"


def sd_copy(drafts, q, p, rng):
    """Speculative sampling of draft 0 (Leviathan et al. 2023, Algorithm 1), as a plain function."""
    return first_draft_sd(drafts, q, p, rng)

sd_copy.lossless = True
sd_copy.drafts = "one"


def no_claim_sd(drafts, q, p, rng):
    """sd_copy, declaring nothing (no lossless claim, reads all drafts as far as a grid knows)."""
    return sd_copy(drafts, q, p, rng)


def accept_all(drafts, q, p, rng):
    """Draft 0 kept whole, then one token of p: lossy whenever q differs from p."""
    x = [int(t) for t in drafts[0]]
    return x + [int(rng.choice(p.shape[2], p=p[0, len(x)]))]


accept_all.lossless = True  # a wrong claim: the measured defect says otherwise


def gumbel_first(drafts, q, p, rng):
    """No draft token kept; the first token by Gumbel-max on log p (exactly p, but not enumerable)."""
    logp = np.log(np.asarray(p[0, 0], dtype=np.float64))
    return [int(np.argmax(logp + rng.gumbel(size=p.shape[2])))]


NOT_A_RULE = 3
