"""The gallery script's entries for the ports: commands, page text and the confirmation lookup."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

from bench.gallery import run_gallery  # noqa: E402
from bench.gallery.ports.entries import PORT_ENTRIES  # noqa: E402

_REPORT = "Validation of x: FAILED\nVerdict: FAILED (exit 1)\n\nrest"


def test_every_port_has_an_entry_with_its_command():
    ports = {e.name: e for e in run_gallery.ENTRIES if e.upstream is not None}
    assert sorted(ports) == sorted(kw["name"] for kw in PORT_ENTRIES)
    assert len(ports) == 6
    vllm = ports["port_vllm_v1_rejection_sampler"]
    assert vllm.command() == (
        "OMP_NUM_THREADS=1 spectr-gbv validate bench.gallery.ports.vllm_v1:verify --interface batched_torch "
        "--budget quick --reference sd"
    )
    assert {e.expect for e in ports.values()} == {"PASSED", "FAILED"}
    assert ports["port_mlx_lm_speculative_generate_step"].expect == "PASSED"


def test_port_page_names_upstream_and_embeds_the_confirmation():
    entry = next(e for e in run_gallery.ENTRIES if e.name == "port_vllm_v1_rejection_sampler")
    text = run_gallery.page(entry, 1, _REPORT, 1.0, {"torch": "2.13.0+cpu"}, None)
    assert "A faithful port (our code, `bench/gallery/ports`) of vllm-project/vllm" in text
    assert "Packages (PyPI" not in text
    assert "## Independent confirmation" in text
    assert "emits first tokens [0]" in text


def test_confirmation_lookup_by_module_path():
    fn = run_gallery._confirmation("bench.gallery.ports.entries:confirm_litgpt")
    assert "raises RuntimeError: probability tensor contains either inf, nan or element < 0 x 20" in fn("")
    assert run_gallery._confirmation("confirm_core_deepinfer") is run_gallery.confirm_core_deepinfer
