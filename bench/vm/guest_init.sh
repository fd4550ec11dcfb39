#!/bin/bash
# PID 1 of the guest bench/vm/fresh_guest.sh boots: the host's / is this guest's root (9p, read-only,
# under an overlay in the guest's memory), so this is the host's checkout and its .venv. Mount what a machine has (proc, sys, /dev, tmpfs on
# /run and /tmp), the scratch disk (ext4 on virtio-blk: the registry's and the benches' files land
# on a block device, as on a cloud VM) and the host's out folder (9p, writable); load the modules the
# rows need (fuse for the mount, sch_tbf for the shaped wire); then run bench.fresh_vm as the first
# job, with the arguments the host left in guest.args on the out share, write its exit status to rc there and power off.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
checkout=$(cd "$(dirname "$0")/../.." && pwd)
say() { echo "fresh_guest: $*" >/dev/console; }
off() {
  sync
  busybox poweroff -f  # does not return
  echo o >/proc/sysrq-trigger
  read -r -t 60 _ </dev/console
}
die() {
  say "$*"
  echo "$*" >$out/error 2>/dev/null
  off
}

mount -t proc proc /proc
mount -t sysfs sysfs /sys
mountpoint -q /dev || mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/pts /dev/shm
mount -t devpts -o gid=5,mode=620,ptmxmode=666 devpts /dev/pts
mount -t tmpfs -o mode=1777 tmpfs /dev/shm
mount -t tmpfs -o mode=755 tmpfs /run
mount -t tmpfs -o mode=1777 tmpfs /tmp
mount -t cgroup2 cgroup2 /sys/fs/cgroup 2>/dev/null
mkdir -p /run/lock /run/out /run/scratch
out=/run/out scratch=/run/scratch
say "init at $(cut -d' ' -f1 /proc/uptime) s after boot, checkout $checkout"

opts=trans=virtio,version=9p2000.L,msize=1048576
mount -t 9p -o "$opts" out $out || die "mounting the host's out folder (9p tag out) on $out failed"
modprobe virtio_blk && modprobe ext4 || die "modprobe virtio_blk ext4 failed"
for _ in 1 2 3 4 5 6 7 8 9 10; do [ -b /dev/vda ] && break; sleep 0.2; done
mount -t ext4 /dev/vda $scratch || die "mounting the scratch disk /dev/vda on $scratch failed"
modprobe fuse || die "modprobe fuse failed"
modprobe sch_tbf || die "modprobe sch_tbf failed"
ip link set lo up || die "ip link set lo up failed"
hostname fresh-guest

mkdir -p $scratch/home $scratch/tmp
export HOME=$scratch/home TMPDIR=$scratch/tmp LANG=C.UTF-8 TERM=dumb
[ -r $out/guest.args ] || die "no guest.args from the host"
# shellcheck source=/dev/null
source $out/guest.args  # sets the bench's arguments: set -- ...
cd "$checkout" || die "no checkout at $checkout"
say "bench at $(cut -d' ' -f1 /proc/uptime) s after boot: .venv/bin/python -m bench.fresh_vm $*"
"$checkout/.venv/bin/python" -m bench.fresh_vm "$@" --logs $out/logs --out $out/table.md </dev/null >/dev/console 2>&1
rc=$?
echo "$rc" >$out/rc
say "bench.fresh_vm exited $rc at $(cut -d' ' -f1 /proc/uptime) s after boot; powering off"
umount $scratch
off
