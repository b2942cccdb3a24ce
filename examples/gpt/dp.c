/* Data parallelism for gpt-train (dp.h): NCCL and the few CUDA driver calls
 * it needs, both loaded with dlopen, and one process per GPU made by fork.
 *
 * Why fork and not threads: each rank is a whole trainer with its own
 * TileKittens context, and one process per GPU is what NCCL and the CUDA
 * driver are tuned for. The launcher never starts CUDA itself, since a
 * process forked after cuInit cannot use the GPU.
 *
 * Why this file loads libcuda.so.1 too: the overlap of the sums with the
 * backward needs a second stream and events, which TileKittens does not
 * offer (it launches on the caller's stream). The driver is the one
 * TileKittens already loaded, and the calls act on the context it made
 * current, so the stream and events live on the rank's GPU. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* dladdr, RTLD_NOLOAD, strsignal */
#endif
#include "dp.h"

#include <dlfcn.h>
#include <errno.h>
#include <glob.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---- Messages -------------------------------------------------------------- */
/* Formats into err (if any room) and returns -1, the module's failure. */
static int fail(char *err, size_t errlen, const char *fmt, ...) {
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

/* Resolves symbols into a table of function pointers: names[i] goes to the
 * field at offs[i] (memcpy: ISO C has no object-to-function pointer cast).
 * Optional names are those after `required`. The first required name
 * missing, or NULL. */
static const char *resolve(void *dl, void *table, const char *const *names, const size_t *offs,
                           size_t n, size_t required) {
    for (size_t i = 0; i < n; i++) {
        void *p = dlsym(dl, names[i]);
        if (!p && i < required) return names[i];
        memcpy((char *)table + offs[i], &p, sizeof p);
    }
    return NULL;
}

/* ---- NCCL's ABI (nccl.h, declared here: nothing of NCCL at build time) ----- */
/* The values are NCCL's (src/nccl.h.in): ncclSuccess 0, ncclFloat32 7,
 * ncclSum 0; the id is 128 bytes (NCCL_UNIQUE_ID_BYTES) passed by value. */
typedef int nccl_result; /* ncclResult_t */
enum { NCCL_SUCCESS = 0, NCCL_FLOAT32 = 7, NCCL_SUM = 0 };
typedef struct nccl_uid {
    char internal[GPT_DP_UID_BYTES];
} nccl_uid;
typedef struct nccl_comm *nccl_comm_t; /* ncclComm_t: opaque */

typedef struct nccl_api {
    nccl_result (*get_version)(int *);
    nccl_result (*get_unique_id)(nccl_uid *);
    nccl_result (*comm_init_rank)(nccl_comm_t *, int, nccl_uid, int);
    nccl_result (*comm_destroy)(nccl_comm_t);
    nccl_result (*comm_abort)(nccl_comm_t);
    nccl_result (*all_reduce)(const void *, void *, size_t, int, int, nccl_comm_t, void *);
    const char *(*error_string)(nccl_result);
    const char *(*last_error)(nccl_comm_t); /* optional: NCCL 2.13 and later */
} nccl_api;

#define NCCL_FIELD(f) offsetof(nccl_api, f)
static const char *const nccl_names[] = {
    "ncclGetVersion", "ncclGetUniqueId", "ncclCommInitRank",   "ncclCommDestroy",
    "ncclCommAbort",  "ncclAllReduce",   "ncclGetErrorString", "ncclGetLastError",
};
static const size_t nccl_offs[] = {
    NCCL_FIELD(get_version),  NCCL_FIELD(get_unique_id), NCCL_FIELD(comm_init_rank),
    NCCL_FIELD(comm_destroy), NCCL_FIELD(comm_abort),    NCCL_FIELD(all_reduce),
    NCCL_FIELD(error_string), NCCL_FIELD(last_error),
};
#define NCCL_COUNT    (sizeof nccl_offs / sizeof nccl_offs[0])
#define NCCL_REQUIRED 7 /* all but ncclGetLastError */
_Static_assert(sizeof nccl_names / sizeof nccl_names[0] == NCCL_COUNT, "one field per name");

/* Loaded once per process and never unloaded: NCCL starts threads that run
 * inside it for the process's life (the id's rendezvous in the launcher,
 * its RAS thread in a rank, which it also registers with atexit). A forked
 * rank inherits the loaded library with the rest of the process. */
static pthread_mutex_t nccl_lock = PTHREAD_MUTEX_INITIALIZER;
static nccl_api nccl;
static bool nccl_loaded;
static char nccl_info[400];

/* ---- Finding libnccl.so.2 ----------------------------------------------------- */
#define NCCL_WHEEL "nvidia/nccl/lib/libnccl.so.2"

/* The first file matching pattern that loads, or NULL; a match that does
 * not load is remembered in bad (the likelier fault than none at all). */
static void *nccl_glob(const char *pattern, char *bad, size_t badlen) {
    glob_t g;
    void *dl = NULL;
    if (glob(pattern, 0, NULL, &g) != 0) return NULL;
    for (size_t i = g.gl_pathc; i-- > 0 && !dl;) { /* highest python3.N first */
        dl = dlopen(g.gl_pathv[i], RTLD_NOW | RTLD_LOCAL);
        if (!dl) snprintf(bad, badlen, "; %.200s does not load: %.200s", g.gl_pathv[i], dlerror());
    }
    globfree(&g);
    return dl;
}

/* pip's places: a virtual environment, the user's, the system's, images
 * that keep one under /opt (PyTorch's there), conda. */
static void *nccl_wheels(char *bad, size_t badlen) {
    const char *venv = getenv("VIRTUAL_ENV"), *home = getenv("HOME");
    const char *fixed[] = {
        "/usr/local/lib/python3*/dist-packages/" NCCL_WHEEL,
        "/usr/local/lib/python3*/site-packages/" NCCL_WHEEL,
        "/usr/lib/python3/dist-packages/" NCCL_WHEEL,
        "/usr/lib/python3*/site-packages/" NCCL_WHEEL,
        "/opt/*/.venv/lib/python3*/site-packages/" NCCL_WHEEL,
        "/opt/conda/lib/python3*/site-packages/" NCCL_WHEEL,
    };
    char pat[1024];
    void *dl = NULL;
    if (venv && snprintf(pat, sizeof pat, "%s/lib/python3*/site-packages/" NCCL_WHEEL, venv) <
                    (int)sizeof pat)
        dl = nccl_glob(pat, bad, badlen);
    if (!dl && home &&
        snprintf(pat, sizeof pat, "%s/.local/lib/python3*/site-packages/" NCCL_WHEEL, home) <
            (int)sizeof pat)
        dl = nccl_glob(pat, bad, badlen);
    for (size_t i = 0; !dl && i < sizeof fixed / sizeof fixed[0]; i++)
        dl = nccl_glob(fixed[i], bad, badlen);
    return dl;
}

static void *nccl_open(char *err, size_t errlen) {
    const char *env = getenv("GPT_NCCL_LIB");
    if (env && *env) {
        void *dl = dlopen(env, RTLD_NOW | RTLD_LOCAL);
        if (!dl) fail(err, errlen, "no NCCL: GPT_NCCL_LIB=%s does not load: %s", env, dlerror());
        return dl;
    }
    void *dl = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (dl) return dl;
    char why[300], bad[600] = "";
    snprintf(why, sizeof why, "%s", dlerror());
    if ((dl = nccl_wheels(bad, sizeof bad))) return dl;
    fail(err, errlen,
         "no NCCL: libnccl.so.2 is not on the loader's path (%s) nor in pip's " NCCL_WHEEL
         " under $VIRTUAL_ENV, ~/.local, /usr/local/lib/python3*, /usr/lib/python3*, "
         "/opt/*/.venv or /opt/conda%s; install PyTorch or nvidia-nccl-cu12/cu13, or set "
         "GPT_NCCL_LIB to the file",
         why, bad);
    return NULL;
}

/* "NCCL 2.27.7 (<path>)": the version NCCL reports (2.9 changed its code's
 * layout), the file it came from. */
static void nccl_describe(void) {
    int code = 0, major, minor, patch;
    nccl.get_version(&code);
    major = code >= 10000 ? code / 10000 : code / 1000;
    minor = code >= 10000 ? code % 10000 / 100 : code % 1000 / 100;
    patch = code % 100;
    Dl_info di;
    void *sym;
    memcpy(&sym, &nccl.get_version, sizeof sym);
    const char *path = dladdr(sym, &di) && di.dli_fname ? di.dli_fname : "?";
    snprintf(nccl_info, sizeof nccl_info, "NCCL %d.%d.%d (%s)", major, minor, patch, path);
}

/* Loads and resolves NCCL into the process's table (the lock held). */
static int nccl_load_locked(char *err, size_t errlen) {
    void *dl = nccl_open(err, errlen);
    if (!dl) return -1;
    const char *missing = resolve(dl, &nccl, nccl_names, nccl_offs, NCCL_COUNT, NCCL_REQUIRED);
    if (missing) { /* not NCCL: none of its code ran, so it may go */
        const char *env = getenv("GPT_NCCL_LIB");
        fail(err, errlen, "no NCCL: %s has no %s (not NCCL 2.x?)",
             env && *env ? env : "the libnccl.so.2 found", missing);
        dlclose(dl);
        return -1;
    }
    nccl_loaded = true;
    nccl_describe();
    return 0;
}

int gpt_dp_nccl_load(char *info, size_t infolen, char *err, size_t errlen) {
    pthread_mutex_lock(&nccl_lock);
    int rc = nccl_loaded ? 0 : nccl_load_locked(err, errlen);
    if (rc == 0 && info && infolen) snprintf(info, infolen, "%s", nccl_info);
    pthread_mutex_unlock(&nccl_lock);
    return rc;
}

/* "ncclX: <NCCL's name for r> (<its last error>)". */
static int nccl_fail(char *err, size_t errlen, const char *call, nccl_result r, nccl_comm_t comm) {
    const char *last = nccl.last_error ? nccl.last_error(comm) : NULL;
    return fail(err, errlen, "%s: %s (ncclResult_t %d)%s%s", call, nccl.error_string(r), r,
                last && *last ? "; " : "", last && *last ? last : "");
}

int gpt_dp_unique_id(void *uid, char *err, size_t errlen) {
    if (!uid) return fail(err, errlen, "gpt_dp_unique_id: uid is NULL");
    if (gpt_dp_nccl_load(NULL, 0, err, errlen)) return -1;
    nccl_uid id;
    nccl_result r = nccl.get_unique_id(&id);
    if (r != NCCL_SUCCESS) return nccl_fail(err, errlen, "ncclGetUniqueId", r, NULL);
    memcpy(uid, id.internal, sizeof id.internal);
    return 0;
}

/* ---- The CUDA driver calls this file makes ------------------------------------ */
typedef int cu_result; /* CUresult: CUDA_SUCCESS 0, CUDA_ERROR_NO_DEVICE 100 */
enum { CU_SUCCESS = 0, CU_NO_DEVICE = 100 };
enum { CU_STREAM_NONBLOCKING = 0x1, CU_EVENT_NO_TIMING = 0x2 }; /* cuda.h's values */

/* cuda.h names the versioned exports: cuStreamDestroy is cuStreamDestroy_v2,
 * and so on; the others have kept their first symbol. */
typedef struct cu_api {
    void *dl;
    cu_result (*init)(unsigned);
    cu_result (*device_count)(int *);
    cu_result (*ctx_current)(void **);
    cu_result (*ctx_device)(int *);
    cu_result (*priority_range)(int *, int *);
    cu_result (*stream_create)(void **, unsigned, int);
    cu_result (*stream_destroy)(void *);
    cu_result (*event_create)(void **, unsigned);
    cu_result (*event_destroy)(void *);
    cu_result (*event_record)(void *, void *);
    cu_result (*stream_wait)(void *, void *, unsigned);
    cu_result (*error_string)(cu_result, const char **);
} cu_api;

#define CU_FIELD(f) offsetof(cu_api, f)
static const char *const cu_names[] = {
    "cuInit",
    "cuDeviceGetCount",
    "cuCtxGetCurrent",
    "cuCtxGetDevice",
    "cuCtxGetStreamPriorityRange",
    "cuStreamCreateWithPriority",
    "cuStreamDestroy_v2",
    "cuEventCreate",
    "cuEventDestroy_v2",
    "cuEventRecord",
    "cuStreamWaitEvent",
    "cuGetErrorString",
};
static const size_t cu_offs[] = {
    CU_FIELD(init),           CU_FIELD(device_count),   CU_FIELD(ctx_current),
    CU_FIELD(ctx_device),     CU_FIELD(priority_range), CU_FIELD(stream_create),
    CU_FIELD(stream_destroy), CU_FIELD(event_create),   CU_FIELD(event_destroy),
    CU_FIELD(event_record),   CU_FIELD(stream_wait),    CU_FIELD(error_string),
};
#define CU_COUNT (sizeof cu_offs / sizeof cu_offs[0])
_Static_assert(sizeof cu_names / sizeof cu_names[0] == CU_COUNT, "one field per name");

static int cu_load(cu_api *cu, char *err, size_t errlen) {
    memset(cu, 0, sizeof *cu);
    cu->dl = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!cu->dl) return fail(err, errlen, "no CUDA driver (%s)", dlerror());
    const char *missing = resolve(cu->dl, cu, cu_names, cu_offs, CU_COUNT, CU_COUNT);
    if (missing) {
        dlclose(cu->dl);
        cu->dl = NULL;
        return fail(err, errlen, "the CUDA driver lacks %s", missing);
    }
    return 0;
}

