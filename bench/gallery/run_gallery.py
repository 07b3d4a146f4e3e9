"""Run ``spectr-gbv validate`` on every gallery wrapper and write ``docs/results/validate_<name>.md``.

Usage (from the repository root)::

    python bench/gallery/run_gallery.py                 # every entry, writes the pages
    python bench/gallery/run_gallery.py --only flashspec_step,economize_batch
    python bench/gallery/run_gallery.py --list          # entries, commands and installed versions
    python bench/gallery/run_gallery.py --generation    # only the whole-generation-loop entries
    python bench/gallery/run_gallery.py --budget quick  # override every entry's budget (faster)
    python bench/gallery/run_gallery.py --harness-args=--no-probes   # extra validate arguments for every entry

Each entry runs the exact command printed on its page (``OMP_NUM_THREADS=1 spectr-gbv validate ...``) in a
subprocess from the repository root, and the page embeds the unedited text report. An entry whose package is not
installed is skipped with a message (its page is left as it is). Exit status: 0 when every verdict run matches
the verdict the page's analysis was written for (``expect``), 1 otherwise (the page then says so at the top: the
analysis must be re-examined), 2 for a usage error.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import importlib.metadata
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "docs" / "results"
CLI = Path(sys.executable).with_name("spectr-gbv")
if str(ROOT) not in sys.path:  # the confirmations import the wrappers as ``bench.gallery.*``
    sys.path.insert(0, str(ROOT))

from bench.gallery.generation_entries import GENERATION_ENTRIES  # noqa: E402 - needs ROOT on sys.path
from bench.gallery.ports.entries import PORT_ENTRIES  # noqa: E402 - needs ROOT on sys.path


@dataclasses.dataclass(frozen=True)
class Entry:
    """One third-party verifier of the gallery.

    Attributes
    ----------
    name : str
        Page slug: ``docs/results/validate_<name>.md``.
    title : str
    target : str
        ``module:function`` of the wrapper.
    interface : str
    packages : tuple[str, ...]
        Distributions whose versions the page records (the first is the one under test).
    budget : str
    extra : tuple[str, ...]
        Further CLI arguments (``--reference sd``, ``--time-limit 600``, ...).
    expect : str
        ``"PASSED"`` or ``"FAILED"``: the verdict :attr:`meaning` was written for.
    function : str
        Markdown: the third-party function, its file, and what it does.
    wrapper : str
        Markdown: what the wrapper adapts (shapes, randomness source) and the consequences.
    meaning : str
        Markdown: what the verdict means for users of the package.
    confirm : str, optional
        Name of a function of this module, or ``"module:function"``, ``f(report_text) -> markdown``, that confirms
        a lossy verdict independently of the harness (exact enumeration); its section is added to the page.
    upstream : str, optional
        Markdown: for a port of upstream code (``bench/gallery/ports``), the repository, file, function and commit
        it reproduces; the page then says it tests the port, not an installed package.
    source : str, optional
        Markdown replacing the page's "Packages (PyPI, installed with `pip install --no-deps`, CPU only)" (the
        generation entries: transformers from this package's extra, or this package's own decoder).
    """

    name: str
    title: str
    target: str
    interface: str
    packages: tuple[str, ...]
    budget: str
    extra: tuple[str, ...]
    expect: str
    function: str
    wrapper: str
    meaning: str
    confirm: str | None = None
    upstream: str | None = None
    source: str | None = None

    def argv(self, budget: str | None = None, more: tuple[str, ...] = ()) -> list[str]:
        """The ``spectr-gbv validate`` arguments (without the program name)."""
        return [
            "validate",
            self.target,
            "--interface",
            self.interface,
            "--budget",
            budget or self.budget,
            *self.extra,
            *more,
        ]

    def command(self, budget: str | None = None, more: tuple[str, ...] = ()) -> str:
        """The shell command printed on the page."""
        return "OMP_NUM_THREADS=1 spectr-gbv " + " ".join(self.argv(budget, more))


_SEEDING_CHAIN = (
    "The function draws its own coins, so the harness's uniforms cannot be fed to it. The wrapper seeds the "
    "function's random stream from `blake2b` of the batch's uniforms (`bench/gallery/_common.py`, "
    "`seed_from_uniforms`): every output is a deterministic function of the harness seed (the determinism "
    "check holds), fresh uniforms give a fresh stream, but the output is not a piecewise-constant function of "
    "the uniforms, so the exact level (bisection of the uniforms) does not apply: `--level exact` falls back to "
    "this statistical run, and the `uniform_reuse` sweep and the coin probes (`zero_coin`) do not reach the "
    "function's own coins (their verdicts say nothing about its coin handling)."
)

ENTRIES: tuple[Entry, ...] = (
    Entry(
        name="flashspec_rejection_step",
        title="flashspec's `rejection_step` (batch-1 engine path, AVX2 residual kernel)",
        target="bench.gallery.flashspec_step:verify",
        interface="chain",
        packages=("flashspec", "flashspec-asm-kernel", "torch"),
        budget="standard",
        extra=("--reference", "sd"),
        expect="PASSED",
        function=(
            "`flashspec/sampling/rejection.py`, `rejection_step(draft_token_ids, draft_logprobs, target_logprobs, "
            "*, generator)`: Algorithm 1 of Leviathan et al. on `[B, gamma]` drafts with no host sync. It draws "
            "`gamma` uniforms `u = torch.rand(..., generator)`, accepts while `u < exp(lp_p - lp_q).clamp(max=1)`, "
            "then makes exactly one `torch.multinomial` draw from `torch.where(rejected, residual, bonus)`, the "
            "residual being `_residual_probs` = `max(p - q, 0)` normalised (with a fallback to p when its mass is "
            "below 1e-6). It is what `SpeculativeEngine._generate_single` (`flashspec/engine/speculative.py`) "
            "calls for a sampled draft. With `flashspec-asm-kernel` installed on an AVX2 CPU (as here: "
            "`residual_backend_status()` reports `backend: asm`) the residual `max(p - q, 0) / sum` is computed by "
            "that package's hand-written AVX2 kernel (`flashspec_asm_kernel.residual_dist`, via ctypes), so this "
            "run also validates the assembly kernel on vocabularies of 2 to 6 tokens (tail handling)."
        ),
        wrapper=(
            "`bench/gallery/flashspec_step.py`, `verify` (chain). Shapes: draft ids `int64 [B, L]`, "
            "`draft_logprobs = log q` and `target_logprobs = log p` as float32 (`-inf` for a zero probability, "
            "what a log-softmax gives; the engine applies the temperature before it), all L+1 target rows (so "
            "the bonus row is used); output `[B, 2]` -> the accepted prefix, the next token, -1 padding. "
            "Randomness: one `torch.Generator` per call. " + _SEEDING_CHAIN
        ),
        meaning=(
            "At this budget the step is lossless token-level speculative sampling on every battery instance "
            "(disjoint supports, p = q, near-one-hot rows, 1e-6 probabilities in float32, 5-token blocks), and "
            "its conditional law on fixed drafts matches `sd`'s exact law. Users of flashspec's batch-1 sampled "
            "path (`variant='rejection'`, the default) get the target model's distribution, with or without the "
            "assembly residual kernel. Not covered: `variant='typical'` (documented lossy), the n-gram path "
            "`rejection_step_onehot` (q one-hot, not an input the harness generates), GPU/Triton kernels."
        ),
    ),
    Entry(
        name="flashspec_rejection_sample",
        title="flashspec's `rejection_sample` + engine bonus draw (batched engine path)",
        target="bench.gallery.flashspec_batch:verify",
        interface="chain",
        packages=("flashspec", "flashspec-asm-kernel", "torch"),
        budget="standard",
        extra=("--reference", "sd"),
        expect="PASSED",
        function=(
            "`flashspec/sampling/rejection.py`, `rejection_sample(input_ids, draft_logprobs, target_logprobs, "
            "draft_token_ids, gamma, *, generator)`: the acceptance test of Algorithm 1 on the gamma draft rows "
            "and, for a rejected row, one residual token from `_sample_residual` (`torch.multinomial` of "
            "`_residual_probs`) written into the rejection slot; it returns `accepted_ids [B, gamma]` (-1 after "
            "the first rejection) and `first_rejection [B]`. The bonus token after a full accept is drawn by "
            "`SpeculativeEngine._generate_generic` (`flashspec/engine/speculative.py`, the loop for batches > 1): "
            "`probs = bonus_logprobs[local].exp(); probs = probs / probs.sum().clamp(min=1e-9); "
            "torch.multinomial(probs, 1, generator=generator)`."
        ),
        wrapper=(
            "`bench/gallery/flashspec_batch.py`, `verify` (chain): `rejection_sample` on the L draft rows, then "
            "the engine's three bonus lines, copied verbatim, for each fully accepted row, in the engine's order "
            "on one generator. Shapes and log-probabilities as for `rejection_step`. " + _SEEDING_CHAIN
        ),
        meaning=(
            "The batched path is lossless at this budget as well: users running flashspec with batch > 1 and "
            "`variant='rejection'` get the target distribution per row. (The engine's per-row bookkeeping "
            "around it, `max_new_tokens` truncation and EOS, is outside the verification step and not tested.)"
        ),
    ),
    Entry(
        name="economize_rejection_batch",
        title="economize's `RejectionVerifier.verify_batch` (vectorised chain path)",
        target="bench.gallery.economize_rejection:verify",
        interface="chain",
        packages=("economize", "torch"),
        budget="standard",
        extra=("--reference", "sd"),
        expect="PASSED",
        function=(
            "`economize/decoding/verifiers.py`, `RejectionVerifier.verify_batch(logits, draft, selector, seq, "
            "ends)`: `p = selector.distributions(logits)`, coins `u = torch.rand(B, width, generator)`, "
            "accepted prefix of `u * q(x) < p(x)`, residual `(p_next - q_next).clamp_min(0)` at the first "
            "rejection (falling back to `p_next` when its sum is 0), else the next target row, and one "
            "`torch.multinomial` draw. The generator is the selector's (`selector_generator`)."
        ),
        wrapper=(
            "`bench/gallery/economize_rejection.py`, `verify` (chain). The selector is economize's own "
            "`TopPSampler(temperature=1.0, top_p=1.0, seed=...)`, whose `distributions(log p)` is `softmax(log p)`"
            " = p (every token kept at `top_p = 1`); the target logits are `log p` in float32 (`-inf` for 0), "
            "`Draft(tokens, lengths=[L] * B, probs=q float32)`. The sampler's seed (hence every coin) comes from "
            "the harness. " + _SEEDING_CHAIN
        ),
        meaning=(
            'economize\'s lossless `"rejection"` verifier is lossless on chain drafts at this budget, and its '
            "conditional law on fixed drafts matches `sd`. Users decoding with `DecodeConfig(verifier="
            '"rejection")` and a sampling selector get the selector\'s distribution on the exact model.'
        ),
    ),
    Entry(
        name="economize_rejection_rowwise",
        title="economize's `RejectionVerifier.verify` (row-by-row path)",
        target="bench.gallery.economize_rejection:verify_rowwise",
        interface="chain",
        packages=("economize", "torch"),
        budget="quick",
        extra=("--reference", "sd", "--time-limit", "600"),
        expect="PASSED",
        function=(
            "`economize/decoding/verifiers.py`, `RejectionVerifier.verify(logits, drafts, probs, selector, "
            "history, end)`: for each draft, `p = selector.distribution(logits[i], ...)`, accept when "
            "`u * q(x) < p(x)` (`_accepts`, `u = torch.rand((), generator)`), else one draw from "
            "`_residual(p, q, x)` = `max(p - q, 0)` (p when that is all zero) normalised; after the last draft "
            "`selector(logits[k], ...)` samples the bonus. Used for selectors that need the history."
        ),
        wrapper=(
            "`bench/gallery/economize_rejection.py`, `verify_rowwise` (chain): one `verify` call per row, each "
            "with a `TopPSampler(temperature=1.0, top_p=1.0)` seeded from that row's uniforms. Python-speed "
            "(about 1-5 ms a row on this shared 2-core machine), hence the quick budget and `--time-limit 600` "
            "(the limit is per chain call of up to 4096 rows). " + _SEEDING_CHAIN
        ),
        meaning=("The row-by-row path agrees with the vectorised one: lossless at this (quick: TV 0.05) budget."),
    ),
    Entry(
        name="economize_rejection_tree",
        title="economize's `RejectionVerifier.verify_tree` (SpecInfer recursive rejection sampling, K drafts)",
        target="bench.gallery.economize_rejection:verify_tree",
        interface="generic",
        packages=("economize", "torch"),
        budget="quick",
        extra=("--time-limit", "60"),
        expect="PASSED",
        function=(
            "`economize/decoding/verifiers.py`, `RejectionVerifier.verify_tree(logits, draft, selector)`: "
            "recursive rejection sampling down a draft tree (SpecInfer, Miao et al. 2024). At each node the "
            "children are tried in node order; child i (token x, drawn from `q_i = draft.probs[b, i]`) is "
            "accepted when `u_i * q_i(x) < p(x)` (`_accepts`), and after a rejection p becomes the normalised "
            "residual `max(p - q_i, 0)` (`_residual`); when every child is rejected the next token is drawn "
            "from the residual, an accepted leaf draws it from its own target row."
        ),
        wrapper=(
            "`bench/gallery/economize_rejection.py`, `verify_tree` (generic, K drafts): the K i.i.d. drafts "
            "become K chains hanging from the root (node `k * L + t` is position t of draft k, parent "
            "`k * L + t - 1` or -1; siblings in draft order; equal tokens are not merged, so each sibling keeps "
            "its own draft law q, which is exactly what i.i.d. drafts are); logits row 0 = `log p` at the root, "
            "row `node + 1` = `log p` after that node; `Draft.probs` = q per node. `TopPSampler(1.0, 1.0, seed)` "
            "with the seed drawn from the harness's `rng` per call (`seed_from_rng`): deterministic given the "
            "harness seed. No declared law and no supplied uniforms: statistical level only."
        ),
        meaning=(
            "Multi-draft (K up to 4, including the `wide_tree` instance) recursive rejection sampling in "
            'economize is lossless at this budget: users drafting trees with the `"rejection"` verifier get '
            "the target distribution."
        ),
    ),
    Entry(
        name="seqspecdecod_standard_step",
        title="sequential-speculative-decoding's `standard_speculative_step`",
        target="bench.gallery.seqspec_standard:verify",
        interface="chain",
        packages=("sequential-speculative-decoding", "torch"),
        budget="quick",
        extra=("--reference", "sd", "--time-limit", "600"),
        expect="PASSED",
        function=(
            "`seqspecdecod/standard_sd.py`, `standard_speculative_step(draft_model, target_model, input_ids, "
            "gamma, draft_temperature, target_temperature)`: one whole round (draft gamma tokens, score, then "
            "the inline loop `acceptance_prob = min(p[token] / q[token], 1)`, `u = torch.rand(1)`, accept when "
            "`u < acceptance_prob`, else `sample_from_probs(max(p - q, 0) / sum)`; the bonus after a full "
            "accept), on torch's global RNG."
        ),
        wrapper=(
            "`bench/gallery/seqspec_standard.py`, `verify` (chain): stand-in models returning `log p` / `log q` "
            "rows (temperatures 1.0, so `apply_temperature`'s softmax gives back p and q); the module's "
            "`sample_from_probs` returns the harness's draft tokens for the gamma draft draws only (the harness "
            "drew them from q, the law the function draws them from), the package's own function afterwards. "
            "Torch's global CPU generator is seeded once per batch from the uniforms' hash and restored "
            "afterwards. Python-speed, hence the quick budget and `--time-limit 600`. " + _SEEDING_CHAIN
        ),
        meaning=(
            "Its standard speculative sampling step is lossless at this (quick) budget. The package's "
            "hierarchical variants (`naive_hsd_step`, `capped_hsd_step`) are not covered: after a rejection they "
            "resample whole continuations, calling both models on prefixes off the draft path, which no harness "
            "interface (verifiers see p and q on the draft path only) can express."
        ),
    ),
    Entry(
        name="lucidrains_speculative_decoding",
        title="lucidrains' `speculative_decoding` (PyPI `speculative-decoding`)",
        target="bench.gallery.lucidrains_sd:verify",
        interface="chain",
        packages=("speculative-decoding", "torch", "einops", "beartype"),
        budget="quick",
        extra=("--reference", "sd", "--time-limit", "600"),
        expect="PASSED",
        function=(
            "`speculative_decoding/speculative_decoding.py`, `speculative_decoding(net, small_net, prompt, "
            "seq_len, gamma, temperature, filter_thres, lenience, pad_id)`: a generation loop whose verification "
            "is inline: `r = torch.zeros_like(q).float().uniform_(0, 1)`, `accepted = find_first_true_index(r > "
            "(p / q))`, `adjusted_prob = F.relu(prob - small_prob)` renormalised at the first rejection "
            "(`torch.where(has_rejected, adjusted_prob, prob_next)`), then `torch.multinomial(prob_next, 1)`; "
            "torch's global RNG."
        ),
        wrapper=(
            "`bench/gallery/lucidrains_sd.py`, `verify` (chain): one round of the loop per row, unchanged, with "
            "stand-in `net` / `small_net` (logits `log p`, `log q`, a dummy KV cache), `temperature=1.0`, "
            "`filter_thres=0.0` (its top-k then keeps all V tokens; the default 0.9 keeps the top 10% of both "
            "laws, a different target), `lenience=1.0` (the default; > 1 is lossy by design); the module's "
            "`gumbel_sample` returns the harness's draft tokens for the gamma draft draws; `seq_len = prompt + "
            "gamma + 1`, and when a rejection would start a second round the stand-in draft model stops the "
            "loop there and the round's tokens are read from the sequence it received. Torch's global CPU "
            "generator is seeded once per batch from the uniforms' hash and restored afterwards. Python-speed, "
            "hence the quick budget and `--time-limit 600`. " + _SEEDING_CHAIN
        ),
        meaning=(
            "The verification step of lucidrains' reference implementation is lossless at this (quick) budget "
            "for batch size 1 with `lenience=1` and no top-k truncation (`filter_thres=0`). With the default "
            "`filter_thres=0.9` it samples the top-k-truncated target, by design. Its batch > 1 re-alignment "
            "code is outside the step and not tested."
        ),
    ),
    Entry(
        name="core_deepinfer_verify_greedy",
        title="core-deepinfer's `verify_greedy` (greedy speculative decoding)",
        target="bench.gallery.core_deepinfer_greedy:verify",
        interface="chain",
        packages=("core-deepinfer", "numpy"),
        budget="quick",
        extra=("--level", "exact"),
        expect="FAILED",
        confirm="confirm_core_deepinfer",
        function=(
            "`core_deepinfer/speculative.py`, `verify_greedy(logits, drafts, *, eos_id=None)`: `predictions = "
            "logits.argmax(axis=1)`; commit predictions while each draft equals the prediction, then the "
            "prediction at the first mismatch (or the bonus row's argmax). `generate_speculative` uses it with "
            'greedy drafts: the package documents "greedy speculative semantics" (the output equals the '
            "target's greedy decoding), not sampling."
        ),
        wrapper=(
            "`bench/gallery/core_deepinfer_greedy.py`, `verify` (chain): one call per row with `logits = "
            "log(max(p, tiny))` (the function rejects non-finite logits; the argmax is unchanged) and the drafts "
            "as Python ints; the draft laws and the uniforms are unused (deterministic), so the exact level "
            "applies: the harness locates the law exactly."
        ),
        meaning=(
            "The verdict is the expected one for a greedy verifier: `verify_greedy` is not a lossless *sampling* "
            "verifier (its output is the target's argmax path, a point mass), and the harness measures how far "
            "that is from sampling p. This is not a bug in core-deepinfer, which claims greedy semantics only: "
            "users get exactly greedy decoding of the target, faster; they must not use it to sample at a "
            "temperature > 0. (The harness has no greedy-target mode; against a one-hot p the function is "
            "lossless.)"
        ),
    ),
)
ENTRIES += tuple(Entry(**kw) for kw in PORT_ENTRIES)
ENTRIES += tuple(Entry(**kw) for kw in GENERATION_ENTRIES)


def confirm_core_deepinfer(report: str) -> str:
    """Exact validity defects of the greedy wrapper by enumerating every draft (independent of the harness)."""
    import json  # noqa: PLC0415

    from bench.gallery.core_deepinfer_greedy import exact_defect  # noqa: PLC0415
    from spectr_gbv.core.numbers import format_value  # noqa: PLC0415
    from spectr_gbv.validate.battery import default_battery, instance_from_spec  # noqa: PLC0415

    rows = []
    m = re.search(r"^Smallest failing case:.*?\n\s+(\{.*\})", report, flags=re.M)
    if m:
        inst, _K = instance_from_spec(json.loads(m.group(1)))
        rows.append((f"smallest failing case `{inst.name}`", exact_defect(inst)))
    rows += [(f"battery `{bi.kind}`", exact_defect(bi.instance)) for bi in default_battery(1)]
    table = ["| instance (K = 1) | exact validity defect |", "|---|---|"]
    table += [f"| {name} | {format_value(d)} (= {float(d):.6f}) |" for name, d in rows]
    return "\n".join(
        [
            "Independent check (`bench/gallery/core_deepinfer_greedy.py`, `exact_defect`): the function is "
            "deterministic, so its output law on an instance is `a(o) = sum of q(d)` over the drafts d of positive "
            "probability with output o; every such draft is run through the wrapper and the law's validity defect "
            '(TV between "output, then fresh p" and p on V^(L+1)) is computed by '
            "`spectr_gbv.simulate.exact.validity_defect`, in exact rationals on the battery instances:",
            "",
            *table,
            "",
            "The values agree with the harness's `exact_defect[...]` statistics above (where it computed one). "
            "A lower bound needs no enumeration at all: the first emitted token is always `argmax p(.)`, so the "
            "defect is at least `1 - max_x p(x)` at the root.",
        ]
    )


def _confirmation(name: str) -> Callable[[str], str]:
    """The confirmation function ``name``: one of this module, or ``"module:function"``."""
    if ":" not in name:
        return globals()[name]
    module, _, function = name.partition(":")
    return getattr(importlib.import_module(module), function)


def versions(packages: tuple[str, ...]) -> dict[str, str | None]:
    """Installed versions of ``packages`` (None when not installed)."""
    out: dict[str, str | None] = {}
    for name in packages:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    return out


def run(entry: Entry, budget: str | None, more: tuple[str, ...] = ()) -> tuple[int, str, float]:
    """Run the entry's command; return (exit status, stdout + stderr, seconds)."""
    env = dict(os.environ, OMP_NUM_THREADS="1")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH", "")]))
    exe = [str(CLI)] if CLI.exists() else [sys.executable, "-m", "spectr_gbv.cli.main"]
    t0 = time.monotonic()
    proc = subprocess.run(  # noqa: S603 - our own CLI
        [*exe, *entry.argv(budget, more), "--quiet"], cwd=ROOT, env=env, capture_output=True, text=True, check=False
    )
    return proc.returncode, (proc.stdout + proc.stderr).rstrip("\n"), time.monotonic() - t0


