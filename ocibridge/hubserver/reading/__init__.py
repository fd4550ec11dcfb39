"""What serve reads: the sources a repo id and a revision name, a model's files as the Hub lists
them, the Hub's JSON, and the bytes (streamed while hashed, followed by every client, by ranges)."""
