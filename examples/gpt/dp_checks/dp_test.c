/* dp.c without NCCL or a GPU (ctest gpt_dp_test): the loader's messages
 * when NCCL is missing or is not NCCL, gpt_dp_launch with one rank in this
 * process, gpt_dp_fork with ranks as processes (the id reaches each, a
 * failure is reported by rank and stops the others, SIGKILL follows a
 * SIGTERM a rank ignores), a one-rank communicator without NCCL (sums are
 * no-ops) and gpt_dp_open's argument checks. Where NCCL or a GPU does exist
 * the cases that need their absence say so and are skipped. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dp.h"

static int failures;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            failures++;                                                                            \
            printf("FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                                 \
            printf(__VA_ARGS__);                                                                   \
            printf("\n");                                                                          \
        }                                                                                          \
    } while (0)

static void expect_text(const char *msg, const char *text) {
    CHECK(strstr(msg, text) != NULL, "\"%s\" lacks \"%s\"", msg, text);
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* ---- Loading NCCL ------------------------------------------------------------ */
static int probe_nothing(int rank, int nranks, const void *uid, void *arg) { return 0; }

static void nccl_missing(void) {
    char err[1024] = "", info[256] = "";
    setenv("GPT_NCCL_LIB", "/nonexistent/libnccl.so.2", 1);
    CHECK(gpt_dp_nccl_load(info, sizeof info, err, sizeof err) != 0, "loaded: %s", info);
    expect_text(err, "no NCCL: GPT_NCCL_LIB=/nonexistent/libnccl.so.2 does not load: ");
    unsigned char uid[GPT_DP_UID_BYTES];
    CHECK(gpt_dp_unique_id(uid, err, sizeof err) != 0, "an id without NCCL");
    expect_text(err, "GPT_NCCL_LIB=/nonexistent");
    /* a library that is not NCCL is named and let go */
    setenv("GPT_NCCL_LIB", "libm.so.6", 1);
    CHECK(gpt_dp_nccl_load(NULL, 0, err, sizeof err) != 0, "libm taken for NCCL");
    expect_text(err, "no NCCL: libm.so.6 has no ncclGetVersion (not NCCL 2.x?)");
    unsetenv("GPT_NCCL_LIB");
    if (gpt_dp_nccl_load(info, sizeof info, err, sizeof err) == 0) {
        printf("the search's message not checked: this machine has %s\n", info);
        return;
    }
    expect_text(err, "no NCCL: libnccl.so.2 is not on the loader's path");
    expect_text(err, "install PyTorch or nvidia-nccl-cu12/cu13, or set GPT_NCCL_LIB to the file");
    /* several ranks need NCCL: refused before any process is made */
    CHECK(gpt_dp_launch(2, probe_nothing, NULL, err, sizeof err) != 0, "launched without NCCL");
    expect_text(err, "no NCCL");
    printf("NCCL missing: %s\n", err);
}

/* ---- Ranks ---------------------------------------------------------------------- */
typedef struct probe {
    int fd;                              /* ranks write their number here   */
    unsigned char uid[GPT_DP_UID_BYTES]; /* what each must receive          */
    int bad_rank, bad_rc;                /* this rank returns bad_rc (-9: SIGKILL) */
    int any_uid;                         /* uid unknown: only not all zero  */
    int hang;                            /* the others wait a minute ...    */
    int ignore_term;                     /* ... ignoring SIGTERM            */
    int ran;                             /* in-process only                 */
} probe;

/* A peer stuck in a collective whose partner died. */
static int hang_rank(void) {
    for (int i = 0; i < 600; i++) usleep(100000);
    return 8;
}

static int probe_rank(int rank, int nranks, const void *uid, void *arg) {
    probe *p = arg;
    if (p->ignore_term) signal(SIGTERM, SIG_IGN); /* before it reports in */
    if (p->fd >= 0) {
        unsigned char b = (unsigned char)rank;
        if (write(p->fd, &b, 1) != 1) return 9;
    }
    if (rank == p->bad_rank) {
        usleep(300000); /* the others are under way */
        if (p->bad_rc == -9) raise(SIGKILL);
        return p->bad_rc;
    }
    if (p->hang) return hang_rank();
    if (p->any_uid) {
        unsigned char zero[GPT_DP_UID_BYTES] = {0};
        if (!uid || memcmp(uid, zero, sizeof zero) == 0) return 7;
    } else if (uid && memcmp(uid, p->uid, GPT_DP_UID_BYTES) != 0) {
        return 7;
    }
    p->ran++;
    return rank < nranks ? 0 : 6;
}

