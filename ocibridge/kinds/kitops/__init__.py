"""KitOps ModelKits and their Kitfile."""
