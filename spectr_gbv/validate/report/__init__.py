"""The report of a validation run: check results, their vocabulary, and the printed report.

* :mod:`~spectr_gbv.validate.report.results` - :class:`~spectr_gbv.validate.report.results.CheckResult`,
  the categories and the diagnosis vocabulary;
* :mod:`~spectr_gbv.validate.report.validation_report` - the verdict vocabulary (law and robustness
  diagnoses, exit codes, sections) and :class:`~spectr_gbv.validate.report.validation_report.ValidationReport`
  (text and JSON).

Import rule: the bottom layer of :mod:`spectr_gbv.validate`: imports nothing of the package; every
other subpackage may import it. This ``__init__`` imports nothing.
"""
