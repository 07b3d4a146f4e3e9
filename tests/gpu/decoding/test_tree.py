"""Tree-structured scoring: the token tree, masked cache forwards, the probe, the automatic fallback."""

import inspect

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from transformers import LlamaForCausalLM  # noqa: E402

from spectr_gbv.gpu import HFDraftSource, RowCache, SamplingConfig, SpeculativeDecoder  # noqa: E402
from spectr_gbv.gpu.decoding.tree import TokenTree  # noqa: E402
from spectr_gbv.gpu.decoding.tree_support import supports_tree_attention  # noqa: E402
from tests.gpu.tiny_models import assert_exact_draft_laws, no_cache_logits, tiny_llama, unit_pair  # noqa: E402

V = 5


@pytest.fixture(scope="module")
def models():
    return unit_pair(V)


# ----------------------------------------------------------------------------- TokenTree
def test_tree_dedups_prefixes_and_pads_ragged_rows():
    drafts = torch.tensor(
        [
            [[1, 2, 3], [1, 2, 4], [1, 2, 3]],  # row 0: prefixes (1), (1,2), (1,2,3), (1,2,4)
            [[0, 0, 0], [4, 0, 0], [4, 1, 0]],  # row 1: 2 nodes at depth 1, then 3 and 3
        ]
    )
    tree = TokenTree.from_drafts(drafts, root_tokens=torch.tensor([7, 8]))
    # slabs: depth 1 width 2, depth 2 width 3, depth 3 width 3 -> N = 1 + 2 + 3 + 3
    assert tree.size == 9 and tree.num_levels == 3 and tree.num_valid == 5 + 9
    assert tree.valid().tolist() == [
        [True, True, False, True, False, False, True, True, False],
        [True, True, True, True, True, True, True, True, True],
    ]
    assert tree.tokens().tolist() == [[7, 1, 0, 2, 0, 0, 3, 4, 0], [8, 0, 4, 0, 0, 1, 0, 0, 0]]
    assert tree.depths()[0].tolist() == [0, 1, 1, 2, 2, 2, 3, 3, 3]
    assert tree.node_index().tolist() == [
        [[0, 1, 3, 6], [0, 1, 3, 7], [0, 1, 3, 6]],
        [[0, 1, 3, 6], [0, 2, 4, 7], [0, 2, 5, 8]],
    ]
    assert tree.num_nodes().tolist() == [5, 9]
    anc = tree.ancestors()
    assert anc[1, 8].nonzero().flatten().tolist() == [0, 2, 5, 8]  # (4, 1, 0) -> (4, 1) -> (4) -> root
    assert anc[0, 2].nonzero().flatten().tolist() == [2]  # padding sees itself only
    assert anc[0, :, 2].nonzero().flatten().tolist() == [2]  # and no other node sees it


@st.composite
def draft_batches(draw):
    B, K, L = draw(st.integers(1, 3)), draw(st.integers(1, 5)), draw(st.integers(1, 4))
    vocab = draw(st.integers(1, 3))
    flat = draw(st.lists(st.integers(0, vocab - 1), min_size=B * K * L, max_size=B * K * L))
    return torch.tensor(flat).view(B, K, L)


@settings(max_examples=60, deadline=None)
@given(drafts=draft_batches())
def test_tree_nodes_are_exactly_the_distinct_prefixes(drafts):
    B, K, L = drafts.shape
    tree = TokenTree.from_drafts(drafts)
    nodes, tokens, depths, valid, anc = tree.node_index(), tree.tokens(), tree.depths(), tree.valid(), tree.ancestors()
    assert tree.num_valid == int(valid.sum())
    for b in range(B):
        prefix_of = {}
        for k in range(K):
            for t in range(L + 1):
                key, node = tuple(drafts[b, k, :t].tolist()), int(nodes[b, k, t])
                assert prefix_of.setdefault(node, key) == key  # one node, one prefix
                assert valid[b, node] and int(depths[b, node]) == t
                if t:
                    assert int(tokens[b, node]) == key[-1]
        assert len(set(prefix_of.values())) == len(prefix_of) == int(valid[b].sum())  # one prefix, one node
        for i, pi in prefix_of.items():
            for j, pj in prefix_of.items():
                assert bool(anc[b, i, j]) == (pi[: len(pj)] == pj)  # j is an ancestor-or-self of i
        for node in range(tree.size):
            if not valid[b, node]:
                assert anc[b, node].nonzero().flatten().tolist() == [node]
                assert not anc[b, valid[b], node].any()


