/* gpt-train: the command line, the training loop (a progress line per step,
 * validation, checkpoints), sampling, and the float64 check
 * (examples/gpt/README.md). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dp.h"
#include "gpt.h"

#define H100_PEAK   989e12  /* bf16 dense FLOP/s of an H100 / H200 (SXM) */
#define INTERP_ARCH "sm_80" /* the interpreter's faster plan (README.md) */

typedef struct opts {
    gpt_config cfg;
    int cfg_given, seed_given;
    int B, T; /* rows per process, sequence length (0: T_max) */
    int64_t steps, stop_at, warmup, save_every, val_every;
    double lr, temp;
    uint64_t seed;
    const char **data;
    int ndata, val_batches, sample, check, interp, quiet, gpus, profile, split_k;
    int dp_overlap, nccl; /* the all-reduce's overlap with the backward; NCCL on one GPU */
    int prep_threads;     /* the startup's compile threads (0: one a core)               */
    int64_t max_bytes;
    const char *save, *load, *dump, *prompt, *arch;
    const char *precompile; /* --backend interp: a cache directory ptxas fills for --arch */
    int arch_given;
} opts;

typedef struct run {
    opts o;
    tk_ctx *ctx;
    gpt_model m;
    gpt_data data;
    gpt_ckpt_state st; /* seed, steps done, the data generator */
    int32_t *host_tok; /* [2, B, T]: tokens, then targets */
    double peak;       /* FLOP/s per device for the MFU; 0: n/a */
    /* data parallel (dp.h): this process's rank of nranks, its
     * communicator (NULL: none; opened in open_device when uid is set) */
    int rank, nranks;
    const void *uid; /* NCCL's id (gpt_dp_launch, or --nccl's), NULL: no NCCL */
    gpt_dp *dp;
} run;

static void usage(FILE *f) {
    fprintf(f,
            "usage: gpt-train [options]\n"
            "  --preset tiny|small|124m   the model (default tiny); -L -H -C -T override its\n"
            "                             layers, heads, width, context (T_max)\n"
            "  --batch B --seq T          rows per step and process (4), their length (T_max)\n"
            "  --steps N                  the schedule's length (20): train to step N\n"
            "  --stop-at K                stop after step K < N, as an interrupted run would\n"
            "  --lr X --warmup W          peak learning rate (6e-4), warmup (min(20, N/10))\n"
            "  --seed S                   init and data order (1337)\n"
            "  --data PATH, or PATH       a file or a directory (its .h files); repeatable\n"
            "                             (default /usr/include)\n"
            "  --max-bytes N              at most N bytes of data (64 MiB)\n"
            "  --val-every K --val-batches V  validation every K steps (0: at the end only)\n"
            "                             over V batches (8)\n"
            "  --save FILE --save-every K  checkpoint at the end and every K steps\n"
            "  --load FILE                resume (the config comes from FILE)\n"
            "  --sample N --temp X --prompt STR  N bytes from the model after training\n"
            "  --dump-grads FILE          step 1's gradients and loss, raw f32\n"
            "  --check                    the first batch's gradients vs a float64 reference\n"
            "  --backend gpu|interp       the GPU (default) or the CPU interpreter\n"
            "  --arch ARCH                the GPU the interpreter plans for (" INTERP_ARCH ")\n"
            "  --precompile DIR           with --backend interp: every kernel the run readies\n"
            "                             also compiled for ARCH by ptxas into DIR, which a\n"
            "                             GPU machine with the same ptxas loads as its\n"
            "                             TK_CACHE_DIR with no compile (--steps 0: start-up only)\n"
            "  --gpus N                   data parallel over GPUs 0 .. N-1, one process\n"
            "                             each (NCCL); --batch is rows per GPU (1)\n"
            "  --dp-overlap 0|1           sum each layer's gradients over the GPUs while\n"
            "                             the backward goes on (1, default), or all of\n"
            "                             them after it (0)\n"
            "  --nccl                     with one GPU, sum through a one-rank NCCL\n"
            "                             communicator anyway (checks that path)\n"
            "  --quiet                    no progress lines\n"
            "  --profile                  each kernel call's time per step (syncs after\n"
            "                             every call; steps 2 ..)\n"
            "  --split-k S                the GEMMs' split over K: 0 the library's choice\n"
            "                             (default), 1 never, 2 .. 64 always\n"
            "  --prepare-threads N        threads compiling the kernels at startup: 0 one\n"
            "                             a core (default, at most 16), 1 .. 16\n");
}

