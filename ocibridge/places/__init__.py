"""Places: where a text points (:mod:`.locate`, the typed locators of :mod:`.locators`) and how
the place it names is opened (:mod:`.targets`), below the kinds of model.

A kind with a place of its own (``ollama:NAME``, ``hf:ORG/NAME``) is known here only through
what the kinds package provides at its import (:mod:`.kinds`): its schemes, its grammar and its
opener, each named by the kind's table and loaded on first use. Its reference answers through
the :class:`~.locators.KindPlace` protocol, so no code outside the kind tests the type."""
