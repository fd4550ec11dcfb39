"""Docker Model Runner artifacts."""
