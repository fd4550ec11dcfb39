"""huggingface_hub's client under the address rule (core/addressrule.py) while a mirror reads an
``hf://`` source: a redirect or a Xet answer of the endpoint is connected to only where it resolves
to a public address or one of the endpoint's own kind, as serve's ``--upstream`` is.

huggingface_hub sends through one client it makes with the factory ``set_client_factory`` sets
(its ``HfApi`` calls, ``hf_hub_download`` and its redirects): for the entry's run that factory makes
its usual client over checked transports, and huggingface_hub's own is put back after.

hf_xet is off for the run unless the entry opts in (``xet = true``): the fetch URLs hf_xet reads
from a Xet CAS go over its own connections, which no rule here checks, so by default every file
comes through the endpoint's ``resolve`` on the checked client. With the opt-in, the CAS URL named
in the endpoint's answers is still checked before huggingface_hub hands it to hf_xet."""

from __future__ import annotations

import contextlib
import importlib
import threading
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

from ocibridge.core.addressrule import AddressRule, resolved
from ocibridge.core.proxiedcheck import PORTS, checked_client_options, proxy_resolves
from ocibridge.errors import OcibridgeError

#: one entry's rule at a time (entries run one after another)
_LOCK = threading.Lock()
#: the headers and JSON keys that name a Xet CAS URL in a Hub's answers
CAS_HEADER, CAS_KEY = "x-xet-cas-url", "casUrl"
#: what an entry that says ``xet = true`` reports: hf_xet kept off by the user, or on outside the rule
XET_OVERRIDDEN = "xet = true overridden by HF_HUB_DISABLE_XET: hf_xet off, every file through the endpoint's resolve"
XET_OUTSIDE = "xet = true: hf_xet's fetches from the Xet CAS are outside the address rule"


def cas_checked(rule: AddressRule) -> Any:
    """A response hook: the CAS URL an answer names, checked before anyone connects to it."""

    def hook(answer: Any) -> None:
        cas = answer.headers.get(CAS_HEADER)
        if cas is None and "xet-read-token" in answer.url.path and answer.status_code == 200:
            answer.read()
            with contextlib.suppress(ValueError, AttributeError):
                cas = answer.json().get(CAS_KEY)
        if isinstance(cas, str):
            parts = urlsplit(cas)
            if parts.hostname:
                host, port = parts.hostname, parts.port or PORTS.get(parts.scheme, 443)
                try:
                    addresses = resolved(host, port, OSError)
                except OSError:
                    if proxy_resolves():
                        return
                    raise rule.refusal(f"{host} (a Xet CAS URL the endpoint {rule.url} named) does not resolve "
                                       "here, so the address rule cannot check it: not connected") from None
                rule.check(host, addresses)

    return hook


@contextlib.contextmanager
def checked_hub(endpoint: str, *, xet: bool = False) -> Iterator[str | None]:
    """huggingface_hub's client under the rule of ``endpoint`` (the kinds of its own host) while
    inside, hf_xet off unless ``xet`` (and not off already); its default client and Xet setting
    after. Yields what the entry's report says of hf_xet (:func:`xet_note`)."""
    from ocibridge.kinds.hf.commitdownload import hub

    hub()  # its one line when huggingface_hub is missing
    try:  # huggingface_hub < 1.0 sends with requests: no client the rule can check
        from huggingface_hub import set_client_factory
        from huggingface_hub.utils._http import default_client_factory
    except ImportError:
        raise OcibridgeError("hf:// sources need huggingface_hub >= 1.0 (pip install -U huggingface_hub): "
                             "its client is what the address rule checks") from None

    rule = AddressRule(endpoint, role="endpoint", logged=False)  # said in the summary's line
    usual = default_client_factory()
    flavour = importlib.import_module(type(usual).__module__.split(".")[0])  # httpx, or httpx2
    core = importlib.import_module(flavour.__name__.replace("httpx", "httpcore"))
    hooks = {"request": list(usual.event_hooks["request"]),
             "response": [*usual.event_hooks["response"], cas_checked(rule)]}
    follow, timeout = usual.follow_redirects, usual.timeout
    usual.close()

    def factory() -> Any:
        return flavour.Client(event_hooks=hooks, follow_redirects=follow, timeout=timeout,
                              **checked_client_options(rule, flavour, core))

    with _LOCK:
        note = xet_note(xet)  # under the lock: another entry's run sets the same constant
        with xet_kept_off(not xet):
            set_client_factory(factory)
            try:
                yield note
            finally:
                set_client_factory(default_client_factory)


def xet_note(xet: bool) -> str | None:
    """Nothing when hf_xet is off as by default; with the opt-in, that the user's
    ``HF_HUB_DISABLE_XET`` overrode it (else it goes unsaid), or that hf_xet runs outside the rule."""
    from huggingface_hub import constants

    if not xet:
        return None
    return XET_OVERRIDDEN if constants.HF_HUB_DISABLE_XET else XET_OUTSIDE


@contextlib.contextmanager
def xet_kept_off(off: bool) -> Iterator[None]:
    """huggingface_hub's ``HF_HUB_DISABLE_XET`` (read from the environment at its import, then at
    each download) set while inside when ``off``, the environment left alone; put back after. The
    user's ``HF_HUB_DISABLE_XET=1`` keeps hf_xet off either way: the safer of the two wins."""
    from huggingface_hub import constants

    was = constants.HF_HUB_DISABLE_XET
    constants.HF_HUB_DISABLE_XET = was or off
    try:
        yield
    finally:
        constants.HF_HUB_DISABLE_XET = was
