r"""The benchmark's side measurements: the peer, the bound-based predictions, the law test.

Each is a library function written elsewhere in :mod:`spectr_gbv.realpair`, imported lazily and
called with fixed keyword arguments (an :class:`ExtraHooks` replaces them in tests):

* peer - :func:`spectr_gbv.realpair.peer.assisted_generation_run` (``transformers`` assisted
  generation, ``do_sample=True``) on the same pair and prompts at the centre (L_c, T_c), with
  ``num_assistant_tokens = L_c``; reported as ratios to our ``sd`` (K = 1) and ``mdbv`` (K_c)
  rows at the centre: target calls per generated token and tokens/s;
* predictions - :func:`spectr_gbv.realpair.predict.predict_block_efficiency`: Monte Carlo
  estimates of B(K) and B_BV(K) (expected accepted length E[tau]) averaged over the contexts met
  (each prompt followed by prefixes of its ``ar`` continuation at T_c, :func:`prediction_contexts`);
  predicted BE = 1 + B. ``bv`` rows are compared with 1 + B_BV(1), ``sd`` rows with 1 + the
  predictor's ``sd_value`` when it has one (else B_BV(1)), multi-draft rows with 1 + B(K) (B and
  B_BV are given for every row);
* law test - :func:`spectr_gbv.realpair.real_lossless.first_tokens_law_test` on the fixed
  :data:`~spectr_gbv.realpair.config.LOSSLESS_PROMPTS` named in ``config.lossless_prompts``,
  for each of ``config.lossless_methods`` (K = 1 for ``sd``/``bv``, else ``lossless_drafts``).

A function that raises is recorded in the ``errors`` of :class:`ExtraResults` (with the exception's type and
message) and the run goes on: the decoding grid is the expensive part and is kept.

Data flows one way: the runner hands down the configuration, the models, the prompts and the
measured rows; :func:`run_extras` returns an :class:`ExtraResults` that the runner puts into the
:class:`~spectr_gbv.realpair.results.BenchResult` it builds. Nothing here writes into a result
or calls back into the runner.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from spectr_gbv.realpair.config import LOSSLESS_PROMPTS, SINGLE_DRAFT, BenchConfig, BenchModels
from spectr_gbv.realpair.results import RunRow, find_row

#: Columns of the peer rows (``transformers`` assisted generation), per dataset.
PEER_FIELDS = (
    "tokens_generated",
    "time_s",
    "target_calls",
    "tokens_per_second",
    "target_calls_per_token",
    "block_efficiency",
)
#: Columns of the prediction rows: Monte Carlo B(K) and B_BV(K) with standard errors.
PREDICTION_FIELDS = (
    "num_drafts",
    "draft_length",
    "temperature",
    "cic_bound",
    "cic_bound_se",
    "bv_bound",
    "bv_bound_se",
)
#: Columns of the real-model law test rows.
LAW_TEST_FIELDS = ("g_statistic", "p_value", "dof", "runs", "power", "power_tv", "observed_tv", "passed")


def _peer_fn() -> Callable[..., Any]:
    from spectr_gbv.realpair.peer import assisted_generation_run

    return assisted_generation_run


def _predict_fn() -> Callable[..., Any]:
    from spectr_gbv.realpair.predict import predict_block_efficiency

    return predict_block_efficiency


def _lossless_fn() -> Callable[..., Any]:
    from spectr_gbv.realpair.real_lossless import first_tokens_law_test

    return first_tokens_law_test


@dataclass
class ExtraHooks:
    """The three side-measurement functions (``None``: the library's, imported on first use).

    Attributes
    ----------
    peer : callable, optional
        Signature of :func:`spectr_gbv.realpair.peer.assisted_generation_run`.
    predict : callable, optional
        Signature of :func:`spectr_gbv.realpair.predict.predict_block_efficiency`.
    lossless : callable, optional
        Signature of :func:`spectr_gbv.realpair.real_lossless.first_tokens_law_test`.
    """

    peer: Callable[..., Any] | None = None
    predict: Callable[..., Any] | None = None
    lossless: Callable[..., Any] | None = None

    def get(self, name: str) -> Callable[..., Any]:
        """The hook ``name`` (``"peer"``, ``"predict"``, ``"lossless"``), importing the default lazily."""
        fn = getattr(self, name)
        if fn is None:
            fn = {"peer": _peer_fn, "predict": _predict_fn, "lossless": _lossless_fn}[name]()
            setattr(self, name, fn)
        return fn


def _fields(obj: Any, names: tuple[str, ...]) -> dict[str, Any]:
    """Named attributes of a result object (AttributeError if one is missing), plus its ``summary()``."""
    out: dict[str, Any] = {}
    for name in names:
        value = getattr(obj, name)
        out[name] = value.item() if isinstance(value, torch.Tensor) else value
    summary = getattr(obj, "summary", None)
    if callable(summary):
        out["summary"] = summary()
    return out


def predict_points(config: BenchConfig) -> list[tuple[int, float]]:
    """(L, T) pairs where predictions are made: the centre, or every L- and T-sweep point."""
    _, lc, tc = config.centre
    if not config.predict_sweeps:
        return [(lc, tc)]
    return sorted({(n, tc) for n in config.ls} | {(lc, float(t)) for t in config.ts})


def count_extra_calls(config: BenchConfig, num_datasets: int) -> int:
    """Number of side-measurement calls (progress-bar units) of a run over ``num_datasets``."""
    n = num_datasets if config.peer else 0
    n += num_datasets * len(predict_points(config)) if config.predict else 0
    n += len(config.lossless_prompts) * len(config.lossless_methods) if config.lossless else 0
    return n


def _ratio(a: float, b: float) -> float:
    return a / b if b and not math.isnan(b) else math.nan


@dataclass
class ExtraResults:
    """What the side measurements of one run produced (the matching fields of a ``BenchResult``).

    Attributes
    ----------
    peer : list of dict
        One entry per dataset (:func:`run_peer`).
    predictions : list of dict
        One entry per (dataset, L, T, K) (:func:`run_predictions`).
    comparisons : list of dict
        Measured against predicted block efficiency, one per predicted row.
    lossless : list of dict
        One law test per (prompt, method).
    errors : list of str
        ``"<what>: <type>: <message>"`` of each side measurement that raised.
    """

    peer: list[dict[str, Any]] = field(default_factory=list)
    predictions: list[dict[str, Any]] = field(default_factory=list)
    comparisons: list[dict[str, Any]] = field(default_factory=list)
    lossless: list[dict[str, Any]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def record(self, what: str, exc: Exception, log: Callable[[str], None]) -> None:
        """Keep the one-line error of a side measurement that raised, and log it as a warning."""
        message = f"{what}: {type(exc).__name__}: {exc}".replace("\n", " ")
        self.errors.append(message)
        log(f"warning: {message}")


def run_peer(
    config: BenchConfig,
    models: BenchModels,
    ds: str,
    xs: list[torch.Tensor],
    rows: Sequence[RunRow],
    hooks: ExtraHooks,
) -> dict[str, Any]:
    """Assisted generation at the centre on ``xs``; ratios to our ``sd`` and ``mdbv`` centre rows (in ``rows``).

    Returns
    -------
    dict
        ``dataset``, the peer's :data:`PEER_FIELDS` and ``summary``, ``ours`` {method: {BE,
        target calls/token, tokens/s}} and ``ratios`` {"vs_sd"/"vs_mdbv": {"target_calls_per_token",
        "tokens_per_second", "block_efficiency"}} = peer / ours.
    """
    kc, lc, tc = config.centre
    if not isinstance(models.draft, torch.nn.Module):
        raise TypeError("the peer needs the draft as a causal LM, not a DraftSource")
    peer = hooks.get("peer")(
        models.target,
        models.draft,
        prompts=list(xs),
        max_new_tokens=config.max_new_tokens,
        temperature=tc,
        num_assistant_tokens=lc,
        seed=config.seed,
    )
    entry: dict[str, Any] = {"dataset": ds, "num_assistant_tokens": lc, "temperature": tc, **_fields(peer, PEER_FIELDS)}
    entry["ours"], entry["ratios"] = {}, {}
    for method, k in (("sd", 1), ("mdbv", kc)):
        row = find_row(rows, ds, method, k, lc, tc)
        if row is None:
            continue
        entry["ours"][method] = {
            "num_drafts": k,
            "block_efficiency": row.block_efficiency,
            "target_calls_per_token": row.target_calls_per_token,
            "tokens_per_second": row.tokens_per_second,
        }
        entry["ratios"][f"vs_{method}"] = {
            "target_calls_per_token": _ratio(entry["target_calls_per_token"], row.target_calls_per_token),
            "tokens_per_second": _ratio(entry["tokens_per_second"], row.tokens_per_second),
            "block_efficiency": _ratio(entry["block_efficiency"], row.block_efficiency),
        }
    return entry


def prediction_contexts(
    prompts: list[torch.Tensor], continuations: list[torch.Tensor], per_prompt: int
) -> list[torch.Tensor]:
    """Contexts met while decoding: each prompt followed by the first j tokens of its continuation.

    Parameters
    ----------
    prompts : list of Tensor [T_i], int64
    continuations : list of Tensor [N_i], int64
        The ``ar`` continuation of each prompt (a prompt without one contributes itself only).
    per_prompt : int
        C >= 1 contexts per prompt, at j = floor(i N / C) for i = 0..C-1 (j = 0 is the prompt).

    Returns
    -------
    list of Tensor
        In prompt order.

    Examples
    --------
    >>> import torch
    >>> [c.tolist() for c in prediction_contexts([torch.tensor([7])], [torch.tensor([1, 2, 3, 4])], 2)]
    [[7], [7, 1, 2]]
    """
    out = []
    for i, x in enumerate(prompts):
        y = continuations[i] if i < len(continuations) else x[:0]
        steps = sorted({(c * y.numel()) // per_prompt for c in range(per_prompt)})
        out += [torch.cat([x, y[:j].to(x.device)]) for j in steps]
    return out


def run_predictions(
    config: BenchConfig,
    models: BenchModels,
    ds: str,
    contexts: list[torch.Tensor],
    draft_length: int,
    temperature: float,
    measured: Sequence[RunRow],
    hooks: ExtraHooks,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """B(K) and B_BV(K) at (L, T) for K = 1 and every K of a multi-draft row there, and the comparisons.

    Returns
    -------
    predictions : list of dict
        One per K: ``dataset``, ``contexts``, ``samples`` and :data:`PREDICTION_FIELDS` (+ ``summary``).
    comparisons : list of dict
        One per measured non-``ar`` row of ``measured`` at (L, T) whose K was predicted: measured BE
        (with its standard error), predicted BE 1 + B(K) and 1 + B_BV(K), the reference one (``SD``
        for ``sd`` when the predictor gives ``sd_value``, else ``B_BV`` for ``sd``/``bv``, ``B``
        otherwise) and measured / reference.
    """
    rows = [
        r
        for r in measured
        if r.dataset == ds and r.method != "ar" and (r.draft_length, r.temperature) == (draft_length, temperature)
    ]
    ks = sorted({1} | {r.num_drafts for r in rows})
    preds = hooks.get("predict")(
        models.target,
        models.draft,
        contexts=list(contexts),
        num_drafts=ks,
        draft_length=draft_length,
        temperature=temperature,
        samples=config.predict_samples,
        seed=config.seed,
    )
    out = [
        {
            "dataset": ds,
            "contexts": len(contexts),
            "samples": config.predict_samples,
            "alpha": getattr(p, "alpha", None),
            "sd_value": getattr(p, "sd_value", None),
            **_fields(p, PREDICTION_FIELDS),
        }
        for p in preds
    ]
    by_k = {int(p["num_drafts"]): p for p in out}
    comparisons = []
    for r in rows:
        p = by_k.get(r.num_drafts)
        if p is None:
            continue
        ref = "B_BV" if r.method in SINGLE_DRAFT else "B"
        sd_value = p["sd_value"]
        if r.method == "sd" and sd_value is not None and math.isfinite(sd_value):
            ref = "SD"  # token-level SD's own E[tau] on the same continuations, when the predictor gives it
        pred = 1 + {"B": p["cic_bound"], "B_BV": p["bv_bound"], "SD": sd_value}[ref]
        comparisons.append(
            {
                "dataset": ds,
                "method": r.method,
                "num_drafts": r.num_drafts,
                "draft_length": r.draft_length,
                "temperature": r.temperature,
                "measured_be": r.block_efficiency,
                "measured_be_se": r.block_efficiency_se,
                "predicted_be_cic": 1 + p["cic_bound"],
                "predicted_be_bv": 1 + p["bv_bound"],
                "reference": ref,
                "predicted_be": pred,
                "measured_over_predicted": _ratio(r.block_efficiency, pred),
            }
        )
    return out, comparisons


def run_extras(
    config: BenchConfig,
    models: BenchModels,
    prompts: dict[str, list[torch.Tensor]],
    ar_outputs: dict[tuple[str, float], list[torch.Tensor]],
    rows: Sequence[RunRow],
    hooks: ExtraHooks,
    bar: Any,
    log: Callable[[str], None] = lambda _msg: None,
) -> ExtraResults:
    """Run the enabled side measurements (errors recorded, not raised).

    Parameters
    ----------
    config : BenchConfig
    models : BenchModels
    prompts : dict dataset -> list of Tensor [T], int64
    ar_outputs : dict (dataset, T) -> list of Tensor [N], int64
        The ``ar`` continuations (new tokens only), one per prompt; the prediction contexts are
        taken along them (:func:`prediction_contexts`).
    rows : sequence of RunRow
        The grid's measured rows (the peer's and the predictions' comparisons read them).
    hooks : ExtraHooks
    bar : tqdm
        Advanced by one per call.
    log : callable (str) -> None

    Returns
    -------
    ExtraResults
    """
    _, _, tc = config.centre
    extra = ExtraResults()
    for ds, xs in prompts.items():
        if config.peer:
            bar.set_description(f"{ds} peer (assisted generation)")
            try:
                extra.peer.append(run_peer(config, models, ds, xs, rows, hooks))
            except Exception as exc:  # noqa: BLE001 - recorded in the results, the grid is kept
                extra.record(f"peer ({ds})", exc, log)
            bar.update()
        if config.predict:
            contexts = prediction_contexts(xs, ar_outputs.get((ds, tc), []), config.predict_contexts)
            for n, t in predict_points(config):
                bar.set_description(f"{ds} predictions L={n} T={t}")
                try:
                    predictions, comparisons = run_predictions(config, models, ds, contexts, n, t, rows, hooks)
                    extra.predictions += predictions
                    extra.comparisons += comparisons
                except Exception as exc:  # noqa: BLE001
                    extra.record(f"predictions ({ds}, L={n}, T={t})", exc, log)
                bar.update()
    if not config.lossless:
        return extra
    for name, chat, text in LOSSLESS_PROMPTS:
        if name not in config.lossless_prompts:
            continue
        ids = models.encode(text, chat, config.max_prompt_tokens)
        for method in config.lossless_methods:
            k = 1 if method in SINGLE_DRAFT else config.lossless_drafts
            bar.set_description(f"law test {method} on '{name}'")
            try:
                test = hooks.get("lossless")(
                    models.target,
                    models.draft,
                    prompt=ids,
                    method=method,
                    num_drafts=k,
                    draft_length=config.lossless_length,
                    temperature=tc,
                    runs=config.lossless_runs,
                    num_tokens=config.lossless_tokens,
                    seed=config.seed,
                )
                extra.lossless.append(
                    {
                        "prompt": name,
                        "method": method,
                        "num_drafts": k,
                        "draft_length": config.lossless_length,
                        "temperature": tc,
                        "num_tokens": config.lossless_tokens,
                        **_fields(test, LAW_TEST_FIELDS),
                    }
                )
            except Exception as exc:  # noqa: BLE001
                extra.record(f"law test ({method}, {name})", exc, log)
            bar.update()
    return extra
