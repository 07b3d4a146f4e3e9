"""Speculative decoder throughput per method, side by side with plain autoregressive decoding.

Run: ``python bench/decoder_bench.py [--tokens 64] [--repeats 2] [--K 2] [--L 4] [--batch 1]
[--model PATH [--draft-model PATH | --draft-layers N]] [--device cpu|cuda] [--threads N]
[--law-test-runs 20000]``

Models. Without ``--model`` it builds random Llama models from configs (nothing downloaded):
a target of ``--layers`` layers whose layers after the first have their residual branches
scaled by ``--closeness`` (near-identity), and a one-layer draft that copies the target's
embedding, first layer, final norm and head; so the draft is cheap and close to the target,
as a real draft model is. With ``--model`` it loads a local checkpoint with
``AutoModelForCausalLM.from_pretrained(..., local_files_only=True)``, and the draft from
``--draft-model`` or, without it, the target's first ``--draft-layers`` layers
(:func:`spectr_gbv.realpair.models.draft.truncated_draft`, parameters shared).

Per method it reports tokens/s, block efficiency (tokens per target call), the speed-up ratio
over AR measured in the same run (same prompt, same number of tokens), and the verification
kernel's time as a fraction of one target step (mean verify time per iteration / mean target
time per iteration). The ratios are the claims; absolute numbers depend on the machine.
Optionally it measures the batched law-test harness (runs/s of the first 3 tokens, B rows per
``generate`` call) used by ``tests/gpu/decoding/test_end_to_end.py``.
"""

from __future__ import annotations

import argparse
import time

import torch
from transformers import AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM

from spectr_gbv.gpu import LOSSLESS_METHODS, SINGLE_DRAFT_METHODS, SpeculativeDecoder

PROMPT_TEXT = 'def fibonacci(n):\n    """Return the n-th Fibonacci number."""\n'


