"""Per-channel gated linear attention (claim C21): GLA, HGRN-2, RWKV-6; forms, bound, cost, VJP."""
