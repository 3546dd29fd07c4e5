"""Claim checks of the group "The recurrences people ship" (C21, C22, C23, C24).

Per-channel gates (GLA, HGRN-2, RWKV-6: C21) live in :mod:`.channel_gates`;
the delta rule and its kin (DeltaNet, Gated DeltaNet, Kimi Delta Attention,
RWKV-7's diagonal-plus-rank-one transition: C22-C24) in :mod:`.delta_rules`.
"""

from __future__ import annotations

from kernelcheck._src.claims.checks import channel_gates, delta_rules
from kernelcheck._src.claims.checks.common import Check

__all__ = ["CHECKS"]

CHECKS: tuple[Check, ...] = channel_gates.CHECKS + delta_rules.CHECKS
