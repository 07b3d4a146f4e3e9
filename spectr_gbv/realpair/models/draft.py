r"""Drafts for the target: the distilled draft model of SmolLM2-135M-Instruct, the truncated
draft (a correctness fixture) and the acceptance rate alpha.

The draft q is the target's first ``N`` decoder layers with low-rank (LoRA) corrections
merged into their weights, a retrained final norm, and a *restricted head*: logits only for
a fixed subset of ``V'`` token ids (rows of the target's tied embedding, frozen), all other
ids at ``-inf``, so q puts probability 0 on them. The head costs ``V'/V`` of the target's
(8192 of 49152), which is what makes a draft step cheap: the target's 49152 x 576 head
alone is about a fifth of a target step. The shipped file holds only what differs from the
target (LoRA factors, norm weight, subset ids), a few MB; :func:`build_draft` rebuilds the
draft from any target with the same layout.

:func:`truncated_draft` builds a cheap draft from the target's first decoder layers, a
correctness fixture for the decoder (its acceptance is low).

Training: ``bench/train_draft.py`` (seeded) distils the target into this form on CPython
source text and target samples, then reports alpha on held-out HumanEval continuations.

References
----------
Hu et al. 2022 (LoRA: W + (alpha/r) B A); Hinton et al. 2015 (distillation); Leviathan et
al. 2023, section 3.6 (alpha = E[sum_x min(p, q)], the per-token acceptance of SD);
Zhao et al. 2025, FR-Spec (frequency-ranked restricted draft vocabulary).
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import os
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import torch

#: Shipped weights (package data).
DRAFT_WEIGHTS_NAME = "smollm2_draft.safetensors"

#: sha256 of the shipped weights (written by ``bench/train_draft.py --threads 1``, seed 0: alpha 0.36 at
#: T = 1 on held-out HumanEval continuations, where the previous draft had 0.21).
SHIPPED_SHA256 = "41b56826050bde5c9dde771e0fcbed7f29b3db3aba1398e9a88903cfb362ac67"

#: LoRA target modules of a Llama decoder layer.
LORA_MODULES = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def shipped_weights_path() -> Path:
    """Path of the distilled draft's weights inside the installed package."""
    return Path(str(resources.files("spectr_gbv.realpair.models") / "data" / DRAFT_WEIGHTS_NAME))


class RestrictedHead(torch.nn.Module):
    """LM head over a subset of the vocabulary; every other id gets logit ``-inf``.

    Parameters
    ----------
    weight : Tensor [V', H], float
        Output embedding rows of the kept ids.
    vocab_ids : Tensor [V'], int64
        The kept ids, distinct, in ``0..vocab_size-1``.
    vocab_size : int
        V, the width of the returned logits.

    Raises
    ------
    ValueError
        Shapes disagree, ids repeat or fall outside ``0..vocab_size-1``.
    """

    def __init__(self, weight: torch.Tensor, vocab_ids: torch.Tensor, vocab_size: int) -> None:
        super().__init__()
        if weight.ndim != 2 or vocab_ids.ndim != 1 or weight.shape[0] != vocab_ids.shape[0]:
            raise ValueError(f"RestrictedHead: weight {tuple(weight.shape)} and vocab_ids {tuple(vocab_ids.shape)}")
        ids = vocab_ids.long()
        if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= vocab_size):
            raise ValueError(f"RestrictedHead: vocab_ids must lie in 0..{vocab_size - 1}")
        if torch.unique(ids).numel() != ids.numel():
            raise ValueError("RestrictedHead: vocab_ids repeat")
        self.weight = torch.nn.Parameter(weight.detach().clone(), requires_grad=False)
        self.register_buffer("vocab_ids", ids.clone())
        self.vocab_size = int(vocab_size)
        self.out_features = self.vocab_size  # what HFDraftSource reads as V

    def subset_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """Logits of the kept ids only: ``hidden [..., H] -> [..., V']`` (for training)."""
        return hidden @ self.weight.T

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        """``hidden [..., H]`` -> logits ``[..., V]``, ``-inf`` outside the kept ids (float32 or hidden's dtype)."""
        small = self.subset_logits(hidden)
        out = small.new_full((*small.shape[:-1], self.vocab_size), float("-inf"))
        out[..., self.vocab_ids] = small
        return out


