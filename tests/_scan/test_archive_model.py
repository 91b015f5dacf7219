"""Archive limits are validated, and every problem kind says why it matters."""

from __future__ import annotations

import pytest

from caplet._scan._archive_model import ArchiveLimits, ArchiveProblemKind
from tests._scan.archivekit import K


def test_limits_must_be_positive() -> None:
    with pytest.raises(
        ValueError, match=r"ArchiveLimits\.max_members must be a positive integer, got 0"
    ):
        ArchiveLimits(max_members=0)


def test_every_problem_kind_has_a_rationale() -> None:
    for kind in ArchiveProblemKind:
        assert len(kind.rationale) > 40, kind
    assert "CVE-2007-4559" in K.ABSOLUTE_PATH.rationale
    assert "Zip Slip" in K.PARENT_TRAVERSAL.rationale
    assert "Fifield" in K.COMPRESSION_RATIO.rationale
