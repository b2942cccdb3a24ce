/* Checkpoints and the gradient dump in SPEC.md's formats. Both are written
 * to FILE.tmp and renamed over FILE only once complete, so a failed save
 * (full disk, a device error) leaves the old FILE as it was. Device
 * buffers stream through a host chunk: a 124M model's 1.5 GB of params, m
 * and v never sit in host memory at once. Little-endian hosts (x86-64,
 * aarch64): the f32 arrays are written as they are in memory. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "gpt.h"

#define HEADER_BYTES 72
#define VERSION      1
#define CHUNK        ((size_t)1 << 20) /* floats per transfer */

static const uint8_t MAGIC[8] = {'T', 'K', 'G', 'P', 'T', 0, 0, 1};

/* A file with the FNV-1a 64 hash of every byte that went through it. */
typedef struct hfile {
    FILE *f;
    const char *path;
    uint64_t hash;
} hfile;

static void fnv(uint64_t *h, const void *p, size_t n) {
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++) *h = (*h ^ b[i]) * 0x100000001B3ull;
}

static int put(hfile *w, const void *p, size_t n) {
    fnv(&w->hash, p, n);
    if (fwrite(p, 1, n, w->f) == n) return 0;
    fprintf(stderr, "gpt-train: cannot write '%s': %s\n", w->path, strerror(errno));
    return 1;
}

static int get(hfile *r, void *p, size_t n) {
    if (fread(p, 1, n, r->f) != n) {
        fprintf(stderr, "gpt-train: checkpoint '%s' is truncated\n", r->path);
        return 1;
    }
    fnv(&r->hash, p, n);
    return 0;
}

static void le32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> 8 * i);
}
static void le64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> 8 * i);
}
static uint32_t rd32(const uint8_t *p) {
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) v |= (uint32_t)p[i] << 8 * i;
    return v;
}
static uint64_t rd64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << 8 * i;
    return v;
}

static void header(uint8_t h[HEADER_BYTES], const gpt_config *c, const gpt_ckpt_state *st,
                   uint64_t n) {
    const int32_t cfg[6] = {c->L, c->H, c->C, c->T_max, c->V, 0};
    memcpy(h, MAGIC, 8);
    le32(h + 8, VERSION), le32(h + 12, HEADER_BYTES);
    for (int i = 0; i < 6; i++) le32(h + 16 + 4 * i, (uint32_t)cfg[i]);
    le64(h + 40, st->seed), le64(h + 48, (uint64_t)st->step), le64(h + 56, st->data_rng);
    le64(h + 64, n);
}

/* ---- Writing: FILE.tmp, renamed when complete -------------------------------- */
static int open_tmp(hfile *w, const char *path, char **tmp) {
    size_t len = strlen(path) + 5;
    if (!(*tmp = gpt_malloc(len))) return 1;
    snprintf(*tmp, len, "%s.tmp", path);
    *w = (hfile){.f = fopen(*tmp, "wb"), .path = *tmp, .hash = 0xCBF29CE484222325ull};
    if (w->f) return 0;
    fprintf(stderr, "gpt-train: cannot write '%s': %s\n", *tmp, strerror(errno));
    free(*tmp);
    return 1;
}

/* Closes w; renames it over path when err is 0, else removes it. */
static int close_tmp(hfile *w, char *tmp, const char *path, int err) {
    if (fclose(w->f) && !err) {
        fprintf(stderr, "gpt-train: cannot write '%s': %s\n", tmp, strerror(errno));
        err = 1;
    }
    if (!err && rename(tmp, path)) {
        fprintf(stderr, "gpt-train: cannot rename '%s' to '%s': %s\n", tmp, path, strerror(errno));
        err = 1;
    }
    if (err) remove(tmp);
    free(tmp);
    return err;
}

/* n floats of device memory through the host chunk buf. */
static int put_device(hfile *w, gpt_model *m, const float *dev, size_t n, float *buf) {
    for (size_t i = 0; i < n; i += CHUNK) {
        size_t k = n - i < CHUNK ? n - i : CHUNK;
        tk_status s = tk_gpu_download(m->ctx, buf, dev + i, k * sizeof(float));
        if (s) return gpt_tk_fail(m->ctx, s, "tk_gpu_download (checkpoint)");
        if (put(w, buf, k * sizeof(float))) return 1;
    }
    return 0;
}

int gpt_ckpt_save(gpt_model *m, const char *path, const gpt_ckpt_state *st) {
    hfile w;
    char *tmp;
    float *buf = gpt_malloc(CHUNK * sizeof(float));
    if (!buf || open_tmp(&w, path, &tmp)) {
        free(buf);
        return 1;
    }
    uint8_t h[HEADER_BYTES], sum[8];
    size_t n = m->lay.n_params;
    header(h, &m->cfg, st, n);
    int err = put(&w, h, sizeof h) || put_device(&w, m, m->params, n, buf) ||
              put_device(&w, m, m->m, n, buf) || put_device(&w, m, m->v, n, buf);
    le64(sum, w.hash);
    err = err || put(&w, sum, sizeof sum);
    free(buf);
    return close_tmp(&w, tmp, path, err);
}

