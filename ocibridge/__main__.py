import gc

# run() sets this too, but the CLI's own imports come first: 15 collections of them for nothing
gc.set_threshold(20_000, 10, 10)

from ocibridge.cli import run  # noqa: E402  (after the threshold: it imports the command run)

run()