/* "<call>: <the driver's name for r> (CUresult r)". */
static int cu_fail(const cu_api *cu, char *err, size_t errlen, const char *call, cu_result r) {
    const char *s = NULL;
    if (cu->error_string(r, &s) != CU_SUCCESS || !s) s = "unknown CUDA error";
    return fail(err, errlen, "%s: %s (CUresult %d)", call, s, r);
}

/* Whether this process has started the driver, after which ranks forked
 * from it could not use their GPUs. Loaded is not started (NCCL's runtime
 * may load it), and before cuInit every other call answers
 * CUDA_ERROR_NOT_INITIALIZED without starting anything. */
static bool cuda_started(void) {
    void *dl = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (!dl) return false;
    cu_result (*count)(int *) = NULL;
    void *sym = dlsym(dl, "cuDeviceGetCount");
    int n = 0;
    memcpy(&count, &sym, sizeof sym);
    bool started = count && count(&n) == CU_SUCCESS;
    dlclose(dl);
    return started;
}

/* ---- Counting GPUs in a child --------------------------------------------------- */
/* The child's report: the count (-1: failed), then a message. */
typedef struct count_report {
    int n;
    char msg[300];
} count_report;

_Noreturn static void count_in_child(int fd) {
    count_report rep = {-1, ""};
    cu_api cu;
    if (cu_load(&cu, rep.msg, sizeof rep.msg) == 0) {
        cu_result r = cu.init(0);
        if (r == CU_NO_DEVICE)
            rep.n = 0;
        else if (r != CU_SUCCESS)
            cu_fail(&cu, rep.msg, sizeof rep.msg, "cuInit", r);
        else if ((r = cu.device_count(&rep.n)) != CU_SUCCESS)
            rep.n = -1, cu_fail(&cu, rep.msg, sizeof rep.msg, "cuDeviceGetCount", r);
    }
    ssize_t w = write(fd, &rep, sizeof rep);
    _exit(w == (ssize_t)sizeof rep ? 0 : 1);
}