int gpt_dump_grads(gpt_model *m, const char *path, float loss) {
    hfile w;
    char *tmp;
    float *buf = gpt_malloc(CHUNK * sizeof(float));
    if (!buf || open_tmp(&w, path, &tmp)) {
        free(buf);
        return 1;
    }
    int err = put_device(&w, m, m->grads, m->lay.n_params, buf) || put(&w, &loss, sizeof loss);
    free(buf);
    return close_tmp(&w, tmp, path, err);
}

/* ---- Reading: every check before the first byte is used ------------------------- */
static int bad(const char *path, const char *why) {
    fprintf(stderr, "gpt-train: checkpoint '%s' %s\n", path, why);
    return 1;
}

/* The header's fields, checked against each other and the file's size. */
static int parse(const uint8_t h[HEADER_BYTES], const char *path, long long size, gpt_config *c,
                 gpt_ckpt_state *st) {
    char why[160];
    if (memcmp(h, MAGIC, 8)) return bad(path, "is not a gpt-train checkpoint (bad magic)");
    if (rd32(h + 8) != VERSION || rd32(h + 12) != HEADER_BYTES) {
        snprintf(why, sizeof why,
                 "has version %u and a %u-byte header; this program reads "
                 "version %d, %d bytes",
                 rd32(h + 8), rd32(h + 12), VERSION, HEADER_BYTES);
        return bad(path, why);
    }
    *c = (gpt_config){(int32_t)rd32(h + 16), (int32_t)rd32(h + 20), (int32_t)rd32(h + 24),
                      (int32_t)rd32(h + 28), (int32_t)rd32(h + 32)};
    snprintf(why, sizeof why, "checkpoint '%s': ", path);
    if (rd32(h + 36)) return bad(path, "has a nonzero pad field (a corrupt header)");
    if (gpt_config_check(c, why)) return 1;
    *st = (gpt_ckpt_state){rd64(h + 40), (int64_t)rd64(h + 48), rd64(h + 56)};
    gpt_layout lay;
    if (gpt_layout_init(&lay, c)) return 1;
    uint64_t n = rd64(h + 64), want = lay.n_params;
    gpt_layout_free(&lay);
    if (n != want || st->step < 0) {
        snprintf(why, sizeof why, "holds %llu parameters at step %lld; its config has %llu",
                 (unsigned long long)n, (long long)st->step, (unsigned long long)want);
        return bad(path, why);
    }
    long long expect = HEADER_BYTES + 12 * (long long)n + 8;
    if (size != expect) {
        snprintf(why, sizeof why, "is %lld bytes; its header says %lld (truncated or padded)", size,
                 expect);
        return bad(path, why);
    }
    return 0;
}

static int open_ckpt(hfile *r, const char *path, uint8_t h[HEADER_BYTES], gpt_config *c,
                     gpt_ckpt_state *st) {
    struct stat sb;
    *r = (hfile){.f = fopen(path, "rb"), .path = path, .hash = 0xCBF29CE484222325ull};
    if (!r->f || fstat(fileno(r->f), &sb)) {
        fprintf(stderr, "gpt-train: cannot read checkpoint '%s': %s\n", path, strerror(errno));
        if (r->f) fclose(r->f);
        return 1;
    }
    if (get(r, h, HEADER_BYTES) || parse(h, path, (long long)sb.st_size, c, st)) {
        fclose(r->f);
        return 1;
    }
    return 0;
}

int gpt_ckpt_peek(const char *path, gpt_config *c, gpt_ckpt_state *st) {
    hfile r;
    uint8_t h[HEADER_BYTES];
    if (open_ckpt(&r, path, h, c, st)) return 1;
    fclose(r.f);
    return 0;
}

/* n floats from the file into the device at dev (and the bf16 copy for the
 * parameters). */
static int get_device(hfile *r, gpt_model *m, float *dev, size_t n, float *buf) {
    for (size_t i = 0; i < n; i += CHUNK) {
        size_t k = n - i < CHUNK ? n - i : CHUNK;
        if (get(r, buf, k * sizeof(float))) return 1;
        if (dev == m->params) {
            if (gpt_upload_params(m, buf, i, k)) return 1;
            continue;
        }
        tk_status s = tk_gpu_upload(m->ctx, dev + i, buf, k * sizeof(float));
        if (s) return gpt_tk_fail(m->ctx, s, "tk_gpu_upload (checkpoint)");
    }
    return 0;
}

int gpt_ckpt_load(gpt_model *m, const char *path, gpt_ckpt_state *st) {
    hfile r;
    uint8_t h[HEADER_BYTES], sum[8];
    gpt_config c;
    if (open_ckpt(&r, path, h, &c, st)) return 1;
    if (memcmp(&c, &m->cfg, sizeof c)) {
        fclose(r.f);
        return bad(path, "holds another config than the model's");
    }
    float *buf = gpt_malloc(CHUNK * sizeof(float));
    size_t n = m->lay.n_params;
    int err = !buf || get_device(&r, m, m->params, n, buf) || get_device(&r, m, m->m, n, buf) ||
              get_device(&r, m, m->v, n, buf);
    uint64_t hash = r.hash; /* of every byte before the checksum */
    err = err || get(&r, sum, sizeof sum);
    if (!err && rd64(sum) != hash) err = bad(path, "fails its checksum (a corrupt file)");
    free(buf);
    fclose(r.f);
    return err;
}
