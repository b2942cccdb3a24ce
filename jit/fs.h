/* Small POSIX file helpers shared by ptxas.c and cache_disk.c. */
#ifndef TK_JIT_FS_H
#define TK_JIT_FS_H

#include <stddef.h>

/* Full read/write with EINTR and short-transfer handling: 0 or -1 (errno). */
int tk_write_all(int fd, const void *buf, size_t n);
int tk_read_all(int fd, void *buf, size_t n); /* -1 with errno 0: early EOF */
/* Whole file into a malloc'd buffer: 0 or -1 (errno). */
int tk_read_file(const char *path, void **data, size_t *n);
/* mkdir -p with mode 0700 for created components: 0 or -1 (errno). */
int tk_mkdirs(const char *path);
/* $TMPDIR, else /tmp. */
const char *tk_tmpdir(void);

#endif