/* ---- The command line ---------------------------------------------------------- */
static int num(const char *opt, const char *s, double lo, double hi, double *out) {
    char *end;
    double v = strtod(s, &end);
    if (*s && !*end && v >= lo && v <= hi) {
        *out = v;
        return 0;
    }
    fprintf(stderr, "gpt-train: %s '%s': expected a number in %g .. %g\n", opt, s, lo, hi);
    return 1;
}

static int integer(const char *opt, const char *s, long long lo, long long hi, long long *out) {
    char *end;
    long long v = strtoll(s, &end, 0);
    if (*s && !*end && v >= lo && v <= hi) {
        *out = v;
        return 0;
    }
    fprintf(stderr, "gpt-train: %s '%s': expected an integer in %lld .. %lld\n", opt, s, lo, hi);
    return 1;
}

/* Options that take an integer: where it goes and its range. */
static int int_option(opts *o, const char *opt, const char *val) {
    static const struct {
        const char *name;
        long long lo, hi;
    } t[] = {{"-L", 1, 1024},
             {"-H", 1, 1024},
             {"-C", 1, 65536},
             {"-T", 1, 1 << 20},
             {"--batch", 1, 1 << 20},
             {"--seq", 1, 1 << 20},
             {"--val-batches", 0, 1 << 20},
             {"--sample", 0, 1 << 24},
             {"--gpus", 1, 64},
             {"--split-k", 0, 64},
             {"--dp-overlap", 0, 1},
             {"--prepare-threads", 0, 16},
             {"--steps", 0, 1ll << 40},
             {"--stop-at", 1, 1ll << 40},
             {"--warmup", 0, 1ll << 40},
             {"--save-every", 0, 1ll << 40},
             {"--val-every", 0, 1ll << 40},
             {"--max-bytes", 1, 1ll << 40}};
    int *narrow[] = {&o->cfg.L, &o->cfg.H,   &o->cfg.C,       &o->cfg.T_max,
                     &o->B,     &o->T,       &o->val_batches, &o->sample,
                     &o->gpus,  &o->split_k, &o->dp_overlap,  &o->prep_threads};
    int64_t *wide[6] = {&o->steps,      &o->stop_at,   &o->warmup,
                        &o->save_every, &o->val_every, &o->max_bytes};
    for (int i = 0; i < (int)(sizeof t / sizeof t[0]); i++) {
        long long v;
        if (strcmp(opt, t[i].name)) continue;
        if (!val) return fprintf(stderr, "gpt-train: %s needs a value\n", opt), 1;
        if (integer(opt, val, t[i].lo, t[i].hi, &v)) return 1;
        int nn = (int)(sizeof narrow / sizeof *narrow);
        if (i < nn)
            *narrow[i] = (int)v;
        else
            *wide[i - nn] = v;
        o->cfg_given |= i < 4;
        return 0;
    }
    return -1; /* not one of them */
}

