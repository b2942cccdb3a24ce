#define _GNU_SOURCE /* nftw's FTW_PHYS */
#include "util/tmpdir.h"

#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

int tu_tmpdir_make(char *root, size_t n, const char *tag) {
    const char *tmp = getenv("TMPDIR");
    int len = snprintf(root, n, "%s/tk-test-%s-XXXXXX", tmp && *tmp ? tmp : "/tmp", tag);
    if (len < 0 || (size_t)len >= n) {
        fprintf(stderr, "tk-test-%s: TMPDIR path too long\n", tag);
        return -1;
    }
    if (!mkdtemp(root)) {
        perror("mkdtemp");
        return -1;
    }
    return 0;
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f) {
    (void)st, (void)flag, (void)f;
    return remove(p);
}

void tu_tmpdir_remove(const char *root) { nftw(root, rm_one, 16, FTW_DEPTH | FTW_PHYS); }

void tu_join(char *buf, size_t n, const char *dir, const char *name) {
    if ((size_t)snprintf(buf, n, "%s/%s", dir, name) >= n) abort();
}

void tu_set_cache_dir(const char *root) {
    char dir[PATH_MAX];
    tu_join(dir, sizeof dir, root, "default-cache");
    setenv("TK_CACHE_DIR", dir, 1);
}
