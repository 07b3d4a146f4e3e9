"""Random generators whose i-th uniform is an extreme coin: exactly 0.0, or the largest value < 1.

The robustness probes (:mod:`spectr_gbv.validate.probes`) need a verifier's acceptance
coin to be exactly 0 (does ``u <= p/q`` accept a token with ``p = 0``?) or the largest uniform
below 1 (does a rejection whose residual ``max(p - q, 0)`` is all zero crash?). Two sources:

numpy (``numpy.random.Generator`` on PCG64)
    ``random()`` (float64) is ``(x >> 11) * 2**-53`` of the next 64-bit output ``x``;
    ``random(dtype=np.float32)`` is ``(y >> 8) * 2**-24`` of the next 32-bit output ``y``, taken
    from the low half of a fresh 64-bit output and then from its buffered high half. PCG64
    steps its 128-bit state ``s -> s * M + inc (mod 2**128)`` (affine, invertible) and outputs
    ``rotr64(hi(s) ^ lo(s), s >> 122)``: any output word is reached by choosing ``lo`` from
    ``hi``, and the state ``i + 1`` steps earlier is found by inverting the step.
torch (the CPU generator, mt19937)
    ``torch.rand`` / ``rand_like`` in float32 is ``(r & 0xFFFFFF) * 2**-24`` of the next 32-bit
    mt19937 output ``r``; in float64 it is ``(r64 & (2**53 - 1)) * 2**-53`` with ``r64 = (r1 << 32)
    | r2`` from two outputs. The serialized state (``torch.get_rng_state()``, 5056 bytes: the
    legacy ``THGeneratorState`` ``the_initial_seed u64, left i32, seeded i32, next u64,
    state[624] u64, normal_x/y/rho f64, normal_is_valid i32``, then ``next_float_normal_sample
    f32, is_valid bool``) is crafted with ``left = 624``, ``next = 0``: the k-th output (k < 623)
    is then the tempered ``state[k]``, so ``state[k]`` is set to the untempered target.

Draw indices count the draws of the stated dtype from the start (every earlier draw of the
same kind); later draws are ordinary pseudo-random values.

torch in reduced precision (CPU generator; pinned by the tests): ``torch.rand`` /
``rand_like`` / ``uniform_`` in bfloat16 or float16 read one 32-bit output like float32, form
the float32 uniform ``(r & 0xFFFFFF) * 2**-24`` and round it to the dtype; a value that rounds
to 1 becomes 0. So a bfloat16 coin is exactly 0 with probability about ``2**-9`` (float16:
``2**-12``), and the largest bfloat16 coin, ``1 - 2**-8``, is not reached by forcing the
float32 maximum. :func:`torch_words_state` therefore forces whole 32-bit output words (a range
of them at once, to search for the coin's draw index) with the patterns of :data:`WORDS`, and
:func:`torch_word_value` / :func:`coin_probability` give the value a verifier sees in each
dtype and how often torch draws it.

References
----------
O'Neill, PCG: A Family of Simple Fast Space-Efficient Statistically Good Algorithms (2014);
Matsumoto and Nishimura, Mersenne Twister (1998); numpy ``distributions.c`` (``next_double``,
``next_float``); ATen ``TransformationHelper.h`` (``uniform_real``), ``CPUGeneratorImpl.cpp``.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Callable
from typing import Any

import numpy as np

#: PCG64 multiplier (numpy's ``PCG_DEFAULT_MULTIPLIER_128``).
PCG_MULT = 0x2360ED051FC65DA44385DF649FCCF645
_MASK64 = (1 << 64) - 1
_MASK128 = (1 << 128) - 1
_PCG_MULT_INV = pow(PCG_MULT, -1, 1 << 128)

#: Size in bytes of torch's CPU generator state (``torch.get_rng_state()``).
TORCH_STATE_BYTES = 5056
_MT_N = 624

_WHICH = ("zero", "max")
_DTYPES = ("float64", "float32")

#: 32-bit mt19937 output words :func:`torch_words_state` forces. float32 / bfloat16 / float16 /
#: float64 (two equal words) uniforms they give: ``"zero"``: 0 in every dtype; ``"max"``:
#: ``1 - 2**-24`` / 0 / 0 / ``1 - 2**-53`` (the reduced-precision values round to 1 and wrap);
#: ``"high"``: ``1 - 2**-9 - 2**-24`` / ``1 - 2**-8`` (the largest bfloat16 coin) / ``1 - 2**-9`` /
#: about 0.984; ``"wrap"``: ``1 - 2**-10`` / 0 / ``1 - 2**-10`` / about 0.992.
WORDS: dict[str, int] = {"zero": 0x00000000, "max": 0xFFFFFFFF, "high": 0xFFFF7FFF, "wrap": 0xFFFFC000}
#: dtypes of a torch uniform (``torch.rand(..., dtype=...)``) the probes tell apart.
TORCH_DTYPES: tuple[str, ...] = ("float64", "float32", "bfloat16", "float16")


def coin_value(which: str, dtype: str) -> float:
    """The coin :func:`numpy_coin_generator` / :func:`torch_coin_state` produce.

    Parameters
    ----------
    which : str
        ``"zero"`` (0.0) or ``"max"`` (the largest uniform below 1 in ``dtype``).
    dtype : str
        ``"float64"`` (max ``1 - 2**-53``) or ``"float32"`` (max ``1 - 2**-24``).

    Returns
    -------
    float

    Raises
    ------
    ValueError
        Unknown ``which`` or ``dtype``.
    """
    _check(which, dtype)
    if which == "zero":
        return 0.0
    return 1.0 - 2.0**-53 if dtype == "float64" else 1.0 - 2.0**-24


def _check(which: str, dtype: str) -> None:
    if which not in _WHICH:
        raise ValueError(f"which: expected 'zero' or 'max', got {which!r}")
    if dtype not in _DTYPES:
        raise ValueError(f"dtype: expected 'float64' or 'float32', got {dtype!r}")


def _check_index(index: Any, limit: int | None = None) -> int:
    if isinstance(index, bool) or not isinstance(index, int | np.integer) or index < 0:
        raise ValueError(f"index: expected an int >= 0, got {index!r}")
    if limit is not None and index >= limit:
        raise ValueError(f"index: expected < {limit}, got {index}")
    return int(index)


# ------------------------------------------------------------------------------- numpy PCG64
def _rotl64(x: int, r: int) -> int:
    return ((x << r) | (x >> ((64 - r) % 64))) & _MASK64 if r else x


def _pcg_output(s: int) -> int:
    hi, lo, rot = s >> 64, s & _MASK64, s >> 122
    x = hi ^ lo
    return ((x >> rot) | (x << ((64 - rot) % 64))) & _MASK64 if rot else x


def _pcg_state_with_output(hi: int, out: int) -> int:
    """The PCG64 state with high word ``hi`` whose XSL-RR output is ``out``."""
    rot = hi >> 58
    lo = hi ^ _rotl64(out, rot)
    return (hi << 64) | lo


def numpy_coin_generator(which: str, index: int = 0, seed: int = 0, dtype: str = "float64") -> np.random.Generator:
    """A :class:`numpy.random.Generator` whose draw ``index`` is exactly 0.0 or the largest uniform < 1.

    ``dtype="float64"``: the generator's 64-bit output number ``index`` (0-based) is 0 (``which
    = "zero"``) or ``2**64 - 1`` (``"max"``), so ``random()`` at that draw is 0.0 or ``1 - 2**-53``
    when every earlier draw consumed one 64-bit output (``random()``, ``uniform()``,
    ``choice(p=...)``, elementwise for arrays). As both 32-bit halves of that word are 0 (all
    ones), ``random(dtype=np.float32)`` draws ``2 * index`` and ``2 * index + 1`` are also 0.0
    (``1 - 2**-24``). ``dtype="float32"``: only the 32-bit draw ``index`` of a generator used
    through ``random(dtype=np.float32)`` alone is forced (the low half of output ``index // 2``
    for even ``index``, the high half for odd); the other half stays ordinary.

    Parameters
    ----------
    which : str
        ``"zero"`` or ``"max"``.
    index : int
        0-based draw number (64-bit outputs for float64, 32-bit draws for float32).
    seed : int
        Seed of the PCG64 stream (its increment and the ordinary draws).
    dtype : str
        ``"float64"`` or ``"float32"``.

    Returns
    -------
    numpy.random.Generator

    Raises
    ------
    ValueError
        Unknown ``which`` or ``dtype``, ``index < 0``.

    Examples
    --------
    >>> rng = numpy_coin_generator("zero", 2, seed=5)
    >>> _ = rng.random(2); rng.random()
    0.0
    """
    _check(which, dtype)
    index = _check_index(index)
    bg = np.random.PCG64(seed)
    st = bg.state
    inc = int(st["state"]["inc"])
    s0 = int(st["state"]["state"])
    word = index if dtype == "float64" else index // 2
    # the ordinary state that would produce output `word`, as a source of the free bits
    s_ord = s0
    for _ in range(word + 1):
        s_ord = (s_ord * PCG_MULT + inc) & _MASK128
    target = 0 if which == "zero" else _MASK64
    if dtype == "float32":
        ordinary = _pcg_output(s_ord)
        half = _MASK64 >> 32
        if index % 2 == 0:
            target = (ordinary & (half << 32)) | (target & half)
        else:
            target = (target & (half << 32)) | (ordinary & half)
    s = _pcg_state_with_output(s_ord >> 64, target)
    for _ in range(word + 1):
        s = ((s - inc) * _PCG_MULT_INV) & _MASK128
    st["state"]["state"] = s
    st["has_uint32"] = 0
    st["uinteger"] = 0
    bg.state = st
    return np.random.Generator(bg)


# ------------------------------------------------------------------------------- torch mt19937
def _untemper(y: int) -> int:
    """Invert mt19937's output tempering (32-bit)."""
    y ^= y >> 18
    y ^= (y << 15) & 0xEFC60000
    x = y
    for _ in range(5):  # y ^= (y << 7) & 0x9d2c5680, 7-bit steps
        x = y ^ ((x << 7) & 0x9D2C5680)
    y = x & 0xFFFFFFFF
    x = y
    for _ in range(3):  # y ^= y >> 11
        x = y ^ (x >> 11)
    return x & 0xFFFFFFFF


