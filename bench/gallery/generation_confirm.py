r"""Independent confirmations of the lossy generation-loop verdicts of the gallery (exact first-token laws).

The generation referee (``spectr-gbv validate ADAPTER --interface generation``) rejects a loop
on sampled sequences. For transformers' two lossy paths this module computes, without the
referee, the exact law of the first generated token as transformers runs it and checks seeded
calls of the same adapter against it:

* ``hf-assisted:usd`` (universal assisted decoding, transformers 5.25): the draft token is drawn
  from the assistant's pruned head, ``q_s``, mapped to target ids by
  ``AssistantToTargetTranslator.get_target_ids`` (column j -> ``assistant_overlap_token_ids[j]``,
  the shared tokens in the assistant tokenizer's ``get_vocab()`` order), while
  ``_speculative_sampling`` accepts and draws its residual with ``q_v``, the softmax of
  ``get_target_logits`` (column j -> the j-th shared assistant id in increasing order). With
  ``p`` the target's processed law, one round emits as its first token

  .. math::
      P(x) = q_s(x)\,a(x) + \Bigl(1 - \sum_y q_s(y)\,a(y)\Bigr)\,\frac{(p - q_v)_+(x)}{\sum_y (p - q_v)_+(y)},
      \qquad a(x) = \min\{1, p(x) / q_v(x)\},

  which is ``p`` when ``q_s = q_v`` (Leviathan et al. 2023, Theorem 1) and not otherwise;
* ``hf-assisted:ensemble`` (``assistant_ensemble_weight`` w, DIVERSE): the acceptance ratio is
  ``1 - w + w p / q``, the residual the same; the first token's law works out to exactly
  ``w p + (1 - w) q``.

The laws come from :mod:`bench.gallery.generation_laws` (read from the objects transformers
uses in this process); :func:`confirm_usd` and :func:`confirm_ensemble` add seeded calls of the
same adapter in the same process (universal assisted decoding's ``get_vocab()`` order changes
from one process to the next, so the referee's own counts, made in other processes, are not
compared with a law computed here) and write the Markdown section that
``bench/gallery/run_gallery.py`` embeds in the FAILED pages.

References
----------
Leviathan et al., Fast Inference from Transformers via Speculative Decoding, ICML 2023;
Timor et al., Accelerating LLM Inference with Lossless Speculative Decoding Algorithms for
Heterogeneous Vocabularies, ICML 2025 (arXiv 2502.05202); transformers
``generation/candidate_generator.py`` and ``generation/utils.py``.
"""

from __future__ import annotations

import re

import numpy as np

from bench.gallery.generation_laws import (
    DEFAULT_SCENARIO,
    ENSEMBLE_WEIGHT,
    FirstTokenLaws,
    all_orders_tv,
    ensemble_laws,
    first_token_law,
    first_tokens,
    scenario_inputs,
    total_variation,
    usd_laws,
)

#: Seeded adapter calls per confirmation (seeds 0..N-1, ``max_new_tokens`` 2 as in the referee).
CONFIRM_CALLS: int = 400
#: Level below which the seeded calls' fit to the predicted law is reported as inconsistent.
FIT_LEVEL: float = 1e-3


def parse_scenario(report: str) -> tuple[str, int, float, int, float]:
    """The first failing small-vocabulary scenario a generation report names, else :data:`DEFAULT_SCENARIO`.

    Parameters
    ----------
    report : str
        Text report of ``spectr-gbv validate ... --interface generation``.

    Returns
    -------
    (str, int, float, int, float)
        Pair, prompt index, temperature, top_k (0 = off), top_p (1.0 = off), read from a
        ``FAIL`` line's ``sequence_law[...]`` or ``positional_law[...]`` label (the ``wide``
        pair, V = 1000, is skipped: its orders cannot be enumerated).
    """
    for m in re.finditer(r"^FAIL\s+\S+\s+(?:sequence_law|positional_law)\[([^\]]+)\]", report, flags=re.M):
        parts = m.group(1).split(",")
        if parts[0] == "wide" or not parts[1].startswith("p"):
            continue
        kv = dict(part.split("=", 1) for part in parts[2:] if "=" in part)
        temperature, top_k, top_p = float(kv.get("T", 1.0)), int(kv.get("top_k", 0)), float(kv.get("top_p", 1.0))
        return (parts[0], int(parts[1][1:]), temperature, top_k, top_p)
    return DEFAULT_SCENARIO



def _double_temperature_note(laws: FirstTokenLaws) -> str:
    """One sentence comparing the recorded q with the draft model's law at T and at T squared."""
    from spectr_gbv.gpu.models.sequence_law import SamplingSettings, conditional_law  # noqa: PLC0415

    pair, prompt, settings = scenario_inputs(laws.scenario)
    t = settings.temperature
    at_t = float(np.abs(laws.q_draw - conditional_law(pair.draft, prompt, settings)).max())
    squared = SamplingSettings(t * t, settings.top_k, settings.top_p)
    at_t2 = float(np.abs(laws.q_draw - conditional_law(pair.draft, prompt, squared)).max())
    return (
        f"The recorded q differs from the draft model's law at T = {t:g} by up to {at_t:.3g} and from its law at "
        f"T^2 = {t * t:g} by up to {at_t2:.3g} (largest difference over tokens). "
        + (
            "transformers divides the assistant's scores by the temperature twice; drafting and verification use the "
            "same scores, so that alone does not bias the output (it changes the acceptance rate)."
            if t != 1.0 and at_t2 < 1e-5 < at_t
            else "q is the draft's law as processed for this call."
        )
    )


