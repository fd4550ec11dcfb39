"""Every command of the CLI in one table: its name and aliases, the group module that builds and
runs it, its one-line summary, in the order ``--help`` lists them.

The table is what lets a command start quickly: ``--help`` lists every command from it and a
command line imports only the module of the command it names (:mod:`.parser`). A group
module's ``register`` gives a command's name, never its summary or aliases: the adder takes them
from here (tests/cli/test_cli_texts.py checks the table against the modules)."""

from __future__ import annotations

from typing import NamedTuple


class CommandEntry(NamedTuple):
    name: str
    #: the group module under ``ocibridge.cli`` whose ``register`` adds it
    module: str
    #: shown in ``--help``'s list and as the command's own description; ``{sources}`` stands for
    #: the kinds of model a push reads (from the kinds table, so it is said in one place)
    summary: str
    aliases: tuple[str, ...] = ()


COMMANDS: tuple[CommandEntry, ...] = (
    CommandEntry("push", "transfer", "convert a model ({sources}) and store it"),
    CommandEntry("pull", "transfer", "fetch an artifact into a directory, an archive or another store"),
    CommandEntry("copy", "transfer", "copy an artifact and everything it references between stores", ("cp",)),
    CommandEntry("convert", "convert",
                 "convert a model artifact to another family (ModelPack, ModelKit, Docker model, ModelCar, Ollama)"),
    CommandEntry("inspect", "inspect", "show an artifact's manifest, config and layers"),
    CommandEntry("validate", "inspect", "check an artifact against the ModelPack rules"),
    CommandEntry("tags", "inspect", "list the tags of a repository or layout"),
    CommandEntry("repo", "browse", "'repo ls REGISTRY[/PREFIX]': list a registry's repositories (its catalog)"),
    CommandEntry("manifest", "browse", "'manifest fetch REF': print a manifest's exact bytes (digest-verified), "
                 "or its descriptor"),
    CommandEntry("diff", "browse", "what changed between two models: files, config fields, safetensors tensors"),
    CommandEntry("login", "auth", "store registry credentials in the docker config"),
    CommandEntry("logout", "auth", "remove stored registry credentials"),
    CommandEntry("mirror", "mirror", "run a mirror job: copy many models between registries, resumably; "
                 "'mirror report REPORT…' merges shard reports"),
    CommandEntry("path", "modelcache", "print the local directory of a model's files, from the shared model "
                 "cache (fetching only what it lacks)"),
    CommandEntry("cache", "modelcache", "the shared model cache of 'path': show where it is, or prune it"),
    CommandEntry("k8s", "k8s",
                 "Kubernetes: image volumes (check, modelcar, volume, mount, prewarm), ocibridge serve (serve), "
                 "admission policies (policy)"),
    CommandEntry("sign", "signing",
                 "sign an artifact (cosign .sig tag, sigstore bundle referrer, OMS model signature)"),
    CommandEntry("verify-dir", "signing",
                 "verify a directory (a pull, a cache, a snapshot) against an OMS model signature"),
    CommandEntry("verify", "signing", "verify an artifact's signatures (every form), or a file against a bundle"),
    CommandEntry("keygen", "signing",
                 "make a key pair to sign with: PREFIX.key (encrypted, as cosign writes it) and PREFIX.pub"),
    CommandEntry("attest", "evidence",
                 "sign and attach evidence about an artifact: its AI-BOM (CycloneDX), SLSA provenance"),
    CommandEntry("scan", "scan",
                 "scan a model's files by content (pickles, NumPy objects, Keras Lambda, ONNX paths, tensor "
                 "headers) and attach the signed report"),
    CommandEntry("check-registry", "registry_check",
                 "report what a registry supports (chunked uploads, mount, referrers API, OCI 1.1 artifacts)"),
    CommandEntry("list", "store", "list the models of the local store or of a layout", ("ls",)),
    CommandEntry("rm", "store", "remove models from the local store or a layout (blobs stay until prune)"),
    CommandEntry("prune", "store", "delete the blobs of a layout that no listed model uses"),
    CommandEntry("tag", "store", "give an artifact more tags in the same repository or layout"),
    CommandEntry("delete", "store", "delete a manifest (and every tag naming it) from a registry or layout"),
    CommandEntry("resolve", "store", "print the digest a tag names"),
    CommandEntry("attach", "store", "push files as an artifact that refers to REF (a signature, an SBOM, a card)"),
    CommandEntry("discover", "store", "list the artifacts that refer to REF"),
    CommandEntry("save", "bundle", "write models (with signatures and referrers) into one bundle file"),
    CommandEntry("load", "bundle", "copy every model of a bundle (from save) under a registry prefix, into oci:DIR "
                 "or (without PREFIX) into the local store"),
    CommandEntry("cat", "lazy", "print a file of a registry model, reading only the byte ranges needed (verified)"),
    CommandEntry("chunks", "lazy", "compute the chunk tables of a pushed model and attach them (for lazy reads)"),
    CommandEntry("mount", "mount", "mount a registry model as a read-only directory: files read lazily, "
                 "every byte verified (FUSE)"),
    CommandEntry("umount", "mount", "unmount a directory mounted by 'ocibridge mount'"),
    CommandEntry("serve", "serve",
                 "serve the Hugging Face Hub's API over registries: load models, and publish with write tokens (HF_ENDPOINT=http://HOST:PORT)"),
    CommandEntry("serve-usage", "serve", "what each namespace of serve's registry holds, against its --quotas "
                 "(bytes, repositories)"),
    CommandEntry("warm", "warm", "compile caches kept beside a model as signed referrers: 'warm save', 'warm ls', "
                 "'warm load' (a warm start on any node)"),
    CommandEntry("completion", "completion", "print a shell completion script (bash, zsh, fish): commands, flags, "
                 "local model names"),
)

#: a command's entry by its name or an alias
BY_NAME: dict[str, CommandEntry] = {word: c for c in COMMANDS for word in (c.name, *c.aliases)}

#: the group modules, in the order ``--help`` lists their commands
GROUPS: tuple[str, ...] = tuple(dict.fromkeys(c.module for c in COMMANDS))


def summary(entry: CommandEntry) -> str:
    """The entry's summary as printed (the kinds table read only for the one that names them)."""
    if "{sources}" not in entry.summary:
        return entry.summary
    from ocibridge.api.session import source_kinds

    return entry.summary.format(sources=source_kinds())