/* Options with a string value (*used = 1) or none; -1: unknown. */
static int other_option(opts *o, const char *opt, const char *val, int *used) {
    static const char *with_value[] = {"--preset", "--lr",   "--temp",    "--seed",
                                       "--data",   "--save", "--load",    "--dump-grads",
                                       "--prompt", "--arch", "--backend", "--precompile"};
    long long s;
    *used = 0;
    if (!strcmp(opt, "--check")) return o->check = 1, 0;
    if (!strcmp(opt, "--quiet")) return o->quiet = 1, 0;
    if (!strcmp(opt, "--profile")) return o->profile = 1, 0;
    if (!strcmp(opt, "--nccl")) return o->nccl = 1, 0;
    *used = 1;
    for (size_t i = 0; i < sizeof with_value / sizeof *with_value && !val; i++)
        if (!strcmp(opt, with_value[i]))
            return fprintf(stderr, "gpt-train: %s needs a value\n", opt), 1;
    if (!strcmp(opt, "--preset")) return o->cfg_given = 1, gpt_preset(val, &o->cfg);
    if (!strcmp(opt, "--lr")) return num(opt, val, 0, 1, &o->lr);
    if (!strcmp(opt, "--temp")) return num(opt, val, 0, 100, &o->temp);
    if (!strcmp(opt, "--seed")) {
        if (integer(opt, val, 0, 0x7FFFFFFFFFFFFFFFll, &s)) return 1;
        return o->seed = (uint64_t)s, o->seed_given = 1, 0;
    }
    if (!strcmp(opt, "--data")) return o->data[o->ndata++] = val, 0;
    if (!strcmp(opt, "--save")) return o->save = val, 0;
    if (!strcmp(opt, "--load")) return o->load = val, 0;
    if (!strcmp(opt, "--dump-grads")) return o->dump = val, 0;
    if (!strcmp(opt, "--prompt")) return o->prompt = val, 0;
    if (!strcmp(opt, "--arch")) return o->arch = val, o->arch_given = 1, 0;
    if (!strcmp(opt, "--precompile")) return o->precompile = val, 0;
    if (!strcmp(opt, "--backend")) {
        if (strcmp(val, "gpu") && strcmp(val, "interp"))
            return fprintf(stderr, "gpt-train: --backend '%s': gpu or interp\n", val), 1;
        return o->interp = !strcmp(val, "interp"), 0;
    }
    return -1;
}

static int parse(int argc, char **argv, opts *o) {
    gpt_preset("tiny", &o->cfg);
    o->B = 4, o->steps = 20, o->warmup = -1, o->lr = 6e-4, o->seed = 1337, o->temp = 1.0;
    o->val_batches = 8, o->max_bytes = (int64_t)64 << 20, o->prompt = "\n";
    o->arch = INTERP_ARCH, o->gpus = 1, o->dp_overlap = 1;
    if (!(o->data = gpt_malloc((size_t)argc * sizeof *o->data))) return 1;
    for (int i = 1; i < argc; i++) {
        const char *opt = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(opt, "--help") || !strcmp(opt, "-h")) return usage(stdout), 2;
        if (opt[0] != '-') { /* a bare path is data, as --data PATH */
            o->data[o->ndata++] = opt;
            continue;
        }
        int used = 1, r = int_option(o, opt, val);
        if (r < 0) r = other_option(o, opt, val, &used);
        if (r < 0) {
            fprintf(stderr, "gpt-train: unknown option '%s' (--help lists them)\n", opt);
            return 1;
        }
        if (r) return 1;
        i += used;
    }
    if (!o->ndata) o->data[o->ndata++] = "/usr/include";
    if ((o->gpus > 1 || o->nccl) && (o->interp || o->check)) {
        fprintf(stderr, "gpt-train: %s: data parallelism runs on GPUs, without %s\n",
                o->nccl ? "--nccl" : "--gpus N > 1", o->interp ? "--backend interp" : "--check");
        return 1;
    }
    if (o->nccl && o->gpus > 1) {
        fprintf(stderr, "gpt-train: --nccl is for one GPU; --gpus %d uses NCCL already\n", o->gpus);
        return 1;
    }
    if (o->precompile && (!o->interp || !o->arch_given)) {
        fprintf(stderr, "gpt-train: --precompile fills a cache on a machine without a GPU: it "
                        "needs --backend interp and --arch naming the GPU to compile for "
                        "(sm_90a for an H100 or H200)\n");
        return 1;
    }
    return 0;
}

/* The config and state: the checkpoint's when loading (what the command
 * line says must agree), else the command line's. */
