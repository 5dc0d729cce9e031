"""Analysis: step windows, verdicts and (in :mod:`tb_diagnostics.rules`) findings."""

from tb_diagnostics.analysis.span import SpanAnalysis
from tb_diagnostics.analysis.steps import StepWindow
from tb_diagnostics.analysis.verdict import Thresholds

__all__ = ["SpanAnalysis", "StepWindow", "Thresholds"]
