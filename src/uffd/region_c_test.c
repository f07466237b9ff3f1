/* File: src/uffd/region_c_test.c
 *
 * Test of the C interface (ztier/region_c.h), compiled as C99: creates a
 * region, writes a pattern, pages it all out, checks that pages were stored
 * (zswpout > 0), reads it back through faults and checks every byte, then
 * destroys the region. Also the argument checks. Exit status 0 on success,
 * 1 on any failure; prints "skip" and exits 0 when userfaultfd is not
 * usable here.
 */
#undef NDEBUG /* Keep the test strong in builds without assertions. */
#define _POSIX_C_SOURCE 200809L /* fork, waitpid under C99 */

#include "ztier/region_c.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#define PAGE 4096u
#define PAGES 256u /* 1 MiB */

static int failures = 0;

#define CHECK(cond)                                                            \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      ++failures;                                                              \
    }                                                                          \
  } while (0)

/* Byte i of page p: compressible text-like data that differs per page, so
 * a page returned in the wrong place is caught. */
static unsigned char Pattern(size_t p, size_t i) {
  static const char kText[] = "ztier region from C: page ";
  if (i < 8) return (unsigned char)(p >> (8 * i));
  return (unsigned char)kText[(i + p) % (sizeof kText - 1)];
}

static void CheckArguments(void) {
  ztier_region_options o;
  ztier_region* r = (ztier_region*)&o; /* must be overwritten with NULL */
  char err[128];
  ztier_region_stats s;

  ztier_region_options_init(&o);
  CHECK(o.size == 0 && o.budget == 0 && o.codec == NULL);
  CHECK(o.max_pool_percent == 20 && o.accept_threshold_percent == 90);
  CHECK(o.page_cluster == 0 && o.batch_stores == 1);

  CHECK(ztier_region_create(NULL, &r, err, sizeof err) == -EINVAL);
  CHECK(r == NULL);
  CHECK(err[0] != '\0');
  CHECK(ztier_region_create(&o, NULL, err, sizeof err) == -EINVAL);
  /* size 0 is an error that names the option. */
  r = (ztier_region*)&o;
  CHECK(ztier_region_create(&o, &r, err, sizeof err) == -EINVAL);
  CHECK(r == NULL);
  CHECK(strlen(err) > 0 && strlen(err) < sizeof err);
  /* A short err buffer is truncated and stays terminated. */
  CHECK(ztier_region_create(&o, &r, err, 4) == -EINVAL);
  CHECK(strlen(err) == 3);
  CHECK(ztier_region_create(&o, &r, NULL, 0) == -EINVAL);

  CHECK(ztier_region_data(NULL) == NULL);
  CHECK(ztier_region_size(NULL) == 0);
  CHECK(ztier_region_pageout(NULL, NULL, 0) == -EINVAL);
  CHECK(ztier_region_get_stats(NULL, &s) == -EINVAL);
  ztier_region_destroy(NULL);
}

int main(void) {
  ztier_region_options o;
  ztier_region* r = NULL;
  ztier_region_stats s;
  char err[512];
  unsigned char* p;
  size_t page, i, bad_pages = 0;
  int rc;

  CheckArguments();

  ztier_region_options_init(&o);
  o.size = (size_t)PAGES * PAGE;
  o.codec = "lz4";
  rc = ztier_region_create(&o, &r, err, sizeof err);
  if (rc == -ENOTSUP || rc == -EPERM) {
    printf("skip: userfaultfd unavailable: %s\n", err);
    return failures == 0 ? 77 : 1; /* 77: ctest's SKIP_RETURN_CODE */
  }
  if (rc != 0) {
    fprintf(stderr, "ztier_region_create: %d (%s): %s\n", rc, strerror(-rc),
            err);
    return 1;
  }
  CHECK(err[0] == '\0');
  CHECK(ztier_region_size(r) == (size_t)PAGES * PAGE);
  p = (unsigned char*)ztier_region_data(r);
  CHECK(p != NULL && ((uintptr_t)p % PAGE) == 0);

  for (page = 0; page < PAGES; ++page) {
    for (i = 0; i < PAGE; ++i) p[page * PAGE + i] = Pattern(page, i);
  }
  CHECK(ztier_region_get_stats(r, &s) == 0);
  CHECK(s.resident_pages == PAGES);

  CHECK(ztier_region_pageout(r, p, ztier_region_size(r)) == 0);
  CHECK(ztier_region_get_stats(r, &s) == 0);
  CHECK(s.zswpout > 0);
  CHECK(s.stored_pages > 0);
  CHECK(s.resident_pages < PAGES);
  printf("after pageout: zswpout %llu stored %llu resident %llu\n",
         (unsigned long long)s.zswpout, (unsigned long long)s.stored_pages,
         (unsigned long long)s.resident_pages);
  /* A range outside the region. */
  CHECK(ztier_region_pageout(r, p + ztier_region_size(r), PAGE) == -ERANGE);

  for (page = 0; page < PAGES; ++page) {
    for (i = 0; i < PAGE; ++i) {
      if (p[page * PAGE + i] != Pattern(page, i)) {
        if (bad_pages < 5) {
          fprintf(stderr, "page %zu byte %zu: got 0x%02x want 0x%02x\n", page,
                  i, p[page * PAGE + i], Pattern(page, i));
        }
        ++bad_pages;
        break;
      }
    }
  }
  CHECK(bad_pages == 0);
  CHECK(ztier_region_get_stats(r, &s) == 0);
  CHECK(s.zswpin > 0);
  CHECK(s.faults > 0);
  CHECK(s.resident_pages == PAGES);
  printf("after read back: zswpin %llu faults %llu resident %llu\n",
         (unsigned long long)s.zswpin, (unsigned long long)s.faults,
         (unsigned long long)s.resident_pages);

  /* Discard: the first page reads as zeros; the others keep their data. */
  CHECK(ztier_region_discard(NULL, p, PAGE) == -EINVAL);
  CHECK(ztier_region_discard(r, p + 1, PAGE) == -EINVAL);
  CHECK(ztier_region_discard(r, p, PAGE) == 0);
  for (i = 0; i < PAGE; ++i) {
    if (p[i] != 0) {
      fprintf(stderr, "discarded page byte %zu: 0x%02x\n", i, p[i]);
      ++failures;
      break;
    }
  }
  CHECK(p[PAGE] == Pattern(1, 0));

  /* A fork()ed child may not use the region (ztier/region.h): "an
   * operation this process may not do", -EPERM, not a bad argument. */
  {
    int status = 0;
    const pid_t child = fork();
    if (child == 0) {
      const int pageout = ztier_region_pageout(r, p, PAGE);
      const int discard = ztier_region_discard(r, p, PAGE);
      _exit(pageout == -EPERM && discard == -EPERM ? 0 : 1);
    }
    CHECK(child > 0);
    if (child > 0) {
      CHECK(waitpid(child, &status, 0) == child);
      CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
  }

  ztier_region_destroy(r);
  if (failures != 0) {
    fprintf(stderr, "%d check(s) failed\n", failures);
    return 1;
  }
  printf("ok\n");
  return 0;
}
