"""The diagonal-plus-rank-one transition, RWKV-7 (C23): forms, bound, cost, gradient, reference."""
