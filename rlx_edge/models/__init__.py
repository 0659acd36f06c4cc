"""Bundled models: the default model every demo and many tests use."""

from rlx_edge.models.digits import build_digits_cnn, default_weights, digits_data

__all__ = ["build_digits_cnn", "default_weights", "digits_data"]
