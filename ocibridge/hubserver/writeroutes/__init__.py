"""The write API over the Hub repository (:mod:`ocibridge.hubserver.repo`): the routes that commit,
create, delete, move and squash repositories and make their refs, and the one commit path."""
