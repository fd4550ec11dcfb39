"""``serve`` from Python: the Hugging Face Hub's API (reads, and publishing with write tokens)
over registries, OCI layouts and the local store (docs/serve.md), as an ASGI application a
test or an existing service hosts or mounts (:func:`create_app`), or run with uvicorn until stopped (:func:`serve`: what
``ocibridge serve`` does). Starlette and uvicorn are the ``ocibridge[serve]`` extra: importing
this module loads neither; a function that needs them says which extra to install.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ocibridge.api.upstream_policy import UpstreamPolicyOptions
from ocibridge.errors import OcibridgeError, UsageError
from ocibridge.hubserver import XET_MIN_SIZE as XET_MIN_SIZE
from ocibridge.hubserver.server import read_tokens as read_tokens
from ocibridge.hubserver.settings import COMPARE_BUDGET as _COMPARE_BUDGET
from ocibridge.hubserver.settings import MULTIPART_MIN as _MULTIPART_MIN
from ocibridge.hubserver.settings import PART_SIZE as _PART_SIZE
from ocibridge.hubserver.uploads.staging import ABANDONED_SECONDS as _STAGING_EXPIRY
from ocibridge.hubserver.uploads.staging import BUDGET as _STAGING_BUDGET
from ocibridge.hubserver.upstream.askbudget import DEFAULT as DEFAULT_ASKS
from ocibridge.hubserver.upstream.askbudget import parse_ask_rate

if TYPE_CHECKING:
    from starlette.applications import Starlette

    from ocibridge.api.options import AttestOptions, SignOptions, TransferOptions
    from ocibridge.api.policy import Verification
    from ocibridge.hubserver.lifetimes.sweep import SweepReport
    from ocibridge.hubserver.repo.evidence import Evidence
    from ocibridge.hubserver.repo.quarantined import TrustedKeys
    from ocibridge.hubserver.server import ServerSettings
    from ocibridge.hubserver.upstream.settings import UpstreamSettings
    from ocibridge.hubserver.web.compare import Diff
    from ocibridge.lazyread.budget import ReadBudget
    from ocibridge.lazyread.diff import ModelDiff
    from ocibridge.oci.reference import LayoutReference, RegistryReference

#: seconds a branch head fetched from the upstream is served before it is asked again (--upstream-fresh)
UPSTREAM_FRESH = 300.0

#: the one error line when the extra is missing
EXTRA = "ocibridge serve needs Starlette, uvicorn and its page renderers: pip install 'ocibridge[serve]'"


@dataclass(frozen=True)
class ServeOptions(UpstreamPolicyOptions):
    """What the application answers besides its sources (``ocibridge serve``'s flags; the ``upstream_*``
    policy: :class:`UpstreamPolicyOptions`)."""

    default_tag: str = "latest"  # the tag the revision "main" names (--default-tag)
    tokens: tuple[str, ...] = ()  # --token-file lines, "TOKEN [read|write] [REPO-PREFIX] [NAME]"; none: open, no writes
    token_file: str | None = None  # the file of those lines (read when tokens is empty), read again when it changes
    audit_log: str | None = None  # each write asked, landed or refused, as a JSON line here ("-": stdout; --audit-log)
    scan: str = "off"  # commits scanned before their branch moves, a flagged one refused or quarantined (--scan)
    scan_verify_keys: tuple[str, ...] = ()  # public keys whose scan reports release a quarantined model
    metrics: bool = True  # GET /metrics in Prometheus' text format (--no-metrics: False)
    xet_min_size: int | None = XET_MIN_SIZE  # files from this size are offered over Xet; None: plain only
    public_url: str | None = None  # the URL clients reach serve at, for the URLs it hands out (--public-url)
    page: int = 1000  # entries per page of a tree or model listing
    send_timeout: float = 30.0  # seconds one write of an answer may take; a client slower is cut (--send-timeout)
    staging_budget: int = _STAGING_BUDGET  # bytes uploads not yet committed may take; past it: 507 (--staging-budget)
    staging_expiry: float = _STAGING_EXPIRY  # seconds an upload no commit names is kept (--staging-expiry)
    lfs_multipart_min: int | None = _MULTIPART_MIN  # LFS uploads from this size come in parts; None: never
    lfs_part_size: int = _PART_SIZE  # the size of those parts (--lfs-part-size)
    writer: str | None = None  # the serve every write is sent to; None: this one writes (--writer)
    trust_forwarded: tuple[str, ...] = ("127.0.0.0/8", "::1/128")  # --trust-forwarded
    peers: tuple[str, ...] = ()  # other serves over the same SOURCE: writes go to the one holding the lease (--peer)
    compare_budget: int = _COMPARE_BUDGET  # bytes one compare page may read from registries (--compare-budget)
    upstream: str | None = None  # an upstream Hub API: what the registry lacks is fetched from it once (--upstream)
    upstream_token_file: str | None = None  # the token sent to it (else $OCIBRIDGE_UPSTREAM_TOKEN), never a client's
    # a branch head re-checked at the upstream at most every SECONDS (0: never; None: UPSTREAM_FRESH)
    upstream_fresh: float | None = None
    quotas: str | None = None  # bytes and repositories per namespace, a TOML file watched for changes (--quotas)
    upstream_max_size: int | None = None  # one ingest of the proxy never larger (--upstream-max-size)
    upstream_quota_namespace: str | None = None  # whose quota the proxy's ingests count against
    upstream_asks_per_client: str | None = None  # asks of the upstream one client's misses may cost (None: 60/min)


@dataclass(frozen=True)
class ListenOptions:
    """Where and how :func:`serve` listens."""

    address: str = "127.0.0.1:8080"  # HOST:PORT, [V6]:PORT, or :PORT for every address (--listen)
    cert: str | None = None  # TLS certificate (PEM), with key: HTTPS (--cert)
    key: str | None = None  # its private key (--key)
    access_log: bool = True  # log each request to stdout (--no-access-log: False)


def create_app(
    sources: str | Sequence[str | RegistryReference | LayoutReference],
    *,
    options: ServeOptions | None = None,
    transfer: TransferOptions | None = None,
    verify: Verification | None = None,
    sign: SignOptions | None = None,
    attest: AttestOptions | None = None,
) -> Starlette:
    """The Hub's API (reads; writes with write tokens) over ``sources`` as a Starlette
    application. Sources are searched in order: a registry prefix ``host[/path]`` (repo
    ``ORG/NAME`` is ``host/path/org/name``),
    ``oci:DIR`` (models named ``ORG/NAME:TAG``) or ``local``, as text or typed references. Its
    models are checked as pull checks them: the containers policy file that applies and the
    keys of ``verify``; the policy file is read now, so a broken one is an error here, not a
    refusal of every request. Run its lifespan (a server does; ``with TestClient(app)``), or
    call ``app.state.serve.close()`` when done, to close the registry connections.

    ``sign`` and ``attest`` (what ``push`` takes): every commit published through the write
    API is signed and given its AI-BOM and provenance (naming its parent commit and uploader)
    before its branch's tag moves; a commit whose evidence fails is refused, the tag left where
    it was (hubserver/repo/evidence.py). The keys are loaded here."""
    _needs("starlette", "blake3", "lz4", "jinja2", "markdown_it", "nh3", "prometheus_client",  # Xet uploads; pages
           "pathspec")  # preupload's .gitignore
    options = options or ServeOptions()
    return _app(sources, options, ListenOptions(), transfer, verify, _evidence(sign, attest, options.scan))[0]


def serve(
    sources: str | Sequence[str | RegistryReference | LayoutReference],
    *,
    listen: str | ListenOptions | None = None,
    options: ServeOptions | None = None,
    transfer: TransferOptions | None = None,
    verify: Verification | None = None,
    sign: SignOptions | None = None,
    attest: AttestOptions | None = None,
) -> None:
    """Run :func:`create_app`'s application (``sign``, ``attest``: its commits' evidence) with
    uvicorn at ``listen`` (``HOST:PORT`` or :class:`ListenOptions`; default 127.0.0.1:8080)
    until SIGTERM or Ctrl-C, which finish the requests in flight first: what ``ocibridge
    serve`` does."""
    _needs("starlette", "uvicorn", "blake3", "lz4", "jinja2", "markdown_it", "nh3", "prometheus_client",
           "pathspec")
    from ocibridge.hubserver.server import run

    listening = ListenOptions(listen) if isinstance(listen, str) else listen or ListenOptions()
    options = options or ServeOptions()
    app, settings = _app(sources, options, listening, transfer, verify, _evidence(sign, attest, options.scan))
    if any(grant.write for grant in app.state.serve.gate.grants):  # it may be asked to commit
        threading.Thread(target=_load_builder, name="load-builder", daemon=True).start()
    run(app, settings)


def _load_builder() -> None:
    """Import the modules a commit builds and copies its artifact with while serve waits for its
    first upload: a fresh serve's first commit imported them after the client's last byte (0.17 s
    of a 1 GiB upload_folder's 5.4 s, on the critical path); beside the upload they cost nothing
    waited for."""
    import ocibridge.chunks.attach
    import ocibridge.chunks.bound
    import ocibridge.model.deliver
    import ocibridge.model.known  # noqa: F401


def _evidence(sign: SignOptions | None, attest: AttestOptions | None, scan: str = "off") -> Evidence | None:
    """``sign`` and ``attest`` checked and their keys loaded (``$COSIGN_PASSWORD`` for an
    encrypted one, ``$OCIBRIDGE_ATTEST_PASSWORD`` first for the attestation key, as push reads
    them), and ``scan``'s library looked for, before serve starts;
    None: commits carry no evidence and are not scanned."""
    if scan not in ("refuse", "quarantine", "off"):
        raise UsageError(f"--scan {scan}: one of refuse, quarantine, off")
    if scan != "off":
        from ocibridge.scanning.library import scanner

        scanner()  # ScannerMissing: one line naming the extra
    if sign is None and (attest is None or not attest.wanted) and scan == "off":
        return None
    from ocibridge.api.evidence import prepare
    from ocibridge.api.signing import sign_forms
    from ocibridge.hubserver.repo.evidence import Evidence
    from ocibridge.signing import keys

    found: dict[str, Any] = {"scan": scan}
    if sign is not None:
        password = sign.password.encode() if isinstance(sign.password, str) else sign.password
        found.update(forms=sign_forms(sign.forms), identity=sign.identity, claims=dict(sign.claims),
                     sign_key=keys.load_private_key(sign.key, password, flag="--sign-key"))
    if attest is not None and attest.wanted:
        prepared = prepare(attest, None)  # the BOM's library looked for, the attestation key loaded
        found.update(sbom=attest.sbom, provenance=attest.provenance, attest_key=prepared.key,
                     sbom_time=attest.sbom_time, provenance_time=attest.provenance_time,
                     parameters=dict(attest.parameters))
    return Evidence(**found)


def _quarantine(options: ServeOptions, evidence: Evidence | None) -> TrustedKeys | None:
    """``--scan quarantine``'s trusted keys (``--scan-verify-key``, and serve's own signing key);
    None when serve does not quarantine."""
    from ocibridge.hubserver.repo.quarantined import trusted_keys

    if options.scan != "quarantine":
        if options.scan_verify_keys:
            raise UsageError("--scan-verify-key goes with --scan quarantine: the keys whose reports release a model")
        return None
    own = evidence.attest_key or evidence.sign_key if evidence is not None else None
    return trusted_keys(options.scan_verify_keys, own)


def _differ(transfer: TransferOptions) -> Diff:
    """What serve's compare pages show: ``ocibridge diff`` itself (:func:`ocibridge.api.browse.diff`),
    with serve's registry options, under the page's read budget, made in a child process
    (:mod:`ocibridge.api.diffprocess`: serve's event loop and memory stay its own)."""

    def diff(old: str, new: str, budget: ReadBudget) -> ModelDiff:
        from ocibridge.api.diffprocess import diff_in_child

        return diff_in_child(old, new, transfer, budget.left)

    return diff


def _needs(*modules: str) -> None:
    """One error line naming the extra when its packages are missing: found, not imported (the
    pages' packages load with the first page, so a replica serving only the API never holds them)."""
    import sys
    from importlib.util import find_spec

    for module in modules:
        if sys.modules.get(module, False) is None or (module not in sys.modules and find_spec(module) is None):
            raise OcibridgeError(EXTRA)


def _app(sources: str | Sequence[str | RegistryReference | LayoutReference], options: ServeOptions,
         listen: ListenOptions, transfer: TransferOptions | None, verify: Verification | None,
         evidence: Evidence | None = None) -> tuple[Starlette, ServerSettings]:
    """The application and what its server is built from; the options are checked before a
    source is located, the policy file read once they are."""
    from ocibridge.api.options import TransferOptions
    from ocibridge.hubserver.replicas.leasetimes import LeaseTimes
    from ocibridge.hubserver.repo.catalog import Catalog
    from ocibridge.hubserver.repo.publishing import Publishing
    from ocibridge.hubserver.repo.sources import RegistrySource, parse_sources
    from ocibridge.hubserver.server import ServerSettings, build_app, check_listening, parse_public_url
    from ocibridge.hubserver.tlsfiles import check_tls_files
    from ocibridge.hubserver.upstream.servingside import CatalogFor, ServingSide
    from ocibridge.signing.containers_policy import UsePolicy
    from ocibridge.signing.policy_file import read_policy_file
    from ocibridge.signing.policy_place import find_policy_file

    transfer = transfer or TransferOptions()
    tokens = options.tokens or (tuple(read_tokens(options.token_file)) if options.token_file else ())
    settings = ServerSettings(
        listen=listen.address, cert=listen.cert, key=listen.key, tokens=tokens, token_file=options.token_file,
        audit_log=options.audit_log, metrics=options.metrics,
        access_log=listen.access_log, concurrency=transfer.concurrency, page=options.page,
        xet_min=options.xet_min_size, public_url=parse_public_url(options.public_url),
        send_timeout=options.send_timeout, publish=Publishing(transfer.concurrency, evidence), diff=_differ(transfer),
        staging_budget=options.staging_budget, staging_expiry=options.staging_expiry,
        lfs_multipart_min=options.lfs_multipart_min, lfs_part_size=options.lfs_part_size,
        writer=parse_public_url(options.writer, "--writer"), trust_forwarded=options.trust_forwarded,
        peers=tuple(url for url in (parse_public_url(p, "--peer") for p in options.peers) if url),
        compare_budget=options.compare_budget, lease=LeaseTimes.from_env(), quotas=options.quotas,
        upstream_max_size=options.upstream_max_size, upstream_quota_namespace=options.upstream_quota_namespace,
        quarantine=_quarantine(options, evidence))
    check_serve_options(options)
    check_listening(settings)
    if settings.cert and settings.key:
        check_tls_files(settings.cert, settings.key)  # once: a key's passphrase is asked by uvicorn alone
    located = parse_sources([sources] if isinstance(sources, str) else sources, transfer.registry_options())
    if evidence is not None and not isinstance(located[0], RegistrySource):
        raise UsageError(f"--sign-key, --sbom and --provenance sign and attest the commits serve pushes to a "
                         f"registry: the first SOURCE ({located[0].shown}), where new repositories go, is not one")
    # The policy file found now is the one enforced for the server's life: read now (a file
    # containers/image refuses stops serve here), named for every later check, so that a file
    # that disappears or breaks later refuses requests rather than falling back to another
    # file or to none.
    use = verify if isinstance(verify, UsePolicy) else UsePolicy(keys=verify)
    found = find_policy_file(use.file)
    if found is not None:
        read_policy_file(found)
        verify = UsePolicy(keys=use.keys, file=str(found))
    upstream = _upstream(options, transfer.concurrency)
    if upstream is not None:
        if not isinstance(located[0], RegistrySource):
            raise UsageError(f"--upstream fills the first SOURCE, a registry prefix: {located[0].shown} is not one")
        from ocibridge.hubserver.upstream.proxy import UpstreamSource

        # each read of a fetched commit noted, for its lifetime (--upstream-keep)
        notes = None
        if upstream.keep is not None:
            from ocibridge.hubserver.lifetimes.notes import ReadNotes

            notes = ReadNotes()
        settings_of_upstream = upstream

        def proxying(side: ServingSide) -> Catalog:
            """The catalog built by the app, for it: the reader rule, the writer role, the audit log
            and the fetch limits are its (app.py), handed to the upstream as constructor arguments."""
            return Catalog(located, default_tag=options.default_tag, verify=verify, upstream=functools.partial(
                UpstreamSource, settings_of_upstream, readers=side.upstream_refuses, fetches_here=side.fetches_here,
                audit=side.audit_line, limits=side.ingest_limits, evidence=evidence, notes=notes))

        catalog: Catalog | CatalogFor = proxying
    else:
        catalog = Catalog(located, default_tag=options.default_tag, verify=verify)
    return build_app(catalog, settings), settings


def _upstream(options: ServeOptions, concurrency: int) -> UpstreamSettings | None:
    """``--upstream`` and its flags, checked; None without ``--upstream``."""
    from ocibridge.hubserver.server import parse_public_url
    from ocibridge.hubserver.upstream.settings import UpstreamSettings, upstream_token

    if not _upstream_wanted(options):
        return None
    from ocibridge.cache.modelcache import ModelCache

    url = parse_public_url(options.upstream, "--upstream")
    assert url is not None
    policy = options.upstream_policy()
    if options.scan != "off" and not policy["scan"]:
        # what serve lets in by a commit it lets in by the proxy as well: scanned before it is served
        # (a flagged one refused: its first reader is being sent its bytes, none can be held back)
        policy["scan"] = f"--scan {options.scan}"
    return UpstreamSettings(url, upstream_token(options.upstream_token_file),
                            UPSTREAM_FRESH if options.upstream_fresh is None else options.upstream_fresh,
                            concurrency=concurrency, asks_per_client=parse_ask_rate(options.upstream_asks_per_client
                                                                                    or DEFAULT_ASKS),
                            hub_cache=ModelCache().root.parent / "upstream-hub",  # beside serve's model cache
                            **policy)


def _upstream_wanted(options: ServeOptions) -> bool:
    """Whether a proxy is asked for; its flags' values checked with ``--upstream`` or without."""
    token_file = ["--upstream-token-file"] if options.upstream_token_file else []
    return options.upstream_wanted(options.upstream, others_given=token_file, fresh=options.upstream_fresh,
                                   tokens=bool(options.tokens or options.token_file), token_flag="--token-file")


def sweep_upstream(source: str, keep: float, *, dry_run: bool = True,
                   transfer: TransferOptions | None = None) -> SweepReport:
    """What ``serve SOURCE --upstream URL --upstream-keep KEEP`` drops now (``keep``: seconds): each
    commit fetched from an upstream under the registry prefix ``source``, dropped or kept and why,
    with the bytes a drop lets the registry's GC free (docs/lifetimes.md). ``dry_run``: only said,
    nothing written (not even the reads record's first sightings)."""
    import time

    from ocibridge.api.options import TransferOptions
    from ocibridge.hubserver.lifetimes.sweep import Sweep
    from ocibridge.hubserver.repo.sources import RegistrySource, parse_sources

    if not keep > 0:
        raise UsageError(f"--upstream-keep {keep}: expected a lifetime above zero")
    located = parse_sources([source], (transfer or TransferOptions()).registry_options())[0]
    if not isinstance(located, RegistrySource):
        raise UsageError(f"--upstream-keep sweeps the proxy's registry prefix: {located.shown} is not one")
    try:
        return Sweep(located, keep, time.time(), dry_run=dry_run).run()
    finally:
        located.close()


def check_serve_options(options: ServeOptions) -> None:
    """What serve refuses of its options before it reads a source (``k8s serve`` checks the pods' with it)."""
    from ocibridge.hubserver.replicas.trusted import parse_networks

    _check_quotas(options)
    _upstream_wanted(options)
    parse_networks(options.trust_forwarded)
    if options.writer and options.peers:
        raise UsageError("--writer and --peer: a reader sends every write to its writer; --peer is for serves "
                         "that take writes themselves while they hold the writer lease")
    if not options.send_timeout > 0:
        raise UsageError(f"--send-timeout {options.send_timeout}: expected a number of seconds above 0")
    if not options.staging_expiry > 0:
        raise UsageError(f"--staging-expiry {options.staging_expiry}: expected a number of seconds above 0")
    if options.lfs_part_size < 1 or options.lfs_multipart_min is not None and options.lfs_multipart_min < 1:
        raise UsageError("--lfs-part-size and --lfs-multipart-min: expected sizes of at least one byte")
    if options.staging_budget < 1:
        raise UsageError(f"--staging-budget {options.staging_budget}: expected a size of at least one byte")


def _check_quotas(options: ServeOptions) -> None:
    """``--quotas`` read once before serve starts (one error line for a file that is not one), and
    the proxy's quota flags only with ``--upstream``."""
    if options.quotas is not None:
        from ocibridge.hubserver.quotas.quotafile import read_quotas

        read_quotas(options.quotas)
    if options.upstream is None and (options.upstream_max_size is not None or options.upstream_quota_namespace):
        raise UsageError("--upstream-max-size and --upstream-quota-namespace go with --upstream")
    if options.upstream is None and options.upstream_asks_per_client is not None:
        raise UsageError("--upstream-asks-per-client goes with --upstream")
    if options.upstream_asks_per_client is not None:
        parse_ask_rate(options.upstream_asks_per_client)
    if options.upstream_max_size is not None and options.upstream_max_size < 1:
        raise UsageError(f"--upstream-max-size {options.upstream_max_size}: expected a size of at least one byte")
    if options.upstream_quota_namespace is not None and not options.upstream_quota_namespace.strip("/ "):
        raise UsageError("--upstream-quota-namespace: expected a namespace's name")


@dataclass(frozen=True)
class NamespaceUsage:
    """What one namespace of serve's registry holds, against its ``--quotas`` (None: no limit)."""

    namespace: str
    bytes: int
    repos: int
    bytes_limit: int | None = None
    repos_limit: int | None = None

    def as_dict(self) -> dict[str, object]:
        return {"namespace": self.namespace, "bytes": self.bytes, "bytesLimit": self.bytes_limit,
                "repos": self.repos, "reposLimit": self.repos_limit}


def serve_usage(source: str, *, quotas: str | None = None, upstream_quota_namespace: str | None = None,
                transfer: TransferOptions | None = None) -> list[NamespaceUsage]:
    """What each namespace of ``source`` (serve's first SOURCE) holds, counted as serve counts it
    for its quotas (docs/quotas.md), beside the limits of the ``quotas`` file; no serve needs to run.
    ``upstream_quota_namespace``: the namespace what serve --upstream fetched counts against."""
    from ocibridge.api.options import TransferOptions
    from ocibridge.hubserver.quotas.report import namespace_usage

    options = (transfer or TransferOptions()).registry_options()
    rows = namespace_usage(source, quotas, options, upstream_quota_namespace)
    return [NamespaceUsage(name, used.bytes, used.repos, limit.bytes if limit else None,
                           limit.repos if limit else None) for name, used, limit in rows]
