#!/usr/bin/env bash
# bench.gpu_load on the GPU machine (issue 89), or the same flow on a CPU (--device cpu).
#
#   bash bench/gpu/run.sh                                   # on the device: CUDA, 1536 MiB, 3 rounds
#   PYTHON=.venv/bin/python bash bench/gpu/run.sh --device cpu --size 64 --repeat 2
#   bash bench/gpu/run.sh --landing                         # and the machine's landing floors (issue 91)
#
# --landing: the memory's state (bench.landing's header: uptime, free memory in blocks of 2 MiB and
# more) is printed before the load, so a first call on a machine just started names how fresh it
# is; after the load, bench.landing's floors (curl to /dev/null, dd into a new file, a first touch
# of new memory) at the load's size, in the same run: $OUT/landing.log.
#
# The device has no internet: what it lacks comes in the checkout's .whl folder (git-ignored,
# carried with the tree): cp312 wheels of ocibridge's dependencies that are not preinstalled
# there, and the docker-registry binary. With --device cuda they are installed into a folder
# of their own (PYTHONPATH), nothing else on the machine changes. Results: $OUT/gpu_load.json
# and $OUT/gpu_load.md (OUT: a folder; default a temporary one), also printed.
set -euo pipefail
cd "$(dirname "$0")/../.."
device=cuda size=1536 repeat=3 deadline=240 install= landing=
python=${PYTHON:-python3}
while [ $# -gt 0 ]; do
  case $1 in
    --device) device=$2; shift 2 ;;
    --size) size=$2; shift 2 ;;
    --repeat) repeat=$2; shift 2 ;;
    --deadline) deadline=$2; shift 2 ;;
    --install) install=1; shift ;;  # install from .whl with --device cpu too (to try the device's way here)
    --landing) landing=1; shift ;;
    *) echo "run.sh: unknown argument $1 (--device D --size MiB --repeat N --deadline S --install --landing)" >&2; exit 2 ;;
  esac
done
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
started=$(date +%s)
if [ "$device" != cpu ] || [ -n "$install" ]; then
  source bench/gpu/install.sh
  [ "$device" = cpu ] || nvidia-smi -L || echo "(nvidia-smi -L failed)"
else
  export PYTHONPATH=$PWD
fi
echo "installed in $(( $(date +%s) - started )) s"
"$python" -c 'import sys, torch; print("python", sys.version.split()[0], "| torch", torch.__version__, "| CUDA", torch.version.cuda, "| available", torch.cuda.is_available(), "| devices", torch.cuda.device_count())'
[ -z "$landing" ] || "$python" -c 'from bench.landing import state; print("before the load:", state())' | tee "$OUT/landing.log"
"$python" -m bench.gpu_load --device "$device" --size "$size" --repeat "$repeat" --deadline "$deadline" --out "$OUT" \
  2>&1 | tee "$OUT/gpu_load.log"
[ -z "$landing" ] || "$python" -m bench.landing --size "$size" --repeat "$repeat" 2>&1 | tee -a "$OUT/landing.log"
echo "done in $(( $(date +%s) - started )) s; results in $OUT"
