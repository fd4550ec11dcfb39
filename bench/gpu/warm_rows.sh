#!/usr/bin/env bash
# Warm starts on the GPU machine (issue 106's GPU row): time to the first compiled token of a
# ~1.1 B-parameter Llama shape, cold against warm from the registry (bench.warm_gpu), one command.
#
#   OUT=$OUT bash bench/gpu/warm_rows.sh                                    # on the device (carry .whl)
#   PYTHON=.venv/bin/python bash bench/gpu/warm_rows.sh --device cpu --size tiny --rounds 2   # the flow here
#
# On the device what the machine lacks is installed as bench/gpu/install.sh says (cp312 wheels and
# the docker-registry binary from .whl). Other arguments go to bench.warm_gpu (--rounds N,
# --deadline S: no round starts that would end after S seconds of it, default what is left of
# WHOLE=450 s of this script after the install, --push weights|config).
# Results: $OUT/warm_gpu.md (the table), $OUT/warm_gpu.json, $OUT/warm_gpu.log.
set -euo pipefail
cd "$(dirname "$0")/../.."
python=${PYTHON:-python3}
device=cuda install=
args=()
while [ $# -gt 0 ]; do
  case $1 in
    --device) device=$2; shift 2 ;;
    --install) install=1; shift ;;  # install from .whl with --device cpu too (the device's way, here)
    *) args+=("$1"); shift ;;
  esac
done
OUT=${OUT:-$(mktemp -d)}
export OUT
mkdir -p "$OUT"
started=$(date +%s)
if [ "$device" != cpu ] || [ -n "$install" ]; then
  source bench/gpu/install.sh
  [ "$device" = cpu ] || nvidia-smi -L || echo "(nvidia-smi -L failed)"
else
  export PYTHONPATH=$PWD
fi
echo "installed in $(( $(date +%s) - started )) s; uptime $(cut -d' ' -f1 /proc/uptime) s, load $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores"
"$python" -c 'import sys, torch, transformers; print("python", sys.version.split()[0], "| torch", torch.__version__, "| transformers", transformers.__version__, "| CUDA", torch.version.cuda, torch.cuda.is_available())'
# no round starts that would end past WHOLE seconds of this script (an explicit --deadline wins)
deadline=$(( ${WHOLE:-450} - ($(date +%s) - started) ))
PYTHONUNBUFFERED=1 "$python" -m bench.warm_gpu --device "$device" --deadline "$deadline" "${args[@]}" --out "$OUT" 2>&1 | tee "$OUT/warm_gpu.log"
echo "done in $(( $(date +%s) - started )) s; results in $OUT"