def _check_target(target: torch.nn.Module, meta: dict) -> None:
    cfg = target.config
    want = dict(hidden_size=meta["hidden_size"], vocab_size=meta["vocab_size"])
    got = dict(hidden_size=cfg.hidden_size, vocab_size=cfg.vocab_size)
    if want != got or cfg.num_hidden_layers < meta["num_layers"]:
        raise ValueError(
            f"draft weights were trained for a target with {want} and >= {meta['num_layers']} layers; "
            f"got {got} with {cfg.num_hidden_layers} layers"
        )


def truncated_draft(target: torch.nn.Module, num_layers: int) -> torch.nn.Module:
    """A draft made of the target's first ``num_layers`` decoder layers, final norm and tied head.

    Every parameter is shared with ``target`` (no copy, no extra memory): the embeddings,
    the first ``num_layers`` decoder layers, the final norm, the rotary embedding and the LM
    head. It is a correctness fixture for the decoder (a real, cheap model on the target's
    vocabulary), not a good drafter: the final norm and head read hidden states they were
    never trained on, so its next-token law is far from the target's and the acceptance is
    very low. On SmolLM2-135M-Instruct at T = 1, alpha = E_p[sum_x min(p, q)] over HumanEval
    contexts is about 0.06 for N = 2 and N = 4 (0.035 on the canonical solutions), still
    0.08 at N = 20 and 0.55 at N = 29 of 30; a decode step costs 0.1 to 0.25 of the
    target's (the 49152 x 576 head is shared and dominates).

    Parameters
    ----------
    target : PreTrainedModel
        A decoder-only ``*ForCausalLM`` with ``.model.embed_tokens``, ``.model.layers``,
        ``.model.norm``, ``.model.rotary_emb`` and ``.lm_head`` (Llama, Mistral, Qwen2, ...).
    num_layers : int
        1 <= N <= the target's number of layers.

    Returns
    -------
    PreTrainedModel
        Same class as ``target``, config copied with ``num_hidden_layers = N``, in eval mode.

    Raises
    ------
    ValueError
        ``num_layers`` out of range.
    TypeError
        ``target`` does not have the module layout above.

    Examples
    --------
    >>> import torch
    >>> from transformers import LlamaConfig, LlamaForCausalLM
    >>> cfg = LlamaConfig(vocab_size=32, hidden_size=16, intermediate_size=32, num_hidden_layers=4,
    ...                   num_attention_heads=2, num_key_value_heads=1, tie_word_embeddings=True)
    >>> target = LlamaForCausalLM(cfg).eval()
    >>> draft = truncated_draft(target, 2)
    >>> draft.config.num_hidden_layers, draft.model.layers[1] is target.model.layers[1]
    (2, True)
    >>> draft(input_ids=torch.tensor([[1, 2, 3]])).logits.shape
    torch.Size([1, 3, 32])
    """
    inner = getattr(target, "model", None)
    needed = ("embed_tokens", "layers", "norm", "rotary_emb")
    if inner is None or not hasattr(target, "lm_head") or not all(hasattr(inner, a) for a in needed):
        raise TypeError(f"truncated_draft needs a decoder-only *ForCausalLM with .model.{needed}, got {type(target)}")
    total = len(inner.layers)
    if not 1 <= num_layers <= total:
        raise ValueError(f"num_layers must lie in 1..{total}, got {num_layers}")
    config = copy.deepcopy(target.config)
    config.num_hidden_layers = num_layers
    if getattr(config, "layer_types", None) is not None:
        config.layer_types = list(config.layer_types)[:num_layers]
    with torch.device("meta"):
        draft = type(target)(config)
    draft.model.embed_tokens = inner.embed_tokens
    draft.model.layers = torch.nn.ModuleList(list(inner.layers[:num_layers]))
    draft.model.norm = inner.norm
    draft.model.rotary_emb = inner.rotary_emb
    draft.lm_head = target.lm_head
    leftover = [n for n, t in (*draft.named_parameters(), *draft.named_buffers()) if t.is_meta]
    if leftover:
        raise TypeError(f"truncated_draft cannot share {leftover[:3]} of {type(target).__name__}")
    draft.generation_config = copy.deepcopy(target.generation_config)
    return draft.eval()


