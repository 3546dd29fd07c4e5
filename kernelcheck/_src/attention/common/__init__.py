"""What several attention families share: blocking, decays, inputs, results, engine, bound terms."""
