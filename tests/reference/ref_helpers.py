"""Constants shared by the reference-layer tests (not a test module)."""

LOSSLESS = ("ar", "sd", "bv", "spectr", "rrs", "gbv_multipath", "mdbv")
LOSSY = ("spectr_gbv_released", "independent_bv")
