"""One folder per attention family: forms, bound, cost, VJP and the family's specification."""
