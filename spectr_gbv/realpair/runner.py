r"""``spectr-gbv bench``: the runner of the real-model decoding benchmark.

Per dataset, grid point (:mod:`spectr_gbv.realpair.config`) and prompt, one
:meth:`~spectr_gbv.gpu.SpeculativeDecoder.generate` call (B = 1) is made; the
:class:`~spectr_gbv.gpu.decoding.stats.DecodeStats` of the prompts are summed into one
:class:`~spectr_gbv.realpair.results.RunRow` (block efficiency, tokens/s, speed-up over
``ar``, accepted-length histogram). The same run adds the side-by-side peer (``transformers``
assisted generation), Monte Carlo predictions of B(K) and B_BV(K) and a law test of the first
tokens on the real model (:mod:`spectr_gbv.realpair.extras`). Output files:
:mod:`spectr_gbv.realpair.output`.

Models are injected (:class:`BenchModels`): :func:`load_models` builds the real pair, tests
pass tiny random models, so nothing here needs the network.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import torch

from spectr_gbv.realpair import extras
from spectr_gbv.realpair.config import (  # noqa: F401 - re-exported: the benchmark's public names
    CENTRE,
    CHAT_DATASETS,
    DATASETS,
    DEFAULT_METHODS,
    K_AXIS,
    L_AXIS,
    LOSSLESS_PROMPTS,
    METHODS,
    PRESETS,
    SINGLE_DRAFT,
    T_AXIS,
    BenchConfig,
    BenchModels,
    GridPoint,
    build_grid,
)
from spectr_gbv.realpair.results import (  # noqa: F401
    BenchResult,
    RunRow,
    add_speedups,
    estimate_seconds,
    measure_step_costs,
)

if TYPE_CHECKING:
    from spectr_gbv.gpu.decoding.decoder import SpeculativeDecoder


def parse_draft_spec(spec: str) -> tuple[str, int | None]:
    """Parse ``"distilled"`` or ``"truncated:N"``.

    Returns
    -------
    (str, int or None)
        ``("distilled", None)`` or ``("truncated", N)``.

    Raises
    ------
    ValueError
        Anything else, or N < 1.

    Examples
    --------
    >>> parse_draft_spec("truncated:4"), parse_draft_spec("distilled")
    (('truncated', 4), ('distilled', None))
    """
    if spec == "distilled":
        return "distilled", None
    kind, _, num = spec.partition(":")
    if kind == "truncated" and num.isdigit() and int(num) >= 1:
        return "truncated", int(num)
    raise ValueError(f"expects 'distilled' or 'truncated:N' (N >= 1 layers), got {spec!r}")


def encode_prompt(tokenizer: Any, text: str, chat: bool, max_tokens: int) -> torch.Tensor:
    """Token ids of a prompt, cut to ``max_tokens``.

    Parameters
    ----------
    tokenizer : PreTrainedTokenizerBase
    text : str
        Raw prompt text.
    chat : bool
        Wrap the text as one user turn of the tokenizer's chat template, with the assistant
        generation prompt; a long question keeps its first ``max_tokens`` tokens. Raw text
        (code to continue) keeps its last ``max_tokens`` tokens.
    max_tokens : int

    Returns
    -------
    Tensor [T], int64
        1 <= T (the chat wrapper adds its own tokens beyond ``max_tokens``).
    """
    ids = tokenizer(text, add_special_tokens=False).input_ids
    if not chat:
        return torch.tensor(ids[-max_tokens:] or [tokenizer.eos_token_id or 0], dtype=torch.int64)
    if len(ids) > max_tokens:
        text = tokenizer.decode(ids[:max_tokens])
    wrapped = tokenizer.apply_chat_template(
        [{"role": "user", "content": text}], tokenize=False, add_generation_prompt=True
    )
    return torch.tensor(tokenizer(wrapped, add_special_tokens=False).input_ids, dtype=torch.int64)


def load_models(
    draft: str = "distilled", device: str | None = None, cache_dir: str | None = None, progress: bool = True
) -> BenchModels:
    """The real target (SmolLM2-135M-Instruct) and a draft, fetching the target when needed.

    Parameters
    ----------
    draft : str
        ``"distilled"`` (:func:`spectr_gbv.realpair.models.draft.load_draft`) or ``"truncated:N"``
        (:func:`spectr_gbv.realpair.models.draft.truncated_draft`, a correctness fixture: low acceptance).
    device : str, optional
        Where the models go (default CPU; the decoder moves them anyway).
    cache_dir : str, optional
        Cache root (:func:`spectr_gbv.realpair.models.fetch.default_cache_dir`).
    progress : bool

    Returns
    -------
    BenchModels

    Raises
    ------
    ValueError
        Malformed ``draft``.
    ImportError
        The distilled draft module or its weights are not available.
    spectr_gbv.realpair.models.fetch.ModelFetchError
        The target could not be fetched.
    """
    from spectr_gbv.realpair.models.draft import truncated_draft
    from spectr_gbv.realpair.models.target import TARGET_NAME, load_target

    kind, layers = parse_draft_spec(draft)
    target, tok = load_target(cache_dir, device=device, progress=progress)
    if kind == "truncated":
        draft_model, name = truncated_draft(target, layers), f"{TARGET_NAME} first {layers} layers (truncated)"
    else:
        try:
            from spectr_gbv.realpair.models.draft import load_draft

            draft_model = load_draft(target)
        except (ImportError, OSError) as exc:  # module or shipped weights missing
            raise ImportError(f"{type(exc).__name__}: {exc}") from exc
        name = "distilled draft (spectr_gbv.realpair.models.draft, shipped weights)"

    def encode(text: str, chat: bool, max_tokens: int) -> torch.Tensor:
        return encode_prompt(tok, text, chat, max_tokens)

    def decode(ids: torch.Tensor) -> str:
        return tok.decode(ids.tolist())

    return BenchModels(target, draft_model, encode, decode, TARGET_NAME, name)


def make_decoder(models: BenchModels, point: GridPoint, seed: int, device: str | None) -> SpeculativeDecoder:
    """Build the decoder of one benchmark run: ``models`` at the grid point ``point``.

    The benchmark and the bench sweep (:mod:`spectr_gbv.realpair.sweep_task`) build every decoder here,
    so a row of either counts the same thing. ``ar`` gets no draft and the grid's L = 0 (its
    table shape, :meth:`~spectr_gbv.core.methods.MethodSpec.grid_shape`, which the decoder
    accepts for ``ar`` only). A user's rule (``"module:attribute"``) is resolved by the decoder.

    Parameters
    ----------
    models : BenchModels
        The target and draft (``models.target``, ``models.draft``).
    point : GridPoint
        Method (a registered name or a user's rule), K (``num_drafts``), L (``draft_length``)
        and temperature of the run.
    seed : int
        The decoder's seed (the benchmark passes ``config.seed + 7919 * prompt_index``).
    device : str or None
        Decoder device; ``None`` is the decoder's default (CUDA when available, else CPU).

    Returns
    -------
    spectr_gbv.gpu.decoding.decoder.SpeculativeDecoder
        A fresh decoder; call :meth:`~spectr_gbv.gpu.decoding.decoder.SpeculativeDecoder.generate`.

    Raises
    ------
    ValueError
        A decoder configuration error (unknown method or bad rule, K or L out of range, bad
        temperature), as :class:`~spectr_gbv.gpu.decoding.decoder.SpeculativeDecoder`.
    ImportError
        ``transformers`` is not installed.

    References
    ----------
    :class:`spectr_gbv.gpu.decoding.decoder.SpeculativeDecoder` (the decoding loop and its methods);
    :func:`run_benchmark` and :func:`spectr_gbv.realpair.sweep_task.run_bench_sweep`, its callers.
    """
    from spectr_gbv.gpu.decoding.decoder import SpeculativeDecoder

    ar = point.method == "ar"
    return SpeculativeDecoder(
        models.target,
        None if ar else models.draft,
        method=point.method,
        num_drafts=point.num_drafts,
        draft_length=point.draft_length,
        temperature=point.temperature,
        seed=seed,
        device=device,
    )


def slow_method_notes(grid: Sequence[GridPoint], vocab_size: int) -> list[str]:
    """The decoder's slow-verifier warnings for the methods of ``grid``, one per method, at its largest K L.

    Parameters
    ----------
    grid : sequence of GridPoint
    vocab_size : int
        V of the target.

    Returns
    -------
    list of str
        :func:`spectr_gbv.gpu.decoding.guards.slow_method_note` of each method of
        :data:`~spectr_gbv.gpu.decoding.guards.SLOW_METHODS` on the grid, at the point with the
        most drafted tokens (K L) and B = 1; empty when V is at most
        :data:`~spectr_gbv.gpu.decoding.guards.SLOW_METHOD_VOCAB` or no such method runs.
    """
    from spectr_gbv.gpu.decoding.guards import slow_method_note

    notes = []
    for method in dict.fromkeys(point.method for point in grid):
        points = [pt for pt in grid if pt.method == method]
        worst = max(points, key=lambda pt: pt.num_drafts * max(pt.draft_length, 1))
        note = slow_method_note(method, vocab_size, worst.num_drafts, max(worst.draft_length, 1))
        if note is not None:
            notes.append(note)
    return notes


def user_rule_notes(grid: Sequence[GridPoint]) -> list[str]:
    """One line per user's rule on ``grid`` (what it is), and a warning for one that claims nothing.

    Parameters
    ----------
    grid : sequence of GridPoint

    Returns
    -------
    list of str
        ``"rule: <describe>"`` per user's rule, followed by ``"warning: <unverified note>"`` when
        the rule declares no ``lossless``; empty when every method is registered.

    Raises
    ------
    ValueError
        A rule that cannot be resolved (:func:`~spectr_gbv.gpu.kernels.rules.resolve_kernel_rule`).
    """
    from spectr_gbv.core.methods import is_registered
    from spectr_gbv.gpu.kernels.rules import resolve_kernel_rule
    from spectr_gbv.realpair.real_lossless import LAW_TEST

    notes = []
    for method in dict.fromkeys(point.method for point in grid):
        if is_registered(method):
            continue
        rule = resolve_kernel_rule(method)
        notes.append(f"rule: {rule.describe()}")
        if rule.lossless_claimed is None:
            notes.append(f"warning: {rule.unverified_note(LAW_TEST)}")
    return notes


def load_bench_prompts(
    config: BenchConfig, models: BenchModels, cache_dir: str | None = None, progress: bool = True
) -> tuple[dict[str, list[torch.Tensor]], dict[str, list[dict[str, Any]]]]:
    """Load ``config.num_prompts`` prompts per dataset and encode them.

    Returns
    -------
    ids : dict dataset -> list of Tensor [T], int64
    meta : dict dataset -> list of {"id", "tokens", "chat"}

    Raises
    ------
    ValueError
        As :func:`spectr_gbv.realpair.models.prompts.load_prompts`.
    spectr_gbv.realpair.models.prompts.MissingPackageError
        As :func:`spectr_gbv.realpair.models.prompts.load_prompts`.
    spectr_gbv.realpair.models.prompts.PromptDataError
        As :func:`spectr_gbv.realpair.models.prompts.load_prompts`.
    """
    from spectr_gbv.realpair.models.prompts import load_prompts

    ids: dict[str, list[torch.Tensor]] = {}
    meta: dict[str, list[dict[str, Any]]] = {}
    for ds in config.datasets:
        chat = ds in CHAT_DATASETS
        prompts = load_prompts(ds, config.num_prompts, config.seed, cache_dir=cache_dir, progress=progress)
        ids[ds] = [models.encode(p.text, chat, config.max_prompt_tokens) for p in prompts]
        meta[ds] = [{"id": p.id, "tokens": int(x.numel()), "chat": chat} for p, x in zip(prompts, ids[ds], strict=True)]
    return ids, meta


def run_benchmark(
    config: BenchConfig,
    models: BenchModels,
    prompts: dict[str, list[torch.Tensor]] | None = None,
    *,
    device: str | None = None,
    hooks: Any = None,
    progress: bool = True,
    log: Callable[[str], None] | None = None,
    cache_dir: str | None = None,
) -> BenchResult:
    """Run the grid on every dataset and prompt, then the peer, the predictions and the law test.

    Parameters
    ----------
    config : BenchConfig
    models : BenchModels
        Injected by the caller (tests pass tiny random models).
    prompts : dict dataset -> list of Tensor [T], int64, optional
        Encoded prompts (keys among :data:`DATASETS`; they replace ``config.datasets`` and
        ``config.num_prompts``); default :func:`load_bench_prompts`.
    device : str, optional
        Decoder device (default CUDA when available, else CPU).
    hooks : spectr_gbv.realpair.extras.ExtraHooks, optional
        The peer / prediction / law-test functions (default: the library's, imported lazily).
    progress : bool
        A tqdm bar over all runs (stderr).
    log : callable (str) -> None, optional
        Where the cost estimate and notes go (default: nowhere); first, a "warning: ..." line per
        slow verifier on a large vocabulary (:func:`slow_method_notes`), whose
        :class:`~spectr_gbv.gpu.decoding.guards.SlowMethodWarning` the decoders then do not repeat,
        and the lines of :func:`user_rule_notes` (whose
        :class:`~spectr_gbv.gpu.kernels.rules.UnverifiedRuleWarning` the decoders do not repeat).
    cache_dir : str, optional
        Cache root for prompt data.

    Returns
    -------
    BenchResult
        One :class:`RunRow` per (dataset, grid point) with speed-ups filled in; ``config`` with
        the datasets and prompt count actually run; extras that raise are recorded in
        ``errors`` (the grid's measurements are kept).

    Raises
    ------
    ValueError
        Empty prompt list, or a decoder configuration error.
    """
    from tqdm.auto import tqdm

    from spectr_gbv.gpu.decoding.cache import model_vocab_size
    from spectr_gbv.gpu.decoding.guards import SlowMethodWarning
    from spectr_gbv.gpu.kernels.rules import UnverifiedRuleWarning

    log = log or (lambda _msg: None)
    start = time.perf_counter()
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    models.target.to(device)
    if isinstance(models.draft, torch.nn.Module):
        models.draft.to(device)
    meta: dict[str, list[dict[str, Any]]] = {}
    if prompts is None:
        prompts, meta = load_bench_prompts(config, models, cache_dir, progress)
    else:
        meta = {
            ds: [{"id": f"{ds}/{i}", "tokens": int(x.numel())} for i, x in enumerate(xs)] for ds, xs in prompts.items()
        }
    if not prompts or any(not xs for xs in prompts.values()):
        raise ValueError("run_benchmark needs at least one prompt per dataset")
    config = config.for_prompts({ds: len(xs) for ds, xs in prompts.items()})  # the configuration run, once
    grid = config.grid()
    for note in slow_method_notes(grid, model_vocab_size(models.target)):
        log(f"warning: {note}")
    for note in user_rule_notes(grid):
        log(note)

    def decoder(point: GridPoint, seed: int) -> SpeculativeDecoder:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SlowMethodWarning)  # logged once above
            warnings.simplefilter("ignore", UnverifiedRuleWarning)
            return make_decoder(models, point, seed, device)

    kc, lc, tc = config.centre
    first = next(iter(prompts.values()))[0]
    widths = sorted({(1, lc + 1), (kc, lc + 1), (max(config.ks), lc + 1), (kc, max(config.ls) + 1)})
    costs = measure_step_costs(models.target, models.draft, first, widths, sorted({1, kc, max(config.ks)}))
    for point in (GridPoint("ar", 1, 0, tc, ()), GridPoint("mdbv", min(2, kc), 2, tc, ())):  # warm-up
        decoder(point, config.seed).generate(first, max_new_tokens=4)
    fixed = {
        name: int(models.encode(text, chat, config.max_prompt_tokens).numel()) for name, chat, text in LOSSLESS_PROMPTS
    }
    mean_tokens = sum(x.numel() for xs in prompts.values() for x in xs) / sum(len(xs) for xs in prompts.values())
    estimate = estimate_seconds(config, costs, lossless_prompt_tokens=fixed, prompt_tokens=mean_tokens)
    centre_key = f"{kc}x{lc + 1}"
    log(
        f"estimate: about {estimate['total_s'] / 60:.1f} min ({estimate['runs']} decoding runs ~"
        f"{estimate['grid_s'] / 60:.1f} min at an assumed BE of 2, extras ~{estimate['extras_s'] / 60:.1f} min); "
        f"decode step {costs['decode_s'] * 1e3:.0f} ms, a {kc}x{lc + 1}-position scoring call "
        f"{costs['score_over_decode'][centre_key]:.2f} decode steps"
    )
    hooks = hooks or extras.ExtraHooks()
    n_extra = extras.count_extra_calls(config, len(prompts))
    bar = tqdm(total=len(grid) * sum(len(x) for x in prompts.values()) + n_extra, disable=not progress, unit="run")
    rows: list[RunRow] = []
    outputs: dict[tuple[str, float], list[torch.Tensor]] = {}
    for ds, xs in prompts.items():
        for point in grid:
            bar.set_description(
                f"{ds} {point.method} K={point.num_drafts} L={point.draft_length} T={point.temperature}"
            )
            row = RunRow(ds, *point.key, ";".join(point.sweeps))
            for i, ids in enumerate(xs):
                out, stats = decoder(point, config.seed + 7919 * i).generate(ids, config.max_new_tokens)
                row.add(stats)
                if point.method == "ar":
                    outputs.setdefault((ds, point.temperature), []).append(out[ids.numel() :].cpu())
                bar.update()
            rows.append(row)
    add_speedups(rows)
    samples = []
    if models.decode is not None:
        for ds in prompts:
            gen = outputs.get((ds, tc), [])
            if gen:
                samples.append({"dataset": ds, "method": "ar", "temperature": tc, "text": models.decode(gen[0])})
    extra = extras.run_extras(config, models, prompts, outputs, rows, hooks, bar, log)
    bar.close()
    return BenchResult(
        config,
        rows,
        costs,
        estimate["total_s"],
        time.perf_counter() - start,
        meta,
        predictions=extra.predictions,
        comparisons=extra.comparisons,
        peer=extra.peer,
        lossless=extra.lossless,
        samples=samples,
        models={"target": models.target_name, "draft": models.draft_name},
        errors=extra.errors,
    )
