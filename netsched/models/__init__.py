"""Completion-time model (scikit-learn). Lands with issue 6."""