def verdict_lines(report: str) -> str:
    """The report's head: every line up to the first blank line."""
    head = []
    for line in report.splitlines():
        if not line.strip():
            break
        head.append(line)
    return "\n".join(head)


def failing_case(report: str) -> str | None:
    """The ``Smallest failing case`` block of a text report, if any."""
    m = re.search(r"^Smallest failing case:.*?(?=^\S|\Z)", report, flags=re.S | re.M)
    return m.group(0).rstrip() if m else None


def page(
    entry: Entry,
    rc: int,
    report: str,
    seconds: float,
    vers: dict[str, str | None],
    budget: str | None,
    more: tuple[str, ...] = (),
) -> str:
    """The Markdown page of one entry."""
    verdict = {0: "PASSED", 1: "FAILED", 3: "PASSED (lossless, differs from the reference)"}.get(rc, f"exit {rc}")
    plain = "PASSED" if rc in (0, 3) else "FAILED" if rc == 1 else "ERROR"
    pkg = ", ".join(f"**{k} {v}**" if i == 0 else f"{k} {v}" for i, (k, v) in enumerate(vers.items()))
    lines = [f"# `spectr-gbv validate` on {entry.title}", ""]
    if plain != entry.expect:
        lines += [
            f"> **Verdict changed**: this run says {plain}, the analysis below was written for {entry.expect}. "
            "Re-examine it (and confirm any lossy verdict by exact enumeration) before relying on this page.",
            "",
        ]
    head = f"Packages (PyPI, installed with `pip install --no-deps`, CPU only): {pkg}"
    if entry.source is not None:
        head = f"{entry.source}: {pkg}"
    if entry.upstream is not None:
        head = f"A faithful port (our code, `bench/gallery/ports`) of {entry.upstream}, run with {pkg}"
    lines += [
        f"{head}. Result: **{verdict}** "
        f"(exit status {rc}), {seconds:.1f} s on a shared 2-core CPU. Page written by "
        "`python bench/gallery/run_gallery.py` (re-run it to refresh; `--only "
        f"{entry.name}` for this page alone).",
        "",
        "## The function under test",
        "",
        entry.function,
        "",
        "## The wrapper",
        "",
        entry.wrapper,
        "",
        "## Command",
        "",
        "From the repository root (the wrapper module is found from the current directory):",
        "",
        "```bash",
        entry.command(budget, more),
        "```",
        "",
        "## Verdict",
        "",
        "```",
        verdict_lines(report),
        "```",
        "",
    ]
    case = failing_case(report)
    if case is not None:
        lines += [
            "## Failing instance",
            "",
            "As the harness prints it (`spectr_gbv.validate.battery.instance_from_spec` rebuilds it):",
            "",
            "```",
            case,
            "```",
            "",
        ]
    if entry.confirm is not None and rc == 1:
        lines += ["## Independent confirmation", "", _confirmation(entry.confirm)(report), ""]
    lines += ["## What it means for users", "", entry.meaning, "", "## Report", "", "```", report, "```", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Entry point; see the module docstring."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="", help="comma-separated entry names")
    ap.add_argument("--budget", default=None, choices=("quick", "standard", "thorough"), help="override budgets")
    ap.add_argument("--list", action="store_true", help="list the entries and exit")
    ap.add_argument("--generation", action="store_true", help="only the whole-generation-loop entries")
    ap.add_argument("--harness-args", default="", help="extra validate arguments for every entry, e.g. '--no-probes'")
    args = ap.parse_args(argv)
    names = [n for n in args.only.split(",") if n]
    unknown = sorted(set(names) - {e.name for e in ENTRIES})
    if unknown:
        print(f"unknown entries {unknown}; valid: {', '.join(e.name for e in ENTRIES)}", file=sys.stderr)
        return 2
    chosen = [e for e in ENTRIES if not names or e.name in names]
    if args.generation:
        chosen = [e for e in chosen if e.interface.startswith("generation")]
    more = tuple(args.harness_args.split())
    if args.list:
        for e in chosen:
            print(f"{e.name}: {e.command(args.budget, more)}  {versions(e.packages)}")
        return 0
    mismatches = 0
    for e in chosen:
        vers = versions(e.packages)
        if vers[e.packages[0]] is None:
            print(f"{e.name}: skipped ({e.packages[0]} is not installed: pip install --no-deps {e.packages[0]})")
            continue
        rc, report, seconds = run(e, args.budget, more)
        plain = "PASSED" if rc in (0, 3) else "FAILED" if rc == 1 else "ERROR"
        (RESULTS / f"validate_{e.name}.md").write_text(page(e, rc, report, seconds, vers, args.budget, more))
        flag = "" if plain == e.expect else f"  <-- expected {e.expect}: re-examine the page"
        mismatches += plain != e.expect
        print(f"{e.name}: {plain} (exit {rc}, {seconds:.0f} s) -> docs/results/validate_{e.name}.md{flag}")
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
