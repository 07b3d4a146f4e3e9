r"""Ready adapter for transformers' universal assisted decoding with sampling: ``hf-assisted:usd``.

``UniversalSpeculativeDecodingGenerator`` (transformers ``generation/candidate_generator.py``)
runs when ``generate`` gets ``assistant_model``, ``tokenizer`` and ``assistant_tokenizer`` with
``do_sample=True``: the assistant drafts in its own vocabulary, the drafts and the assistant's
logits are translated into the target's vocabulary (``AssistantToTargetTranslator``), and the
target verifies them by speculative sampling. It is meant to be lossless (Timor et al. 2025).

Driving it offline. ``generate`` refuses an ``assistant_tokenizer`` whenever the two models'
config vocabulary sizes are equal, and the referee's pairs share one vocabulary; so this adapter
brings its own assistant and ignores the ``draft`` argument (``uses_draft = False``: a
draft-invariance check says nothing here). For a target of vocabulary V it builds, once per V
(cached for the process, :func:`usd_kit`):

* the target tokenizer: a ``tokenizers`` ``WordLevel`` model mapping ``"t<i>"`` to id i for
  i < V, whitespace pre-tokenizer (nothing is downloaded);
* the assistant tokenizer: the same V words plus one word the target lacks, ``"<extra>"``,
  at id V (so the vocabularies differ, as in every real heterogeneous pair);
* the assistant: a random one-layer Llama over V + 1 ids, seeded with :data:`USD_ASSISTANT_SEED`.

Because the assistant has a token the target lacks, transformers takes its pruning path
(``assistant_prune_lm_head=True``): it replaces the assistant's head by one restricted to the
shared tokens and maps its input embeddings, in place, which is why the assistant is the
adapter's own. Two alternatives do not run: an assistant vocabulary that is a strict subset of
the target's makes transformers 5.25 raise ``AttributeError: 'AssistantToTargetTranslator'
object has no attribute 'assistant_overlap_token_ids'`` on the first round (the attribute is
set only when some assistant token is missing from the target); and the reference models have
no head to prune (their logits come from a table).

Known lossy in transformers 5.25 (found with this adapter): the pruned head's columns follow
``assistant_overlap_token_ids``, the shared tokens in the order of the assistant tokenizer's
``get_vocab()`` dictionary, while ``AssistantToTargetTranslator.get_target_logits`` scatters
those columns onto the target ids in increasing assistant-id order. Unless the two orders
agree, each drafted token's q is read from another token's column, so the acceptance test and
the residual use the wrong law. ``get_vocab()`` of a ``tokenizers`` model iterates a hash map
whose order changes from one process to the next, so the damage (and the ids a seed gives)
does too: ``deterministic = False`` (the same seed gives the same ids within a process). On
the ``close`` reference pair (temperature 1, prompt ``(1, 2)``, two new tokens, 200 seeds) the
first token's empirical law was at total variation 0.56 and 0.63 from the target's in two
processes (G-test p below 1e-90); with ``get_target_logits`` patched to scatter column j onto
the target id of ``assistant_overlap_token_ids[j]``, 0.078 (p = 0.02, the sampling noise of
200 draws over 6 tokens). The adapter is registered with ``lossless = True`` (the design
intent); the referee's verdict is the finding.

References
----------
Timor et al., Accelerating LLM Inference with Lossless Speculative Decoding Algorithms for
Heterogeneous Vocabularies, ICML 2025 (arXiv 2502.05202); transformers
``generation/candidate_generator.py`` (``UniversalSpeculativeDecodingGenerator``,
``AssistantToTargetTranslator``, ``_PruneReindexingLMHead``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from spectr_gbv.validate.generation.adapters.common import (
    bound_adapter,
    check_prompt,
    check_settings,
    model_device,
    stamp,
)
from spectr_gbv.validate.generation.adapters.hf_assisted import AssistedSettings, assisted_generate

#: torch seed of the adapter's random assistant (its weights are a function of it and V).
USD_ASSISTANT_SEED: int = 20250205
#: The assistant-only word: present in the assistant's vocabulary, absent from the target's.
EXTRA_WORD: str = "<extra>"
#: Draft-length settings of ``hf-assisted:usd``: constant schedule, 3 tokens, threshold off.
USD_SETTINGS = AssistedSettings("constant", 3, 0.0)


@dataclass(frozen=True)
class USDKit:
    """What :func:`usd_kit` builds for a target vocabulary of V ids.

    Attributes
    ----------
    vocab_size : int
        V.
    target_tokenizer, assistant_tokenizer : transformers fast tokenizers
        ``"t<i>"`` -> i (i < V); the assistant's also ``"<extra>"`` -> V.
    assistant : LlamaForCausalLM
        V + 1 logits, eval mode (transformers prunes its head to the V shared ids on first use).
    """

    vocab_size: int
    target_tokenizer: Any
    assistant_tokenizer: Any
    assistant: Any


_KITS: dict[tuple[int, str], USDKit] = {}


def _word_tokenizer(vocab: dict[str, int]) -> Any:
    """A transformers fast tokenizer over a fixed word -> id map (``tokenizers`` WordLevel, whitespace split)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=tok)