def build_draft(target: torch.nn.Module, tensors: dict[str, torch.Tensor], meta: dict) -> torch.nn.Module:
    """Rebuild the draft from a target and the stored differences.

    Parameters
    ----------
    target : LlamaForCausalLM
        The target (not modified; the draft shares its embedding and rotary tables).
    tensors : dict of str -> Tensor
        ``"vocab_ids"`` [V'] int64, ``"norm.weight"`` [H], and for each merged linear layer
        ``"layers.{i}.{module}.lora_A"`` [r, in] and ``"layers.{i}.{module}.lora_B"`` [out, r];
        a layer or module without factors keeps the target's weight.
    meta : dict
        ``num_layers`` (N), ``lora_scale`` (alpha / r), ``hidden_size``, ``vocab_size``.

    Returns
    -------
    LlamaForCausalLM
        N layers, ``W = W_target + lora_scale * B @ A`` for every stored pair, eval mode,
        float32 like the target; ``draft.lm_head`` is a :class:`RestrictedHead`.

    Raises
    ------
    ValueError
        The target does not match ``meta`` or a factor's shape does not fit its layer.
    """
    _check_target(target, meta)
    N = int(meta["num_layers"])
    draft = truncated_draft(target, N)
    draft.model.layers = torch.nn.ModuleList([copy.deepcopy(layer) for layer in draft.model.layers])
    draft.model.norm = copy.deepcopy(target.model.norm)
    scale = float(meta["lora_scale"])
    with torch.no_grad():
        for i, layer in enumerate(draft.model.layers):
            for name, module in layer.named_modules():
                short = name.rsplit(".", 1)[-1]
                key = f"layers.{i}.{short}"
                if short not in LORA_MODULES or f"{key}.lora_A" not in tensors:
                    continue
                A, B = tensors[f"{key}.lora_A"].float(), tensors[f"{key}.lora_B"].float()
                if (B.shape[0], A.shape[1]) != tuple(module.weight.shape) or A.shape[0] != B.shape[1]:
                    raise ValueError(
                        f"{key}: factors {tuple(B.shape)} @ {tuple(A.shape)} do not fit {tuple(module.weight.shape)}"
                    )
                module.weight += scale * (B @ A).to(module.weight.dtype)
        draft.model.norm.weight.copy_(tensors["norm.weight"].to(draft.model.norm.weight.dtype))
    ids = tensors["vocab_ids"].long()
    emb = target.get_output_embeddings().weight
    draft.lm_head = RestrictedHead(emb[ids].detach(), ids, int(meta["vocab_size"]))
    draft.config.tie_word_embeddings = False
    for p in draft.parameters():
        p.requires_grad_(False)
    return draft.eval()


def save_draft_weights(path: str | os.PathLike[str], tensors: dict[str, torch.Tensor], meta: dict) -> str:
    """Write the draft's tensors (fp16 factors) and metadata to a safetensors file; return its sha256."""
    from safetensors.torch import save_file

    out = {
        k: (v.half() if v.is_floating_point() and k.endswith(("lora_A", "lora_B")) else v).contiguous()
        for k, v in tensors.items()
    }
    save_file(out, str(path), metadata={"spectr_gbv_draft": json.dumps(meta, sort_keys=True)})
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def read_draft_weights(path: str | os.PathLike[str]) -> tuple[dict[str, torch.Tensor], dict]:
    """Read a file written by :func:`save_draft_weights`: ``(tensors, meta)``.

    Raises
    ------
    FileNotFoundError
        No file at ``path``.
    ValueError
        The file has no ``spectr_gbv_draft`` metadata.
    """
    from safetensors import safe_open

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"draft weights not found: {path}")
    with safe_open(str(path), framework="pt") as f:
        meta_text = (f.metadata() or {}).get("spectr_gbv_draft")
        if meta_text is None:
            raise ValueError(f"{path} is not a spectr_gbv draft file (no 'spectr_gbv_draft' metadata)")
        tensors = {k: f.get_tensor(k) for k in f.keys()}
    return tensors, json.loads(meta_text)


