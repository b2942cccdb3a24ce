/* Data parallelism for gpt-train: one process per GPU, gradients summed
 * across the processes by NCCL.
 *
 * NCCL is loaded at run time with dlopen, as TileKittens loads the CUDA
 * driver, so the trainer builds everywhere and runs on one GPU or on the
 * interpreter without it. Where it is looked for: the file $GPT_NCCL_LIB
 * names (only there, when set); else "libnccl.so.2" on the loader's path;
 * else the copy pip's nvidia-nccl-cu12/cu13 wheels (PyTorch's) put in
 * <site-packages>/nvidia/nccl/lib/ under $VIRTUAL_ENV, ~/.local,
 * /usr/local/lib/python3*, /usr/lib/python3*, /opt/<name>/.venv and
 * /opt/conda.
 *
 * Every function returns 0 on success and nonzero on failure with a message
 * (in err, or gpt_dp_error for a communicator); none aborts or exits.
 *
 * How a trainer uses it: gpt_dp_launch(nranks, child, ...) first thing in
 * main, before any CUDA call; in child(rank, ...): a TileKittens context with
 * tk_gpu_set_device(ctx, rank) and tk_gpu_init(ctx), then gpt_dp_open, and
 * per step either gpt_dp_allreduce over the whole gradient or, during the
 * backward, gpt_dp_bucket_ready per finished range and gpt_dp_finish before
 * the optimizer. With nranks 1 nothing of NCCL is loaded and the reductions
 * are no-ops, so one code path serves one GPU and many. */
#ifndef GPT_DP_H
#define GPT_DP_H

#include <stddef.h>

#define GPT_DP_UID_BYTES 128 /* NCCL's ncclUniqueId */

typedef struct gpt_dp gpt_dp;

/* A rank's work, run in its own process (rank 0 .. nranks-1); uid is the
 * communicator's id for gpt_dp_open (NULL when nranks is 1). Its return is
 * the process's exit status: 0 for success. */
typedef int (*gpt_dp_child_fn)(int rank, int nranks, const void *uid, void *arg);

/* ---- Processes (in the launching process, before any CUDA call) ---------- */
/* Runs child on nranks ranks and waits for them. nranks 1: child(0, 1, NULL,
 * arg) in this process, without NCCL. nranks > 1: loads NCCL, forks the
 * ranks, then makes the communicator's id (ncclGetUniqueId) and sends it to
 * each: in that order so that no process is forked while NCCL runs a
 * thread here (the id's rendezvous, served by this process until the ranks
 * have met). Otherwise as gpt_dp_fork. The CUDA driver must not have been
 * started in this process (CUDA does not survive fork; refused with a
 * message): the ranks start it, each on its own GPU. Nonzero when NCCL
 * cannot be loaded, a process cannot be made, or a rank fails (err names
 * the rank and how). */
int gpt_dp_launch(int nranks, gpt_dp_child_fn child, void *arg, char *err, size_t errlen);

/* The process part of gpt_dp_launch, with an id the caller made before (or
 * any bytes, for ranks that never open a communicator: tests). Forks nranks
 * processes (nranks 1 included), rank r runs child(r, nranks, uid, arg)
 * and exits with its return; waits for all. When a rank fails (a nonzero
 * return or a signal), the others are stopped (SIGTERM, SIGKILL 3 s later)
 * so none waits forever on a collective its peer will never join; err then
 * says which rank failed first and how. A rank also dies with this process
 * (PR_SET_PDEATHSIG). stdout and stderr are flushed before the fork and by
 * each rank before it exits. */
int gpt_dp_fork(int nranks, gpt_dp_child_fn child, void *arg, const void *uid, char *err,
                size_t errlen);

/* Loads NCCL (once per process; it stays loaded: it starts threads that
 * live as long as the process) and writes "NCCL 2.x.y (<path>)" into info
 * (may be NULL). Nonzero with the places tried when there is none. */
int gpt_dp_nccl_load(char *info, size_t infolen, char *err, size_t errlen);

/* A new communicator id (GPT_DP_UID_BYTES bytes) from ncclGetUniqueId. This
 * process then serves the id's rendezvous (a thread of NCCL's) until the
 * ranks have met, so it must outlive their gpt_dp_open; fork after it only
 * with care (gpt_dp_launch does not). */
int gpt_dp_unique_id(void *uid, char *err, size_t errlen);

/* The GPUs the CUDA driver sees, counted in a short-lived child process so
 * that this one never starts the driver (a launcher must not). */
int gpt_dp_device_count(int *n, char *err, size_t errlen);

/* ---- A rank's communicator (in the child) -------------------------------- */
/* Joins the communicator `uid` as rank `rank` of nranks; blocks until all
 * ranks have joined. The GPU is the one whose context is current on this
 * thread: the caller has run tk_gpu_set_device(ctx, rank) and tk_gpu_init
 * first (NCCL picks the device the CUDA runtime finds current, which is
 * that primary context). nranks 1 with uid NULL needs neither NCCL nor a
 * GPU, and every reduction is then a no-op; nranks 1 with a uid makes a
 * real one-rank communicator (dp_check uses it). Call the functions below
 * from one thread, the one whose context is current. */
int gpt_dp_open(gpt_dp **out, int rank, int nranks, const void *uid, char *err, size_t errlen);

/* Sums buf (n f32 on this GPU) over the ranks, in place, enqueued on stream
 * (a CUstream, NULL for the default stream) after the work before it. The
 * trainer pre-scales the loss gradient (1 / (tokens per rank * nranks)) so
 * the sum is the global mean. */
int gpt_dp_allreduce(gpt_dp *dp, float *buf, size_t n, void *stream);

/* Overlap with the backward: call when the work already enqueued on
 * compute_stream has produced buf's final gradients for this step. The sum
 * starts on the communicator's own stream (high priority, not synchronized
 * with the default stream) once that work is done, while the backward goes
 * on. Until gpt_dp_finish, later work must not read or write buf: post a
 * range only when nothing else in the step touches it (the tied wte is
 * written by the head first and the embedding last: post it after the
 * embedding backward; with gradient accumulation, only on the last
 * micro-batch). */
int gpt_dp_bucket_ready(gpt_dp *dp, float *buf, size_t n, void *compute_stream);

/* Makes work enqueued on compute_stream from now on wait for every sum
 * posted since the last finish (no host wait). Call before the gradient
 * norm and the optimizer read the gradients. */
int gpt_dp_finish(gpt_dp *dp, void *compute_stream);

/* The first failure's message ("" if none): failures are sticky, every later
 * call fails with it, since NCCL's state after an error is unknown. */
const char *gpt_dp_error(const gpt_dp *dp);

/* Destroys the communicator, which first waits for the sums in flight
 * (after a failure it aborts instead, so a dead peer cannot hang it), then
 * the stream and events. NULL-safe. */
void gpt_dp_close(gpt_dp *dp);

#endif
