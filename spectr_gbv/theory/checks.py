"""Argument checks shared by the theory functions (:mod:`~spectr_gbv.theory.bounds`, :mod:`~spectr_gbv.theory.lp`,
:mod:`~spectr_gbv.theory.single_path`) and the ledger's joint LP (:mod:`~spectr_gbv.ledger.deployable`)."""

from __future__ import annotations

from spectr_gbv.core.tabular import TabularAR

#: Largest K accepted by the exact bound functions (Fraction powers grow with K).
MAX_NUM_DRAFTS = 10_000


def check_models(
    target: TabularAR, draft: TabularAR, draft_length: int, num_drafts: int | None = None
) -> tuple[TabularAR, TabularAR]:
    """Validate (p, q, L[, K]) and return the pair in one number kind.

    Returns
    -------
    (TabularAR, TabularAR)
        Both exact, or both float64 (a float model turns the other into float64).

    Raises
    ------
    ValueError
        ``draft_length`` (L) < 1, ``num_drafts`` (K) outside ``1..MAX_NUM_DRAFTS``, vocabulary
        mismatch, or tables too shallow (target needs depth >= L, draft depth >= L - 1).
    TypeError
        If a model is not a :class:`~spectr_gbv.core.tabular.TabularAR`.
    """
    for role, m in (("target", target), ("draft", draft)):
        if not isinstance(m, TabularAR):
            raise TypeError(f"{role} must be a TabularAR, got {type(m).__name__}")
    if not isinstance(draft_length, int) or isinstance(draft_length, bool) or draft_length < 1:
        raise ValueError(f"draft_length (L) must be an int >= 1, got {draft_length!r}")
    if num_drafts is not None and (
        not isinstance(num_drafts, int) or isinstance(num_drafts, bool) or not 1 <= num_drafts <= MAX_NUM_DRAFTS
    ):
        raise ValueError(f"num_drafts (K) must be an int in 1..{MAX_NUM_DRAFTS}, got {num_drafts!r}")
    if target.n != draft.n:
        raise ValueError(f"vocabulary mismatch: target n={target.n}, draft n={draft.n}")
    if target.depth < draft_length - 1 or draft.depth < draft_length - 1:
        raise ValueError(
            f"draft_length L={draft_length} needs laws at prefixes of length 0..{draft_length - 1}; "
            f"target depth {target.depth}, draft depth {draft.depth}"
        )
    if target.exact != draft.exact:
        return target.to_float(), draft.to_float()
    return target, draft