def test_tree_rejects_bad_shapes():
    with pytest.raises(ValueError, match="drafts"):
        TokenTree.from_drafts(torch.zeros(2, 3, dtype=torch.int64))
    tree = TokenTree(2, 3, "cpu")
    with pytest.raises(ValueError, match="tokens"):
        tree.add_level(torch.zeros(2, 2, dtype=torch.int64))
    with pytest.raises(ValueError, match="num_drafts"):
        TokenTree(1, 0, "cpu")


# ----------------------------------------------------------------------------- masked cache forwards
@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_tree_forward_and_keep_slots_match_no_cache_forwards(attn):
    """Ragged rows with holes, a tree forward, the accepted paths kept, then a chain forward."""
    model = tiny_llama(V, seed=3, num_layers=2, initializer_range=0.25, attn_implementation=attn)
    rc = RowCache(2, torch.device("cpu"))
    with torch.no_grad():
        rc.forward(model, torch.tensor([[1, 2, 3], [4, 0, 1]]))
        rc.truncate(torch.tensor([3, 1]))  # contexts [1 2 3] and [4]
        contexts = [[1, 2, 3], [4]]
        drafts = torch.tensor([[[1, 1], [1, 2], [3, 0]], [[2, 2], [2, 2], [2, 4]]])
        tree = TokenTree.from_drafts(drafts, root_tokens=torch.tensor([0, 3]))
        start = rc.physical_length
        logits = rc.forward_masked(
            model, tree.tokens(), tree.valid(), rc.lengths[:, None] + tree.depths(), tree.ancestors(), start
        )
        nodes = tree.node_index()
        for b in range(2):
            for k in range(3):
                path = contexts[b] + tree.tokens()[b, nodes[b, k]].tolist()
                ref = no_cache_logits(model, path)[len(contexts[b]) :]
                torch.testing.assert_close(logits[b, nodes[b, k]], ref, atol=1e-5, rtol=0)
        # accept: row 0 draft 1 with tau = 2 (root, 1, 2), row 1 draft 2 with tau = 1 (root, 2)
        rc.keep_slots(start, torch.stack([nodes[0, 1], nodes[1, 2]]), torch.tensor([3, 2]))
        seqs = [contexts[0] + [0, 1, 2], contexts[1] + [3, 2]]
        assert rc.lengths.tolist() == [len(s) for s in seqs] and rc.physical_length == start + 3
        out = rc.forward(model, torch.tensor([[4, 1], [0, 3]]))
        for b, extra in enumerate([[4, 1], [0, 3]]):
            torch.testing.assert_close(out[b], no_cache_logits(model, seqs[b] + extra)[-2:], atol=1e-5, rtol=0)