def synthetic_pair(vocab: int, hidden: int, layers: int, closeness: float, seed: int) -> tuple:
    """A random target and a cheap one-layer draft that shares its first layer and head."""
    cfg = LlamaConfig(
        vocab_size=vocab,
        hidden_size=hidden,
        intermediate_size=4 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=max(1, hidden // 64),
        num_key_value_heads=max(1, hidden // 64),
        max_position_embeddings=4096,
        initializer_range=0.05,
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    target = LlamaForCausalLM(cfg).eval()
    with torch.no_grad():
        for layer in target.model.layers[1:]:
            layer.self_attn.o_proj.weight.mul_(closeness)
            layer.mlp.down_proj.weight.mul_(closeness)
    dcfg = LlamaConfig(**{**cfg.to_dict(), "num_hidden_layers": 1})
    draft = LlamaForCausalLM(dcfg).eval()
    state = {k: v for k, v in target.state_dict().items() if not k.startswith("model.layers.") or ".layers.0." in k}
    draft.load_state_dict(state)
    return target, draft


def run(dec: SpeculativeDecoder, prompt: torch.Tensor, tokens: int, repeats: int) -> dict[str, float]:
    """Mean rates over ``repeats`` generations (one warm-up first)."""
    dec.generate(prompt, max_new_tokens=min(tokens, 8))
    agg = dict(tokens=0, time=0.0, emitted=0, row_iters=0, iters=0, t_target=0.0, t_verify=0.0, t_draft=0.0)
    for _ in range(repeats):
        _, st = dec.generate(prompt, max_new_tokens=tokens)
        agg["tokens"] += st.tokens_generated
        agg["time"] += st.time_total
        agg["emitted"] += st.tokens_emitted
        agg["row_iters"] += st.row_iterations
        agg["iters"] += st.iterations
        agg["t_target"] += st.time_target
        agg["t_verify"] += st.time_verify
        agg["t_draft"] += st.time_draft
    return dict(
        tokens_per_s=agg["tokens"] / agg["time"],
        block_efficiency=agg["emitted"] / agg["row_iters"],
        verify_over_target_step=agg["t_verify"] / agg["t_target"],
        draft_share=agg["t_draft"] / agg["time"],
    )


def law_test_throughput(target: torch.nn.Module, draft: torch.nn.Module, runs: int, device: str) -> None:
    """Runs/s of the batched harness: ``runs`` rows, first 3 tokens, tiny V = 4 models."""
    from transformers import LlamaConfig as Cfg

    cfg = Cfg(
        vocab_size=4,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        initializer_range=0.25,
        tie_word_embeddings=False,
    )
    torch.manual_seed(0)
    tiny_t, tiny_d = LlamaForCausalLM(cfg).eval(), LlamaForCausalLM(cfg).eval()
    print(f"\nbatched law-test harness ({runs} rows, first 3 tokens, V=4):")
    for method, K, L in (("ar", 1, 1), ("sd", 1, 2), ("mdbv", 3, 2), ("spectr", 3, 2)):
        dec = SpeculativeDecoder(tiny_t, tiny_d, method=method, num_drafts=K, draft_length=L, seed=0, device=device)
        prompt = torch.tensor([[1, 2]] * runs)
        dec.generate(prompt[:100], max_new_tokens=3)
        t0 = time.perf_counter()
        dec.generate(prompt, max_new_tokens=3)
        print(f"  {method:>6} K={K} L={L}: {runs / (time.perf_counter() - t0):10.0f} runs/s")


def main() -> None:
    """Parse arguments, build or load the models, print the table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--K", type=int, default=2)
    ap.add_argument("--L", type=int, default=4)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--vocab", type=int, default=1024)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--closeness", type=float, default=0.05)
    ap.add_argument("--model", default=None)
    ap.add_argument("--draft-model", default=None)
    ap.add_argument("--draft-layers", type=int, default=2, help="with --model and no --draft-model")
    ap.add_argument("--device", default=None)
    ap.add_argument("--methods", default=",".join(m for m in LOSSLESS_METHODS if m != "ar"))
    ap.add_argument("--law-test-runs", type=int, default=0)
    ap.add_argument("--threads", type=int, default=0, help="torch CPU threads (0 = torch default)")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)  # oversubscribed CPUs make multi-threaded small GEMMs crawl
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if args.model:
        target = AutoModelForCausalLM.from_pretrained(args.model, local_files_only=True).eval()
        if args.draft_model:
            draft = AutoModelForCausalLM.from_pretrained(args.draft_model, local_files_only=True).eval()
            label = f"{args.model} / {args.draft_model}"
        else:
            from spectr_gbv.realpair.models.draft import truncated_draft

            draft = truncated_draft(target, args.draft_layers)
            label = f"{args.model} / its first {args.draft_layers} layers"
    else:
        target, draft = synthetic_pair(args.vocab, args.hidden, args.layers, args.closeness, seed=0)
        label = f"random Llama V={args.vocab} hidden={args.hidden} target {args.layers} layers, draft 1 layer"
    prompt = torch.randint(0, target.config.vocab_size, (args.batch, 16), generator=torch.Generator().manual_seed(0))
    if args.model:  # a real model gets a real prompt when its tokenizer is there
        try:
            from transformers import AutoTokenizer

            tok = AutoTokenizer.from_pretrained(args.model, local_files_only=True)
            prompt = tok(PROMPT_TEXT, return_tensors="pt").input_ids.repeat(args.batch, 1)
        except (OSError, ValueError):
            pass
    print(f"{label}; device {device}; B={args.batch}, {args.tokens} new tokens x {args.repeats}, T={args.temperature}")
    common = dict(temperature=args.temperature, seed=0, device=device)
    ar = run(SpeculativeDecoder(target, None, method="ar", **common), prompt, args.tokens, args.repeats)
    print(
        f"{'method':>14} {'K':>2} {'L':>2} {'tokens/s':>9} {'BE':>6} {'vs AR':>7} {'verify/target':>14} {'draft %':>8}"
    )
    print(f"{'ar':>14} {'-':>2} {'-':>2} {ar['tokens_per_s']:9.1f} {1.0:6.3f} {1.0:6.2f}x {'-':>14} {'-':>8}")
    for method in args.methods.split(","):
        K = 1 if method in SINGLE_DRAFT_METHODS else args.K  # a user's rule (module:attribute) takes --K
        dec = SpeculativeDecoder(target, draft, method=method, num_drafts=K, draft_length=args.L, **common)
        r = run(dec, prompt, args.tokens, args.repeats)
        print(
            f"{method:>14} {K:>2} {args.L:>2} {r['tokens_per_s']:9.1f} {r['block_efficiency']:6.3f} "
            f"{r['tokens_per_s'] / ar['tokens_per_s']:6.2f}x {r['verify_over_target_step']:14.3f} "
            f"{100 * r['draft_share']:7.1f}%"
        )
    if args.law_test_runs:
        law_test_throughput(target, draft, args.law_test_runs, device)


if __name__ == "__main__":
    main()