def _fmt(v: np.ndarray) -> str:
    return "[" + ", ".join(f"{x:.4f}" for x in v) + "]"


def _label(scenario: tuple[str, int, float, int, float]) -> str:
    name, idx, t, k, tp = scenario
    parts = [name, f"p{idx}", f"T={t:g}", *([f"top_k={k}"] if k else []), *([f"top_p={tp:g}"] if tp < 1 else [])]
    return ",".join(parts)


def _fit_lines(laws: FirstTokenLaws, counts: np.ndarray, adapter: str) -> list[str]:
    from spectr_gbv.simulate.monte_carlo import pooled_g_test  # noqa: PLC0415

    fit = pooled_g_test(counts, laws.law)
    target = pooled_g_test(counts, laws.p)
    n = int(counts.sum())
    verdict = "consistent" if fit.p_value > FIT_LEVEL else f"NOT consistent at level {FIT_LEVEL:g}: re-examine"
    return [
        f"Seeded calls of `{adapter}` in the same process (seeds 0-{n - 1}, `max_new_tokens=2`), first tokens by id: "
        f"`{counts.tolist()}`; expected under the predicted law `{(laws.law * n).round(1).tolist()}`, under p "
        f"`{(laws.p * n).round(1).tolist()}`.",
        "",
        f"- against the predicted law: G = {fit.g:.2f}, df {fit.df}, p-value {fit.p_value:.3g} ({verdict});",
        f"- against the target's law p: G = {target.g:.2f}, df {target.df}, p-value "
        f"{target.p_value:.3g}{' (below the smallest double)' if target.p_value == 0 else ''}.",
    ]


def confirm_usd(report: str, num: int = CONFIRM_CALLS) -> str:
    """Markdown: the exact first-token law of ``hf-assisted:usd`` and the fit of seeded calls (see the module).

    Parameters
    ----------
    report : str
        The referee's text report (its first failing small-vocabulary scenario is used).
    num : int
        Seeded calls.

    Returns
    -------
    str
    """
    scenario = parse_scenario(report)
    laws = usd_laws(scenario)
    counts = first_tokens("hf-assisted:usd", scenario, num)
    tv = float(total_variation(laws.law, laws.p))
    lines = [
        f"Exact computation (`bench/gallery/generation_confirm.py`, `confirm_usd`) on `{_label(scenario)}` (prompt "
        f"`{laws.prompt}`), without the referee. In this process transformers' translator has "
        f"`assistant_overlap_token_ids = {laws.order}` (the shared tokens in `get_vocab()` order), so the pruned "
        "head's column j is drafted as target id `order[j]` (`get_target_ids`) but verified as target id j "
        "(`get_target_logits`). The laws, by target id 0..V-1 (float64 from transformers' float32 warped scores):",
        "",
        f"- target p (temperature, top-k, top-p): `{_fmt(laws.p)}`",
        f"- draft law q_s (what the assistant samples): `{_fmt(laws.q_draw)}`",
        f"- verifier's q_v (`softmax(get_target_logits(...))`): `{_fmt(laws.q_verify)}`",
        f"- first emitted token, `q_s(x) min(1, p/q_v) + P(reject) (p - q_v)+ / |(p - q_v)+|`: `{_fmt(laws.law)}`",
        "",
        f"**TV(first-token law, p) = {tv:.4f}** for this order (the formula gives p when q_s = q_v, i.e. for the "
        "increasing order).",
    ]
    if len(laws.p) <= 9:
        tvs = all_orders_tv(laws)
        lines += [
            "",
            f"Over all {len(tvs):,} orders of the {len(laws.p)} shared tokens (the order is a hash-map order that "
            f"changes between processes): TV from p is 0 (below 1e-12) for {int((tvs < 1e-12).sum())} orders, "
            "among them the increasing order and every order that only exchanges tokens of target probability 0 "
            f"(always rejected); median {np.median(tvs):.4f}, max {tvs.max():.4f}; "
            f"{float(np.mean(tvs > 0.05)):.1%} of the orders give TV > 0.05.",
        ]
    lines += ["", *_fit_lines(laws, counts, "hf-assisted:usd")]
    if tv < WEAK_TV and len(laws.p) <= 9:
        pinned, pinned_counts = pinned_order_witness(scenario, num)
        lines += [
            "",
            f"This process's order moves little mass (TV {tv:.4f}), so the witness is repeated with the order pinned: "
            f"the assistant tokenizer's `get_vocab()` iterated as ids {PINNED_ORDER} (the same map; a fresh "
            f"translator). Then `assistant_overlap_token_ids = {pinned.order}`, q_v = `{_fmt(pinned.q_verify)}`, "
            f"the first emitted token's law is `{_fmt(pinned.law)}`, **TV(first-token law, p) = "
            f"{float(total_variation(pinned.law, pinned.p)):.4f}**, and",
            "",
            *_fit_lines(pinned, pinned_counts, "hf-assisted:usd"),
        ]
    lines += [
        "",
        "The referee's calls ran in other processes, each with its own order, so their counts are not compared "
        "with this order's law. Fix: scatter column j onto the target id of `assistant_overlap_token_ids[j]` in "
        "`get_target_logits` (or build `assistant_overlap_token_ids` in increasing id order).",
    ]
    return "\n".join(lines)


