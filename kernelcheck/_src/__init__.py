"""Private implementation modules; the public API lives one level up."""