/* Reads up to n bytes, through interruptions; the count read. */
static size_t read_full(int fd, void *buf, size_t n) {
    size_t got = 0;
    while (got < n) {
        ssize_t k = read(fd, (char *)buf + got, n - got);
        if (k > 0)
            got += (size_t)k;
        else if (k == 0 || errno != EINTR)
            break;
    }
    return got;
}

int gpt_dp_device_count(int *n, char *err, size_t errlen) {
    if (!n) return fail(err, errlen, "gpt_dp_device_count: n is NULL");
    *n = 0;
    int fds[2];
    if (pipe(fds) != 0) return fail(err, errlen, "pipe: %s", strerror(errno));
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        count_in_child(fds[1]);
    }
    int fork_errno = errno;
    close(fds[1]);
    count_report rep = {-1, ""};
    size_t got = pid > 0 ? read_full(fds[0], &rep, sizeof rep) : 0;
    close(fds[0]);
    while (pid > 0 && waitpid(pid, NULL, 0) < 0 && errno == EINTR) continue;
    if (pid < 0) return fail(err, errlen, "counting GPUs: fork: %s", strerror(fork_errno));
    if (got != sizeof rep) return fail(err, errlen, "counting GPUs: the counting process died");
    if (rep.n < 0) return fail(err, errlen, "counting GPUs: %s", rep.msg);
    *n = rep.n;
    return 0;
}

