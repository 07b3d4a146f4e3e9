"""Faithful ports of public verification steps, for ``spectr-gbv validate`` (see ``bench/gallery/README.md``).

Each module reproduces one upstream verify step in behaviour (arithmetic, dtypes, comparison orientation, draw
order and dtype of every random draw, discarded draws, clamping and normalisation), at the upstream commit named in
its docstring, in the harness interface closest to its calling convention. The code is ours; the logic is theirs.
Randomness comes from the ``torch.Generator`` the torch interfaces pass, drawn in upstream's order and dtype, so
the harness's coin forcing reaches the draws upstream would make.
"""
