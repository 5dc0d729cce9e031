"""Present: the JSON document and its text, Markdown and HTML renderings.

This package only renders what the analysis decided; the engine
(:func:`tb_diagnostics.engine.build_document`) runs the analysis and calls it.
"""

from tb_diagnostics.report.document import logdir_document, span_document

__all__ = ["logdir_document", "span_document"]