/* ---- Ranks as processes ----------------------------------------------------------- */
/* How ranks are made. Every rank is forked before NCCL has any thread in
 * the launcher: a process forked while another thread holds a lock (NCCL's
 * rendezvous thread logging, say) inherits the lock held forever. So with
 * `sock`, the ranks start first and wait for the id, which the launcher
 * makes afterwards and sends each on its own socket (a socket, not a pipe:
 * a send to a rank already dead fails with EPIPE instead of raising
 * SIGPIPE in the launcher). */
typedef struct spawn {
    int n;
    gpt_dp_child_fn child;
    void *arg;
    const void *uid; /* known before the fork, or NULL: sent on sock[r] */
    int (*sock)[2];  /* per rank: [0] the launcher's end, [1] the rank's */
    pid_t launcher;
} spawn;

/* The id from the launcher's socket into buf; the other ranks' sockets
 * are closed so that each end has one owner. */
static const void *rank_uid(const spawn *sp, int rank, unsigned char *buf) {
    if (!sp->sock) return sp->uid;
    for (int q = 0; q < sp->n; q++) {
        close(sp->sock[q][0]);
        if (q != rank) close(sp->sock[q][1]);
    }
    size_t got = read_full(sp->sock[rank][1], buf, GPT_DP_UID_BYTES);
    close(sp->sock[rank][1]);
    return got == GPT_DP_UID_BYTES ? buf : NULL; /* none: the launcher says why */
}

