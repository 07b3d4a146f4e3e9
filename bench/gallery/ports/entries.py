"""Gallery entries of the five ports (``bench/gallery/run_gallery.py`` builds its ``Entry`` objects from them).

:data:`PORT_ENTRIES` holds the keyword arguments of one ``run_gallery.Entry`` per port (plain data, so this module
does not import the script); the ``confirm_*`` functions are the independent confirmations a ``FAILED`` page
embeds: each recomputes, without the harness, the upstream fact behind the failure (the tests in
``tests/gallery/test_ports.py`` pin the same facts).
"""

from __future__ import annotations

from typing import Any

import numpy as np

_SEEDED_TORCH = (
    "Randomness: the harness's `torch.Generator` (`generic_torch`, `batched_torch`: seeded per call from the harness "
    "seed, or set to a probe's forced state), drawn in upstream's order and dtype, so the coin probes reach the "
    "draws upstream would make and the run is deterministic given the seed. The exact level does not apply (no "
    "uniforms are taken): `--level exact` falls back to this statistical run."
)

_AGREE_Q = np.array([[[5e-10, 0.6, 0.4 - 5e-10]]])
_AGREE_P = np.array([[[0.0, 0.6, 0.4 - 5e-10], [0.2, 0.3, 0.5]]])
_DRAFT0 = np.array([[0]])


def _run(verify: Any, calls: int = 20, **arrays: Any) -> dict[str, int]:
    import torch  # noqa: PLC0415

    counts: dict[str, int] = {}
    for seed in range(calls):
        try:
            key = str(verify(arrays["d"], arrays["q"], arrays["p"], torch.Generator().manual_seed(seed)))
        except RuntimeError as err:
            key = "raises RuntimeError: " + str(err).splitlines()[0].replace("`", "")
        counts[key] = counts.get(key, 0) + 1
    return counts


def _agree_text(verify: Any) -> str:
    out = _run(verify, d=_DRAFT0, q=_AGREE_Q, p=_AGREE_P)
    return (
        "On the valid rows `q = (5e-10, 0.6, 0.4 - 5e-10)`, `p = (0, 0.6, 0.4 - 5e-10)` (rows that agree up to "
        "rounding; the drafted token 0 has p = 0 < q), 20 calls with seeds 0-19 give: "
        + ", ".join(f"{k} x {v}" for k, v in out.items())
        + "."
    )


def confirm_litgpt(report: str) -> str:
    """LitGPT's raise on an all-zero residual, recomputed on the port with ordinary randomness."""
    from bench.gallery.ports import litgpt_sd  # noqa: PLC0415

    return (
        _agree_text(litgpt_sd.verify)
        + " (`p_f32 - q_f32` is 0 everywhere, `0 / 0` is NaN, `torch.multinomial` raises.)"
    )


def confirm_litgpt_top_p(report: str) -> str:
    """LitGPT with ``top_p = 0.5``: the raise on rejection, recomputed."""
    from bench.gallery.ports import litgpt_sd  # noqa: PLC0415

    q = np.array([[[0.5, 0.25, 0.25]]])
    p = np.array([[[0.25, 0.5, 0.25], [0.2, 0.3, 0.5]]])
    out = _run(litgpt_sd.verify_top_p, d=_DRAFT0, q=q, p=p)
    return (
        "With `q = (1/2, 1/4, 1/4)`, `p = (1/4, 1/2, 1/4)` and draft token 0, 20 calls give: "
        + ", ".join(f"{k} x {v}" for k, v in out.items())
        + " (`sample_top_p` masks the residual, read as logits, with `-inf`)."
    )


