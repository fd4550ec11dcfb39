# Sourced by bench/gpu/run.sh and bench/gpu/boot_rows.sh on the device, which has no internet:
# ocibridge's dependencies the machine lacks come as cp312 wheels in the checkout's .whl folder
# (git-ignored, carried with the tree), with the docker-registry binary; they are installed into a
# folder of their own (PYTHONPATH), nothing else on the machine changes. Needs: $python.
scratch=${TMPDIR:-/tmp}/ocibridge-gpu-bench
rm -rf "$scratch" && mkdir -p "$scratch/site" "$scratch/bin"
# .whl/if-older: what the device has already but maybe too old for pydantic (typing-extensions
# >= 4.16): each installed only where the machine's own is absent or older than the wheel
wheels=(.whl/*.whl)
for wheel in .whl/if-older/*.whl; do
  [ -e "$wheel" ] || continue
  if "$python" - "$wheel" <<'PY'
import importlib.metadata, os, sys
name, version = os.path.basename(sys.argv[1]).split("-")[:2]
key = lambda v: tuple(int(p) for p in v.split(".")[:3] if p.isdigit())
try:
  have = importlib.metadata.version(name)
except importlib.metadata.PackageNotFoundError:
  have = None
print(f"{name}: the machine has {have}, the wheel is {version}")
sys.exit(0 if have is None or key(have) < key(version) else 1)
PY
  then wheels+=("$wheel"); fi
done
if "$python" -m pip --version >/dev/null 2>&1; then
  "$python" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target "$scratch/site" "${wheels[@]}"
else  # (no pip: a wheel of these is a zip of what goes in site-packages)
  "$python" -c 'import sys, zipfile; [zipfile.ZipFile(w).extractall(sys.argv[1]) for w in sys.argv[2:]]' \
    "$scratch/site" "${wheels[@]}"
fi
# compiled as pip compiles what it installs (--no-compile above is for speed only): the machine sets
# PYTHONDONTWRITEBYTECODE, so an uncompiled module is compiled from source at every start of every
# process (~0.2 s of each ocibridge process there, paid by no installed copy)
"$python" -m compileall -q "$scratch/site" ocibridge >/dev/null || true
cp .whl/docker-registry "$scratch/bin/docker-registry" && chmod +x "$scratch/bin/docker-registry"
export PYTHONPATH=$scratch/site:$PWD PATH=$scratch/bin:$PATH