/* A rank's process: its work, then _exit, not exit: it is a copy of the
 * launcher, whose atexit handlers and static destructors are not its own. */
_Noreturn static void rank_main(const spawn *sp, int rank) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);        /* no orphan left waiting on its peers */
    if (getppid() != sp->launcher) _exit(1); /* the launcher died before prctl */
    unsigned char buf[GPT_DP_UID_BYTES];
    const void *uid = rank_uid(sp, rank, buf);
    if (sp->sock && !uid) _exit(1);
    int rc = sp->child(rank, sp->n, uid, sp->arg);
    fflush(NULL);
    _exit(rc == 0 ? 0 : (rc & 0xff) ? rc & 0xff : 1);
}

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

/* What happened to a rank, from its wait status. */
static void describe_status(int st, char *buf, size_t n) {
    if (st == -1)
        snprintf(buf, n, "lost: waitpid could not wait for it (is SIGCHLD ignored?)");
    else if (WIFEXITED(st))
        snprintf(buf, n, "exit status %d", WEXITSTATUS(st));
    else if (WIFSIGNALED(st))
        snprintf(buf, n, "killed by signal %d (%s)", WTERMSIG(st), strsignal(WTERMSIG(st)));
    else
        snprintf(buf, n, "wait status 0x%x", (unsigned)st);
}

typedef struct ranks {
    int n, left, first; /* first: the first rank that failed, or -1 */
    int first_status;
    double kill_at; /* when SIGKILL follows SIGTERM; 0: not yet */
    pid_t *pid;     /* 0 once reaped */
} ranks;

static void signal_ranks(ranks *rs, int sig) {
    for (int r = 0; r < rs->n; r++)
        if (rs->pid[r] > 0) kill(rs->pid[r], sig);
}

/* Reaps rank r if it ended; a failure stops the others. */
static void poll_rank(ranks *rs, int r) {
    int st = 0;
    pid_t p = waitpid(rs->pid[r], &st, WNOHANG);
    if (p == 0 || (p < 0 && errno == EINTR)) return;
    if (p < 0) st = -1; /* lost: SIGCHLD ignored, or reaped by someone else */
    rs->pid[r] = 0;
    rs->left--;
    bool ok = p > 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0;
    if (!ok && rs->first < 0) {
        rs->first = r, rs->first_status = st;
        signal_ranks(rs, SIGTERM);
        rs->kill_at = now_ms() + 3000.0;
    }
}

/* Waits for every rank; a failure's others get SIGTERM, then SIGKILL. */
static int wait_ranks(ranks *rs, char *err, size_t errlen) {
    while (rs->left > 0) {
        int before = rs->left;
        for (int r = 0; r < rs->n; r++)
            if (rs->pid[r] > 0) poll_rank(rs, r);
        if (rs->kill_at > 0 && rs->left > 0 && now_ms() >= rs->kill_at) {
            signal_ranks(rs, SIGKILL);
            rs->kill_at = 0;
        }
        if (rs->left > 0 && rs->left == before) nanosleep(&(struct timespec){0, 10000000}, NULL);
    }
    if (rs->first < 0) return 0;
    char how[96];
    describe_status(rs->first_status, how, sizeof how);
    return fail(err, errlen, "rank %d of %d failed: %s%s", rs->first, rs->n, how,
                rs->n > 1 ? "; the other ranks were stopped" : "");
}

