/* ptxas ahead of time (see jit/link.h): locate it, ask its version, run it
 * on a private temp directory with posix_spawn (no shell, no quoting). */
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "jit/fs.h"
#include "jit/jit.h"
#include "jit/link.h"

extern char **environ;

/* Bytes of a tool's output kept for messages; the rest is drained. */
#define TK_CAPTURE_MAX 16384

static bool tk_is_exec(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

/* Runs argv[0] with stdout+stderr captured into out (NUL-terminated,
 * truncated to outn). Returns the exit status, or -1 with errno. */
static int tk_run_capture(char *const argv[], char *out, size_t outn) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return -1;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 2);
    pid_t pid;
    int rc = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(fds[1]);
    if (rc != 0) {
        close(fds[0]);
        errno = rc;
        return -1;
    }
    size_t len = 0;
    char chunk[4096];
    for (;;) {
        ssize_t r = read(fds[0], chunk, sizeof chunk);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        size_t take = outn > len + 1 ? outn - len - 1 : 0;
        if (take > (size_t)r) take = (size_t)r;
        memcpy(out + len, chunk, take);
        len += take;
    }
    out[len] = '\0';
    close(fds[0]);
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR) return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

/* The first executable `ptxas` in $PATH. */
static bool tk_ptxas_on_path(char *buf, size_t n) {
    const char *path = getenv("PATH");
    while (path && *path) {
        const char *end = strchr(path, ':');
        size_t len = end ? (size_t)(end - path) : strlen(path);
        if (len > 0 && (size_t)snprintf(buf, n, "%.*s/ptxas", (int)len, path) < n &&
            tk_is_exec(buf))
            return true;
        path = end ? end + 1 : NULL;
    }
    return false;
}

/* The last non-empty line of `ptxas --version` identifies the build. */
static tk_status tk_ptxas_version(tk_ptxas *p, tk_diag *dg) {
    char out[TK_CAPTURE_MAX];
    char *argv[] = {p->path, (char *)"--version", NULL};
    int rc = tk_run_capture(argv, out, sizeof out);
    if (rc != 0)
        return tk_diag_fail(dg, TK_ERR_PTXAS, "%s --version failed (%s): %s", p->path,
                            rc < 0 ? strerror(errno) : "non-zero exit", out);
    size_t len = strlen(out);
    while (len > 0 && (out[len - 1] == '\n' || out[len - 1] == '\r' || out[len - 1] == ' '))
        out[--len] = '\0';
    const char *last = strrchr(out, '\n');
    last = last ? last + 1 : out;
    if (!*last) return tk_diag_fail(dg, TK_ERR_PTXAS, "%s --version printed nothing", p->path);
    size_t n = strlen(last) < sizeof p->version ? strlen(last) : sizeof p->version - 1;
    memcpy(p->version, last, n); /* a build line is short; cut, it still identifies */
    p->version[n] = '\0';
    return TK_OK;
}

tk_status tk_ptxas_find(tk_ptxas *p, tk_diag *dg) {
    memset(p, 0, sizeof *p);
    const char *env = getenv("TK_PTXAS");
    if (env && *env) {
        /* An explicit choice is honoured or reported, never silently replaced. */
        if (!tk_is_exec(env))
            return tk_diag_fail(dg, TK_ERR_PTXAS, "TK_PTXAS=%s is not an executable file", env);
        snprintf(p->path, sizeof p->path, "%s", env);
    } else if (!tk_ptxas_on_path(p->path, sizeof p->path)) {
        snprintf(p->path, sizeof p->path, "/usr/local/cuda/bin/ptxas");
        if (!tk_is_exec(p->path))
            return tk_diag_fail(
                dg, TK_ERR_PTXAS,
                "ptxas not found (set TK_PTXAS, add it to PATH, or install the CUDA "
                "toolkit in /usr/local/cuda)");
    }
    return tk_ptxas_version(p, dg);
}

/* Writes the PTX into dir/k.ptx. */
static tk_status tk_write_ptx(const char *path, const char *ptx, tk_diag *dg) {
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) return tk_diag_fail(dg, TK_ERR_IO, "cannot create %s: %s", path, strerror(errno));
    int bad = tk_write_all(fd, ptx, strlen(ptx));
    int e = errno;
    if (close(fd) != 0 && !bad) {
        bad = 1;
        e = errno;
    }
    return bad ? tk_diag_fail(dg, TK_ERR_IO, "cannot write %s: %s", path, strerror(e)) : TK_OK;
}

/* Runs ptxas inside the private directory `dir`, reading the cubin back. */
static tk_status tk_ptxas_in(const tk_ptxas *p, const char *dir, const char *ptx, const char *arch,
                             void **cubin, size_t *n, tk_diag *dg) {
    char in[PATH_MAX + 16], outp[PATH_MAX + 16], archopt[32], log[TK_CAPTURE_MAX];
    snprintf(in, sizeof in, "%s/k.ptx", dir);
    snprintf(outp, sizeof outp, "%s/k.cubin", dir);
    snprintf(archopt, sizeof archopt, "-arch=%s", arch);
    tk_status s = tk_write_ptx(in, ptx, dg);
    if (s == TK_OK) {
        char *argv[] = {(char *)p->path, archopt, (char *)"-o", outp, in, NULL};
        int rc = tk_run_capture(argv, log, sizeof log);
        if (rc < 0)
            s = tk_diag_fail(dg, TK_ERR_PTXAS, "cannot run %s: %s", p->path, strerror(errno));
        else if (rc != 0)
            s = tk_diag_fail(dg, TK_ERR_PTXAS, "ptxas -arch=%s failed (exit %d):\n%s", arch, rc,
                             log);
        else if (tk_read_file(outp, cubin, n) != 0)
            s = tk_diag_fail(dg, TK_ERR_PTXAS, "ptxas wrote no cubin %s: %s", outp,
                             strerror(errno));
    }
    unlink(in);
    unlink(outp);
    return s;
}

tk_status tk_ptxas_compile(const tk_ptxas *p, const char *ptx, const char *arch, void **cubin,
                           size_t *n, tk_diag *dg) {
    *cubin = NULL;
    *n = 0;
    if (!tk_arch_valid(arch))
        return tk_diag_fail(dg, TK_ERR_INVALID_ARG, "invalid target \"%s\"", arch ? arch : "");
    /* A fresh 0700 directory: nobody else can read or swap our files. */
    char dir[PATH_MAX];
    if ((size_t)snprintf(dir, sizeof dir, "%s/tk-ptxas-XXXXXX", tk_tmpdir()) >= sizeof dir ||
        !mkdtemp(dir))
        return tk_diag_fail(dg, TK_ERR_IO, "cannot create a temp directory in %s: %s", tk_tmpdir(),
                            strerror(errno));
    tk_status s = tk_ptxas_in(p, dir, ptx, arch, cubin, n, dg);
    rmdir(dir);
    return s;
}
