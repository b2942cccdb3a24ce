/* SPEC.md's data: byte tokens of the named files (a directory: its .h files,
 * recursively, in strcmp order, symlinks skipped), capped at max_bytes, a
 * 90/10 train/validation split, the training sampler (rank-aware: every
 * rank draws every row and keeps its own) and the fixed validation rows. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "gpt.h"

typedef struct reader {
    gpt_data *d;
    size_t cap, max;
} reader;

static int full(const reader *r) { return r->d->n >= r->max; }

/* Appends the file's bytes, up to the cap. */
static int add_file(reader *r, const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "gpt-train: cannot read data file '%s': %s\n", path, strerror(errno));
        return 1;
    }
    int err = 0;
    while (!full(r) && !err) {
        if (r->d->n == r->cap) {
            size_t cap = r->cap ? 2 * r->cap : 1 << 20;
            cap = cap > r->max ? r->max : cap;
            uint8_t *p = realloc(r->d->bytes, cap);
            if (!p) {
                fprintf(stderr, "gpt-train: out of memory reading the data (%zu bytes)\n", cap);
                err = 1;
                break;
            }
            r->d->bytes = p, r->cap = cap;
        }
        size_t got = fread(r->d->bytes + r->d->n, 1, r->cap - r->d->n, f);
        r->d->n += got;
        if (got == 0) break;
    }
    if (!err && ferror(f)) {
        fprintf(stderr, "gpt-train: error reading data file '%s'\n", path);
        err = 1;
    }
    fclose(f);
    return err;
}

static int by_name(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int ends_with_h(const char *name) {
    size_t n = strlen(name);
    return n >= 2 && !strcmp(name + n - 2, ".h");
}

/* The directory's names, sorted; *count of them. */
static char **list_dir(const char *dir, size_t *count) {
    DIR *dp = opendir(dir);
    if (!dp) {
        fprintf(stderr, "gpt-train: cannot read data directory '%s': %s\n", dir, strerror(errno));
        return NULL;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    int err = 0;
    for (struct dirent *e; !err && (e = readdir(dp));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        if (n == cap) {
            char **p = realloc(names, (cap = cap ? 2 * cap : 64) * sizeof *names);
            if (!p)
                err = 1;
            else
                names = p;
        }
        if (!err && !(names[n] = malloc(strlen(e->d_name) + 1))) err = 1;
        if (!err) strcpy(names[n++], e->d_name);
    }
    closedir(dp);
    if (err) fprintf(stderr, "gpt-train: out of memory listing '%s'\n", dir);
    if (!err) qsort(names, n, sizeof *names, by_name);
    *count = n;
    if (err) {
        for (size_t i = 0; i < n; i++) free(names[i]);
        free(names);
        return NULL;
    }
    return names ? names : calloc(1, sizeof *names);
}

static int walk(reader *r, const char *dir) {
    size_t n = 0;
    char **names = list_dir(dir, &n);
    if (!names) return 1;
    int err = 0;
    for (size_t i = 0; i < n && !err && !full(r); i++) {
        size_t len = strlen(dir) + strlen(names[i]) + 2;
        char *path = gpt_malloc(len);
        struct stat st;
        if (!path) {
            err = 1;
            break;
        }
        snprintf(path, len, "%s/%s", dir, names[i]);
        /* lstat: a symlink is neither a directory nor a regular file here */
        if (lstat(path, &st)) {
            fprintf(stderr, "gpt-train: cannot stat '%s': %s\n", path, strerror(errno));
            err = 1;
        } else if (S_ISDIR(st.st_mode)) {
            err = walk(r, path);
        } else if (S_ISREG(st.st_mode) && ends_with_h(names[i])) {
            err = add_file(r, path);
        }
        free(path);
    }
    for (size_t i = 0; i < n; i++) free(names[i]);
    free(names);
    return err;
}

int gpt_data_load(gpt_data *d, const char *const *paths, int npaths, size_t max_bytes) {
    *d = (gpt_data){0};
    reader r = {.d = d, .max = max_bytes};
    int err = 0;
    for (int i = 0; i < npaths && !err && !full(&r); i++) {
        struct stat st;
        if (stat(paths[i], &st)) {
            fprintf(stderr, "gpt-train: cannot open data '%s': %s\n", paths[i], strerror(errno));
            err = 1;
        } else if (S_ISDIR(st.st_mode)) {
            err = walk(&r, paths[i]);
        } else if (S_ISREG(st.st_mode)) {
            err = add_file(&r, paths[i]);
        } else {
            fprintf(stderr, "gpt-train: data '%s' is neither a file nor a directory\n", paths[i]);
            err = 1;
        }
    }
    if (!err && d->n == 0) {
        fprintf(stderr, "gpt-train: no data: the files named hold 0 bytes%s\n",
                npaths ? " (a directory gives only its .h files)" : "");
        err = 1;
    }
    if (err) {
        gpt_data_free(d);
        return 1;
    }
    d->n_train = d->n * 9 / 10; /* floor(0.9 n), exactly */
    d->n_val = d->n - d->n_train;
    return 0;
}

void gpt_data_free(gpt_data *d) {
    free(d->bytes);
    *d = (gpt_data){0};
}

int gpt_data_check(const gpt_data *d, int T, int val_batches) {
    /* a row is T + 1 bytes inside its split */
    if (d->n_train >= (size_t)T + 1 && (val_batches == 0 || d->n_val >= (size_t)T + 1)) return 0;
    fprintf(stderr,
            "gpt-train: the data is too small: %zu bytes (train %zu, validation %zu), and a row "
            "of --seq %d needs %d bytes in each split; name more data (--data, --max-bytes) or "
            "a shorter --seq\n",
            d->n, d->n_train, d->n_val, T, T + 1);
    return 1;
}

static void fill_row(const uint8_t *src, int T, int32_t *tokens, int32_t *targets) {
    for (int t = 0; t < T; t++) tokens[t] = src[t], targets[t] = src[t + 1];
}

void gpt_data_batch(const gpt_data *d, uint64_t *rng, int B, int T, int rank, int nranks,
                    int32_t *tokens, int32_t *targets) {
    uint64_t span = (uint64_t)(d->n_train - (size_t)T);
    /* global row r·B + b: drawn by every rank, in order, kept by rank r */
    for (int r = 0; r < nranks; r++)
        for (int b = 0; b < B; b++) {
            uint64_t off = gpt_rng_next(rng) % span;
            if (r == rank)
                fill_row(d->bytes + off, T, tokens + (size_t)b * T, targets + (size_t)b * T);
        }
}

void gpt_data_val_batch(const gpt_data *d, int i, int nbatches, int B, int T, int32_t *tokens,
                        int32_t *targets) {
    uint64_t last = (uint64_t)nbatches * (uint64_t)B - 1, span = d->n_val - (size_t)T - 1;
    for (int b = 0; b < B; b++) {
        uint64_t row = (uint64_t)i * (uint64_t)B + (uint64_t)b;
        uint64_t off = last ? row * span / last : 0;
        fill_row(d->bytes + d->n_train + off, T, tokens + (size_t)b * T, targets + (size_t)b * T);
    }
}
