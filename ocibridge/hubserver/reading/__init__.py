"""The read API over the Hub repository (:mod:`ocibridge.hubserver.repo`): the routes, and the bytes
(streamed while hashed, followed by every client, by ranges)."""