static void in_process(void) {
    char err[512] = "";
    probe p = {.fd = -1, .bad_rank = -1};
    CHECK(gpt_dp_launch(1, probe_rank, &p, err, sizeof err) == 0, "%s", err);
    CHECK(p.ran == 1, "ran %d times", p.ran); /* here, not in a child */
    p.bad_rank = 0, p.bad_rc = 5;
    CHECK(gpt_dp_launch(1, probe_rank, &p, err, sizeof err) == 5, "%s", err);
    expect_text(err, "rank 0 of 1 (in this process) failed: returned 5");
    CHECK(gpt_dp_launch(0, probe_rank, &p, err, sizeof err) != 0, "0 ranks");
    expect_text(err, "gpt_dp_launch: nranks < 1");
}

/* Runs n ranks through gpt_dp_fork; the ranks that reported, as a bitmask. */
static int forked(probe *p, int n, int *rc, char *err, size_t errlen) {
    int fds[2];
    if (pipe(fds) != 0) return -1;
    p->fd = fds[1];
    for (int i = 0; i < GPT_DP_UID_BYTES; i++) p->uid[i] = (unsigned char)(i * 7 + 1);
    *rc = gpt_dp_fork(n, probe_rank, p, p->uid, err, errlen);
    close(fds[1]);
    int seen = 0;
    unsigned char b;
    while (read(fds[0], &b, 1) == 1) seen |= 1 << b;
    close(fds[0]);
    return seen;
}

/* Where NCCL is installed (a GPU is not needed for this): real ids, and
 * gpt_dp_launch's ranks as processes, which here use neither. */
static void launch_with_nccl(void) {
    char err[512] = "";
    unsigned char a[GPT_DP_UID_BYTES], b[GPT_DP_UID_BYTES];
    if (gpt_dp_nccl_load(NULL, 0, err, sizeof err) != 0) {
        printf("gpt_dp_launch of 2 ranks not run: %s\n", err);
        return;
    }
    CHECK(gpt_dp_unique_id(a, err, sizeof err) == 0, "%s", err);
    CHECK(gpt_dp_unique_id(b, err, sizeof err) == 0, "%s", err);
    CHECK(memcmp(a, b, sizeof a) != 0, "two ids alike");
    CHECK(gpt_dp_unique_id(NULL, err, sizeof err) != 0, "NULL uid");
    int fds[2];
    CHECK(pipe(fds) == 0, "pipe");
    probe p = {.fd = fds[1], .bad_rank = -1, .any_uid = 1};
    CHECK(gpt_dp_launch(2, probe_rank, &p, err, sizeof err) == 0, "%s", err);
    close(fds[1]);
    int seen = 0;
    unsigned char r;
    while (read(fds[0], &r, 1) == 1) seen |= 1 << r;
    close(fds[0]);
    CHECK(seen == 3, "ranks seen 0x%x", seen);
}

static void ranks_succeed(void) {
    char err[512] = "";
    probe p = {.bad_rank = -1};
    int rc, seen = forked(&p, 3, &rc, err, sizeof err);
    CHECK(rc == 0, "%s", err);
    CHECK(seen == 7, "ranks seen 0x%x", seen);
    CHECK(p.ran == 0, "a rank ran in the launcher");
}

static void rank_fails_others_stopped(void) {
    char err[512] = "";
    probe p = {.bad_rank = 1, .bad_rc = 3, .hang = 1};
    double t0 = now_s();
    int rc, seen = forked(&p, 2, &rc, err, sizeof err);
    double took = now_s() - t0;
    CHECK(rc != 0 && seen == 3, "rc %d seen 0x%x", rc, seen);
    expect_text(err, "rank 1 of 2 failed: exit status 3; the other ranks were stopped");
    CHECK(took < 2.5, "rank 0 stopped after %.1f s: SIGTERM should end it at once", took);
    /* a negative return is still a failure (255), never a success */
    p.bad_rc = -1;
    forked(&p, 2, &rc, err, sizeof err);
    expect_text(err, "rank 1 of 2 failed: exit status 255");
}

