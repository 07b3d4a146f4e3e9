"""A passing sweep prints no alarming text: no WARNING, no traceback (Ray's local-cluster note filtered, narrowly)."""

import logging
import subprocess
import sys

import pytest

pytest.importorskip("ray")
pytest.importorskip("pyarrow")

from spectr_gbv.sweep.runner import RAY_AUTH_LOGGER, RAY_AUTH_NOTE, start_ray  # noqa: E402
from spectr_gbv.sweep.runner import _LocalAuthNoteFilter as LocalAuthNoteFilter  # noqa: E402

RAY_NOTE = (
    "Token authentication is enabled for this Ray cluster. Set RAY_AUTH_MODE=disabled to opt out. For more "
    "information, see https://docs.ray.io/en/latest/ray-security/token-auth.html"
)


def record(message: str) -> logging.LogRecord:
    return logging.LogRecord(RAY_AUTH_LOGGER, logging.WARNING, __file__, 1, message, None, None)


def test_the_filter_drops_rays_enabled_note_only():
    keep = LocalAuthNoteFilter().filter
    assert RAY_NOTE.startswith(RAY_AUTH_NOTE)
    assert keep(record(RAY_NOTE)) is False
    assert keep(record("Token authentication is disabled for this Ray cluster. Anyone with network access")) is True
    assert keep(record("some other warning")) is True


class FakeRay:
    """Records what the auth logger's filters are while ``init`` runs."""

    def __init__(self):
        self.filters_during_init = None

    def is_initialized(self):
        return False

    def init(self, address=None, **options):
        self.filters_during_init = list(logging.getLogger(RAY_AUTH_LOGGER).filters)


def test_the_filter_is_on_only_while_a_local_cluster_starts(monkeypatch):
    fake = FakeRay()
    assert start_ray(fake, None, 1) is True
    assert [type(f) for f in fake.filters_during_init] == [LocalAuthNoteFilter]
    assert logging.getLogger(RAY_AUTH_LOGGER).filters == []  # removed after
    monkeypatch.setattr("spectr_gbv.sweep.runner.check_address", lambda address: None)
    assert start_ray(fake, "ray://example:10001", None) is True
    assert fake.filters_during_init == []  # a user's cluster: Ray says what it says


def test_a_small_local_sweep_prints_no_warning_and_no_traceback(tmp_path):
    out = tmp_path / "sweep"
    cmd = [sys.executable, "-m", "spectr_gbv.cli.main", "sweep", "--random", "2,1,0", "--methods", "mdbv"]
    run = subprocess.run([*cmd, "--K", "1", "--out", str(out)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("Sweep of 1 instances: 1 tasks done, 0 skipped (already stored), 0 failed; 1 rows")
    assert "WARNING" not in run.stderr and "Traceback" not in run.stderr, run.stderr
    assert "Token authentication" not in run.stderr
