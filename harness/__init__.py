"""Reproducible acceptance harness for speculative decoding in SGLang and vLLM."""

__version__ = "0.1.0"
