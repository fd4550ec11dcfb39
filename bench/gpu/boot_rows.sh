#!/usr/bin/env bash
# Issue 91's rows on a machine just started: the first command on the lent GPU machine, so that
# each row's first round is the first run after boot. pull against curl and OpenSSL
# (bench.pull_row), load_tensors against pull + load_file and curl (bench.load_tensors), and the
# mount's cold read against pull (bench.mount, where the machine has FUSE), and ``wire``: load_tensors
# against curl on a loopback shaped to 1 Gbit/s (bench.shaped_wire, needs tc and unshare), each with the
# machine's landing floors in the same run, 1 GiB, the memory's state printed before the first;
# ``start``: where load_tensors' process spends the time before its first connect (bench.load_start);
# ``fresh``: every row of issue 108 in its order, and again AGAIN minutes after (bench.fresh_vm).
#
#   OUT=$OUT bash bench/gpu/boot_rows.sh                       # on the device, as its first call
#   PYTHON=.venv/bin/python bash bench/gpu/boot_rows.sh --local --repeat 1 --size 64   # the flow here
#   BASELINE=.whl/base OUT=$OUT bash bench/gpu/boot_rows.sh   # + another checkout's pull (and wire's load_tensors) in the same rounds
#   WIRE_REPEAT=3 ...                                          # fewer rounds of the 1 Gbit/s row (9 s a GiB)
#   LONG_REPEAT=3 ... --rows fresh                             # fewer rounds of fresh's wire and publish rows
#   AGAIN=30 OUT=$OUT taskset -c 0,1 bash bench/gpu/boot_rows.sh --rows fresh   # a 2-core VM's rows, twice
#   FRESH_ROWS="pull mount load" ...                           # some of them (bench.fresh_vm --rows)
#
# On the device what the machine lacks is installed as bench/gpu/install.sh says; Debian's fuse3
# and libfuse3-3 come as .debs in .whl/debs (unpacked into a folder of their own). Logs: $OUT/*.log.
set -uo pipefail
cd "$(dirname "$0")/../.."
repeat=5 size=1024 local= rows="pull load mount"
python=${PYTHON:-python3}
while [ $# -gt 0 ]; do
  case $1 in
    --repeat) repeat=$2; shift 2 ;;
    --size) size=$2; shift 2 ;;
    --rows) rows=$2; shift 2 ;;
    --local) local=1; shift ;;
    *) echo "boot_rows.sh: unknown argument $1 (--repeat N --size MiB --rows 'pull load mount wire start fresh' --local)" >&2; exit 2 ;;
  esac
done
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
started=$(date +%s)
{ echo "uptime: $(cat /proc/uptime) | load: $(cat /proc/loadavg)"; nproc; free -m; } | tee "$OUT/machine.log"
if [ -z "$local" ]; then
  set -e
  source bench/gpu/install.sh
  fuse=$scratch/fuse && mkdir -p "$fuse"  # (no .debs: an empty folder, the mount row skipped)
  for deb in .whl/debs/*.deb; do [ -e "$deb" ] && dpkg -x "$deb" "$fuse"; done
  lib=$(find "$fuse" -name libfuse3.so.3 | head -n 1)  # bookworm: /lib/x86_64-linux-gnu
  [ -z "$lib" ] || export FUSE_LIBRARY_PATH=$lib
  export PATH=$fuse/usr/bin:$fuse/bin:$PATH
  [ -c /dev/fuse ] || mknod -m 666 /dev/fuse c 10 229 2>/dev/null || true
  set +e
else
  export PYTHONPATH=$PWD
fi
echo "installed in $(( $(date +%s) - started )) s; fuse: $(grep -c fuse /proc/filesystems) in /proc/filesystems, /dev/fuse $(ls -l /dev/fuse 2>&1), fusermount3 $(command -v fusermount3)" | tee -a "$OUT/machine.log"
"$python" -c 'from bench.landing import state; print("before the first row:", state())' | tee -a "$OUT/machine.log"
for row in $rows; do
  case $row in
    pull) module=bench.pull_row args=(--repeat "$repeat" --size-mib "$size" ${BASELINE:+--baseline "$BASELINE"}) ;;
    load) module=bench.load_tensors args=(--repeat "$repeat" --size "$size") ;;
    mount) module=bench.mount args=(--repeat "$repeat" --size "$size") ;;
    wire) module=bench.shaped_wire args=(--rows load --repeat "${WIRE_REPEAT:-$repeat}" --size-mib "$size"
                                         ${BASELINE:+--baseline "$BASELINE"})
          echo "wire: tc $(command -v tc || echo missing), unshare $(command -v unshare || echo missing)" ;;
    fresh) module=bench.fresh_vm args=(--repeat "$repeat" --size "$size" --logs "$OUT/fresh" --out "$OUT/fresh.md"
                                       ${AGAIN:+--again-after "$AGAIN"} ${BASELINE:+--baseline "$BASELINE"}
                                       ${LONG_REPEAT:+--long-repeat "$LONG_REPEAT"}
                                       ${FRESH_ROWS:+--rows $FRESH_ROWS}) ;;
    start) module=bench.load_start args=(--repeat "$repeat" ${BASELINE:+--baseline "$BASELINE"}) ;;
    *) echo "boot_rows.sh: unknown row $row" >&2; exit 2 ;;
  esac
  echo "== $row: $module ${args[*]} (uptime $(cut -d' ' -f1 /proc/uptime) s)"
  PYTHONUNBUFFERED=1 "$python" -m "$module" "${args[@]}" 2>&1 | tee "$OUT/$row.log"
done
echo "done in $(( $(date +%s) - started )) s; logs in $OUT"
