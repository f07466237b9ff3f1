#!/bin/busybox sh
# /init of the test guest (testing/guest/build_guest.py): mounts the usual
# file systems, loads the modules of /etc/modules, brings up the network
# (10.0.2.15; the host's loopback is 10.0.2.2 through qemu's user network),
# mounts /opt (build_guest.py's opt.img) when attached,
# runs /test.sh and prints "@@EXIT <status>" on the console for
# run_guest.py, then powers off.
/bin/busybox mkdir -p /usr/sbin
/bin/busybox --install -s
export PATH=/bin:/sbin:/usr/bin:/usr/sbin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mkdir -p /dev/pts /dev/shm
mount -t tmpfs tmp /tmp
for m in $(cat /etc/modules); do
  insmod "/lib/modules/$m.ko" 2>/dev/null || echo "init: insmod $m failed" >&2
done
# build_guest.py's opt.img (ztier and fio), when run_guest.py attached it.
if [ -b /dev/vda ]; then
  mkdir -p /opt && mount -t ext4 -o ro,noload /dev/vda /opt &&
    export PATH=$PATH:/opt/bin
fi
ip link set lo up
ip link set eth0 up && ip addr add 10.0.2.15/24 dev eth0 &&
  ip route add default via 10.0.2.2
stty -F /dev/ttyS1 raw -echo 2>/dev/null
echo "@@BOOTED $(uname -r)"
rc=1
if [ -x /test.sh ]; then
  cd /work && /bin/sh /test.sh
  rc=$?
else
  echo "init: no /test.sh" >&2
fi
sync
echo "@@EXIT $rc"
poweroff -f