def test_keep_slots_compacts_once_holes_dominate():
    model = tiny_llama(V, seed=3, num_layers=1)
    rc = RowCache(2, torch.device("cpu"))
    with torch.no_grad():
        rc.forward(model, torch.tensor([[1, 2]] * 2))
        seqs = [[1, 2], [1, 2]]
        for step in range(40):
            start = rc.physical_length
            rc.forward(model, torch.tensor([[step % V, (step + 1) % V]] * 2))
            rc.keep_slots(start, torch.tensor([[0, 1], [0, 1]]), torch.tensor([2, 1]))  # row 1 keeps one token
            seqs[0] += [step % V, (step + 1) % V]
            seqs[1] += [step % V]
        assert rc.lengths.tolist() == [len(s) for s in seqs]
        assert rc.physical_length - len(seqs[0]) < max(32, rc.physical_length // 4)  # compacted on the way
        out = rc.forward(model, torch.tensor([[3], [4]]))
        for b, extra in enumerate([3, 4]):
            torch.testing.assert_close(out[b, -1], no_cache_logits(model, seqs[b] + [extra])[-1], atol=1e-5, rtol=0)


# ----------------------------------------------------------------------------- the probe and the fallback
def _with_llama_signature(cls):
    cls.forward.__signature__ = inspect.signature(LlamaForCausalLM.forward)
    return cls


@_with_llama_signature
class MaskIgnoringLlama(LlamaForCausalLM):
    """Silently drops the attention mask (as an attention kernel that builds its own causal mask would)."""

    def forward(self, *args, **kwargs):
        kwargs["attention_mask"] = None
        return super().forward(*args, **kwargs)


@_with_llama_signature
class PositionIgnoringLlama(LlamaForCausalLM):
    """Derives positions from the cache length instead of the given ``position_ids``."""

    def forward(self, *args, **kwargs):
        kwargs["position_ids"] = None
        return super().forward(*args, **kwargs)


@_with_llama_signature
class MaskRefusingLlama(LlamaForCausalLM):
    """Raises on a custom 4-D mask."""

    def forward(self, *args, **kwargs):
        mask = kwargs.get("attention_mask")
        if mask is not None and mask.ndim == 4:
            raise ValueError("custom 4-D attention masks are not supported")
        return super().forward(*args, **kwargs)


def as_class(model, cls):
    out = cls(model.config).eval()
    out.load_state_dict(model.state_dict())
    return out


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_probe_accepts_models_that_honour_masks_and_positions(attn):
    assert supports_tree_attention(tiny_llama(V, seed=4, num_layers=2, attn_implementation=attn))


@pytest.mark.parametrize("cls", [MaskIgnoringLlama, PositionIgnoringLlama, MaskRefusingLlama])
def test_probe_refuses_models_that_ignore_or_refuse_custom_masks(models, cls):
    assert not supports_tree_attention(as_class(models[0], cls))


def test_probe_refuses_attention_implementations_without_4d_masks():
    model = tiny_llama(V, seed=5)
    model.config._attn_implementation = "flash_attention_2"  # never run: refused before the probe
    assert not supports_tree_attention(model)


@pytest.mark.parametrize("cls", [MaskIgnoringLlama, MaskRefusingLlama])
def test_auto_scoring_falls_back_to_flat_and_stays_exact(models, cls):
    """A target that ignores or refuses masks is scored flat: token for token what flat scoring of the model gives."""
    target, draft = models
    odd = as_class(target, cls)
    kwargs = dict(method="mdbv", num_drafts=3, draft_length=2, temperature=0.9, seed=5)
    ids, st = SpeculativeDecoder(odd, draft, **kwargs).generate([1, 2, 3], max_new_tokens=30)
    ref, ref_st = SpeculativeDecoder(target, draft, scoring="flat", **kwargs).generate([1, 2, 3], max_new_tokens=30)
    assert st.scoring == "flat" and ids.tolist() == ref.tolist() and st.accepted_hist == ref_st.accepted_hist
    with pytest.raises(ValueError, match="scoring='tree'"):
        SpeculativeDecoder(odd, draft, scoring="tree", **kwargs).generate([1, 2, 3], max_new_tokens=4)
    with pytest.raises(ValueError, match="one at a time"):
        SpeculativeDecoder(odd, draft, **kwargs).generate([[1, 2, 3], [3, 2, 1]], max_new_tokens=4)
    with pytest.raises(ValueError, match="tree=True"):
        HFDraftSource(odd, tree=True).uses_tree(2)


@pytest.mark.parametrize("method", ["mdbv", "spectr", "rrs", "gbv_multipath", "traversal", "near_opt_bv"])
@pytest.mark.parametrize("prompt", [[1, 2, 3], [[1, 2, 3], [4, 0, 2], [2, 2, 1]]])
def test_tree_and_flat_scoring_agree_token_for_token(models, method, prompt):
    """Both consume the generator identically and compute the same laws (to float rounding): same output."""
    kwargs = dict(method=method, num_drafts=3, draft_length=3, temperature=0.8, seed=11)
    ids, st = SpeculativeDecoder(*models, scoring="tree", **kwargs).generate(prompt, max_new_tokens=24)
    ref, ref_st = SpeculativeDecoder(*models, scoring="flat", **kwargs).generate(prompt, max_new_tokens=24)
    assert st.scoring == "tree" and ref_st.scoring == "flat"
    assert ids.tolist() == ref.tolist() and st.accepted_hist == ref_st.accepted_hist
    assert st.target_positions < ref_st.target_positions == ref_st.row_iterations * 3 * 4
    assert st.draft_positions < ref_st.draft_positions


def test_tree_draft_laws_are_the_exact_sampling_laws(models):
    """Tree drafting: q[b, k, t] is the processed draft law at (prompt, prefix); equal prefixes share it exactly."""
    _, draft = models
    src = HFDraftSource(draft, tree=True)
    sampling = SamplingConfig(temperature=0.6, top_k=3)
    prompts = torch.tensor([[1, 2, 3], [0, 4, 4]])
    src.begin(prompts)
    drafts, q = src.propose(4, 3, sampling, torch.Generator().manual_seed(0))
    assert drafts.shape == (2, 4, 3) and q.shape == (2, 4, 3, V)
    assert_exact_draft_laws(draft, prompts, drafts, q, sampling)
    for b in range(2):
        for k in range(4):
            for t in range(3):
                for j in range(k):
                    if drafts[b, j, :t].tolist() == drafts[b, k, :t].tolist():
                        assert torch.equal(q[b, j, t], q[b, k, t])
    assert src.forward_calls == 1 + 3 and src.positions < 2 * (1 + 4 * 2)  # prefill, L calls; shared prefixes once
