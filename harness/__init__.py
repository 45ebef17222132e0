"""Reproducible acceptance harness for speculative decoding in SGLang."""

__version__ = "0.1.0"
