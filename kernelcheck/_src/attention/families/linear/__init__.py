"""Linear attention (claims C10, C11, C14, C19): forms, bound, cost, VJP, specification."""