def confirm_gptfast(report: str) -> str:
    """Exact validity defects of the gpt-fast port at bf16 on the battery, and its all-zero residual."""
    from bench.gallery.ports import gptfast_law, gptfast_sd  # noqa: PLC0415
    from spectr_gbv.validate.battery import default_battery  # noqa: PLC0415

    rows = ["| instance (K = 1) | defect vs p | defect vs bf16(p) |", "|---|---|---|"]
    for bi in default_battery(1):
        d_p, d_16 = gptfast_law.exact_defect(bi.instance), gptfast_law.exact_defect(bi.instance, "bf16")
        rows.append(f"| `{bi.kind}` | {float(d_p):.6f} | {float(d_16):.6f} |")
    return "\n".join(
        [
            "Exact output law of the port (`bench/gallery/ports/gptfast_law.py`, Fractions; the coin's lattice "
            f"enumerated: `P(coin = 0) = (2^15 + 1) / 2^24 = {float(gptfast_law.coin_cdf(0.0)):.6%}`, the "
            "acceptance probability of a draft token outside the target's top-k):",
            "",
            *rows,
            "",
            "These defects (0.0005-0.003) are below every budget's detectable TV (0.05 / 0.02 / 0.01): the law "
            "checks cannot see them, only the coin probes fail the port. " + _agree_text(gptfast_sd.verify),
        ]
    )


def confirm_vllm(report: str) -> str:
    """vLLM V1's token 0 on an all-zero residual, recomputed on the port."""
    import torch  # noqa: PLC0415

    from bench.gallery.ports import vllm_v1  # noqa: PLC0415

    def rep(x: np.ndarray) -> Any:
        return torch.as_tensor(x)[None].repeat(20, *([1] * x.ndim))

    out = vllm_v1.verify(rep(_DRAFT0), rep(_AGREE_Q), rep(_AGREE_P), torch.Generator().manual_seed(0))
    firsts = sorted({int(t) for t in out[:, 0]})
    return (
        "On the valid rows `q = (5e-10, 0.6, 0.4 - 5e-10)`, `p = (0, 0.6, 0.4 - 5e-10)` with draft token 0, one "
        f"batch of 20 rows emits first tokens {firsts} (`argmax(0 / q)` is index 0; p(0) = 0). A drafted token "
        "with p = 0 < q is accepted only by a float64 uniform of exactly 0, probability 2^-53 per draw on torch's "
        "CPU generator."
    )


def confirm_sglang(report: str) -> str:
    """SGLang's zero-coin acceptance and its degenerate residual (token V - 1), recomputed with forced coins."""
    import torch  # noqa: PLC0415

    from bench.gallery.ports import sglang_tree  # noqa: PLC0415

    original = sglang_tree.draw_coins
    row = [0.5227033098782227, 0.04948726460709252, 0.04687085517956508, 0.38093857033511963, 0.0]
    try:
        sglang_tree.draw_coins = lambda n, g: (np.zeros(n, dtype=np.float32), np.float32(0.5))
        zero = sglang_tree.verify(
            np.array([[0], [1]]), np.full((2, 1, 3), 1 / 3), np.array([[[0.0, 0.5, 0.5], [0.2, 0.3, 0.5]]] * 2), None
        )
        sglang_tree.draw_coins = lambda n, g: (np.full(n, 1 - 2**-24, dtype=np.float32), np.float32(0.5))
        degenerate = sglang_tree.verify(
            np.array([[0], [1], [2], [3]]), np.full((4, 1, 5), 0.2), np.array([[row, [0.2] * 5]] * 4), torch.Generator()
        )
    finally:
        sglang_tree.draw_coins = original
    return (
        f"Coin 0 with a first sibling of p = 0 (`p = (0, 1/2, 1/2)`, siblings 0, 1): emitted {zero} (probability "
        "2^-24 per float32 coin). Siblings 0-3 covering the support of `p = (0.5227..., 0.0494..., 0.0468..., "
        f"0.3809..., 0)` (float32 sum 1 - 2^-23) and the coin 1 - 2^-24: emitted {degenerate}, token V - 1 of "
        "target probability 0 (probability 2^-24 per call under ordinary randomness)."
    )


