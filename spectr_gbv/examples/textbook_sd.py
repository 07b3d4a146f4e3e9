r"""The textbook speculative sampling verifier, in numpy, for the harness's generic interface.

A correct verifier as a third party would write it from the papers, with nothing of this
package imported: run it through the harness with ::

    spectr-gbv validate spectr_gbv.examples.textbook_sd:verify --interface generic --budget quick

or ``python -m spectr_gbv.examples.textbook_sd`` (the same run, from :func:`main`).

It knows nothing about ``-1`` placeholder ids (it indexes with whatever id it is given), as
the algorithms in the papers do; the harness reports that convention as a note, not a failure.

References
----------
Leviathan et al. 2023, "Fast inference from transformers via speculative decoding",
arXiv 2211.17192, Algorithm 1; Chen et al. 2023, "Accelerating large language model decoding
with speculative sampling", arXiv 2302.01318, Algorithm 2.
"""

from __future__ import annotations

import os
import sys

import numpy as np


def _sample(row: np.ndarray, rng: np.random.Generator) -> int:
    """One token from the law ``row`` (normalised here), with one draw of ``rng``."""
    return int(rng.choice(len(row), p=row / row.sum()))


def verify(
    draft_tokens: np.ndarray, draft_probs: np.ndarray, target_probs: np.ndarray, rng: np.random.Generator
) -> list[int]:
    r"""Token-level speculative sampling of the first draft; the other drafts are ignored.

    For t = 1..L, with :math:`x = ` ``draft_tokens[0]``, :math:`q_t = ` ``draft_probs[0, t-1]``
    and :math:`p_t = ` ``target_probs[0, t-1]``: draw :math:`u \sim U[0, 1)` and accept
    :math:`x_t` when :math:`u < p_t(x_t) / q_t(x_t)`; at the first rejection emit
    :math:`Z \sim \mathrm{normalize}(\max\{p_t - q_t, 0\})` (:math:`p_t` itself when that
    residual is all zero, i.e. p and q agree on the row up to rounding) and stop; when all L
    are accepted emit the bonus :math:`Z \sim p_{L+1}` = ``target_probs[0, L]``.

    The output follows the target law exactly (the method is lossless), and since the K
    drafts are i.i.d. draws of q, verifying only the first one is lossless for every K.

    Parameters
    ----------
    draft_tokens : ndarray, shape [K, L], int64
        K drafts of L tokens; only ``draft_tokens[0]`` is read.
    draft_probs : ndarray, shape [K, L, V], float64
        ``draft_probs[k, t] = q(. | X^(k)_{1:t})``, the law draft token t + 1 was drawn from.
    target_probs : ndarray, shape [K, L+1, V], float64
        ``target_probs[k, t] = p(. | X^(k)_{1:t})``; row L is the bonus position.
    rng : numpy.random.Generator
        The only source of randomness: one ``random()`` per verified token, one ``choice``
        for the emitted correction or bonus token.

    Returns
    -------
    list of int
        The accepted prefix of draft 0, then one token: 1 to L + 1 tokens.

    Raises
    ------
    ValueError
        From :meth:`numpy.random.Generator.choice` when the row a token is drawn from is not a
        distribution (e.g. it holds NaN).

    References
    ----------
    Leviathan et al. 2023, arXiv 2211.17192, Algorithm 1; Chen et al. 2023, arXiv 2302.01318,
    Algorithm 2.

    Examples
    --------
    >>> import numpy as np
    >>> q = np.array([[[0.5, 0.5]]])            # K = 1, L = 1, V = 2
    >>> p = np.array([[[0.5, 0.5], [0.0, 1.0]]])
    >>> verify(np.array([[1]]), q, p, np.random.default_rng(0))  # p = q: accepted, then the bonus
    [1, 1]
    """
    x = np.asarray(draft_tokens)[0]
    q = np.asarray(draft_probs, dtype=np.float64)[0]
    p = np.asarray(target_probs, dtype=np.float64)[0]
    out: list[int] = []
    for t in range(x.shape[0]):
        token = int(x[t])
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = p[t, token] / q[t, token]
        if rng.random() < ratio:
            out.append(token)
            continue
        residual = np.maximum(p[t] - q[t], 0.0)
        out.append(_sample(residual if residual.sum() > 0 else p[t], rng))
        return out
    out.append(_sample(p[x.shape[0]], rng))
    return out


def main() -> int:
    """Validate :func:`verify` at budget ``quick`` and print the report (``python -m spectr_gbv.examples.textbook_sd``).

    Returns
    -------
    int
        The report's exit status: 0 (passed).
    """
    from spectr_gbv.examples.textbook_sd import verify as shipped  # its own name, also under ``python -m``
    from spectr_gbv.validate import validate

    report = validate(shipped, budget="quick")
    try:
        print(report.to_text(), flush=True)
    except BrokenPipeError:  # a reader that closed the pipe early (``| head``): the verdict stands
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return report.exit_code


if __name__ == "__main__":
    raise SystemExit(main())
