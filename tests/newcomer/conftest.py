"""The lifecycle tests' fixtures (the SGLang test double), shared here."""

from tests.lifecycle.conftest import fake_env, write_suite

__all__ = ["fake_env", "write_suite"]
