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
means the acceptance rule differs: ``not_lossless`` relative to the claim), and the law of the
emitted tokens given the stop position (a failure with the stop law right means the token
drawn at the stop, residual or bonus, is wrong: ``wrong_residual``; ``reuses_uniform`` when
an SD-type correction follows the residual drawn with the rejecting uniform). The reported
p-value is the smaller of the two, Bonferroni-adjusted (x2).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from spectr_gbv.reference.registry import get_verifier
from spectr_gbv.simulate.monte_carlo import g_test_power, iterations_for_power
from spectr_gbv.validate.battery import BatteryInstance, Tables
from spectr_gbv.validate.checks_statistical import POWER_TARGET, GTest, combine, g_test
from spectr_gbv.validate.checks_structural import StructuralTally, classify
from spectr_gbv.validate.interfaces import Adapter
from spectr_gbv.validate.report import CheckResult

#: Candidate draft tuples scored per instance.
CANDIDATES = 64


def check_reference(name: str | None) -> str | None:
    """Return ``name`` if it names a verifier with an ``outcome_law`` (or None).

    Raises
    ------
    ValueError
        Unknown name, or one that needs a whole instance (``greedy_bv``, ``lp_oracle``).
    """
    if name is None:
        return None
    get_verifier(name)  # raises ValueError naming the valid names
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

    ``law_fn`` replaces ``get_verifier(reference).outcome_law`` (e.g. a verifier's own law).
    """
    tables = Tables(bi.float_instance)
    outcome_law = law_fn or get_verifier(reference).outcome_law
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
    conditional law at ``alpha_test / 2`` (the two sub-tests). ``law_fn`` replaces the
    reference's ``outcome_law`` (``reference`` is then only a label).

    Raises
    ------
    VerifierRaised, VerifierTimedOut
    """
    out = []
    for bi in battery:
        drafts, law = pick_drafts(bi, reference, rng, law_fn)
        L = bi.instance.L
        tables = Tables(bi.float_instance)
        df = max(len(law) - 1, 1)
        tv_ref = tv
        N = iterations_for_power(df, alpha_test / 2, tv_ref, POWER_TARGET)
        obs: dict[tuple[int, ...], int] = {}
        invalid = 0
        done = 0
        while done < N:
            c = min(8192, N - done)
            d = np.broadcast_to(drafts, (c, *drafts.shape)).copy()
            q, p = tables.rows(d)
            em = adapter.emit(d, q, p, rng)
            problems = classify(em, d, p)
            if tally is not None:
                tally.add(bi, d, problems, c)
            invalid += len(problems)
            ok = np.ones(c, dtype=bool)
            ok[list(problems)] = False
            toks, lens = em.tokens[ok], em.lengths[ok]
            codes, counts = np.unique(np.concatenate([toks, lens[:, None]], axis=1), axis=0, return_counts=True)
            for row, cnt in zip(codes.tolist(), counts.tolist(), strict=True):
                o = tuple(row[: row[-1]])
                obs[o] = obs.get(o, 0) + cnt
            done += c
        law_name = "the declared outcome_law" if law_fn is not None else f"{reference}'s exact law"
        full, stop, given = _stop_and_token_tests(obs, law, L)
        pval = min(1.0, 2 * min(stop.p_value, given.p_value))
        failed = pval < alpha_test
        if not failed:
            diag = "ok"
        elif reuse_seen:
            diag = "reuses_uniform"
        elif stop.p_value < alpha_test / 2:
            diag = "not_lossless"
        else:
            q1, p1 = tables.rows(drafts)
            diag = "reuses_uniform" if reference == "sd" and _sd_reuse_fits(obs, drafts, q1, p1) else "wrong_residual"
        n_obs = int(sum(obs.values()))
        top = sorted(law.items(), key=lambda kv: -kv[1])[:6]
        compare = ", ".join(f"{list(o)}: {obs.get(o, 0) / max(n_obs, 1):.4f} vs {v:.4f}" for o, v in top)
        out.append(
            CheckResult(
                f"reference_law[{bi.label}]",
                "reference",
                not failed,
                statistic=full.g,
                p_value=pval,
                sample_size=N,
                power=g_test_power(N, df, alpha_test / 2, tv_ref),
                instance=bi.spec(drafts=drafts.tolist()),
                detail=(
                    f"{N} calls on the fixed drafts {drafts.tolist()} vs {law_name} "
                    f"(stop-position law p = {stop.p_value:.3g}, tokens given the stop p = {given.p_value:.3g}; "
                    f"power against a conditional TV error of {tv_ref:g}); observed vs reference: {compare}"
                    + (f"; {invalid} invalid outputs" if invalid else "")
                ),
                diagnosis=diag,
            )
        )
    return out


__all__ = ["CANDIDATES", "MIN_REJECTION", "check_reference", "pick_drafts", "reference_checks"]