PORT_ENTRIES: tuple[dict[str, Any], ...] = (
    {
        "name": "port_litgpt_speculative_decoding",
        "title": "a port of LitGPT's `speculative_decoding` (verify step)",
        "target": "bench.gallery.ports.litgpt_sd:verify",
        "interface": "generic_torch",
        "packages": ("torch",),
        "budget": "quick",
        "extra": ("--reference", "sd", "--time-limit", "600"),
        "expect": "FAILED",
        "confirm": "bench.gallery.ports.entries:confirm_litgpt",
        "upstream": "Lightning-AI/litgpt `litgpt/generate/speculative_decoding.py` `speculative_decoding` at "
        "`26857050fe3f`",
        "function": "Steps 3-4 of `speculative_decoding`: one discarded `torch.multinomial` draw per target row "
        "(L + 1 of them) before any coin; accept without a coin when `p >= q`, else reject when "
        "`torch.rand(1) <= 1 - p/q` (float32); on rejection `clamp(p - q, 0) / sum` passed to `sample(..., "
        "apply_softmax=False)`; the bonus `sample` on the last target row.",
        "wrapper": "`bench/gallery/ports/litgpt_sd.py`, `verify` (generic_torch, draft 0): float32 logits `log p`, "
        "`log q`, temperature 1, no top-k, `top_p = 1`. " + _SEEDED_TORCH,
        "meaning": "LitGPT's step raises `RuntimeError` whenever it rejects at a row whose float32 residual is all "
        "zero (p <= q everywhere after rounding: rows that nearly agree, or a drafted token with p = 0 < q at "
        "rows that otherwise agree, where the rejection is certain), and `torch.multinomial` (CPU: `argmax(p / "
        "Exp(1))`) returns a token of probability 0 when its exponential is exactly 0 (2^-53). Elsewhere its law is "
        "that of speculative sampling.",
    },
    {
        "name": "port_litgpt_speculative_decoding_top_p",
        "title": "a port of LitGPT's `speculative_decoding` with `top_p = 0.5`",
        "target": "bench.gallery.ports.litgpt_sd:verify_top_p",
        "interface": "generic_torch",
        "packages": ("torch",),
        "budget": "quick",
        "extra": ("--time-limit", "600"),
        "expect": "FAILED",
        "confirm": "bench.gallery.ports.entries:confirm_litgpt_top_p",
        "upstream": "as above, with `top_p = 0.5`",
        "function": "As above; with `top_p < 1` the rejection path runs `sample_top_p` on the residual read as "
        "logits, which masks entries with `-inf` before `torch.multinomial`.",
        "wrapper": "`bench/gallery/ports/litgpt_sd.py`, `verify_top_p`. " + _SEEDED_TORCH,
        "meaning": "With `top_p < 1` the target is p truncated to its nucleus (by design), and a rejection raises "
        "whenever the residual's smallest softmax entry is at most `1 - top_p`: always at `top_p = 0.5`.",
    },
    {
        "name": "port_gptfast_speculative_decode_bf16",
        "title": "a port of gpt-fast's `speculative_decode` at bf16",
        "target": "bench.gallery.ports.gptfast_sd:verify",
        "interface": "generic_torch",
        "packages": ("torch",),
        "budget": "quick",
        "extra": ("--reference", "sd", "--time-limit", "600"),
        "expect": "FAILED",
        "confirm": "bench.gallery.ports.entries:confirm_gptfast",
        "upstream": "pytorch-labs/gpt-fast `generate.py` `speculative_decode` at `32971d312954`",
        "function": "bf16 probabilities; `minimum(1, p/q)`; L bf16 coins `rand_like`, reject at the first "
        "`coin > ratio`; residual `where(p - q > 0, p - q, 0) / sum`; the exponential race "
        "`argmax(probs / Exp(1))` for the correction and the bonus.",
        "wrapper": "`bench/gallery/ports/gptfast_sd.py`, `verify` (generic_torch, draft 0): p and q rounded to bf16. "
        + _SEEDED_TORCH,
        "meaning": "At bf16 the coin is a lattice (0 with probability about 2^-9), so a drafted token of target "
        "probability 0 is accepted about 0.2 % of the time, the acceptance probabilities are staircases, and an "
        "all-zero residual emits token 0 (NaN argmax). The law defect (about 0.002 TV) is too small for the law "
        "checks of any budget; the coin probes catch the port.",
    },
    {
        "name": "port_vllm_v1_rejection_sampler",
        "title": "a port of vLLM V1's rejection sampler (random path, batched)",
        "target": "bench.gallery.ports.vllm_v1:verify",
        "interface": "batched_torch",
        "packages": ("torch",),
        "budget": "quick",
        "extra": ("--reference", "sd"),
        "expect": "FAILED",
        "confirm": "bench.gallery.ports.entries:confirm_vllm",
        "upstream": "vllm-project/vllm `vllm/v1/sample/rejection_sampler.py` at `7f6fc1c5ce8d`",
        "function": "Bonus token by the sampler's exponential race; float64 uniforms; accept iff `q > 0` and "
        "`p / q >= u` (float32 ratio); recovered token `argmax(max(p - q, 0) / Exp(1))` with one exponential "
        "vector per request.",
        "wrapper": "`bench/gallery/ports/vllm_v1.py`, `verify` (batched_torch, draft 0 of each row): float32 "
        "softmax of `log p`, float32 q. " + _SEEDED_TORCH,
        "meaning": "A uniform of exactly 0 accepts a drafted token of target probability 0 (probability 2^-53 per "
        "draw on torch's CPU generator), and a rejection at an all-zero residual emits token 0 whatever its "
        "target probability. Otherwise the law is that of speculative sampling.",
    },
    {
        "name": "port_sglang_tree_target_only",
        "title": "a port of SGLang's `tree_speculative_sampling_target_only`",
        "target": "bench.gallery.ports.sglang_tree:verify",
        "interface": "generic_torch",
        "packages": ("torch",),
        "budget": "quick",
        "extra": ("--time-limit", "600"),
        "expect": "FAILED",
        "confirm": "bench.gallery.ports.entries:confirm_sglang",
        "upstream": "sgl-project/sglang `sgl-kernel/csrc/speculative/speculative_sampling.cuh` "
        "`TreeSpeculativeSamplingTargetOnly` at `120affb9613c`",
        "function": "The K drafts as a tree; per level one float32 coin, a child accepted iff `coin <= "
        "cumulative p of the siblings tried`; rejected siblings removed from p; the final token by inverse CDF "
        "of the residual, `V - 1` when it is all zero.",
        "wrapper": "`bench/gallery/ports/sglang_tree.py`, `verify` (generic_torch, all K drafts), thresholds 1. "
        + _SEEDED_TORCH,
        "meaning": "Target-only sampling is lossless for any q, except that a coin of exactly 0 accepts a first "
        "sibling of target probability 0 (2^-24 per float32 coin) and a residual emptied by rejected siblings "
        "emits token V - 1 whatever its target probability.",
    },
    {
        "name": "port_mlx_lm_speculative_generate_step",
        "title": "a port of mlx-lm's `speculative_generate_step` (sample-and-match)",
        "target": "bench.gallery.ports.mlx_lm_sd:verify",
        "interface": "generic_torch",
        "packages": ("torch",),
        "budget": "quick",
        "extra": ("--time-limit", "600"),
        "expect": "PASSED",
        "upstream": "ml-explore/mlx-lm `mlx_lm/generate.py` `speculative_generate_step` at `d78bf58e217c`",
        "function": "One categorical sample per target row (Gumbel-max); emit the samples while they match the "
        "drafts, then the first mismatching sample (or the bonus). No acceptance coin.",
        "wrapper": "`bench/gallery/ports/mlx_lm_sd.py`, `verify` (generic_torch, draft 0), torch in place of mlx. "
        + _SEEDED_TORCH,
        "meaning": "Sample-and-match emits samples of the target, so it is lossless (and accepts a draft token "
        "with probability p(x) only, below speculative sampling's min(1, p/q)).",
    },
)
