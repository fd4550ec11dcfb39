#!/usr/bin/env bash
# Boot a brand-new 2-vCPU KVM guest from this machine's own files and run bench.fresh_vm as its
# init's first job, so that a machine with KVM can measure a just-booted 2-core VM again and again.
# The guest's root is this machine's / (9p, read-only, under an overlay kept in the guest's memory):
# the checkout this script lives in and its .venv, as they are here. Its files go on a fresh ext4 scratch disk (virtio-blk, made each run);
# its serial console, bench.fresh_vm's table and each bench's log come back in --out.
#
#   bash bench/vm/fresh_guest.sh -- --size 64 --repeat 1                 # the flow, quickly
#   bash bench/vm/fresh_guest.sh --again-after 30 --out /tmp/fresh       # every row at 1 GiB, twice
#
# Needs /dev/kvm, qemu-system-x86_64, a Debian kernel in /boot with its modules in /lib/modules and
# busybox (static), on Debian: apt-get install qemu-system-x86 linux-image-amd64 busybox
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
checkout=$(cd "$here/../.." && pwd)
usage() {
  cat <<EOF
usage: bash bench/vm/fresh_guest.sh [options] [-- bench.fresh_vm arguments]

Boots a fresh KVM guest (this machine's / as its root, its writes kept in the guest) and runs
  $checkout/.venv/bin/python -m bench.fresh_vm ARGS --logs OUT/logs --out OUT/table.md
as the guest's first job; then powers it off. Exits non-zero when the guest did not finish,
the bench failed, or a row was skipped or gave no figure.

options:
  --cpus N          the guest's vCPUs (default 2)
  --mem SIZE        the guest's memory, as qemu's -m takes it (default 8G)
  --disk SIZE       the scratch disk, sparse (default 24G)
  --disk-dir DIR    the folder its file is made in, on a disk, not tmpfs (default /var/tmp)
  --again-after MIN passed to bench.fresh_vm: a second pass MIN minutes after the first began,
                    the guest staying up between them
  --out DIR         where the serial log, table.md and the benches' logs go
                    (default \${TMPDIR:-/tmp}/fresh-guest-<time>)
  --kernel FILE     the guest's kernel (default: the newest /boot/vmlinuz-* with its modules)
  --timeout MIN     power the guest off after MIN minutes (default 120, + --again-after)
  --accel tcg       QEMU's emulated CPU instead of KVM: checks the flow on a machine without
                    (hardware) KVM; its figures mean nothing
  --write           append the guest's table to docs/bench-2core-fresh-vm.md here (bench.fresh_vm's own
                    --write would write into the guest's memory)
  -h, --help        this text
EOF
}
fail() { echo "fresh_guest.sh: $*" >&2; exit 1; }

cpus=2 mem=8G disk=24G disk_dir=/var/tmp again= out= kernel= timeout_min=120 accel=kvm write=
while [ $# -gt 0 ]; do
  case $1 in
    --cpus) cpus=${2:?}; shift 2 ;;
    --mem) mem=${2:?}; shift 2 ;;
    --disk) disk=${2:?}; shift 2 ;;
    --disk-dir) disk_dir=${2:?}; shift 2 ;;
    --again-after) again=${2:?}; shift 2 ;;
    --out) out=${2:?}; shift 2 ;;
    --kernel) kernel=${2:?}; shift 2 ;;
    --timeout) timeout_min=${2:?}; shift 2 ;;
    --accel) accel=${2:?}; shift 2 ;;
    --write) write=1; shift ;;
    -h|--help) usage; exit 0 ;;
    --) shift; break ;;
    *) echo "fresh_guest.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
bench_args=("$@")
for a in "${bench_args[@]}"; do
  [ "$a" = --write ] && fail "--write goes before --: bench.fresh_vm's own would write into the guest's memory"
done
[ -n "$again" ] && bench_args+=(--again-after "$again")
again_min=$(printf '%.0f' "${again:-0}" 2>/dev/null) || fail "--again-after $again: minutes, a number"
[[ $timeout_min =~ ^[0-9]+$ ]] || fail "--timeout $timeout_min: whole minutes"
limit=$((timeout_min + again_min + 1))

