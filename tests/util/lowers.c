/* Lowering checks shared by the tests (util/lowers.h). */
#define _GNU_SOURCE /* mkstemp, popen */
#include "util/lowers.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "jit/lower.h"

const char *const tu_archs[2] = {"sm_80", "sm_90a"};

static const char *ptxas_path(void) {
    static char path[512];
    const char *env = getenv("TK_PTXAS");
    const char *cands[2] = {env, "/usr/local/cuda/bin/ptxas"};
    for (int i = 0; i < 2; i++)
        if (cands[i] && access(cands[i], X_OK) == 0) {
            snprintf(path, sizeof path, "%s", cands[i]);
            return path;
        }
    static int said;
    if (!said++) printf("ptxas checks skipped: no ptxas (set TK_PTXAS or install CUDA)\n");
    return NULL;
}

/* Assembles ptx with `ptxas -v`; returns its exit status (-1: skipped) and
 * the spill bytes (stores + loads) it reported. */
int tu_run_ptxas(const char *ptx, const char *arch, long *spills, char *log, size_t logn) {
    const char *px = ptxas_path();
    *spills = 0;
    log[0] = 0;
    if (!px) return -1;
    char file[] = "/tmp/tk_lower_XXXXXX";
    int fd = mkstemp(file);
    ck_assert_int_ge(fd, 0);
    size_t len = strlen(ptx);
    ck_assert_int_eq((long)write(fd, ptx, len), (long)len);
    close(fd);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s -arch=%s -v %s -o /dev/null 2>&1", px, arch, file);
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    size_t used = 0;
    char line[1024];
    while (fgets(line, sizeof line, p)) {
        long st, ld;
        const char *sp = strstr(line, "bytes spill stores");
        if (sp) {
            while (sp > line && sp[-1] == ' ') sp--;
            while (sp > line && sp[-1] >= '0' && sp[-1] <= '9') sp--;
            if (sscanf(sp, "%ld bytes spill stores, %ld bytes spill loads", &st, &ld) == 2)
                *spills += st + ld;
        }
        used += (size_t)snprintf(log + used, used < logn ? logn - used : 0, "%s", line);
        if (used >= logn) used = logn - 1;
    }
    int rc = pclose(p);
    unlink(file);
    return rc;
}

/* Lowers k for both archs: IR verifies, PTX assembles. Returns the spill
 * bytes of the worse arch (0 when ptxas is missing). */
long tu_check_lowers(const tk_kernel *k) {
    char log[8192];
    tk_diag dg = {0};
    long worst = 0;
    ck_assert_msg(tk_kernel_status(k) == TK_OK, "build: %s", tk_kernel_error(k));
    for (int a = 0; a < 2; a++) {
        char *text = NULL, *ptx = NULL;
        tk_status s = tk_lower_llvm_text(k, tu_archs[a], &text, &dg);
        ck_assert_msg(s == TK_OK, "%s %s: %s", tk_kernel_name(k), tu_archs[a], dg.msg);
        ck_assert_ptr_nonnull(strstr(text, "ptx_kernel"));
        free(text);
        s = tk_lower_ptx(k, tu_archs[a], &ptx, &dg);
        ck_assert_msg(s == TK_OK, "%s %s: %s", tk_kernel_name(k), tu_archs[a], dg.msg);
        ck_assert_ptr_nonnull(strstr(ptx, ".entry"));
        long spills;
        int rc = tu_run_ptxas(ptx, tu_archs[a], &spills, log, sizeof log);
        ck_assert_msg(rc <= 0, "ptxas %s rejected %s:\n%s", tu_archs[a], tk_kernel_name(k), log);
        if (spills > worst) worst = spills;
        free(ptx);
    }
    return worst;
}
