"""This package's decoder against transformers' assisted generation: one run, same pair, prompts and tokens.

Run: ``python bench/decoder_vs_hf.py [--pair real|synthetic|tiny] [--prompts 4] [--tokens 64]
[--K 3] [--L 4[,2,...]] [--T 0.7] [--configs ar,hf_constant,...] [--device cpu|cuda] [--dtype float32]
[--threads N] [--closeness 0.05] [--out DIR]``

Pairs: ``real`` = SmolLM2-135M-Instruct with the shipped distilled draft on HumanEval prompts
(fetched and cached on first use); ``synthetic`` = random Llama models of SmolLM2-1.7B's
(target) and SmolLM2-135M's (draft) shapes with near-identity layers, so acceptance is high
(:func:`spectr_gbv.gpu.models.synthetic.synthetic_pair`), on random prompts; ``tiny`` = the
same construction at tiny shapes (seconds on a CPU; what CI runs).

Configurations (``--configs``; default all): ``ar`` (plain sampling, this package),
``hf_constant`` and ``hf_heuristic`` (``target.generate(assistant_model=draft)`` with the
constant and the heuristic draft-length schedule, starting at L, confidence threshold 0;
:func:`spectr_gbv.realpair.peer.assisted_generation_run`), ``sd``, ``bv`` (K = 1), ``mdbv``,
``mdbv_flat`` (MDBV with flat scoring: K rows of L + 1 positions, the fallback, to show
what the token tree saves), ``spectr``, ``gbv_multipath``, ``near_opt_bv`` (K drafts).
Prompts run round-robin (prompt i through every configuration, then prompt i + 1), after one
untimed warm-up generation per configuration, so slow drifts of the machine hit every
configuration alike. Every run generates exactly ``--tokens`` new tokens per prompt at
temperature T (no top-k/top-p).

Reported per configuration: tokens/s; block efficiency BE (tokens per verification call:
E[tau + 1] for this package, tokens / target calls for transformers, whose first call also
encodes the prompt); target calls, target positions and draft calls per generated token;
the time shares inside target forwards, inside draft forwards and elsewhere (verification,
sampling, cache bookkeeping, Python), measured with forward hooks on both models, the same
way for both implementations (synchronised on CUDA); the ratios to ``ar`` and to each
transformers schedule. Writes ``results.json``, ``summary.md`` and ``decoder_vs_hf.png``
(with matplotlib) to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import torch
from tqdm.auto import tqdm

from spectr_gbv.gpu import SpeculativeDecoder
from spectr_gbv.realpair.output import machine_info
from spectr_gbv.realpair.peer import assisted_generation_run

#: Configuration name -> (method, K is the run's K (else 1), scoring).
CONFIGS: dict[str, tuple[str, bool, str]] = {
    "ar": ("ar", False, "auto"),
    "hf_constant": ("hf", False, "constant"),
    "hf_heuristic": ("hf", False, "heuristic"),
    "sd": ("sd", False, "auto"),
    "bv": ("bv", False, "auto"),
    "mdbv": ("mdbv", True, "auto"),
    "mdbv_flat": ("mdbv", True, "flat"),
    "spectr": ("spectr", True, "auto"),
    "gbv_multipath": ("gbv_multipath", True, "auto"),
    "near_opt_bv": ("near_opt_bv", True, "auto"),
}


@dataclass
class Totals:
    """What one configuration accumulated over the prompts."""

    name: str
    method: str
    K: int
    L: int
    scoring: str = ""
    tokens: int = 0
    seconds: float = 0.0
    target_calls: int = 0
    draft_calls: int = 0
    emitted: int = 0
    iterations: int = 0
    target_positions: int = 0
    target_forward_s: float = 0.0
    draft_forward_s: float = 0.0
    hist: list[int] = field(default_factory=list)

    def row(self) -> dict[str, object]:
        """The reported figures (see the module docstring)."""
        hf = self.method == "hf"
        be = self.tokens / self.target_calls if hf else self.emitted / max(self.iterations, 1)
        other = self.seconds - self.target_forward_s - self.draft_forward_s
        return dict(
            config=self.name,
            method=self.method,
            K=self.K,
            L=self.L,
            scoring=self.scoring,
            tokens=self.tokens,
            seconds=self.seconds,
            tokens_per_s=self.tokens / self.seconds,
            block_efficiency=be if self.method != "ar" else 1.0,
            target_calls_per_token=self.target_calls / self.tokens,
            target_positions_per_token=self.target_positions / self.tokens,
            draft_calls_per_token=self.draft_calls / self.tokens,
            share_target=self.target_forward_s / self.seconds,
            share_draft=self.draft_forward_s / self.seconds,
            share_other=other / self.seconds,
            accepted_hist=self.hist,
        )


class ForwardMeter:
    """Forward hooks on a module: calls, input positions and seconds inside its forwards."""

    def __init__(self, module: torch.nn.Module, device: torch.device) -> None:
        self.calls, self.positions, self.seconds = 0, 0, 0.0
        self._sync = device.type == "cuda"
        self._t0 = 0.0
        self._handles = [
            module.register_forward_pre_hook(self._pre, with_kwargs=True),
            module.register_forward_hook(self._post),
        ]

    def _pre(self, _module: torch.nn.Module, args: tuple, kwargs: dict) -> None:
        ids = kwargs.get("input_ids", args[0] if args else None)
        self.positions += int(ids.numel()) if isinstance(ids, torch.Tensor) else 0
        if self._sync:
            torch.cuda.synchronize()
        self._t0 = time.perf_counter()

    def _post(self, *_args: object) -> None:
        if self._sync:
            torch.cuda.synchronize()
        self.calls += 1
        self.seconds += time.perf_counter() - self._t0

    def close(self) -> None:
        for h in self._handles:
            h.remove()


@contextmanager
def metered(target: torch.nn.Module, draft: torch.nn.Module, device: torch.device) -> Iterator[tuple]:
    """Meters on both models while inside."""
    mt, md = ForwardMeter(target, device), ForwardMeter(draft, device)
    try:
        yield mt, md
    finally:
        mt.close()
        md.close()


def load_pair(args: argparse.Namespace) -> tuple[torch.nn.Module, torch.nn.Module, list[torch.Tensor], str]:
    """Target, draft, prompts [T] and a label, for ``--pair``."""
    dtype = getattr(torch, args.dtype)
    if args.pair == "real":
        from spectr_gbv.realpair.models.prompts import load_prompts
        from spectr_gbv.realpair.runner import load_models

        models = load_models(progress=True)
        prompts = [
            models.encode(p.text, False, 256) for p in load_prompts("humaneval", args.prompts, 0, progress=False)
        ]
        label = f"{models.target_name} + {models.draft_name}, HumanEval prompts"
        return models.target.to(dtype), models.draft.to(dtype), prompts, label
    from spectr_gbv.gpu.models.synthetic import SHAPES, synthetic_pair

    shapes = ("smollm2-1.7b", "smollm2-135m") if args.pair == "synthetic" else ("tiny-target", "tiny-draft")
    target, draft = synthetic_pair(*shapes, closeness=args.closeness, seed=0, dtype=dtype)
    gen = torch.Generator().manual_seed(0)
    V = SHAPES[shapes[0]]["vocab_size"]
    prompts = [torch.randint(0, V, (args.prompt_tokens,), generator=gen) for _ in range(args.prompts)]
    label = f"synthetic {shapes[0]} target + {shapes[1]} draft (closeness {args.closeness}), random prompts"
    return target, draft, prompts, label


def runner(
    name: str,
    L: int,
    args: argparse.Namespace,
    target: torch.nn.Module,
    draft: torch.nn.Module,
    device: torch.device,
) -> tuple[Totals, Callable[[torch.Tensor, int, int, bool], None]]:
    """The totals of configuration ``name`` at draft length L and a function running it on one prompt."""
    method, multi, mode = CONFIGS[name]
    K = args.K if multi else 1
    L = 0 if method == "ar" else L
    tot = Totals(name, method, K, L, scoring=mode if method == "hf" else "")
    if method != "hf":
        dec = SpeculativeDecoder(
            target,
            None if method == "ar" else draft,
            method=method,
            num_drafts=K,
            draft_length=max(L, 1),
            temperature=args.T,
            seed=args.seed,
            device=device,
            scoring=mode,
        )

    def run(prompt: torch.Tensor, tokens: int, seed: int, count: bool) -> None:
        with metered(target, draft, device) as (mt, md):
            if method == "hf":
                res = assisted_generation_run(target, draft, [prompt], tokens, args.T, L, seed, schedule=mode)
                seconds, calls, emitted, iters = res.time_s, res.target_calls, res.tokens_generated, res.target_calls
                hist: list[int] = []
            else:
                dec.generator = None if dec.generator is None else dec.generator.manual_seed(seed)
                _, st = dec.generate(prompt, tokens)
                seconds, calls, emitted, iters = st.time_total, st.target_calls, st.tokens_emitted, st.row_iterations
                hist, tot.scoring = st.accepted_hist, st.scoring
        if not count:
            return
        prefill = prompt.numel() - 1  # this package's prefill call, or the prompt inside the first HF call
        tot.tokens += tokens
        tot.seconds += seconds
        tot.target_calls += calls
        tot.draft_calls += md.calls - (1 if method not in ("hf", "ar") and prefill else 0)
        tot.emitted += emitted
        tot.iterations += iters
        tot.target_positions += mt.positions - prefill
        tot.target_forward_s += mt.seconds
        tot.draft_forward_s += md.seconds
        tot.hist = [a + b for a, b in zip(tot.hist, hist, strict=True)] if tot.hist else list(hist)

    return tot, run


def markdown(rows: list[dict], label: str, args: argparse.Namespace, machine: dict) -> str:
    """The summary table."""
    base = {(r["config"], r["L"]): r["tokens_per_s"] for r in rows}
    best_hf = max((r["tokens_per_s"] for r in rows if r["method"] == "hf"), default=None)
    lines = [
        "# Decoder vs transformers' assisted generation",
        "",
        f"Pair: {label}. {args.prompts} prompts x {args.tokens} new tokens, T = {args.T}, K = {args.K}, L = {args.L};",
        f"device {machine['device']} ({machine.get('device_name') or machine['processor']}), "
        f"torch {machine['torch']} ({machine['torch_threads']} threads), transformers {machine['transformers']}, "
        f"commit {machine['git_commit']}, {machine['datetime']}.",
        f"Command: `{machine['command']}`",
        "",
        "| config | K | L | scoring | tokens/s | BE | vs ar | vs hf_constant (same L) | vs hf_heuristic (same L) "
        "| vs best hf | target calls/tok | target positions/tok | draft calls/tok | time: target / draft / other |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        keys = [("ar", 0), ("hf_constant", r["L"]), ("hf_heuristic", r["L"])]
        ratio = [f"{r['tokens_per_s'] / base[k]:.2f}x" if k in base else "-" for k in keys]
        ratio.append(f"{r['tokens_per_s'] / best_hf:.2f}x" if best_hf else "-")
        lines.append(
            f"| {r['config']} | {r['K']} | {r['L']} | {r['scoring'] or '-'} | {r['tokens_per_s']:.2f} | "
            f"{r['block_efficiency']:.3f} | {' | '.join(ratio)} | {r['target_calls_per_token']:.3f} | "
            f"{r['target_positions_per_token']:.2f} | {r['draft_calls_per_token']:.2f} | "
            f"{r['share_target']:.2f} / {r['share_draft']:.2f} / {r['share_other']:.2f} |"
        )
    lines += [
        "",
        "BE: tokens per verification call (this package: E[tau + 1]; transformers: tokens / target calls). "
        "Positions per token: target positions fed in verification calls (prompt excluded). Time shares: inside "
        "target forwards, inside draft forwards, elsewhere (forward hooks, the same for both implementations).",
    ]
    return "\n".join(lines) + "\n"


def plot(rows: list[dict], path: Path, title: str) -> str | None:
    """Tokens/s and time shares per configuration; returns an error message without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        return f"matplotlib is not installed ({exc})"
    names = [r["config"] if r["method"] == "ar" else f"{r['config']} L={r['L']}" for r in rows]
    fig, (a, b) = plt.subplots(1, 2, figsize=(12, 0.45 * len(rows) + 1.5), sharey=True)
    colors = ["tab:gray" if n.startswith("hf") else "tab:blue" for n in names]
    a.barh(names, [r["tokens_per_s"] for r in rows], color=colors)
    for i, r in enumerate(rows):
        a.text(r["tokens_per_s"], i, f" BE {r['block_efficiency']:.2f}", va="center", fontsize=8)
    a.set_xlabel("tokens/s")
    a.invert_yaxis()
    left = [0.0] * len(rows)
    for key, label, color in (
        ("share_target", "target forwards", "tab:red"),
        ("share_draft", "draft forwards", "tab:orange"),
        ("share_other", "other", "tab:green"),
    ):
        vals = [max(r[key], 0.0) for r in rows]
        b.barh(names, vals, left=left, label=label, color=color)
        left = [x + v for x, v in zip(left, vals, strict=True)]
    b.set_xlabel("share of decode time")
    b.legend(loc="lower right", fontsize=8)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return None