static int settle(run *r) {
    opts *o = &r->o;
    r->st = (gpt_ckpt_state){.seed = o->seed, .data_rng = o->seed ^ GPT_DATA_SEED_XOR};
    if (o->load) {
        gpt_config c;
        gpt_ckpt_state st;
        if (gpt_ckpt_peek(o->load, &c, &st)) return 1;
        if (o->cfg_given && memcmp(&c, &o->cfg, sizeof c)) {
            fprintf(stderr,
                    "gpt-train: checkpoint '%s' is L %d H %d C %d T %d; the command line asks "
                    "for L %d H %d C %d T %d\n",
                    o->load, c.L, c.H, c.C, c.T_max, o->cfg.L, o->cfg.H, o->cfg.C, o->cfg.T_max);
            return 1;
        }
        if (o->seed_given && st.seed != o->seed) {
            fprintf(stderr, "gpt-train: checkpoint '%s' has seed %llu; --seed says %llu\n", o->load,
                    (unsigned long long)st.seed, (unsigned long long)o->seed);
            return 1;
        }
        o->cfg = c, r->st = st;
    }
    if (gpt_config_check(&o->cfg, "")) return 1;
    if (!o->T) o->T = o->cfg.T_max;
    if (o->T > o->cfg.T_max) {
        fprintf(stderr, "gpt-train: --seq %d exceeds the model's context T_max %d\n", o->T,
                o->cfg.T_max);
        return 1;
    }
    if (o->dump && (r->st.step != 0 || o->steps < 1)) {
        fprintf(stderr, "gpt-train: --dump-grads writes step 1's gradients: it needs a run "
                        "from step 0 with --steps >= 1\n");
        return 1;
    }
    if (!*o->prompt) {
        fprintf(stderr, "gpt-train: --prompt is empty; sampling needs at least one byte\n");
        return 1;
    }
    if (o->warmup < 0) o->warmup = o->steps / 10 < 20 ? o->steps / 10 : 20;
    return 0;
}

/* ---- Device and model ------------------------------------------------------------ */
static int open_device(run *r) {
    tk_status s = tk_ctx_create(&r->ctx);
    if (s) return fprintf(stderr, "gpt-train: tk_ctx_create: %s\n", tk_status_name(s)), 1;
    if (r->o.interp) {
        const char *pre = r->o.precompile;
        if ((s = tk_ctx_set_backend(r->ctx, TK_BACKEND_INTERP, r->o.arch, 0)))
            return gpt_tk_fail(r->ctx, s, "tk_ctx_set_backend");
        if (pre &&
            ((s = tk_cache_set_dir(r->ctx, pre)) || (s = tk_cache_set_precompile(r->ctx, 1))))
            return gpt_tk_fail(r->ctx, s, "--precompile");
        return 0;
    }
    char arch[16] = "", err[512];
    if ((r->nranks > 1 && (s = tk_gpu_set_device(r->ctx, r->rank))) || (s = tk_gpu_init(r->ctx)) ||
        (s = tk_gpu_arch(r->ctx, arch, sizeof arch))) {
        fprintf(stderr, "gpt-train: rank %d: no GPU: %s (--backend interp runs on the CPU)\n",
                r->rank, tk_ctx_error(r->ctx));
        return 1;
    }
    r->peak = !strncmp(arch, "sm_90", 5) ? H100_PEAK : 0;
    /* NCCL finds the device current: tk_gpu_init made its primary context so */
    if (r->uid && gpt_dp_open(&r->dp, r->rank, r->nranks, r->uid, err, sizeof err))
        return fprintf(stderr, "gpt-train: rank %d: %s\n", r->rank, err), 1;
    return 0;
}

/* Init (SPEC.md) or the checkpoint; the moments zero at init. */
static int load_params(run *r) {
    gpt_model *m = &r->m;
    if (r->o.load) return gpt_ckpt_load(m, r->o.load, &r->st);
    float *host = gpt_malloc(m->lay.n_params * sizeof(float));
    if (!host) return 1;
    gpt_init_params(&m->lay, r->st.seed, host);
    int err = gpt_upload_params(m, host, 0, m->lay.n_params);
    free(host);
    size_t bytes = m->lay.n_params * sizeof(float);
    tk_status s = TK_OK;
    if (!err && !(s = tk_gpu_memset(r->ctx, m->m, 0, bytes)))
        s = tk_gpu_memset(r->ctx, m->v, 0, bytes);
    return err || (s && gpt_tk_fail(r->ctx, s, "tk_gpu_memset (AdamW moments)"));
}

static int upload_batch(run *r, int B, int T) {
    size_t bytes = (size_t)B * T * sizeof(int32_t);
    tk_status s = tk_gpu_upload(r->ctx, r->m.tokens, r->host_tok, bytes);
    if (!s) s = tk_gpu_upload(r->ctx, r->m.targets, r->host_tok + (size_t)B * T, bytes);
    return s ? gpt_tk_fail(r->ctx, s, "tk_gpu_upload (batch)") : 0;
}

