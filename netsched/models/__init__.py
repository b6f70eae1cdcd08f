"""Completion-time model serving: feature schema, artifacts, predictor (no training code)."""
