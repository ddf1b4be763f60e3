"""Diagnostics: data returned by queries (codes, spans, notes, help), rendered by the CLI."""

from kinac.diag.model import Diagnostic, Label, NodeRef, Span

__all__ = ["Diagnostic", "Label", "NodeRef", "Span"]
