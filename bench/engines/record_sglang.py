"""Record what the SGLang adapters pass to the real SGLang 0.5.23 chain kernel and what it returns (CI fixtures).

Run inside the engine environment, from the repository root::

    PYTHONPATH=. .engines/sglang-0.5.23/bin/python bench/engines/record_sglang.py [--out tests/engines/data]

For every case it builds the harness-level arrays (draft ids, q, p, uniforms), the kernel's keyword arguments with
:func:`bench.engines.sglang_kernels.chain_call_inputs`, calls the released
``chain_speculative_sampling_triton`` (Triton interpreter) and saves, in ``sglang_chain_<case>.npz``: the
harness arrays (``h_*``), every keyword argument before the call (``in_*``), the three output tensors after the
call (``out_predicts``, ``out_accept_index``, ``out_accept_token_num``), the adapter's result (``result``), the
flag ``block`` and the versions (``versions``, a JSON string). ``tests/engines/test_sglang_adapters.py`` replays them
without sglang or triton.

Cases:

``random``
    B = 6, L = 3, V = 5, q = softmax(z), p = softmax(z + 0.7 noise) (so drafts are often accepted), drafts drawn
    from q, random uniforms (token-level rejection).
``random_block``
    The same arrays with ``block_verification=True``.
``zero_coin``
    Row 0: the drafted token has p = 0 < q and the harness uniform is 0 (SGLang coin 0): the kernel must reject
    (``coin * q < p`` is ``0 < 0``). Row 1: p = q, coin ``1 - 2**-24`` (largest float32 coin) must accept.
``empty_residual``
    q is p pushed up by one float32 ulp on every token, the largest coin: the drafted token is rejected and
    ``relu(p - q)`` is all zero, so the kernel's final scan finds nothing and emits ``V - 1`` (its documented
    fallback), here a token of target probability 0 (p = [1/4, 1/4, 1/2, 0]).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import torch

from bench.engines import sglang_kernels as sk

OUT_KEYS = ("predicts", "accept_index", "accept_token_num")


def _random_case(seed: int, B: int, L: int, V: int) -> dict[str, np.ndarray]:
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(B, L + 1, V, generator=g, dtype=torch.float64)
    q = torch.softmax(z[:, :L], -1)
    p = torch.softmax(z + 0.7 * torch.randn(B, L + 1, V, generator=g, dtype=torch.float64), -1)
    d = torch.multinomial(q.reshape(-1, V), 1, generator=g).view(B, L)
    u = torch.rand(B, L + 1, generator=g, dtype=torch.float64)
    return {"draft_ids": d.numpy(), "draft_probs": q.numpy(), "target_probs": p.numpy(), "uniforms": u.numpy()}


def _zero_coin_case() -> dict[str, np.ndarray]:
    V = 4
    q = np.array([[[0.25, 0.25, 0.25, 0.25]], [[0.1, 0.2, 0.3, 0.4]]])
    p = np.array([[[0.0, 0.5, 0.25, 0.25], [0.25] * 4], [[0.1, 0.2, 0.3, 0.4], [0.25] * 4]])
    d = np.array([[0], [3]], dtype=np.int64)
    u = np.array([[0.0, 0.5], [1.0 - 2.0**-24, 0.5]])
    assert p.shape[-1] == V
    return {"draft_ids": d, "draft_probs": q, "target_probs": p, "uniforms": u}


def _empty_residual_case() -> dict[str, np.ndarray]:
    p32 = np.array([0.25, 0.25, 0.5, 0.0], dtype=np.float32)
    q32 = np.nextafter(p32, np.float32(1.0))
    q = q32.astype(np.float64)[None, None, :]
    p = np.stack([p32.astype(np.float64), p32.astype(np.float64)])[None]
    d = np.array([[1]], dtype=np.int64)
    u = np.array([[1.0 - 2.0**-24, 0.3]])
    return {"draft_ids": d, "draft_probs": q, "target_probs": p, "uniforms": u}


CASES = {
    "random": (lambda: _random_case(0, 6, 3, 5), False),
    "random_block": (lambda: _random_case(0, 6, 3, 5), True),
    "zero_coin": (_zero_coin_case, False),
    "empty_residual": (_empty_residual_case, False),
}


def record(name: str, out_dir: Path) -> Path:
    """Run one case on the real kernel and write ``sglang_chain_<name>.npz``.

    Parameters
    ----------
    name : str
        A key of :data:`CASES`.
    out_dir : Path

    Returns
    -------
    Path
        The file written.
    """
    make, block = CASES[name]
    h = make()
    kw = sk.chain_call_inputs(**h)
    before = {k: v.clone() for k, v in kw.items()}
    kernel = sk._chain_kernel()
    extra = {"block_verification": True} if block else {}
    kernel(**kw, threshold_single=1.0, threshold_acc=1.0, deterministic=True, **extra)
    result = sk.emitted_tokens(kw["predicts"], kw["accept_index"], kw["accept_token_num"])
    via_adapter = (sk.chain_block if block else sk.chain)(**h)
    if not torch.equal(result, via_adapter):
        raise RuntimeError(f"{name}: the adapter's result differs from the direct call")
    import sglang
    import triton

    versions = {"sglang": sglang.__version__, "triton": triton.__version__, "torch": torch.__version__}
    arrays = {f"h_{k}": np.asarray(v) for k, v in h.items()}
    arrays.update({f"in_{k}": v.numpy() for k, v in before.items()})
    arrays.update({f"out_{k}": kw[k].numpy() for k in OUT_KEYS})
    arrays["result"] = result.numpy()
    arrays["block"] = np.array(block)
    arrays["versions"] = np.array(json.dumps(versions))
    path = out_dir / f"sglang_chain_{name}.npz"
    np.savez_compressed(path, **arrays)
    print(f"{path}: result {result.tolist()}", file=sys.stderr)
    return path


def main(argv: list[str] | None = None) -> int:
    """CLI entry: record every case (or ``--only NAME``)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("tests/engines/data"))
    ap.add_argument("--only", choices=sorted(CASES))
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for name in [args.only] if args.only else list(CASES):
        record(name, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
