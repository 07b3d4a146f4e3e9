import sympy as sp

from spectr_gbv.theory import symbolic


def test_all_symbolic_proofs_hold():
    proofs = symbolic.all_proofs()
    assert [p.name for p in proofs] == ["monotonicity_identity", "k1_reduction", "convergence"]
    for proof in proofs:
        assert proof.holds and proof.residual == 0, proof.name


def test_monotonicity_identity_numeric_spot_check():
    proof = symbolic.prove_monotonicity_identity()
    sym = {s.name: s for s in proof.lhs.free_symbols | proof.rhs.free_symbols}
    p, r, K = sym["p"], sym["r"], sym["K"]
    vals = {p: sp.Rational(3, 7), r: sp.Rational(2, 5), K: 4}
    expected = sp.Rational(3, 7) * sp.Rational(2, 5) * sp.Rational(3, 5) ** 4
    assert proof.lhs.subs(vals) == proof.rhs.subs(vals) == expected


def test_k1_reduction_both_cases():
    proof = symbolic.prove_k1_reduction()
    sym = {s.name: s for s in proof.lhs.free_symbols}
    p, q = sym["p"], sym["q"]
    assert proof.lhs.subs({p: sp.Rational(1, 2), q: sp.Rational(1, 3)}) == sp.Rational(1, 3)
    assert proof.lhs.subs({p: sp.Rational(1, 3), q: sp.Rational(1, 2)}) == sp.Rational(1, 3)


def test_a_false_identity_is_not_reported_as_proved():
    # the machinery must be able to fail: (1-r)^(K+1) - (1-r)^K is not r (1-r)^K
    p, r = sp.symbols("p r", real=True)
    K = sp.Symbol("K", integer=True, positive=True)
    wrong = sp.simplify(
        sp.expand(
            sp.powsimp(
                sp.expand_power_exp(symbolic._term(p, r, K + 1) - symbolic._term(p, r, K) - p * r * (1 - r) ** (K + 1))
            )
        )
    )
    assert wrong != 0
