"""The one host classifier (ocibridge/core/hosts.py): loopback is ``localhost`` or a loopback IP
literal, never a DNS name by its spelling (issue 41, finding 4); every caller agrees with it."""

from __future__ import annotations

import pytest

from ocibridge.core.hosts import is_loopback, split_host_port
from ocibridge.errors import InvalidReference
from ocibridge.oci.reference import parse_ollama_name
from ocibridge.stores.registry.client import ClientOptions, base_url
from ocibridge.stores.registry.pull_secret import loopback_warnings

LOOPBACK = ["127.0.0.1", "127.1.2.3:5000", "127.255.255.254", "[::1]:5000", "[::1]", "::1", "localhost",
            "localhost:5000", "LOCALHOST", "LocalHost:80", "localhost.", "localhost.:5000",
            "0:0:0:0:0:0:0:1", "[0:0::1]:443",
            # IPv4-mapped IPv6 of a loopback address reaches the same socket: loopback
            "[::ffff:127.0.0.1]:5000", "::ffff:127.0.0.1"]
NOT_LOOPBACK = ["127.attacker.example", "127.attacker.example:5000", "127.0.0.1.nip.io", "127.0.0.1.nip.io:80",
                "localhost.evil.com", "evil-localhost", "registry.localhost", "localhost.localdomain",
                # inet_aton forms ipaddress refuses: treated as names, so they get HTTPS (the safe side)
                "0x7f.0.0.1", "0177.0.0.1", "127.1", "2130706433",
                "128.0.0.1", "10.0.0.1:5000", "[::2]:5000", "::ffff:10.0.0.1", "[::ffff:8.8.8.8]",
                "registry.example", "docker.io", "", "[", "127.0.0.1x"]


@pytest.mark.parametrize("host", LOOPBACK)
def test_loopback(host):
    assert is_loopback(host)


@pytest.mark.parametrize("host", NOT_LOOPBACK)
def test_not_loopback(host):
    assert not is_loopback(host)


@pytest.mark.parametrize("host", LOOPBACK + NOT_LOOPBACK)
def test_every_caller_agrees(host):
    """Plain HTTP by default, the pod warning and Ollama's host are the classifier's answer."""
    if not host or host == "[":
        return
    plain = base_url(host, ClientOptions()).startswith("http://")
    assert plain is is_loopback(host)
    assert bool(loopback_warnings([host])) is is_loopback(host)
    try:
        ollama = parse_ollama_name(f"{host}/library/m:1")
    except InvalidReference:
        return
    if ollama.host == host:
        assert ollama.is_loopback is is_loopback(host)


@pytest.mark.parametrize("text, parts", [
    ("h", ("h", None)), ("h:5000", ("h", "5000")), ("[::1]:5000", ("::1", "5000")), ("[::1]", ("::1", None)),
    ("::1", ("::1", None)), ("fe80::1:2", ("fe80::1:2", None))])
def test_split_host_port(text, parts):
    assert split_host_port(text) == parts


def test_a_dns_name_beginning_with_127_gets_https():
    """The finding: such a name was plain HTTP, and stored Basic credentials went in clear."""
    assert base_url("127.attacker.example:5000", ClientOptions()) == "https://127.attacker.example:5000"
    assert base_url("127.attacker.example", ClientOptions(plain_http=True)) == "http://127.attacker.example"
