"""ModelPack: the neutral model package, its config, reproducible packing and the builder."""
