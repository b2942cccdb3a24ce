/* A per-run scratch directory for tests that write files (disk cache,
 * ptxas temporaries): made with mkdtemp under $TMPDIR (or /tmp) and
 * removed, with everything below it, when the program ends. */
#ifndef TK_TEST_TMPDIR_H
#define TK_TEST_TMPDIR_H

#include <stddef.h>

/* Makes <$TMPDIR or /tmp>/tk-test-<tag>-XXXXXX into root (n bytes).
 * Returns 0, or -1 after printing why (the caller's main then fails). */
int tu_tmpdir_make(char *root, size_t n, const char *tag);
/* Removes root and everything below it. */
void tu_tmpdir_remove(const char *root);
/* dir/name into buf; test paths are short, so a cut path aborts. */
void tu_join(char *buf, size_t n, const char *dir, const char *name);
/* Points TK_CACHE_DIR at <root>/default-cache, so that contexts the tests
 * create never write to the user's cache. */
void tu_set_cache_dir(const char *root);

#endif