#: Below this TV the process's own order is a weak witness and :func:`pinned_order_witness` is added.
WEAK_TV: float = 0.05
#: The pinned iteration order of the assistant vocabulary's shared words (then ``"<extra>"``).
PINNED_ORDER: tuple[int, ...] = (1, 2, 3, 4, 5, 6, 7, 0)


def pinned_order_witness(scenario: tuple[str, int, float, int, float], num: int) -> tuple[FirstTokenLaws, np.ndarray]:
    """The USD laws and ``num`` seeded first tokens with ``get_vocab()`` iterating in :data:`PINNED_ORDER`.

    A fresh kit (fresh tokenizers, so transformers builds a fresh translator) whose assistant tokenizer's
    ``get_vocab`` returns the same map in the pinned order; the adapter's kit cache is restored afterwards.
    """
    from spectr_gbv.validate.generation.adapters import hf_usd  # noqa: PLC0415

    saved = dict(hf_usd._KITS)
    hf_usd._KITS.clear()
    try:
        kit = hf_usd.usd_kit(len(PINNED_ORDER))
        pinned = {**{f"t{i}": i for i in PINNED_ORDER}, hf_usd.EXTRA_WORD: len(PINNED_ORDER)}
        if pinned != kit.assistant_tokenizer.get_vocab():
            raise RuntimeError("the assistant vocabulary is not the 8-word map the pinned order assumes")
        kit.assistant_tokenizer.get_vocab = lambda *a, **k: dict(pinned)
        return usd_laws(scenario), first_tokens("hf-assisted:usd", scenario, num)
    finally:
        hf_usd._KITS.clear()
        hf_usd._KITS.update(saved)


def confirm_ensemble(report: str, num: int = CONFIRM_CALLS) -> str:
    """Markdown: the exact first-token law of ``hf-assisted:ensemble`` (``w p + (1 - w) q``) and the fit of calls.

    Parameters
    ----------
    report : str
        The referee's text report (its first failing small-vocabulary scenario is used).
    num : int
        Seeded calls.

    Returns
    -------
    str
    """
    scenario = parse_scenario(report)
    laws = ensemble_laws(scenario)
    counts = first_tokens("hf-assisted:ensemble", scenario, num)
    mix = ENSEMBLE_WEIGHT * laws.p + (1 - ENSEMBLE_WEIGHT) * laws.q_draw
    tv = float(total_variation(laws.law, laws.p))
    tv_pq = float(total_variation(laws.p, laws.q_draw))
    lines = [
        f"Exact computation (`bench/gallery/generation_confirm.py`, `confirm_ensemble`) on `{_label(scenario)}` "
        f"(prompt `{laws.prompt}`), without the referee: `_speculative_sampling` with `assistant_ensemble_weight` "
        f"w = {ENSEMBLE_WEIGHT:g} accepts a draft x ~ q with probability `min(1, 1 - w + w p(x)/q(x))` and draws "
        "the residual `(p - q)+` on rejection, so the first token's law is "
        "`q min(1, 1 - w + w p/q) + P(reject) (p - q)+ / |(p - q)+|` = `w p + (1 - w) q` exactly "
        f"(largest difference between the two here: {float(np.abs(laws.law - mix).max()):.1e}). By target id:",
        "",
        f"- target p: `{_fmt(laws.p)}`",
        f"- draft q (the assistant's processed scores as transformers computes them, read from its call): "
        f"`{_fmt(laws.q_draw)}`",
        f"- first emitted token: `{_fmt(laws.law)}`",
        "",
        f"**TV(first-token law, p) = {tv:.4f}** = (1 - w) TV(p, q) = {1 - ENSEMBLE_WEIGHT:g} x {tv_pq:.4f}.",
        "",
        _double_temperature_note(laws),
        "",
        *_fit_lines(laws, counts, "hf-assisted:ensemble"),
    ]
    return "\n".join(lines)


__all__ = [
    "CONFIRM_CALLS",
    "DEFAULT_SCENARIO",
    "ENSEMBLE_WEIGHT",
    "FIT_LEVEL",
    "all_orders_tv",
    "confirm_ensemble",
    "confirm_usd",
    "ensemble_laws",
    "first_token_law",
    "first_tokens",
    "parse_scenario",
    "total_variation",
    "usd_laws",
]
