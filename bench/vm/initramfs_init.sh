#!/bin/busybox sh
# /init of the guest's initramfs (busybox, static): load the modules a 9p root needs, mount the
# host's / read-only over virtio-9p under a tmpfs overlay, and hand over to the init named by fresh_guest.init= on the
# kernel's command line. The kernel's own modules are modules, not built in: they come in the
# initramfs, in the order modprobe --show-depends gave (modules.order).
/bin/busybox mkdir -p /proc /sys /dev /newroot
/bin/busybox mount -t proc proc /proc
/bin/busybox mount -t sysfs sysfs /sys
/bin/busybox mount -t devtmpfs devtmpfs /dev
fail() {
  echo "fresh_guest initramfs: $*" >/dev/console
  /bin/busybox poweroff -f
}
while read -r module; do
  /bin/busybox insmod "/modules/$module" || fail "insmod $module failed"
done </modules.order
init=/sbin/init
for word in $(/bin/busybox cat /proc/cmdline); do
  case $word in fresh_guest.init=*) init=${word#fresh_guest.init=} ;; esac
done
/bin/busybox mkdir -p /host /rw
/bin/busybox mount -t 9p -o ro,trans=virtio,version=9p2000.L,msize=1048576,cache=loose rootfs /host \
  || fail "mounting the host's / over 9p (mount_tag rootfs) failed"
# writable as a machine's root is (the benches byte-compile the checkout): what the guest writes
# outside its disks lands in its memory, never in the host's files
/bin/busybox mount -t tmpfs -o mode=755 tmpfs /rw
/bin/busybox mkdir -p /rw/upper /rw/work
/bin/busybox mount -t overlay -o lowerdir=/host,upperdir=/rw/upper,workdir=/rw/work overlay /newroot \
  || fail "the overlay of the 9p root and a tmpfs failed"
[ -x "/newroot$init" ] || fail "no $init on the 9p root"
/bin/busybox mount --move /dev /newroot/dev
/bin/busybox umount /proc /sys
exec /bin/busybox switch_root /newroot "$init"
