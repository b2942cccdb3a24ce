/* --profile: where a step's time goes, kernel call by kernel call. Each call
 * is followed by a device sync and charged the wall time since the previous
 * mark (its launch and its run), under its label; labels repeat across
 * layers, so a row is one kind of call summed over the model. The syncs
 * cost a few microseconds each and keep launches from overlapping, so the
 * table's total exceeds an unprofiled step's time: read it for shares, and
 * the progress lines for speed. The library has no timing events (a sync
 * and the host clock are what it offers), hence this way. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpt.h"

#define PROF_ROWS 96

struct gpt_prof {
    int active, steps;
    double last; /* ms, the host clock at the previous mark */
    int n;
    struct {
        char what[64];
        double ms;
        long calls;
    } row[PROF_ROWS];
};

static double clock_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

gpt_prof *gpt_prof_create(void) {
    gpt_prof *p = gpt_malloc(sizeof *p);
    if (p) memset(p, 0, sizeof *p);
    return p;
}

void gpt_prof_destroy(gpt_prof *p) { free(p); }

int gpt_prof_begin(gpt_model *m) {
    tk_status s = tk_gpu_sync(m->ctx);
    if (s) return gpt_tk_fail(m->ctx, s, "tk_gpu_sync (profile)");
    m->prof->active = 1, m->prof->steps++, m->prof->last = clock_ms();
    return 0;
}

void gpt_prof_end(gpt_model *m) { m->prof->active = 0; }

int gpt_prof_mark(gpt_model *m, const char *what) {
    gpt_prof *p = m->prof;
    if (!p || !p->active) return 0;
    tk_status s = tk_gpu_sync(m->ctx);
    if (s) return gpt_tk_fail(m->ctx, s, what);
    double now = clock_ms();
    if (p->n == PROF_ROWS) what = "(other calls)"; /* the last row, once the rest are taken */
    int i = 0;
    while (i < p->n && strcmp(p->row[i].what, what)) i++;
    if (i == p->n) {
        if (p->n == PROF_ROWS - 1) what = "(other calls)";
        snprintf(p->row[p->n++].what, sizeof p->row[0].what, "%s", what);
    }
    p->row[i].ms += now - p->last, p->row[i].calls++, p->last = now;
    return 0;
}

static int by_time(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b; /* a row's ms: largest first */
    return (x < y) - (x > y);
}

void gpt_prof_print(const gpt_prof *p, FILE *f) {
    if (!p->steps) return;
    struct {
        double ms; /* first: by_time compares it */
        int i;
    } order[PROF_ROWS];
    double total = 0;
    for (int i = 0; i < p->n; i++)
        order[i].ms = p->row[i].ms, order[i].i = i, total += p->row[i].ms;
    qsort(order, (size_t)p->n, sizeof order[0], by_time);
    fprintf(f, "profile over %d steps (a device sync after every call; see prof.c)\n", p->steps);
    fprintf(f, "| call | per step | ms/step | us/call | share |\n|---|---|---|---|---|\n");
    for (int k = 0; k < p->n; k++) {
        int i = order[k].i;
        double ms = p->row[i].ms / p->steps;
        fprintf(f, "| %s | %.0f | %.3f | %.1f | %.1f%% |\n", p->row[i].what,
                (double)p->row[i].calls / p->steps, ms, 1e3 * p->row[i].ms / p->row[i].calls,
                100 * p->row[i].ms / total);
    }
    fprintf(f, "| total | | %.3f | | |\n", total / p->steps);
}
