#!/bin/sh
# tools/bench/remote_writeback.sh: `ztier bench writeback --backing` across
# a veth link, as root. Makes two network namespaces joined by a veth pair
# (10.231.1.1 and .2, inside them only), runs `nbdkit memory` on the
# "remote" one and the benchmark on the other, then removes them.
#
#   tools/bench/remote_writeback.sh ZTIER [bench writeback FLAGS...]
#
# e.g. `tools/bench/remote_writeback.sh build/ztier bench writeback --size
# 1G --runs 5`; --backing is added. Without arguments after ZTIER: `bench
# writeback --size 1G --runs 3`.
set -eu
if [ $# -lt 1 ]; then
  echo "usage: $0 ZTIER [bench writeback FLAGS...]" >&2
  exit 2
fi
if [ "$(id -u)" != 0 ]; then
  echo "$0: needs root (ip netns add, a veth pair)" >&2
  exit 1
fi
ztier=$1
shift
[ $# -gt 0 ] || set -- bench writeback --size 1G --runs 3
r=ztbench-r$$ l=ztbench-l$$
cleanup() {
  [ -n "${nbdkit:-}" ] && kill "$nbdkit" 2>/dev/null || true
  ip netns del "$r" 2>/dev/null || true
  ip netns del "$l" 2>/dev/null || true
}
trap cleanup EXIT INT TERM
ip netns add "$r"
ip netns add "$l"
ip link add ztbl$$ netns "$l" type veth peer name ztbr$$ netns "$r"
ip -n "$r" addr add 10.231.1.1/24 dev ztbr$$
ip -n "$l" addr add 10.231.1.2/24 dev ztbl$$
for n in "$r" "$l"; do ip -n "$n" link set lo up; done
ip -n "$r" link set ztbr$$ up
ip -n "$l" link set ztbl$$ up
# The export holds SIZE + 4096 bytes: 2 GiB covers any --size up to 2G.
ip netns exec "$r" nbdkit -f --ipaddr 10.231.1.1 --port 10809 memory 2G &
nbdkit=$!
for _ in $(seq 100); do
  ip netns exec "$l" nbdinfo --size nbd://10.231.1.1/ >/dev/null 2>&1 && break
  sleep 0.1
done
ip netns exec "$l" "$ztier" "$@" --backing nbd://10.231.1.1/