def load_draft(target: torch.nn.Module, weights: str | os.PathLike[str] | None = None) -> torch.nn.Module:
    """The distilled draft for ``target`` (SmolLM2-135M-Instruct), from the shipped weights.

    Parameters
    ----------
    target : LlamaForCausalLM
        As returned by :func:`spectr_gbv.realpair.models.target.load_target`.
    weights : str or PathLike, optional
        A file written by ``bench/train_draft.py``; default the shipped one.

    Returns
    -------
    LlamaForCausalLM
        See :func:`build_draft`; on the target's device.

    Raises
    ------
    FileNotFoundError, ValueError
        As :func:`read_draft_weights` and :func:`build_draft`; ``ValueError`` also when the
        shipped file's sha256 is not :data:`SHIPPED_SHA256`.
    """
    if weights is None:
        weights = shipped_weights_path()
        if weights.is_file() and hashlib.sha256(weights.read_bytes()).hexdigest() != SHIPPED_SHA256:
            raise ValueError(f"{weights} does not match the shipped draft (sha256 mismatch): reinstall spectr_gbv")
    tensors, meta = read_draft_weights(weights)
    device = next(target.parameters()).device
    return build_draft(target, tensors, meta).to(device)


@dataclass(frozen=True)
class AcceptanceEstimate:
    """Per-token acceptance of a draft along given sequences.

    Attributes
    ----------
    alpha : float
        Mean over sequences of the mean over each sequence's scored positions of
        ``sum_x min(p(x | ctx), q(x | ctx))``, in [0, 1].
    standard_error : float
        Across sequences (each sequence's mean is one observation).
    positions : int
        Number of scored positions.
    draft_coverage : float
        Mean target mass on the tokens the draft can propose (finite draft logit): an upper
        bound on alpha.
    temperature : float
    """

    alpha: float
    standard_error: float
    positions: int
    draft_coverage: float
    temperature: float


@torch.no_grad()
def acceptance_rate(
    target: torch.nn.Module,
    draft: torch.nn.Module,
    sequences: list[torch.Tensor],
    starts: list[int],
    temperature: float = 1.0,
) -> AcceptanceEstimate:
    """alpha = E[sum_x min(p, q)] over the positions ``starts[j]..len-1`` of each sequence.

    Parameters
    ----------
    target, draft : causal LMs on one vocabulary and device
    sequences : list of Tensor [T_j], int64
        Token ids; position t is scored with context ``seq[:t]`` (so ``starts[j] >= 1``).
    starts : list of int
        First scored position per sequence, ``1 <= starts[j] < T_j``.
    temperature : float
        > 0; both laws are ``softmax(logits / temperature)``.

    Returns
    -------
    AcceptanceEstimate

    Raises
    ------
    ValueError
        Empty input, mismatched lengths, a start out of range, temperature <= 0.

    Notes
    -----
    Source: Leviathan et al. 2023, definition 3.1 (alpha = 1 - TV(p, q), the expected
    single-draft acceptance per token).
    """
    if not sequences or len(sequences) != len(starts):
        raise ValueError(
            f"sequences ({len(sequences)}) and starts ({len(starts)}) must be non-empty and equal in length"
        )
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    device = next(target.parameters()).device
    per_seq, covers, n = [], [], 0
    for seq, start in zip(sequences, starts, strict=True):
        if not 1 <= start < seq.numel():
            raise ValueError(f"start {start} out of range for a sequence of length {seq.numel()}")
        ids = seq.to(device).view(1, -1)[:, :-1]
        p = torch.softmax(target(input_ids=ids).logits[0, start - 1 :].float() / temperature, dim=-1)
        q_logits = draft(input_ids=ids).logits[0, start - 1 :].float()
        q = torch.softmax(q_logits / temperature, dim=-1)
        overlap = torch.minimum(p, q).sum(-1)
        per_seq.append(float(overlap.mean()))
        covers.append(float((p * torch.isfinite(q_logits)).sum(-1).mean()))
        n += overlap.numel()
    m = len(per_seq)
    mean = sum(per_seq) / m
    se = math.sqrt(sum((x - mean) ** 2 for x in per_seq) / (m - 1) / m) if m > 1 else float("nan")
    return AcceptanceEstimate(mean, se, n, sum(covers) / m, float(temperature))
