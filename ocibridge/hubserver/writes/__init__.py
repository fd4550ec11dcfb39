"""What changes a repository: commits, created repositories, refs, their history and evidence."""
