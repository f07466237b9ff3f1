/* zeroout: zeroes a byte range of a block device with the BLKZEROOUT
 * ioctl, which the kernel sends as REQ_OP_WRITE_ZEROES where the device
 * takes it (busybox's blkdiscard has no -z).
 *
 *   zeroout DEVICE OFFSET LENGTH     (bytes, multiples of 512)
 *
 * Exit status 0 on success, 1 with the error on stderr. */
#include <fcntl.h>
#include <linux/fs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <sys/ioctl.h>
#include <unistd.h>

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: zeroout DEVICE OFFSET LENGTH\n");
    return 2;
  }
  int fd = open(argv[1], O_WRONLY);
  if (fd < 0) {
    fprintf(stderr, "zeroout: %s: %s\n", argv[1], strerror(errno));
    return 1;
  }
  uint64_t range[2] = {strtoull(argv[2], NULL, 0), strtoull(argv[3], NULL, 0)};
  if (ioctl(fd, BLKZEROOUT, range) != 0) {
    fprintf(stderr, "zeroout: BLKZEROOUT %s %llu+%llu: %s\n", argv[1],
            (unsigned long long)range[0], (unsigned long long)range[1],
            strerror(errno));
    return 1;
  }
  close(fd);
  return 0;
}
