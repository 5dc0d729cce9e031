"""Present: the JSON document and its text and Markdown renderings."""

from tb_diagnostics.report.document import analyse_file, build_document

__all__ = ["analyse_file", "build_document"]