/* Ends the ranks made so far at once (a launch that cannot go on). */
static void kill_ranks(ranks *rs) {
    signal_ranks(rs, SIGKILL);
    for (int r = 0; r < rs->n; r++)
        if (rs->pid[r] > 0) waitpid(rs->pid[r], NULL, 0);
}

/* Forks the ranks; on failure none is left. */
static int fork_ranks(const spawn *sp, ranks *rs, char *err, size_t errlen) {
    fflush(NULL); /* else each rank would print the launcher's pending output again */
    for (int r = 0; r < sp->n; r++) {
        pid_t p = fork();
        if (p == 0) rank_main(sp, r);
        if (p < 0) {
            int e = errno;
            kill_ranks(rs);
            return fail(err, errlen, "fork for rank %d of %d: %s", r, sp->n, strerror(e));
        }
        rs->pid[r] = p, rs->left++;
    }
    return 0;
}

/* Makes the id and sends it to every rank (they are waiting for it). */
static int send_uid(const spawn *sp, char *err, size_t errlen) {
    unsigned char uid[GPT_DP_UID_BYTES];
    if (gpt_dp_unique_id(uid, err, errlen)) return -1;
    for (int r = 0; r < sp->n; r++) {
        ssize_t w = send(sp->sock[r][0], uid, sizeof uid, MSG_NOSIGNAL);
        if (w != (ssize_t)sizeof uid) return 0; /* rank r died: wait_ranks says how */
    }
    return 0;
}

static void close_socks(int (*sock)[2], int n, int end) {
    for (int r = 0; sock && r < n; r++)
        if (sock[r][end] >= 0) close(sock[r][end]), sock[r][end] = -1;
}

/* The ranks of sp, from fork to the last one's end. */
static int run_ranks(const spawn *sp, char *err, size_t errlen) {
    ranks rs = {.n = sp->n, .first = -1, .pid = calloc((size_t)sp->n, sizeof(pid_t))};
    if (!rs.pid) return fail(err, errlen, "out of memory");
    int rc = fork_ranks(sp, &rs, err, errlen);
    close_socks(sp->sock, sp->n, 1);
    if (rc == 0 && sp->sock && send_uid(sp, err, errlen)) {
        kill_ranks(&rs);
        rc = -1;
    }
    close_socks(sp->sock, sp->n, 0);
    if (rc == 0) rc = wait_ranks(&rs, err, errlen);
    free(rs.pid);
    return rc;
}

int gpt_dp_fork(int nranks, gpt_dp_child_fn child, void *arg, const void *uid, char *err,
                size_t errlen) {
    if (nranks < 1 || !child)
        return fail(err, errlen, "gpt_dp_fork: %s", !child ? "child is NULL" : "nranks < 1");
    spawn sp = {nranks, child, arg, uid, NULL, getpid()};
    return run_ranks(&sp, err, errlen);
}

/* One socket pair per rank for its id; -1 where none was made. */
static int make_socks(int (*sock)[2], int n, char *err, size_t errlen) {
    for (int r = 0; r < n; r++) sock[r][0] = sock[r][1] = -1;
    for (int r = 0; r < n; r++)
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sock[r]) != 0) {
            int e = errno;
            close_socks(sock, n, 0), close_socks(sock, n, 1);
            return fail(err, errlen, "socketpair: %s", strerror(e));
        }
    return 0;
}

int gpt_dp_launch(int nranks, gpt_dp_child_fn child, void *arg, char *err, size_t errlen) {
    if (nranks < 1 || !child)
        return fail(err, errlen, "gpt_dp_launch: %s", !child ? "child is NULL" : "nranks < 1");
    if (nranks == 1) {
        int rc = child(0, 1, NULL, arg);
        if (rc != 0) fail(err, errlen, "rank 0 of 1 (in this process) failed: returned %d", rc);
        return rc;
    }
    if (cuda_started())
        return fail(err, errlen,
                    "gpt_dp_launch: this process has started the CUDA driver, and processes "
                    "forked after that cannot use the GPU: launch before any CUDA call "
                    "(tk_gpu_init, a GPU allocation or compile)");
    /* NCCL is loaded before the fork (a clear error, no rank made), its id
       made after (send_uid) */
    if (gpt_dp_nccl_load(NULL, 0, err, errlen)) return -1;
    int(*sock)[2] = calloc((size_t)nranks, sizeof *sock);
    if (!sock) return fail(err, errlen, "gpt_dp_launch: out of memory");
    int rc = make_socks(sock, nranks, err, errlen);
    spawn sp = {nranks, child, arg, NULL, sock, getpid()};
    if (rc == 0) rc = run_ranks(&sp, err, errlen);
    free(sock);
    return rc;
}