# -- what the host needs -------------------------------------------------------------------------
command -v qemu-system-x86_64 >/dev/null || fail "no qemu-system-x86_64: apt-get install qemu-system-x86"
case $accel in
  kvm)
    [ -c /dev/kvm ] || fail "no /dev/kvm: this machine has no KVM (nested virtualization off?); --accel tcg checks the flow only"
    [ -r /dev/kvm ] && [ -w /dev/kvm ] || fail "/dev/kvm not readable and writable by $(id -un): run as root or join group kvm"
    # PVM (kvm_pvm: KVM without hardware virtualization) runs only kernels built as PVM guests; a
    # stock kernel's every instruction is emulated, slowly, until one it cannot (cmpxchg16b) stops it
    [ -d /sys/module/kvm_pvm ] && fail "this machine's KVM is PVM (kvm_pvm, no hardware virtualization): a stock kernel cannot run under it; use a machine with VT-x/AMD-V (--accel tcg checks the flow only)"
    machine=(-enable-kvm -cpu host) ;;
  tcg) machine=(-accel tcg,thread=multi -cpu max) ;;
  *) fail "--accel $accel: kvm or tcg" ;;
esac
command -v mkfs.ext4 >/dev/null || fail "no mkfs.ext4: apt-get install e2fsprogs"
busybox=$(command -v busybox) || fail "no busybox: apt-get install busybox"
ldd "$busybox" >/dev/null 2>&1 && fail "$busybox is not static: apt-get install busybox-static"
[ "$(id -u)" = 0 ] || fail "run as root: the guest's root is this machine's / and its rows need root inside"
[ -x "$checkout/.venv/bin/python" ] \
  || fail "no $checkout/.venv: python3 -m venv .venv && .venv/bin/pip install -e '.[test]'"
if [ -z "$kernel" ]; then
  for k in $(ls -v /boot/vmlinuz-* 2>/dev/null | tac); do
    [ -d "/lib/modules/${k#/boot/vmlinuz-}/kernel" ] && { kernel=$k; break; }
  done
  [ -n "$kernel" ] || fail "no kernel in /boot with its modules in /lib/modules: apt-get install linux-image-amd64"
fi
[ -r "$kernel" ] || fail "cannot read the kernel $kernel"
kver=${kernel##*/vmlinuz-}
[ -d "/lib/modules/$kver/kernel" ] || fail "no /lib/modules/$kver for $kernel: install its linux-image package"
mods=$(for m in 9p 9pnet_virtio virtio_pci overlay; do modprobe -S "$kver" --show-depends "$m" || exit 1; done) \
  || fail "modprobe -S $kver --show-depends failed: the kernel $kver lacks 9p, virtio_pci or overlay modules"

out=${out:-${TMPDIR:-/tmp}/fresh-guest-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$out" || fail "cannot make $out"
out=$(cd "$out" && pwd)
rm -f "$out/rc" "$out/error" "$out/table.md" "$out/serial.log"
work=$(mktemp -d "${TMPDIR:-/tmp}/fresh-guest-work.XXXXXX") || fail "no temporary folder"
trap 'rm -rf "$work"' EXIT

# -- the initramfs: busybox, the modules a 9p root needs, and initramfs_init.sh as /init --------------
root=$work/initramfs
mkdir -p "$root/bin" "$root/modules"
cp "$busybox" "$root/bin/busybox"
cp "$here/initramfs_init.sh" "$root/init" && chmod +x "$root/init"
: >"$root/modules.order"
while read -r verb path _; do
  [ "$verb" = insmod ] || continue
  name=$(basename "$path")
  grep -qx "$name" "$root/modules.order" && continue
  case $path in
    *.ko) cp "$path" "$root/modules/$name" ;;
    *.ko.xz) xz -dc "$path" >"$root/modules/${name%.xz}"; name=${name%.xz} ;;
    *.ko.zst) zstd -qdc "$path" >"$root/modules/${name%.zst}"; name=${name%.zst} ;;
    *) fail "module $path: neither .ko, .ko.xz nor .ko.zst" ;;
  esac
  echo "$name" >>"$root/modules.order"