static int next_batch(run *r) {
    int B = r->o.B, T = r->o.T;
    gpt_data_batch(&r->data, &r->st.data_rng, B, T, r->rank, r->nranks, r->host_tok,
                   r->host_tok + (size_t)B * T);
    return upload_batch(r, B, T);
}

static int read_scalars(run *r, float out[2]) {
    tk_status s = tk_gpu_download(r->ctx, out, r->m.scalars, 2 * sizeof(float));
    return s ? gpt_tk_fail(r->ctx, s, "tk_gpu_download (loss)") : 0;
}

/* ---- Training --------------------------------------------------------------------------- */
static double now_ms(void) {
    struct timespec t;
    timespec_get(&t, TIME_UTC);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

static int validate(run *r) {
    int B = r->o.B, T = r->o.T, n = r->o.val_batches;
    double sum = 0;
    for (int i = 0; i < n; i++) {
        float sc[2];
        gpt_data_val_batch(&r->data, i, n, B, T, r->host_tok, r->host_tok + (size_t)B * T);
        if (upload_batch(r, B, T) || gpt_forward(&r->m, B, T, GPT_FWD_LOSS) || read_scalars(r, sc))
            return 1;
        sum += sc[0];
    }
    if (n && r->rank == 0)
        printf("val %lld/%lld | val_loss %.6f\n", (long long)r->st.step, (long long)r->o.steps,
               sum / n);
    return 0;
}

/* One step: batch, forward, backward, [all-reduce], update. out: loss, norm. */
static int step(run *r, int64_t t, float out[2]) {
    gpt_model *m = &r->m;
    int B = r->o.B, T = r->o.T;
    if (next_batch(r) || (m->prof && t > 1 && gpt_prof_begin(m)) ||
        gpt_forward(m, B, T, GPT_FWD_LOSS | GPT_FWD_GRAD) || gpt_backward(m, B, T))
        return 1;
    /* ==== DATA-PARALLEL SEAM =================================================
     * Here each rank holds its rows' share of the global mean's gradient
     * (the loss gradient is scaled by 1 / (B·T·nranks)) and its own mean
     * loss. Their sums over the ranks (dp.c) come before the norm, the
     * clipping and the update, which then agree on every rank. With the
     * overlap the backward has started them range by range (m->dp), and
     * the step's work from here on waits for them. */
    if (r->dp && ((m->dp ? gpt_dp_finish(r->dp, m->stream)
                         : gpt_dp_allreduce(r->dp, m->grads, m->lay.n_params, m->stream)) ||
                  gpt_dp_allreduce(r->dp, m->scalars, 1, m->stream)))
        return fprintf(stderr, "gpt-train: all-reduce: %s\n", gpt_dp_error(r->dp)), 1;
    if (r->dp && gpt_prof_mark(m, "NCCL all-reduce (gradients, loss)")) return 1;
    if (t == 1 && r->o.dump && r->rank == 0) {
        if (read_scalars(r, out) || gpt_dump_grads(m, r->o.dump, out[0] / (float)r->nranks))
            return 1;
        if (!r->o.quiet) printf("gradients of step 1 written to %s\n", r->o.dump);
    }
    double lr = gpt_lr(t, r->o.steps, r->o.warmup, r->o.lr);
    if (gpt_optimizer(m, t, (float)lr) || read_scalars(r, out)) return 1;
    out[0] /= (float)r->nranks; /* the sum of the ranks' means */
    return 0;
}

/* SPEC.md's progress line: global tokens/s, MFU per GPU. */
static void progress(const run *r, int64_t t, const float sc[2], double ms) {
    const opts *o = &r->o;
    double tokens = (double)o->B * o->T, tps = tokens * r->nranks / (ms * 1e-3);
    double flops = 6.0 * (double)r->m.lay.n_params + 12.0 * o->cfg.L * o->T * o->cfg.C;
    char mfu[32] = "n/a";
    if (r->peak > 0) snprintf(mfu, sizeof mfu, "%.1f%%", 100 * flops * tps / r->nranks / r->peak);
    printf("step %lld/%lld | loss %.6f | lr %.3e | norm %.6f | %.1f ms | %.0f tok/s | MFU %s\n",
           (long long)t, (long long)o->steps, (double)sc[0], gpt_lr(t, o->steps, o->warmup, o->lr),
           (double)sc[1], ms, tps, mfu);
    fflush(stdout);
}

static int save(run *r) {
    if (r->rank != 0 || !r->o.save) return 0;
    if (gpt_ckpt_save(&r->m, r->o.save, &r->st)) return 1;
    if (!r->o.quiet) printf("checkpoint %s at step %lld\n", r->o.save, (long long)r->st.step);
    return 0;
}

static int train(run *r) {
    const opts *o = &r->o;
    int64_t last = o->stop_at && o->stop_at < o->steps ? o->stop_at : o->steps;
    while (r->st.step < last) {
        int64_t t = r->st.step + 1;
        float sc[2];
        double t0 = now_ms();
        if (step(r, t, sc)) return 1;
        if (r->m.prof) gpt_prof_end(&r->m);
        r->st.step = t;
        if (!isfinite(sc[0])) {
            fprintf(stderr, "gpt-train: the loss is %f at step %lld\n", (double)sc[0],
                    (long long)t);
            return 1;
        }
        if (!o->quiet && r->rank == 0) progress(r, t, sc, now_ms() - t0);
        if (o->val_every && t % o->val_every == 0 && t < last && validate(r)) return 1;
        if (o->save_every && t % o->save_every == 0 && t < last && save(r)) return 1;
    }
    if (r->m.prof && r->rank == 0) gpt_prof_print(r->m.prof, stdout);
    return validate(r);
}

/* ---- Sampling ---------------------------------------------------------------------------- */
/* The next byte from the last row's logits at temperature temp (0: the
 * most likely). */
static int pick(const uint16_t *logits, int V, double temp, uint64_t *rng) {
    int best = 0;
    for (int v = 1; v < V; v++)
        if (tk_bf16_to_f32(logits[v]) > tk_bf16_to_f32(logits[best])) best = v;
    if (temp <= 0) return best;
    double p[GPT_VOCAB], sum = 0, top = tk_bf16_to_f32(logits[best]);
    for (int v = 0; v < V; v++) sum += p[v] = exp((tk_bf16_to_f32(logits[v]) - top) / temp);
    double u = gpt_rng_uniform(rng) * sum;
    for (int v = 0; v < V; v++)
        if ((u -= p[v]) < 0) return v;
    return best;
}

/* The forward over the whole context (B = 1, up to --seq bytes, the latest
 * kept) for each new byte: the kernels take any T. */
static int sample(run *r) {
    gpt_model *m = &r->m;
    int cap = r->o.T, V = m->cfg.V, n = 0;
    uint64_t rng = r->st.seed ^ GPT_SAMPLE_SEED_XOR;
    uint16_t logits[GPT_VOCAB];
    size_t plen = strlen(r->o.prompt);
    const char *p = r->o.prompt + (plen > (size_t)cap ? plen - (size_t)cap : 0);
    for (; *p; p++) r->host_tok[n++] = (uint8_t)*p;
    printf("sample (%d bytes, temperature %g):\n%s", r->o.sample, r->o.temp, r->o.prompt);
    for (int k = 0; k < r->o.sample; k++) {
        tk_status s = tk_gpu_upload(r->ctx, m->tokens, r->host_tok, (size_t)n * sizeof(int32_t));
        if (s) return gpt_tk_fail(r->ctx, s, "tk_gpu_upload (sample)");
        if (gpt_forward(m, 1, n, 0)) return 1;
        s = tk_gpu_download(r->ctx, logits, (uint16_t *)m->logits + (size_t)(n - 1) * V,
                            (size_t)V * sizeof(uint16_t));
        if (s) return gpt_tk_fail(r->ctx, s, "tk_gpu_download (sample)");
        int byte = pick(logits, V, r->o.temp, &rng);
        putchar(byte);
        fflush(stdout);
        if (n == cap) memmove(r->host_tok, r->host_tok + 1, (size_t)--n * sizeof(int32_t));
        r->host_tok[n++] = byte;
    }
    printf("\n");
    return 0;
}

/* ---- main ---------------------------------------------------------------------------------- */
static int setup(run *r) {
    opts *o = &r->o;
    int steps = r->st.step < o->steps, data = steps || o->check;
    if (data && (gpt_data_load(&r->data, o->data, o->ndata, (size_t)o->max_bytes) ||
                 gpt_data_check(&r->data, o->T, o->val_batches)))
        return 1;
    if (!(r->host_tok = gpt_malloc((size_t)2 * o->B * o->T * sizeof(int32_t)))) return 1;
    if (open_device(r) || gpt_model_create(r->ctx, &o->cfg, o->B, o->T, &r->m)) return 1;
    r->m.nranks = r->nranks, r->m.split_k = o->split_k, r->m.prep_threads = o->prep_threads;
    r->m.dp = o->dp_overlap ? r->dp : NULL;
    if (o->profile && !(r->m.prof = gpt_prof_create())) return 1;
    if (gpt_model_prepare(&r->m) || load_params(r)) return 1;
    tk_cache_stats st; /* what the kernels came from: compiles, the disk cache */
    tk_cache_stats_get(r->ctx, &st);
    if (!o->quiet && r->rank == 0)
        printf("gpt-train: L %d H %d C %d T_max %d, %zu parameters; batch %d x %d on %s%s; "
               "data %zu bytes (train %zu, val %zu); step %lld of %lld; kernels ready in %.0f ms "
               "(%d prepare calls on %d threads; %llu compiled, %llu from disk)\n",
               o->cfg.L, o->cfg.H, o->cfg.C, o->cfg.T_max, r->m.lay.n_params, o->B, o->T,
               o->interp ? "the interpreter as " : "the GPU", o->interp ? o->arch : "", r->data.n,
               r->data.n_train, r->data.n_val, (long long)r->st.step, (long long)o->steps,
               r->m.prep_ms, r->m.prep_calls, r->m.prep_used, (unsigned long long)st.misses,
               (unsigned long long)st.disk_hits);
    return 0;
}

static int check(run *r) {
    uint64_t rng = r->st.data_rng; /* the next step's batch, the state untouched */
    int B = r->o.B, T = r->o.T;
    gpt_data_batch(&r->data, &rng, B, T, r->rank, r->nranks, r->host_tok,
                   r->host_tok + (size_t)B * T);
    return upload_batch(r, B, T) || gpt_check(&r->m, B, T, 1e-2);
}

/* Everything one process does after the command line: rank r->rank of
 * r->nranks (data parallel: a rank's child of dp.h's gpt_dp_launch sets
 * them and r->dp, and selects its GPU before open_device), and its cleanup. */
static int run_rank(run *r) {
    int err = settle(r) || setup(r);
    int steps = !err && r->st.step < r->o.steps;
    if (!err && r->o.check)
        err = check(r);
    else if (!err)
        err = (steps && train(r)) || save(r) || (r->o.sample && r->rank == 0 && sample(r));
    gpt_dp_close(r->dp);
    if (r->ctx) {
        gpt_model_destroy(&r->m);
        tk_ctx_destroy(r->ctx);
    }
    gpt_data_free(&r->data);
    free(r->host_tok);
    return err;
}

/* One rank of --gpus N, in a process of its own (dp.h): the parsed
 * options, its rank and NCCL's id. */
static int rank_main(int rank, int nranks, const void *uid, void *arg) {
    run r = {.o = *(const opts *)arg, .rank = rank, .nranks = nranks, .uid = uid};
    return run_rank(&r);
}

int main(int argc, char **argv) {
    run r = {.rank = 0, .nranks = 1};
    char why[512];
    unsigned char uid[GPT_DP_UID_BYTES];
    int err = parse(argc, argv, &r.o);
    if (!err && r.o.gpus == 1 && r.o.nccl) { /* a one-rank communicator, in this process */
        err = gpt_dp_nccl_load(NULL, 0, why, sizeof why) || gpt_dp_unique_id(uid, why, sizeof why);
        if (err) fprintf(stderr, "gpt-train: --nccl: %s\n", why);
        r.uid = err ? NULL : uid;
    }
    if (!err && r.o.gpus == 1) err = run_rank(&r);
    if (!err && r.o.gpus > 1 && gpt_dp_launch(r.o.gpus, rank_main, &r.o, why, sizeof why)) {
        fprintf(stderr, "gpt-train: --gpus %d: %s\n", r.o.gpus, why);
        err = 1;
    }
    free(r.o.data);
    return err == 1 ? 1 : 0; /* 2: --help */
}