/* ---- A rank's communicator ------------------------------------------------------------ */
struct gpt_dp {
    int rank, nranks;
    int device;         /* the CUDA device of the context current at open */
    cu_api cu;          /* loaded only with a communicator              */
    nccl_comm_t comm;   /* NULL: one rank without NCCL, sums are no-ops */
    void *stream;       /* the sums' stream (CUstream)                  */
    void *ready, *done; /* events: the backward's progress, the sums'   */
    int pending;        /* sums posted since the last gpt_dp_finish     */
    char err[512];      /* the first failure; sticky                    */
};

/* Keeps msg as the communicator's failure unless one came first; -1. */
static int dp_keep(gpt_dp *dp, const char *msg) {
    if (!dp->err[0]) snprintf(dp->err, sizeof dp->err, "rank %d: %s", dp->rank, msg);
    return -1;
}

static int dp_cu_error(gpt_dp *dp, const char *call, cu_result r) {
    char msg[256];
    cu_fail(&dp->cu, msg, sizeof msg, call, r);
    return dp_keep(dp, msg);
}

static int dp_nccl_error(gpt_dp *dp, const char *call, nccl_result r) {
    char msg[400];
    nccl_fail(msg, sizeof msg, call, r, dp->comm);
    return dp_keep(dp, msg);
}

/* The GPU this rank runs on: the context TileKittens made current. */
static int dp_device(gpt_dp *dp) {
    void *ctx = NULL;
    cu_result r = dp->cu.ctx_current(&ctx);
    if (r != CU_SUCCESS || !ctx) {
        char msg[200];
        snprintf(msg, sizeof msg,
                 "no CUDA context is current on this thread; call tk_gpu_set_device(ctx, %d) "
                 "and tk_gpu_init(ctx) before gpt_dp_open",
                 dp->rank);
        return dp_keep(dp, msg);
    }
    r = dp->cu.ctx_device(&dp->device);
    return r == CU_SUCCESS ? 0 : dp_cu_error(dp, "cuCtxGetDevice", r);
}

/* The sums' stream: non-blocking, so that the default stream the backward
 * runs on does not serialize with it; highest priority, so that its
 * kernels take the SMs the backward's kernels free first. */
static int dp_streams(gpt_dp *dp) {
    int least = 0, greatest = 0;
    cu_result r;
    if ((r = dp->cu.priority_range(&least, &greatest)) != CU_SUCCESS)
        return dp_cu_error(dp, "cuCtxGetStreamPriorityRange", r);
    if ((r = dp->cu.stream_create(&dp->stream, CU_STREAM_NONBLOCKING, greatest)) != CU_SUCCESS)
        return dp_cu_error(dp, "cuStreamCreateWithPriority", r);
    if ((r = dp->cu.event_create(&dp->ready, CU_EVENT_NO_TIMING)) != CU_SUCCESS ||
        (r = dp->cu.event_create(&dp->done, CU_EVENT_NO_TIMING)) != CU_SUCCESS)
        return dp_cu_error(dp, "cuEventCreate", r);
    return 0;
}

static int dp_comm(gpt_dp *dp, const void *uid) {
    nccl_uid id;
    memcpy(id.internal, uid, sizeof id.internal);
    nccl_result r = nccl.comm_init_rank(&dp->comm, dp->nranks, id, dp->rank);
    if (r == NCCL_SUCCESS) return 0;
    dp->comm = NULL;
    char call[96];
    snprintf(call, sizeof call, "ncclCommInitRank (%d ranks, this one on CUDA device %d)",
             dp->nranks, dp->device);
    return dp_nccl_error(dp, call, r);
}