def usd_kit(vocab_size: int, device: Any = "cpu") -> USDKit:
    """The tokenizers and assistant of ``hf-assisted:usd`` for a target of ``vocab_size`` ids (cached).

    Parameters
    ----------
    vocab_size : int
        V >= 2, the target's vocabulary size.
    device : torch.device or str
        Where the assistant lives.

    Returns
    -------
    USDKit
        The same object for the same (V, device) within a process: transformers caches its
        vocabulary translator per tokenizer pair and prunes the assistant once.

    Raises
    ------
    ValueError
        ``vocab_size`` < 2.
    """
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size < 2:
        raise ValueError(f"vocab_size must be an int >= 2, got {vocab_size!r}")
    key = (vocab_size, str(device))
    if key not in _KITS:
        words = {f"t{i}": i for i in range(vocab_size)}
        config = LlamaConfig(
            vocab_size=vocab_size + 1,
            hidden_size=16,
            intermediate_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            num_key_value_heads=1,
            max_position_embeddings=4096,
            initializer_range=0.5,
            tie_word_embeddings=False,
            bos_token_id=None,
            eos_token_id=None,
            pad_token_id=None,
        )
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(USD_ASSISTANT_SEED)
            assistant = LlamaForCausalLM(config).eval().to(device)
        _KITS[key] = USDKit(
            vocab_size,
            _word_tokenizer(words),
            _word_tokenizer({**words, EXTRA_WORD: vocab_size}),
            assistant,
        )
    return _KITS[key]


def usd_generate(
    target: Any,
    draft: Any,
    prompt_ids: Any,
    max_new_tokens: int,
    *,
    temperature: float,
    top_k: int,
    top_p: float,
    seed: int,
) -> list[int]:
    """Universal assisted decoding with sampling, the adapter's own assistant, seeded; returns the new ids.

    Parameters
    ----------
    target : transformers causal LM
        Its ``config.vocab_size`` sets V.
    draft : any
        Ignored (see the module docstring).
    prompt_ids, max_new_tokens, temperature, top_k, top_p, seed
        As in :func:`~spectr_gbv.validate.generation.adapters.hf_assisted.assisted_generate`.

    Returns
    -------
    list of int

    Raises
    ------
    ValueError
        As :func:`~spectr_gbv.validate.generation.adapters.hf_assisted.assisted_generate`; a
        prompt id outside the target's vocabulary (it has no word).
    """
    ids = check_prompt(prompt_ids)
    check_settings(max_new_tokens, temperature, top_k, top_p, seed)
    V = int(target.config.vocab_size)
    if max(ids) >= V:
        raise ValueError(f"prompt_ids holds id {max(ids)}, outside the target's vocabulary 0..{V - 1}")
    kit = usd_kit(V, model_device(target))
    return assisted_generate(
        target,
        draft,
        ids,
        max_new_tokens,
        temperature=temperature,
        top_k=top_k,
        top_p=top_p,
        seed=seed,
        settings=USD_SETTINGS,
        assistant=kit.assistant,
        tokenizers=(kit.target_tokenizer, kit.assistant_tokenizer),
    )


def _usd_adapter() -> Callable[..., list[int]]:
    generate = bound_adapter(usd_generate)
    generate.settings = USD_SETTINGS  # type: ignore[attr-defined]
    return stamp(
        generate,
        "hf-assisted:usd",
        interface="generation",
        description="transformers universal assisted decoding (different tokenizers, do_sample=True) with the "
        "adapter's own assistant over V + 1 words, 3 draft tokens, threshold off; ignores the draft",
        family="hf-assisted",
        deterministic=False,
        uses_draft=False,
    )


#: ``hf-assisted:usd`` -> its adapter.
HF_USD_ADAPTERS: dict[str, Callable[..., list[int]]] = {"hf-assisted:usd": _usd_adapter()}
