"""Run xpkit's facade on array-api-strict at its strictest settings."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import xpkit


def latest_api_version() -> str:
    """The newest released standard array-api-strict supports (not the draft)."""
    flags = pytest.importorskip("array_api_strict._flags")
    return max(flags.supported_versions)


@pytest.fixture
def strict_backend() -> Iterator[xpkit.Backend]:
    """array-api-strict: latest version, no boolean indexing, no data-dependent shapes."""
    strict = pytest.importorskip("array_api_strict")
    with strict.ArrayAPIStrictFlags(
        api_version=latest_api_version(),
        boolean_indexing=False,
        data_dependent_shapes=False,
    ):
        yield xpkit.Backend("array_api_strict")