int gpt_dp_open(gpt_dp **out, int rank, int nranks, const void *uid, char *err, size_t errlen) {
    if (!out) return fail(err, errlen, "gpt_dp_open: out is NULL");
    *out = NULL;
    if (nranks < 1 || rank < 0 || rank >= nranks)
        return fail(err, errlen, "gpt_dp_open: rank %d of %d", rank, nranks);
    if (!uid && nranks > 1)
        return fail(err, errlen, "gpt_dp_open: %d ranks need the communicator's id", nranks);
    gpt_dp *dp = calloc(1, sizeof *dp);
    if (!dp) return fail(err, errlen, "gpt_dp_open: out of memory");
    dp->rank = rank, dp->nranks = nranks, dp->device = -1;
    char why[400];
    if (uid && (gpt_dp_nccl_load(NULL, 0, why, sizeof why) || cu_load(&dp->cu, why, sizeof why)))
        dp_keep(dp, why);
    if (uid && (dp->err[0] || dp_device(dp) || dp_streams(dp) || dp_comm(dp, uid))) {
        fail(err, errlen, "%s", dp->err);
        gpt_dp_close(dp);
        return -1;
    }
    *out = dp;
    return 0;
}

/* 1: nothing to do (no communicator, n 0), 0: go on, -1: refused. */
static int dp_skip(gpt_dp *dp, const float *buf, size_t n, const char *what) {
    if (!dp) return -1;
    if (dp->err[0]) return -1;
    if (!dp->comm || n == 0) return 1;
    if (!buf) {
        char msg[96];
        snprintf(msg, sizeof msg, "%s: buf is NULL", what);
        return dp_keep(dp, msg);
    }
    return 0;
}

int gpt_dp_allreduce(gpt_dp *dp, float *buf, size_t n, void *stream) {
    int s = dp_skip(dp, buf, n, "gpt_dp_allreduce");
    if (s != 0) return s < 0 ? -1 : 0;
    nccl_result r = nccl.all_reduce(buf, buf, n, NCCL_FLOAT32, NCCL_SUM, dp->comm, stream);
    return r == NCCL_SUCCESS ? 0 : dp_nccl_error(dp, "ncclAllReduce", r);
}

int gpt_dp_bucket_ready(gpt_dp *dp, float *buf, size_t n, void *compute_stream) {
    int s = dp_skip(dp, buf, n, "gpt_dp_bucket_ready");
    if (s != 0) return s < 0 ? -1 : 0;
    /* the sum waits for what compute_stream has so far, not for what follows */
    cu_result c = dp->cu.event_record(dp->ready, compute_stream);
    if (c != CU_SUCCESS) return dp_cu_error(dp, "cuEventRecord", c);
    if ((c = dp->cu.stream_wait(dp->stream, dp->ready, 0)) != CU_SUCCESS)
        return dp_cu_error(dp, "cuStreamWaitEvent", c);
    nccl_result r = nccl.all_reduce(buf, buf, n, NCCL_FLOAT32, NCCL_SUM, dp->comm, dp->stream);
    if (r != NCCL_SUCCESS) return dp_nccl_error(dp, "ncclAllReduce", r);
    dp->pending++;
    return 0;
}

int gpt_dp_finish(gpt_dp *dp, void *compute_stream) {
    if (!dp || dp->err[0]) return -1;
    if (!dp->comm || dp->pending == 0) return 0;
    cu_result c = dp->cu.event_record(dp->done, dp->stream);
    if (c != CU_SUCCESS) return dp_cu_error(dp, "cuEventRecord", c);
    if ((c = dp->cu.stream_wait(compute_stream, dp->done, 0)) != CU_SUCCESS)
        return dp_cu_error(dp, "cuStreamWaitEvent", c);
    dp->pending = 0;
    return 0;
}

const char *gpt_dp_error(const gpt_dp *dp) { return dp ? dp->err : "gpt_dp is NULL"; }

void gpt_dp_close(gpt_dp *dp) {
    if (!dp) return;
    /* destroy finalizes, waiting for the sums in flight; after a failure a
       peer may be gone, and only abort cannot hang on it */
    if (dp->comm) (dp->err[0] ? nccl.comm_abort : nccl.comm_destroy)(dp->comm);
    if (dp->done) dp->cu.event_destroy(dp->done);
    if (dp->ready) dp->cu.event_destroy(dp->ready);
    if (dp->stream) dp->cu.stream_destroy(dp->stream);
    if (dp->cu.dl) dlclose(dp->cu.dl);
    free(dp);
}