def _temper(y: int) -> int:
    y ^= y >> 11
    y ^= (y << 7) & 0x9D2C5680
    y ^= (y << 15) & 0xEFC60000
    y ^= y >> 18
    return y & 0xFFFFFFFF


def torch_coin_state(which: str, index: int = 0, seed: int = 0, dtype: str = "float32") -> Any:
    """A torch CPU RNG state whose uniform draw ``index`` is exactly 0.0 or the largest uniform < 1.

    After ``torch.set_rng_state(state)`` (or ``torch.Generator().set_state(state)``), the
    ``index``-th (0-based) element drawn by ``torch.rand`` / ``rand_like`` / ``uniform_`` in
    ``dtype`` on the CPU, counting every earlier float32 (resp. float64) uniform, is 0.0
    (``which="zero"``) or ``1 - 2**-24`` (float32) / ``1 - 2**-53`` (float64) (``"max"``).
    float32 draw k reads mt19937 output k; float64 draw k reads outputs 2k and 2k + 1.

    Parameters
    ----------
    which : str
        ``"zero"`` or ``"max"``.
    index : int
        0-based draw number: < 623 (float32) or < 311 (float64).
    seed : int
        Seed of the ordinary words (``torch.Generator().manual_seed(seed)``).
    dtype : str
        ``"float32"`` or ``"float64"``.

    Returns
    -------
    torch.Tensor, shape [5056], uint8
        The state, as ``torch.get_rng_state()`` returns.

    Raises
    ------
    ValueError
        Unknown ``which`` or ``dtype``, ``index`` out of range.
    ImportError
        torch is not installed.

    Examples
    --------
    >>> import torch
    >>> g = torch.Generator(); _ = g.set_state(torch_coin_state("zero", 1))
    >>> torch.rand(3, generator=g)[1].item()
    0.0
    """
    _check(which, dtype)
    index = _check_index(index, _MT_N - 1 if dtype == "float32" else (_MT_N - 1) // 2)
    import torch  # noqa: PLC0415 - optional dependency

    g = torch.Generator()
    g.manual_seed(int(seed))
    torch.rand(1, generator=g)  # twist once: the state words are then ordinary outputs
    raw = bytearray(g.get_state().numpy().tobytes())
    if len(raw) != TORCH_STATE_BYTES:
        raise ValueError(f"unsupported torch RNG state of {len(raw)} bytes (expected {TORCH_STATE_BYTES})")
    words = list(struct.unpack_from(f"<{_MT_N}Q", raw, 24))
    if dtype == "float32":
        # (r & 0xFFFFFF): zero needs the low 24 bits 0, max all 1; the high byte stays ordinary
        ordinary = _temper(int(words[index]) & 0xFFFFFFFF)
        low = 0 if which == "zero" else 0xFFFFFF
        words[index] = _untemper((ordinary & 0xFF000000) | low)
    else:
        # r64 = (r1 << 32) | r2, masked to 53 bits: r2 all 0 (1), r1's low 21 bits 0 (1)
        r1 = _temper(int(words[2 * index]) & 0xFFFFFFFF)
        lo21 = 0 if which == "zero" else 0x1FFFFF
        words[2 * index] = _untemper((r1 & ~0x1FFFFF & 0xFFFFFFFF) | lo21)
        words[2 * index + 1] = _untemper(0 if which == "zero" else 0xFFFFFFFF)
    struct.pack_into("<ii", raw, 8, _MT_N, 1)  # left = 624 (no twist before output 623), seeded
    struct.pack_into("<Q", raw, 16, 0)  # next = 0
    struct.pack_into(f"<{_MT_N}Q", raw, 24, *words)
    return torch.frombuffer(raw, dtype=torch.uint8).clone()


def torch_words_state(pattern: str, outputs: range | tuple[int, ...] | list[int], seed: int = 0) -> Any:
    """A torch CPU RNG state whose mt19937 outputs ``outputs`` are all the word :data:`WORDS` [pattern].

    Forcing whole words serves every dtype at once (a float32, bfloat16 or float16 uniform reads
    one output, a float64 uniform two: draw k reads outputs 2k and 2k + 1), and forcing a range
    of outputs at once lets a search find the draw index of a coin by bisection.

    Parameters
    ----------
    pattern : str
        A key of :data:`WORDS`.
    outputs : sequence of int
        Output numbers to force, each in 0..622 (0-based, counting every 32-bit output).
    seed : int
        Seed of the ordinary outputs.

    Returns
    -------
    torch.Tensor, shape [5056], uint8
        The state, as ``torch.get_rng_state()`` returns.

    Raises
    ------
    ValueError
        Unknown ``pattern``, an output number out of range.
    ImportError
        torch is not installed.
    """
    if pattern not in WORDS:
        raise ValueError(f"pattern: expected one of {', '.join(WORDS)}, got {pattern!r}")
    outs = [_check_index(i, _MT_N - 1) for i in outputs]
    import torch  # noqa: PLC0415 - optional dependency

    g = torch.Generator()
    g.manual_seed(int(seed))
    torch.rand(1, generator=g)
    raw = bytearray(g.get_state().numpy().tobytes())
    if len(raw) != TORCH_STATE_BYTES:
        raise ValueError(f"unsupported torch RNG state of {len(raw)} bytes (expected {TORCH_STATE_BYTES})")
    words = list(struct.unpack_from(f"<{_MT_N}Q", raw, 24))
    forced = _untemper(WORDS[pattern])
    for i in outs:
        words[i] = forced
    struct.pack_into("<ii", raw, 8, _MT_N, 1)
    struct.pack_into("<Q", raw, 16, 0)
    struct.pack_into(f"<{_MT_N}Q", raw, 24, *words)
    return torch.frombuffer(raw, dtype=torch.uint8).clone()


def torch_word_value(pattern: str, dtype: str) -> float:
    """The uniform ``torch.rand(1, dtype=dtype)`` draws on the CPU from forced words :data:`WORDS` [pattern].

    Computed by torch itself (two forced outputs, one draw), so it follows the installed
    torch's conversion.

    Parameters
    ----------
    pattern : str
        A key of :data:`WORDS`.
    dtype : str
        One of :data:`TORCH_DTYPES`.

    Returns
    -------
    float

    Raises
    ------
    ValueError
        Unknown ``pattern`` or ``dtype``.
    """
    if dtype not in TORCH_DTYPES:
        raise ValueError(f"dtype: expected one of {', '.join(TORCH_DTYPES)}, got {dtype!r}")
    import torch  # noqa: PLC0415 - optional dependency

    g = torch.Generator()
    g.set_state(torch_words_state(pattern, (0, 1)))
    return float(torch.rand(1, generator=g, dtype=getattr(torch, dtype)).item())


@functools.lru_cache(maxsize=32)
def coin_probability(value: float, dtype: str) -> float:
    """The probability that one uniform of ``dtype`` is exactly ``value``.

    float64: ``2**-53`` (numpy ``random()``, ``torch.rand``); float32: ``2**-24``; bfloat16 and
    float16 (torch's CPU uniform): counted over the ``2**24`` float32 uniforms ``k * 2**-24``,
    each rounded to the dtype as torch does (a value that rounds to 1 becomes 0): about ``2**-9``
    (bfloat16) and ``2**-12`` (float16) for 0, ``2**-8`` for the largest bfloat16 coin.

    Parameters
    ----------
    value : float
        A value the uniform can take.
    dtype : str
        One of :data:`TORCH_DTYPES`.

    Returns
    -------
    float
        In [0, 1].

    Raises
    ------
    ValueError
        Unknown ``dtype``.
    """
    if dtype == "float64":
        return 2.0**-53
    if dtype == "float32":
        return 2.0**-24
    if dtype not in TORCH_DTYPES:
        raise ValueError(f"dtype: expected one of {', '.join(TORCH_DTYPES)}, got {dtype!r}")
    import torch  # noqa: PLC0415 - optional dependency

    tdt = getattr(torch, dtype)

    def rounded(k: int) -> float:  # float32 uniform k * 2**-24 rounded to dtype (monotone in k)
        return float(torch.tensor(k * 2.0**-24, dtype=torch.float32).to(tdt).item())

    def first(pred: Callable[[float], bool]) -> int:  # smallest k in [0, 2**24] with pred(rounded(k))
        lo, hi = 0, 2**24
        while lo < hi:
            mid = (lo + hi) // 2
            if pred(rounded(mid)):
                hi = mid
            else:
                lo = mid + 1
        return lo

    count = first(lambda r: r > value) - first(lambda r: r >= value)
    if value == 0.0:
        count += 2**24 - first(lambda r: r >= 1.0)  # rounds to 1, becomes 0
    return count * 2.0**-24


__all__ = [
    "PCG_MULT",
    "TORCH_DTYPES",
    "TORCH_STATE_BYTES",
    "WORDS",
    "coin_probability",
    "coin_value",
    "numpy_coin_generator",
    "torch_coin_state",
    "torch_word_value",
    "torch_words_state",
]
