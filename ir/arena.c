/* One bump arena per kernel: every node of a kernel comes from here and is
 * released in one call, so builder error paths never leak. */
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"

typedef struct tk_chunk {
    struct tk_chunk *next;
    size_t used, cap;
    _Alignas(16) unsigned char data[];
} tk_chunk;

struct tk_arena {
    tk_chunk *head;
};

enum { TK_CHUNK_MIN = 64 * 1024 };

tk_arena *tk_arena_new(void) { return calloc(1, sizeof(tk_arena)); }

void tk_arena_free(tk_arena *a) {
    if (!a) return;
    for (tk_chunk *c = a->head, *n; c; c = n) {
        n = c->next;
        free(c);
    }
    free(a);
}

void *tk_arena_alloc(tk_arena *a, size_t n) {
    n = (n + 15) & ~(size_t)15;
    tk_chunk *c = a->head;
    if (!c || c->cap - c->used < n) {
        size_t cap = n > TK_CHUNK_MIN ? n : TK_CHUNK_MIN;
        c = malloc(sizeof(tk_chunk) + cap);
        if (!c) return NULL;
        c->used = 0;
        c->cap = cap;
        c->next = a->head;
        a->head = c;
    }
    void *p = c->data + c->used;
    c->used += n;
    memset(p, 0, n);
    return p;
}

char *tk_arena_strdup(tk_arena *a, const char *s) {
    size_t n = strlen(s) + 1;
    char *d = tk_arena_alloc(a, n);
    if (d) memcpy(d, s, n);
    return d;
}