def main(argv: list[str] | None = None) -> dict:
    """Parse arguments, run every configuration, write the outputs; return the results."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pair", choices=("real", "synthetic", "tiny"), default="real")
    ap.add_argument("--prompts", type=int, default=4)
    ap.add_argument("--prompt-tokens", type=int, default=64, help="length of the random prompts (synthetic pairs)")
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--K", type=int, default=3)
    ap.add_argument("--L", default="4", help="draft length, or a comma list (every configuration at each)")
    ap.add_argument("--T", type=float, default=0.7)
    ap.add_argument("--configs", default=",".join(CONFIGS))
    ap.add_argument("--device", default=None)
    ap.add_argument("--dtype", default="float32", choices=("float32", "bfloat16", "float16"))
    ap.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    ap.add_argument("--closeness", type=float, default=0.05, help="synthetic pairs: residual scale of the layers")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None, help="directory for results.json, summary.md, decoder_vs_hf.png")
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    names = args.configs.split(",")
    unknown = [n for n in names if n not in CONFIGS]
    if unknown:
        ap.error(f"unknown configs {unknown}; valid: {', '.join(CONFIGS)}")
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    target, draft, prompts, label = load_pair(args)
    target, draft = target.to(device).eval(), draft.to(device).eval()
    lengths = [int(x) for x in str(args.L).split(",")]
    runs = [runner(n, L, args, target, draft, device) for L in lengths for n in names if n != "ar" or L == lengths[0]]
    with torch.no_grad():
        for _, run in tqdm(runs, desc="warm-up", file=sys.stderr):
            run(prompts[0], min(8, args.tokens), args.seed, False)
        bar = tqdm(total=len(runs) * len(prompts), desc="runs", file=sys.stderr)
        for i, prompt in enumerate(prompts):
            for tot, run in runs:
                bar.set_postfix_str(f"prompt {i} {tot.name}")
                run(prompt, args.tokens, args.seed + 7919 * i, True)
                bar.update()
        bar.close()
    rows = [tot.row() for tot, _ in runs]
    machine = machine_info(
        str(device), ["python", "bench/decoder_vs_hf.py", *(argv if argv is not None else sys.argv[1:])]
    )
    result = dict(pair=label, args=vars(args), machine=machine, rows=rows)
    text = markdown(rows, label, args, machine)
    print(text)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        err = plot(rows, out / "decoder_vs_hf.png", f"{label}; T={args.T}, K={args.K}, L={args.L}")
        if err:
            result["plot_error"] = err
        (out / "results.json").write_text(json.dumps(result, indent=2) + "\n")
        (out / "summary.md").write_text(text)
    return result


if __name__ == "__main__":
    main()
