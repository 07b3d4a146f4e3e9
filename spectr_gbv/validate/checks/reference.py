r"""Reference check: the law of the emitted tokens given fixed drafts against a named algorithm.

When the user names the algorithm the verifier claims to implement (``reference="sd"``,
``"bv"``, ``"mdbv"``, ...), the harness fixes one draft tuple per battery instance (the most
informative of 64 drawn from q: among those the reference rejects with probability >= 0.05,
the one whose reference law has the largest entropy), calls
the verifier many times on exactly that input, and G-tests the observed outputs against the
reference's exact :meth:`~spectr_gbv.reference.Verifier.outcome_law`. Conditioning on the
drafts removes the averaging over q that hides subtle bugs in the end-to-end law (a
residual drawn with the wrong uniform moves the conditional law by 0.1 or more where it moves
the end-to-end law by 0.001-0.03), so these tests are far more sensitive.

Two tests per tuple, for the diagnosis: the stop-position law ``P(|O| = j + 1)`` (a failure
means the acceptance rule differs from the reference's), and the law of the emitted tokens given
the stop position (a failure with the stop law right means the token drawn at the stop, residual
or bonus, differs). The reported p-value is the smaller of the two, Bonferroni-adjusted (x2).

A failure is diagnosed ``differs_from_reference``, never ``not_lossless``: a verifier may follow
another lossless convention than the reference (SpecInfer's random child order against ``rrs``'s
draft order), and a lossy reference (``spectr_gbv_released``, ``independent_bv``) is expected to
differ from any lossless verifier. Losslessness is decided by the law checks alone. Documented
conventions are named ``"NAME:VARIANT"`` (:mod:`spectr_gbv.validate.reference_variants`), e.g.
``"rrs:random_order"``. (With ``law_fn``, the sampler against its own declared law, a failure
keeps the law diagnoses ``not_lossless`` / ``wrong_residual`` / ``reuses_uniform``.)

A verifier that raises on one instance gets a failed ``raises`` check on that instance; the other
instances still run (a timeout stops the check: :class:`~spectr_gbv.validate.isolation.failures.VerifierTimedOut`
propagates).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from spectr_gbv.simulate.monte_carlo import g_test_power, iterations_for_power
from spectr_gbv.validate.battery.instance import BatteryInstance
from spectr_gbv.validate.battery.tables import Tables
from spectr_gbv.validate.checks.sampling import widen
from spectr_gbv.validate.checks.statistical import POWER_TARGET, GTest, combine, g_test, planned_tv
from spectr_gbv.validate.checks.structural import StructuralTally, classify
from spectr_gbv.validate.interfaces.adapter import Adapter
from spectr_gbv.validate.isolation.failures import VerifierRaised
from spectr_gbv.validate.reference_variants import parse_reference, reference_verifier, variants
from spectr_gbv.validate.report.results import CheckResult

#: Candidate draft tuples scored per instance.
CANDIDATES = 64


def check_reference(name: str | None) -> str | None:
    """Return ``name`` unchanged if it names a verifier with an ``outcome_law`` (or None).

    ``name`` is ``"NAME"`` or ``"NAME:VARIANT"``
    (:func:`~spectr_gbv.validate.reference_variants.parse_reference`).

    Raises
    ------
    ValueError
        Unknown name or variant (the message lists the valid names and variants), or a name
        that needs a whole instance (``greedy_bv``, ``lp_oracle``).
    """
    if name is None:
        return None
    parse_reference(name)
    return name


#: Smallest rejection probability P(tau < L) that makes a draft tuple preferred by :func:`pick_drafts`.
MIN_REJECTION = 0.05


def _entropy(law: dict[tuple[int, ...], float]) -> float:
    v = np.array([float(x) for x in law.values()])
    v = v[v > 0]
    return float(-(v * np.log(v)).sum())


def pick_drafts(
    bi: BatteryInstance, reference: str, rng: np.random.Generator, law_fn: Callable[..., Any] | None = None
) -> tuple[np.ndarray, dict[Any, float]]:
    """The draft tuple [K, L] (among :data:`CANDIDATES` from q) whose reference law has most entropy.

    Drafts the reference rejects with probability >= :data:`MIN_REJECTION` come first, so the
    residual (where most public bugs live) is exercised.

    ``reference`` is ``"NAME"`` or ``"NAME:VARIANT"``; ``law_fn`` replaces its ``outcome_law`` (e.g. a
    verifier's own law).
    """
    tables = Tables(bi.float_instance)
    outcome_law = law_fn or reference_verifier(reference).outcome_law
    cands = tables.sample_drafts(CANDIDATES, bi.K, rng)
    best: tuple[tuple[bool, float], np.ndarray, dict[Any, float]] | None = None
    seen = set()
    for d in cands:
        key = d.tobytes()
        if key in seen:
            continue
        seen.add(key)
        q, p = tables.rows(d)
        law = {o: float(v) for o, v in outcome_law(d, q, p).items()}
        rejects = sum(v for o, v in law.items() if len(o) <= bi.instance.L)  # P(tau < L): residual draws
        score = (rejects >= MIN_REJECTION, _entropy(law))
        if best is None or score > best[0]:
            best = (score, d, law)
    assert best is not None
    return best[1], best[2]


def _stop_and_token_tests(
    obs: dict[tuple[int, ...], int], law: dict[tuple[int, ...], float], L: int
) -> tuple[GTest, GTest, GTest]:
    """(full law, stop-position law, tokens given stop position) G-tests."""
    keys = sorted(set(obs) | set(law), key=lambda o: (len(o), o))
    o_arr = np.array([obs.get(k, 0) for k in keys], dtype=np.float64)
    p_arr = np.array([law.get(k, 0.0) for k in keys])
    full = g_test(o_arr, p_arr)
    lens = np.array([len(k) for k in keys])
    stop_obs = np.array([o_arr[lens == m].sum() for m in range(1, L + 2)])
    stop_p = np.array([p_arr[lens == m].sum() for m in range(1, L + 2)])
    stop = g_test(stop_obs, stop_p)
    given = [g_test(o_arr[lens == m], p_arr[lens == m]) for m in range(1, L + 2) if o_arr[lens == m].sum() > 0]
    return full, stop, combine(given) if given else GTest(0.0, 0, 1.0, 0)


def _sd_reuse_fits(obs: dict[tuple[int, ...], int], drafts: np.ndarray, q: np.ndarray, p: np.ndarray) -> bool:
    """SD corrections consistent with "residual drawn with the uniform that rejected" (first draft)."""
    L, n = drafts.shape[1], q.shape[-1]
    tests_ok, tests_reuse = [], []
    for j in range(L):
        x = int(drafts[0, j])
        if q[0, j, x] <= 0:
            continue
        r = min(1.0, p[0, j, x] / q[0, j, x])
        res = np.maximum(p[0, j] - q[0, j], 0.0)
        if r >= 1 - 1e-9 or res.sum() <= 0:
            continue
        res = res / res.sum()
        hi = np.cumsum(res)
        lo = hi - res
        reuse = np.clip(np.minimum(hi, 1.0) - np.maximum(lo, r), 0.0, None) / (1 - r)
        prefix = tuple(int(t) for t in drafts[0, :j])
        counts = np.array([obs.get(prefix + (z,), 0) for z in range(n)], dtype=np.float64)
        if counts.sum() < 20:
            continue
        tests_ok.append(g_test(counts, res))
        tests_reuse.append(g_test(counts, reuse))
    if not tests_ok:
        return False
    return combine(tests_ok).p_value < 1e-3 and combine(tests_reuse).p_value >= 0.01


def differs_wording(
    reference: str, acceptance: bool, token: bool, hint: str = "", num_drafts: int | None = None
) -> str:
    """The explanation of a failed comparison with ``reference``, which claims no loss of losslessness.

    Parameters
    ----------
    reference : str
        ``"NAME"`` or ``"NAME:VARIANT"``.
    acceptance : bool
        The stop-position law differs (the acceptance rule).
    token : bool
        The law of the tokens given the stop position differs (the token drawn at the stop).
    hint : str
        Appended to the list of differences (e.g. a uniform-reuse signature).
    num_drafts : int, optional
        K; with K = 1 the draft-order variants (equal to the registered verifier) are not
        offered as other conventions.

    Returns
    -------
    str
        ``"differs from NAME's conditional law: ..."``; for a lossy reference
        (``Verifier.lossless`` False) it says that a lossless verifier is expected to differ.
    """
    name, current = parse_reference(reference)
    parts = []
    if acceptance:
        parts.append(f"the acceptance rule differs from {reference}'s (stop-position law)")
    if token or not parts:
        parts.append("the token drawn at the stop differs (tokens given the stop position: residual or bonus)")
    text = f"differs from {reference}'s conditional law: {'; '.join(parts)}{hint}. "
    if not reference_verifier(reference).lossless:
        text += (
            f"The reference {name} is itself lossy (Verifier.lossless is False): a lossless verifier is expected to "
            "differ from it; "
        )
    else:
        others = [f"{name}:{v}" for v in variants(name) if v != current]
        if num_drafts == 1:
            others = [o for o in others if not o.endswith(("random_order", "random_draft"))]
        alt = f" (documented: {', '.join(others)})" if others else ""
        text += f"A different convention{alt} can be lossless too, so this is not by itself a loss of losslessness; "
    return text + "the law checks decide losslessness"


def _shown(bi: BatteryInstance, output: tuple[int, ...]) -> list[int]:
    """An output of the small instance in the ids the verifier sees (``bi.vocab``'s, when wide)."""
    return list(output) if bi.vocab is None else bi.vocab.widen_ids(np.array(output)).tolist()


def _raised_result(bi: BatteryInstance, err: VerifierRaised, drafts: np.ndarray, label: str) -> CheckResult:
    return CheckResult(
        f"reference_law[{bi.label}]",
        "reference",
        False,
        instance=bi.spec(drafts=drafts.tolist()),
        detail=(
            f"the verifier raised on instance {bi.label!r} (fixed drafts {drafts.tolist()}, compared with "
            f"{label}): {err}; the other instances were still checked"
        ),
        diagnosis="raises",
    )


def reference_checks(
    adapter: Adapter,
    battery: list[BatteryInstance],
    reference: str,
    rng: np.random.Generator,
    alpha_test: float,
    tv: float,
    tally: StructuralTally | None = None,
    reuse_seen: bool = False,
    law_fn: Callable[..., Any] | None = None,
) -> list[CheckResult]:
    """One ``reference_law[kind]`` check per battery instance (fixed drafts, repeated calls).

    Sample size per tuple: power :data:`POWER_TARGET` against a TV error of ``tv`` in the
    conditional law at ``alpha_test / 2`` (the two sub-tests). ``reference`` is ``"NAME"`` or
    ``"NAME:VARIANT"``; a failure is diagnosed ``differs_from_reference``. ``law_fn`` replaces
    the reference's ``outcome_law`` (``reference`` is then only a label, and a failure keeps the
    law diagnoses). A verifier that raises on an instance gets a failed check with diagnosis
    ``"raises"`` there; the other instances still run.

    Raises
    ------
    VerifierTimedOut
        A call hung (the check stops).
    """
    out = []
    law_name = "the declared outcome_law" if law_fn is not None else f"{reference}'s exact law"
    for bi in battery:
        drafts, law = pick_drafts(bi, reference, rng, law_fn)
        L = bi.instance.L
        tables = Tables(bi.float_instance)
        df = max(len(law) - 1, 1)
        tv_ref = planned_tv(bi, tv)
        N = iterations_for_power(df, alpha_test / 2, tv_ref, POWER_TARGET)
        cap = 8192 if bi.vocab is None else bi.vocab.batch_cap(bi.K, L)
        shown = widen(bi, drafts[None], *tables.rows(drafts[None]))[0][0]  # the drafts in the verifier's ids
        obs: dict[tuple[int, ...], int] = {}
        invalid = 0
        done = 0
        try:
            while done < N:
                c = min(cap, N - done)
                d = np.broadcast_to(drafts, (c, *drafts.shape)).copy()
                d, q, p = widen(bi, d, *tables.rows(d))
                em = adapter.emit(d, q, p, rng)
                problems = classify(em, d, p)
                if tally is not None:
                    tally.add(bi, d, problems, c)
                invalid += len(problems)
                ok = np.ones(c, dtype=bool)
                ok[list(problems)] = False
                toks = em.tokens[ok] if bi.vocab is None else bi.vocab.narrow_ids(em.tokens[ok])
                lens = em.lengths[ok]
                codes, counts = np.unique(np.concatenate([toks, lens[:, None]], axis=1), axis=0, return_counts=True)
                for row, cnt in zip(codes.tolist(), counts.tolist(), strict=True):
                    o = tuple(row[: row[-1]])
                    obs[o] = obs.get(o, 0) + cnt
                done += c
        except VerifierRaised as err:
            out.append(_raised_result(bi, err, shown, law_name))
            continue
        full, stop, given = _stop_and_token_tests(obs, law, L)
        pval = min(1.0, 2 * min(stop.p_value, given.p_value))
        failed = pval < alpha_test
        q1, p1 = tables.rows(drafts)
        if not failed:
            diag, why = "ok", ""
        elif law_fn is None:
            hint = ""
            if reuse_seen:
                hint = " (the corrections depend on the uniform that decided the rejection: see uniform_reuse)"
            elif parse_reference(reference)[0] == "sd" and _sd_reuse_fits(obs, drafts, q1, p1):
                hint = " (consistent with a residual drawn with the uniform that rejected)"
            why = differs_wording(reference, stop.p_value < alpha_test / 2, given.p_value < alpha_test / 2, hint, bi.K)
            diag = "differs_from_reference"
        elif reuse_seen:
            diag, why = "reuses_uniform", ""
        elif stop.p_value < alpha_test / 2:
            diag, why = "not_lossless", ""
        else:
            diag = "reuses_uniform" if reference == "sd" and _sd_reuse_fits(obs, drafts, q1, p1) else "wrong_residual"
            why = ""
        n_obs = int(sum(obs.values()))
        top = sorted(law.items(), key=lambda kv: -kv[1])[:6]
        compare = ", ".join(f"{_shown(bi, o)}: {obs.get(o, 0) / max(n_obs, 1):.4f} vs {v:.4f}" for o, v in top)
        out.append(
            CheckResult(
                f"reference_law[{bi.label}]",
                "reference",
                not failed,
                statistic=full.g,
                p_value=pval,
                sample_size=N,
                power=g_test_power(N, df, alpha_test / 2, tv_ref),
                instance=bi.spec(drafts=shown.tolist()),
                detail=(
                    (f"{why[0].upper()}{why[1:]}. " if why else "")
                    + f"{N} calls on the fixed drafts {shown.tolist()} vs {law_name} "
                    f"(stop-position law p = {stop.p_value:.3g}, tokens given the stop p = {given.p_value:.3g}; "
                    f"power against a conditional TV error of {tv_ref:g}); observed vs reference: {compare}"
                    + (f"; {invalid} invalid outputs" if invalid else "")
                ),
                diagnosis=diag,
            )
        )
    return out


__all__ = ["CANDIDATES", "MIN_REJECTION", "check_reference", "differs_wording", "pick_drafts", "reference_checks"]