done <<<"$mods"
(cd "$root" && find . | cpio -o -H newc --quiet | gzip -1) >"$work/initramfs.gz" || fail "building the initramfs failed"

# -- the scratch disk, new each run: its writes go past the host's page cache (cache=none), as a cloud
# VM's go to its volume; formatted whole now, so that no lazy init writes in the guest's first minutes
[ "$(stat -f -c %T "$disk_dir" 2>/dev/null)" = tmpfs ] \
  && fail "--disk-dir $disk_dir is tmpfs (memory, no O_DIRECT): give a folder on a disk"
scratch=$(mktemp "$disk_dir/fresh-guest-scratch.XXXXXX") || fail "cannot make the scratch disk's file in $disk_dir"
trap 'rm -rf "$work" "$scratch"' EXIT
truncate -s "$disk" "$scratch" || fail "cannot make a $disk scratch disk in $disk_dir"
mkfs.ext4 -q -F -i 65536 -E lazy_itable_init=0,lazy_journal_init=0 "$scratch" \
  || fail "mkfs.ext4 on the scratch disk failed"

# -- the guest's arguments, then the guest -------------------------------------------------------------
printf 'set --' >"$out/guest.args"
printf ' %q' "${bench_args[@]}" >>"$out/guest.args"
echo >>"$out/guest.args"
echo "fresh_guest.sh: $cpus vCPUs ($accel), $mem, kernel $kver, scratch $disk; out $out (up to $limit min)"
timeout --foreground -k 30 "$((limit * 60))" qemu-system-x86_64 \
  -nodefaults -no-user-config "${machine[@]}" -machine q35 -smp "$cpus" -m "$mem" \
  -display none -no-reboot \
  -chardev "stdio,id=console,signal=off,logfile=$out/serial.log" -serial chardev:console \
  -kernel "$kernel" -initrd "$work/initramfs.gz" \
  -append "console=ttyS0 panic=-1 quiet fresh_guest.init=$here/guest_init.sh" \
  -fsdev "local,id=rootfs,path=/,security_model=none,readonly=on,multidevs=remap" \
  -device virtio-9p-pci,fsdev=rootfs,mount_tag=rootfs \
  -fsdev "local,id=out,path=$out,security_model=none" \
  -device virtio-9p-pci,fsdev=out,mount_tag=out \
  -drive "file=$scratch,format=raw,if=virtio,cache=none,aio=native" \
  </dev/null
qemu_rc=$?

# -- what came back --------------------------------------------------------------------------------------
echo
grep -a "^# pass " "$out/serial.log" 2>/dev/null | sed 's/^/fresh_guest.sh: guest at /'
[ -s "$out/error" ] && fail "the guest: $(cat "$out/error") (serial log: $out/serial.log)"
[ $qemu_rc = 124 ] && fail "the guest ran past $limit min and was stopped (serial log: $out/serial.log)"
[ -s "$out/rc" ] || fail "the guest stopped before the bench finished, qemu exit $qemu_rc (serial log: $out/serial.log)"
[ "$(cat "$out/rc")" = 0 ] || fail "bench.fresh_vm exited $(cat "$out/rc") in the guest (serial log: $out/serial.log)"
[ -s "$out/table.md" ] || fail "no table.md from the guest (serial log: $out/serial.log)"
if grep -q "skipped:\|failed:" "$out/table.md"; then
  fail "rows without a figure in the guest: $(grep -o '| [^|]* | [^|]*\(skipped\|failed\):[^|]*' "$out/table.md" | tr '\n' ';') (see $out/table.md)"
fi
if [ -n "$write" ]; then
  cat "$out/table.md" >>"$checkout/docs/bench-2core-fresh-vm.md" || fail "cannot append to $checkout/docs/bench-2core-fresh-vm.md"
fi
echo "fresh_guest.sh: every row measured; table in $out/table.md${write:+ (appended to docs/bench-2core-fresh-vm.md)}, serial log in $out/serial.log, logs in $out/logs"
