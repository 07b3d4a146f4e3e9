"""Where one decoding iteration's time goes: model forwards, masks, cache copies, softmaxes, sampling, syncs.

Run: ``python bench/decoder_profile.py [--pair real|tiny] [--method mdbv] [--K 3] [--L 4] [--T 0.7]
[--prompts 3] [--tokens 48] [--scoring auto|flat] [--threads N] [--json PATH]``

The decoder runs unchanged; the profile comes from wrappers put around the functions it
calls (each timed exclusive of the wrapped functions it calls in turn) and forward hooks on
the two models:

* target / draft forwards: inside the models' forwards (the target's prefill excluded);
* masks and positions: :class:`~spectr_gbv.gpu.decoding.cache.RowCache` ``forward`` and
  ``forward_masked`` outside the model (position ids, the 4-D mask);
* cache copies: ``RowCache`` ``repeat``, ``select``, ``truncate``, ``compact``, ``keep_slots``;
* tree building: ``TokenTree.add_level`` (absent before tree scoring);
* laws (softmax): ``process_logits`` (temperature, softmax) on both sides;
* sampling: ``sample_from``; verification kernel: ``spectr_gbv.gpu.kernels.verify``;
* other: the rest of the loop (Python, checks, the output buffer).

Host syncs are counted as calls of ``Tensor.item``, ``tolist``, ``__bool__``, ``__int__`` and
``__float__`` (each a device-to-host transfer on a GPU), the decoder's apart from those inside
the models' forwards (transformers' own). Functions missing from the checkout
being profiled are skipped, so the same script profiles an older commit
(``PYTHONPATH=<old checkout> python bench/decoder_profile.py``) for a before/after table.
Timings are per iteration (one verification call), in ms; the wrappers add a few
microseconds per call.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import json
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))  # decoder_vs_hf, a sibling script

#: Category -> (module, attribute path) of the functions timed for it.
TIMED: dict[str, list[tuple[str, str]]] = {
    "masks and positions": [
        ("spectr_gbv.gpu.decoding.cache", "RowCache.forward"),
        ("spectr_gbv.gpu.decoding.cache", "RowCache.forward_masked"),
    ],
    "cache copies": [
        ("spectr_gbv.gpu.decoding.cache", f"RowCache.{name}")
        for name in ("repeat", "select", "truncate", "compact", "keep_slots")
    ],
    "tree building": [("spectr_gbv.gpu.decoding.tree", "TokenTree.add_level")],
    "laws (softmax)": [
        ("spectr_gbv.gpu.decoding.decoder", "process_logits"),
        ("spectr_gbv.gpu.decoding.draft_sources", "process_logits"),
    ],
    "sampling": [
        ("spectr_gbv.gpu.decoding.decoder", "sample_from"),
        ("spectr_gbv.gpu.decoding.draft_sources", "sample_from"),
    ],
    "verification kernel": [("spectr_gbv.gpu.kernels", "verify")],
}
SYNC_METHODS = ("item", "tolist", "__bool__", "__int__", "__float__")


class Profile:
    """Exclusive wall time per category (a stack of open timers) and sync counts."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.syncs = 0  # outside the models' forwards (the decoder's own)
        self.model_syncs = 0  # inside them (transformers' code)
        self.in_model = 0
        self._stack: list[list[float]] = []  # [start, time spent in children]

    def wrap(self, category: str, fn: Any) -> Any:
        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            self._stack.append([time.perf_counter(), 0.0])
            try:
                return fn(*args, **kwargs)
            finally:
                start, children = self._stack.pop()
                spent = time.perf_counter() - start
                self.seconds[category] += spent - children
                if self._stack:
                    self._stack[-1][1] += spent

        return timed

    def hook_model(self, model: torch.nn.Module, category: str) -> None:
        """Count the time inside ``model``'s forwards as ``category`` (and as a child of the open timer)."""

        def pre(*_a: Any) -> None:
            self.in_model += 1
            self._stack.append([time.perf_counter(), 0.0])

        def post(*_a: Any) -> None:
            self.in_model -= 1
            start, children = self._stack.pop()
            spent = time.perf_counter() - start
            self.seconds["prefill" if self.in_prefill else category] += spent - children
            if self._stack:
                self._stack[-1][1] += spent

        model.register_forward_pre_hook(pre)
        model.register_forward_hook(post)

    in_prefill = False

    def wrap_prefill(self, fn: Any) -> Any:
        """Everything inside the decoder's ``_prefill`` goes to ``prefill`` (not counted per iteration)."""

        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            self.in_prefill = True
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.in_prefill = False
                self.prefill_inclusive += time.perf_counter() - start

        return timed

    prefill_inclusive = 0.0