static void rank_killed_peer_stubborn(void) {
    char err[512] = "";
    probe p = {.bad_rank = 0, .bad_rc = -9, .hang = 1, .ignore_term = 1};
    double t0 = now_s();
    int rc, seen = forked(&p, 3, &rc, err, sizeof err);
    double took = now_s() - t0;
    CHECK(rc != 0 && seen == 7, "rc %d seen 0x%x", rc, seen);
    expect_text(err, "rank 0 of 3 failed: killed by signal 9");
    /* SIGTERM ignored: SIGKILL 3 s later, not the ranks' minute */
    CHECK(took > 2.5 && took < 20.0, "took %.1f s", took);
    printf("a killed rank: %s (%.1f s)\n", err, took);
}

/* ---- Communicators ----------------------------------------------------------------- */
static void one_rank_without_nccl(void) {
    char err[512] = "";
    gpt_dp *dp = NULL;
    float buf[4] = {1, 2, 3, 4};
    CHECK(gpt_dp_open(&dp, 0, 1, NULL, err, sizeof err) == 0, "%s", err);
    CHECK(gpt_dp_allreduce(dp, buf, 4, NULL) == 0, "%s", gpt_dp_error(dp));
    CHECK(gpt_dp_bucket_ready(dp, buf, 4, NULL) == 0, "%s", gpt_dp_error(dp));
    CHECK(gpt_dp_bucket_ready(dp, NULL, 0, NULL) == 0, "%s", gpt_dp_error(dp));
    CHECK(gpt_dp_finish(dp, NULL) == 0, "%s", gpt_dp_error(dp));
    CHECK(buf[0] == 1 && buf[3] == 4, "one rank changed the buffer");
    CHECK(strcmp(gpt_dp_error(dp), "") == 0, "%s", gpt_dp_error(dp));
    gpt_dp_close(dp);
    gpt_dp_close(NULL);
    CHECK(gpt_dp_allreduce(NULL, buf, 4, NULL) != 0, "NULL communicator");
}

static void open_checks(void) {
    char err[512] = "";
    gpt_dp *dp = (gpt_dp *)err;
    unsigned char uid[GPT_DP_UID_BYTES] = {0};
    CHECK(gpt_dp_open(NULL, 0, 1, NULL, err, sizeof err) != 0, "NULL out");
    expect_text(err, "gpt_dp_open: out is NULL");
    CHECK(gpt_dp_open(&dp, 2, 2, uid, err, sizeof err) != 0 && !dp, "rank 2 of 2");
    expect_text(err, "gpt_dp_open: rank 2 of 2");
    CHECK(gpt_dp_open(&dp, 0, 2, NULL, err, sizeof err) != 0, "no id");
    expect_text(err, "gpt_dp_open: 2 ranks need the communicator's id");
    /* with an id the communicator needs NCCL and a GPU: the first missing
       one's message, nothing made (with both, it is gpt_dp_check's part) */
    int nccl = gpt_dp_nccl_load(NULL, 0, err, sizeof err) == 0, n = 0;
    int gpu = gpt_dp_device_count(&n, err, sizeof err) == 0 && n > 0;
    if (nccl && gpu) return;
    CHECK(gpt_dp_open(&dp, 0, 1, uid, err, sizeof err) != 0 && !dp, "opened");
    expect_text(err, nccl ? "rank 0: no CUDA driver" : "rank 0: no NCCL");
    printf("gpt_dp_open with an id: %s\n", err);
}

static void device_count(void) {
    char err[512] = "";
    int n = -1;
    if (gpt_dp_device_count(&n, err, sizeof err) == 0) {
        printf("GPUs: %d\n", n);
        CHECK(n >= 0, "%d GPUs", n);
    } else {
        printf("no GPU count: %s\n", err);
        expect_text(err, "counting GPUs: ");
        CHECK(n == 0, "n %d after a failure", n);
    }
    CHECK(gpt_dp_device_count(NULL, err, sizeof err) != 0, "NULL n");
}

int main(void) {
    nccl_missing();
    in_process();
    launch_with_nccl();
    ranks_succeed();
    rank_fails_others_stopped();
    rank_killed_peer_stubborn();
    one_rank_without_nccl();
    open_checks();
    device_count();
    printf("%s: %d failure(s)\n", failures ? "FAIL" : "PASS", failures);
    return failures ? 1 : 0;
}
