/* File: testing/install/consumer_c.c
 *
 * A C99 program built by install_test.sh against an installed libztier, with
 * `pkg-config --cflags --libs --static ztier` only: maps a 1 MiB region
 * (ztier/region_c.h), writes a pattern that differs per page, pages it all
 * out, checks that pages were compressed away (zswpout), reads every byte
 * back through faults and compares. Exit status 0 when the data round-trips,
 * 1 on any failure, 77 when userfaultfd is not usable here (as
 * src/uffd/region_c_test.c, which this follows).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <ztier/region_c.h>

#define PAGE 4096u
#define PAGES 256u

static unsigned char Pattern(size_t p, size_t i) {
  static const char kText[] = "installed libztier, C consumer, page ";
  if (i < 8) return (unsigned char)(p >> (8 * i));
  return (unsigned char)kText[(i + p) % (sizeof kText - 1)];
}

int main(void) {
  ztier_region_options o;
  ztier_region* r = NULL;
  ztier_region_stats s;
  char err[512];
  unsigned char* p;
  size_t page, i, bad = 0;
  int rc;

  ztier_region_options_init(&o);
  o.size = (size_t)PAGES * PAGE;
  o.codec = "zstd";
  rc = ztier_region_create(&o, &r, err, sizeof err);
  if (rc == -ENOTSUP || rc == -EPERM) {
    printf("skip: userfaultfd unavailable: %s\n", err);
    return 77;
  }
  if (rc != 0) {
    fprintf(stderr, "ztier_region_create: %d: %s\n", rc, err);
    return 1;
  }
  p = (unsigned char*)ztier_region_data(r);
  for (page = 0; page < PAGES; ++page) {
    for (i = 0; i < PAGE; ++i) p[page * PAGE + i] = Pattern(page, i);
  }
  if (ztier_region_pageout(r, p, ztier_region_size(r)) != 0 ||
      ztier_region_get_stats(r, &s) != 0) {
    fprintf(stderr, "pageout or stats failed\n");
    return 1;
  }
  if (s.zswpout == 0 || s.resident_pages >= PAGES) {
    fprintf(stderr, "nothing was paged out: zswpout %llu resident %llu\n",
            (unsigned long long)s.zswpout,
            (unsigned long long)s.resident_pages);
    return 1;
  }
  for (page = 0; page < PAGES; ++page) {
    for (i = 0; i < PAGE; ++i) {
      if (p[page * PAGE + i] != Pattern(page, i)) {
        ++bad;
        break;
      }
    }
  }
  if (ztier_region_get_stats(r, &s) != 0 || s.zswpin == 0) {
    fprintf(stderr, "no page came back from the pool (zswpin 0)\n");
    return 1;
  }
  ztier_region_destroy(r);
  if (bad != 0) {
    fprintf(stderr, "%zu of %u pages differ after the round trip\n", bad,
            PAGES);
    return 1;
  }
  printf("ok: %u pages paged out (zswpout %llu) and read back (zswpin %llu)\n",
         PAGES, (unsigned long long)s.zswpout, (unsigned long long)s.zswpin);
  return 0;
}
