"""Examples shown at the end of every command's ``--help``, as oras, skopeo and docker show them.

Keyed by the command as typed after ``ocibridge`` (``"k8s check"``); aliases share their
command's examples. A command without an entry fails ``tests/cli/test_cli_conventions.py``.
"""

from __future__ import annotations

import argparse

from ocibridge.api.session import OFFLINE_ENV as OFFLINE

EXAMPLES: dict[str, str] = {
    "": """\
  ocibridge push ./tiny-llama registry.example/team/tiny:v1
  ocibridge pull registry.example/team/tiny:v1 ./tiny
  ocibridge ls
  ocibridge COMMAND --help                                     # each command's own examples""",
    "push": """\
  ocibridge push ./tiny-llama                                  # into the local store
  ocibridge push ./tiny-llama registry.example/team/tiny:v1
  ocibridge push model.carton oci:/srv/models:model-v2 --media-types cncf
  ocibridge push ./m reg.example/m:v1 --kind '*.json=weight.config' --layer doc=tar+zstd
  ocibridge push ollama:llama3.2 registry.example/ollama/llama3.2:latest
  ocibridge push ./tiny-llama reg.example/kit/tiny:v1 -f Kitfile --to modelkit
  ocibridge push ./big-model registry.example/team/big:v1 --no-chunks   # no chunk table (default: files from 64M)""",
    "pull": """\
  ocibridge pull registry.example/team/tiny:v1 ./tiny          # files back
  ocibridge pull registry.example/team/tiny:v1 -o ./tiny --include '*.json' --include 'tokenizer*'
  ocibridge pull registry.example/team/tiny:v1 ./tiny --overwrite   # replace files that differ
  ocibridge pull oci:/srv/models:model-v2 model.carton         # rebuild the archive
  ocibridge pull registry.example/ollama/llama3.2 ollama:llama3.2
  ocibridge pull registry.example/team/tiny:v1 ./tiny --with-attestations --verify-key cosign.pub  # BOM, SLSA""",
    "copy": """\
  ocibridge copy registry.example/team/tiny:v1 mirror.example/team/tiny:v1 -r
  ocibridge cp registry.example/team/tiny:v1 oci:/srv/models:tiny --progress plain
  ocibridge copy registry.example/team/tiny:v1 mirror.example/team/tiny:v1 --provenance --attest-key cosign.key""",
    "convert": """\
  ocibridge convert registry.example/kit/tiny:v1 registry.example/models/tiny:v1 --to modelpack
  ocibridge convert oci:/srv/models:tiny oci:/srv/docker:tiny --to docker-model --json
  ocibridge convert registry.example/ai/smollm2:latest ollama:smollm2 --to ollama
  ocibridge convert registry.example/kit/tiny:v1 registry.example/models/tiny:v1 --to modelpack --provenance""",
    "inspect": """\
  ocibridge inspect registry.example/team/tiny:v1
  ocibridge inspect oci:/srv/models:tiny --json""",
    "validate": """\
  ocibridge validate registry.example/team/tiny:v1
  ocibridge validate oci:/srv/models:tiny --json
  ocibridge validate registry.example/team/tiny:v1 --strict    # spec warnings are errors
  ocibridge validate registry.example/team/tiny:v1 --runtime cri-o@1.34   # and CRI-O 1.34's needs""",
    "tags": """\
  ocibridge tags registry.example/team/tiny
  ocibridge tags oci:/srv/models --json
  ocibridge tags registry.example/acme/m --all        # also serve's ocibridge-commit-<id> and ocibridge-refs""",
    "repo": """\
  ocibridge repo ls registry.example                           # every repository of the catalog
  ocibridge repo ls registry.example/team --json               # those under team/, named without it""",
    "manifest": """\
  ocibridge manifest fetch registry.example/team/tiny:v1 > manifest.json   # the exact bytes
  ocibridge manifest fetch registry.example/team/tiny:v1 --descriptor""",
    "diff": """\
  ocibridge diff registry.example/team/tiny:v1 registry.example/team/tiny:v2
  ocibridge diff registry.example/team/tiny:v1 registry.example/team/tiny:v2 --json
  ocibridge diff registry.example/team/tiny:v1 registry.example/team/tiny:v2 --exit-code   # exit 1: they differ
  ocibridge diff r.io/a/m@3f1e5487c0a1d2b3e4f5a6b7c8d9e0f1a2b3c4d5 r.io/a/m@9c7bf7d7d7b5d10c00b7e20353aceda537548860""",
    "check-registry": """\
  ocibridge check-registry registry.example               # reachable, API version
  ocibridge check-registry registry.example/team/scratch --json   # tries uploads, mount, referrers""",
    "login": """\
  ocibridge login registry.example -u alice --password-stdin < token.txt
  ocibridge login localhost:5000 -u alice -p secret --json""",
    "logout": """\
  ocibridge logout registry.example""",
    "path": f"""\
  ocibridge path registry.example/team/tiny:v1     # shared, read-only: vllm serve "$(ocibridge path ...)"
  ocibridge path registry.example/team/tiny:v1 --include '*.json'
  ocibridge path registry.example/team/tiny:v1 --offline   # as last resolved ({OFFLINE}=1)
  ocibridge path registry.example/team/tiny:v2 --progress plain   # a fine-tune of v1: 'reused N of M chunks'""",
    "cache": """\
  ocibridge cache dir
  ocibridge cache prune --older-than 30d --max-size 50G""",
    "mirror": """\
  ocibridge mirror job.toml --dry-run
  ocibridge mirror job.toml --json
  ocibridge mirror job.toml --shard 2/8 --json > shard-2.json    # one of 8 workers
  ocibridge mirror job.toml --emit k8s-job --shards 8 --parallelism 4 --image reg.example/ocibridge:0.1.0
  ocibridge mirror report shard-*.json                         # one summary; exit 1 if a shard failed or is missing""",
    "list": """\
  ocibridge ls                                                 # the local store
  ocibridge list oci:/srv/models --json""",
    "rm": """\
  ocibridge rm tiny-llama                                      # a model of the local store
  ocibridge rm oci:/srv/models:old oci:/srv/models@sha256:…""",
    "prune": """\
  ocibridge prune --dry-run
  ocibridge prune oci:/srv/models --grace 0""",
    "tag": """\
  ocibridge tag registry.example/team/tiny:v1 stable latest
  ocibridge tag oci:/srv/models:tiny v1""",
    "delete": """\
  ocibridge delete registry.example/team/tiny:old
  ocibridge delete oci:/srv/models@sha256:…""",
    "resolve": """\
  ocibridge resolve registry.example/team/tiny:v1
  ocibridge resolve oci:/srv/models:tiny --json""",
    "attach": """\
  ocibridge attach registry.example/team/tiny:v1 card.md --artifact-type application/vnd.example.card
  ocibridge attach oci:/srv/models:tiny sbom.json --artifact-type application/spdx+json -a k=v""",
    "cat": """\
  ocibridge cat registry.example/team/tiny:v1 config.json
  ocibridge cat registry.example/team/tiny:v1 model.safetensors --range 0-8 > header-length.bin
  ocibridge cat registry.example/team/tiny:v1 weights/part-2.bin --range -1024 > tail.bin
  ocibridge cat registry.example/team/tiny:v1 config.json --verify-key cosign.pub""",
    "chunks": """\
  ocibridge chunks registry.example/team/older:v1              # then sign the referrer it names
  ocibridge push ./tiny-llama registry.example/team/tiny:v1 --chunk-threshold 1M   # bound at push instead""",
    "save": """\
  ocibridge save registry.example/team/tiny:v1 registry.example/team/big:v2 -o models.tar
  ocibridge save registry.example/team/tiny:v1 -o models.tar --verify-key cosign.pub""",
    "load": """\
  ocibridge load --list models.tar
  ocibridge load models.tar registry.internal:5000/mirror
  ocibridge load models.tar oci:/srv/models""",
    "discover": """\
  ocibridge discover registry.example/team/tiny:v1
  ocibridge discover registry.example/team/tiny:v1 --artifact-type application/spdx+json --json""",
    "sign": """\
  ocibridge sign registry.example/team/tiny:v1 --key cosign.key -a team=ml
  ocibridge sign oci:/srv/models:tiny --key cosign.key --identity registry.example/team/tiny
  ocibridge sign registry.example/team/tiny:v1 --key cosign.key --form all    # classic, bundle and OMS""",
    "attest": """\
  ocibridge attest registry.example/team/tiny:v1 --key cosign.key --sbom      # the AI-BOM, signed
  ocibridge attest registry.example/team/tiny:v1 --key cosign.key --provenance provenance.json
  ocibridge verify registry.example/team/tiny:v1 --key cosign.pub --attestation-type cyclonedx""",
    "scan": """\
  ocibridge scan registry.example/team/tiny:v1 --key scanner.key    # findings; exit 1 when flagged; signed report
  ocibridge scan --path ./tiny                                       # files on disk, nothing attached
  ocibridge scan --rescan registry.example/team --key scanner.key   # what an older scanner judged, again
  ocibridge push ./tiny registry.example/team/tiny:v1 --scan refuse""",
    "verify-dir": """\
  ocibridge pull registry.example/team/tiny:v1 tiny --verify-key cosign.pub --with-signatures
  ocibridge verify-dir tiny --key cosign.pub      # tiny/model.sig, where pull put it""",
    "verify": """\
  ocibridge verify registry.example/team/tiny:v1 --key cosign.pub
  ocibridge verify registry.example/team/tiny:v1 --key cosign.pub -a team=ml --json""",
    "completion": """\
  ocibridge completion bash > ~/.local/share/bash-completion/completions/ocibridge
  ocibridge completion zsh > "${fpath[1]}/_ocibridge"
  ocibridge completion fish > ~/.config/fish/completions/ocibridge.fish""",
    "keygen": """\
  ocibridge keygen                                             # cosign.key (asks a password) and cosign.pub
  ocibridge keygen keys/release --password-stdin < pass.txt --json   # or $COSIGN_PASSWORD
  ocibridge keygen oms384 --curve p384                         # a P-384 key for sign --form oms (PEM PKCS#8)""",
    "warm": """\
  ocibridge warm save registry.example/team/tiny:v1 ./vllm-cache --engine vllm --key cosign.key
  ocibridge warm ls registry.example/team/tiny:v1
  ocibridge warm load registry.example/team/tiny:v1 ./vllm-cache --engine vllm --verify-key cosign.pub""",
    "warm save": """\
  ocibridge warm save registry.example/team/tiny:v1 ./vllm-cache --engine vllm --key cosign.key
  ocibridge warm save registry.example/team/tiny:v1 --torch artifacts.bin --key cosign.key   # save_cache_artifacts()
  ocibridge warm save registry.example/team/tiny:v1 ./inductor --engine inductor --option mode=max-autotune""",
    "warm ls": """\
  ocibridge warm ls registry.example/team/tiny:v1
  ocibridge warm ls registry.example/team/tiny:v1 --json""",
    "warm load": """\
  ocibridge warm load registry.example/team/tiny:v1 ./vllm-cache --engine vllm --verify-key cosign.pub
  ocibridge warm load registry.example/team/tiny:v1 --torch artifacts.bin --policy policy.json
  ocibridge warm load reg.example/m:v1 ./inductor --engine inductor --option mode=max-autotune --verify-key k.pub""",
    "k8s": """\
  ocibridge k8s check registry.example/team/tiny:v1 --runtime cri-o
  ocibridge k8s volume registry.example/team/tiny:v1 > pod.yaml""",
    "serve": """\
  ocibridge serve registry.example/models                      # repo ORG/NAME: registry.example/models/org/name
  ocibridge serve registry.example/models local --listen :8080 --token-file tokens.txt
  ocibridge serve oci:/srv/models --default-tag v1             # then HF_ENDPOINT=http://127.0.0.1:8080
  ocibridge serve registry.example/models --policy /etc/containers/policy.json   # refused: 403 GatedRepo""",
    "serve-usage": """\
  ocibridge serve-usage registry.example/models --quotas quotas.toml   # each namespace: used, limit, repos
  ocibridge serve-usage registry.example/models --json""",
    "k8s check": """\
  ocibridge k8s check registry.example/team/tiny:v1 --runtime cri-o
  ocibridge k8s check registry.example/team/tiny:v1 --runtime cri-o@1.33    # names by org.cnai.model.filepath
  ocibridge k8s check registry.example/team/tiny:v1 --runtime containerd@2.1 --json
  ocibridge k8s check registry.example/team/tiny:v1 --runtime cri-o --node-policy node-policy.json""",
    "k8s modelcar": """\
  ocibridge k8s modelcar registry.example/team/tiny:v1 --tag v1-modelcar
  ocibridge k8s modelcar oci:/srv/models:tiny --tag both --index""",
    "k8s volume": """\
  ocibridge k8s volume registry.example/team/tiny:v1 > pod.yaml
  ocibridge k8s volume registry.example/team/tiny:v1 --json > pod.json
  ocibridge k8s volume registry.example/team/tiny:v1 --snippet --mount-path /models""",
    "k8s mount": """\
  ocibridge k8s mount oci:/srv/models:tiny ./as-mounted --runtime containerd""",
    "k8s mount-daemon": """\
  ocibridge k8s mount-daemon registry.example/models/llama:v1 --image reg.example/tools/ocibridge:0.1 > mounts.yaml
  ocibridge k8s mount-daemon llama=registry.example/models/llama:v1 qwen=registry.example/models/qwen:v2 --validate
  ocibridge k8s mount-daemon registry.example/models/llama:v1 --selector gpu=true --docker-config-secret regcreds""",
    "mount": """\
  ocibridge mount registry.example/team/tiny:v1 ./tiny          # detached; ocibridge umount ./tiny ends it
  ocibridge mount registry.example/team/tiny:v1 ./tiny --foreground   # Ctrl-C unmounts
  ocibridge mount registry.example/team/tiny:v1 ./tiny --verify-key cosign.pub --policy policy.json""",
    "umount": """\
  ocibridge umount ./tiny""",
    "k8s serve": """\
  ocibridge k8s serve registry.example/models --image registry.example/tools/ocibridge:0.1.0 > serve.yaml
  ocibridge k8s serve registry.example/models --replicas 3 --cache-access-mode ReadWriteMany --storage-class cephfs
  ocibridge k8s serve registry.example/models --token-secret hf-tokens --create-pull-secret --ca-file ca.pem""",
    "k8s prewarm": """\
  ocibridge k8s prewarm registry.example/llm/llama:v3 --selector nvidia.com/gpu.present=true > prewarm.yaml
  ocibridge k8s prewarm registry.example/llm/llama:v3-modelcar --runtime containerd@1.7   # init containers
  ocibridge k8s prewarm registry.example/llm/llama:v3 --json    # kubectl rollout status ds/model-prewarm""",
    "k8s policy": """\
  ocibridge k8s policy --from-policy /etc/containers/policy.json > admission.yaml
  ocibridge k8s policy --image registry.example/ml --key cosign.pub --kyverno-only
  ocibridge k8s policy --image registry.example/ml --identity ci@example.com --issuer https://token.example""",
}


def subcommands(parser: argparse.ArgumentParser, prefix: str = "") -> dict[str, argparse.ArgumentParser]:
    """Every command parser by its name as typed (aliases left out)."""
    found: dict[str, argparse.ArgumentParser] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            primary = {id(p): name for name, p in reversed(list(action.choices.items()))}
            for name, sub in action.choices.items():
                if primary[id(sub)] != name:
                    continue  # an alias
                full = f"{prefix}{name}"
                found[full] = sub
                found.update(subcommands(sub, full + " "))
    return found


def add_examples(parser: argparse.ArgumentParser, name: str = "") -> None:
    """Put the examples of the command ``name`` (the program's own: "") and of its subcommands
    in their epilogs (kept as written, not re-wrapped)."""
    for full, sub in {name: parser, **subcommands(parser, f"{name} " if name else "")}.items():
        text = EXAMPLES.get(full)
        if text:
            sub.epilog = "examples:\n" + text
            sub.formatter_class = argparse.RawDescriptionHelpFormatter