def install(profile: Profile) -> list[str]:
    """Wrap every function of :data:`TIMED` that exists, and the sync methods; return what was wrapped."""
    done = []
    for category, targets in TIMED.items():
        for module_name, path in targets:
            try:
                owner: Any = importlib.import_module(module_name)
            except ImportError:
                continue
            *parents, name = path.split(".")
            for p in parents:
                owner = getattr(owner, p, None)
            if owner is None or not hasattr(owner, name):
                continue
            setattr(owner, name, profile.wrap(category, getattr(owner, name)))
            done.append(f"{module_name}.{path}")
    for name in SYNC_METHODS:
        original = getattr(torch.Tensor, name)

        def counted(self: torch.Tensor, *a: Any, _orig: Any = original, **k: Any) -> Any:
            if profile.in_model:
                profile.model_syncs += 1
            else:
                profile.syncs += 1
            return _orig(self, *a, **k)

        setattr(torch.Tensor, name, counted)
    return done


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Profile ``--prompts`` generations and print the per-iteration table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pair", choices=("real", "tiny"), default="real")
    ap.add_argument("--method", default="mdbv")
    ap.add_argument("--K", type=int, default=3)
    ap.add_argument("--L", type=int, default=4)
    ap.add_argument("--T", type=float, default=0.7)
    ap.add_argument("--prompts", type=int, default=3)
    ap.add_argument("--tokens", type=int, default=48)
    ap.add_argument("--scoring", default=None, help="auto or flat (omit for a checkout without the option)")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    from decoder_vs_hf import load_pair  # the same pairs and prompts as the side-by-side bench

    pair = argparse.Namespace(pair=args.pair, prompts=args.prompts, dtype="float32", closeness=0.05, prompt_tokens=64)
    target, draft, prompts, _ = load_pair(pair)
    from spectr_gbv.gpu import SpeculativeDecoder

    extra = {} if args.scoring is None else {"scoring": args.scoring}
    dec = SpeculativeDecoder(
        target,
        draft,
        method=args.method,
        num_drafts=args.K,
        draft_length=args.L,
        temperature=args.T,
        seed=0,
        device="cpu",
        **extra,
    )
    dec.generate(prompts[0], 8)  # warm-up (and the tree-attention probe), before the wrappers
    profile = Profile()
    wrapped = install(profile)
    dec._prefill = profile.wrap_prefill(dec._prefill)
    dec._verify_fn = None  # re-imported through the wrapper
    profile.hook_model(target, "target forward")
    profile.hook_model(draft, "draft forward")
    iterations = tokens = emitted = 0
    total = 0.0
    with torch.no_grad():
        for prompt in prompts:
            t0 = time.perf_counter()
            _, st = dec.generate(prompt, args.tokens)
            total += time.perf_counter() - t0
            iterations += st.iterations
            tokens += st.tokens_generated
            emitted += st.tokens_emitted
    loop = total - profile.prefill_inclusive  # the iterations' time, prefill excluded
    per_iter = {k: 1e3 * v / iterations for k, v in profile.seconds.items() if k != "prefill"}
    per_iter["other"] = 1e3 * loop / iterations - sum(per_iter.values())
    result = dict(
        method=args.method,
        K=args.K,
        L=args.L,
        scoring=getattr(st, "scoring", "flat (no tree option)"),
        iterations=iterations,
        tokens_per_s=tokens / total,
        block_efficiency=emitted / iterations,
        prefill_ms_per_prompt=1e3 * profile.prefill_inclusive / len(prompts),
        ms_per_iteration=1e3 * loop / iterations,
        ms=per_iter,
        syncs_per_iteration=profile.syncs / iterations,
        model_syncs_per_iteration=profile.model_syncs / iterations,
        wrapped=wrapped,
    )
    print(
        f"{args.method} K={args.K} L={args.L} scoring={result['scoring']}: {iterations} iterations, "
        f"{result['tokens_per_s']:.2f} tokens/s, BE {result['block_efficiency']:.3f}, "
        f"{result['ms_per_iteration']:.1f} ms/iteration, {result['syncs_per_iteration']:.1f} host syncs/iteration "
        f"(+{result['model_syncs_per_iteration']:.1f} inside the models), "
        f"prefill {result['prefill_ms_per_prompt']:.0f} ms/prompt"
    )
    for k, v in sorted(per_iter.items(), key=lambda kv: -kv[1]):
        print(f"  {k:>22}: {v:8.2f} ms  ({100 * v / result['ms_per_iteration']:5.1f}%)")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    return result


if __name__ == "__main__":
    main()
