/* The internal error carrier (see ir/diag.h). */
#include <stdio.h>

#include "ir/diag.h"

tk_status tk_diag_vfail(tk_diag *d, tk_status s, const char *fmt, va_list ap) {
    if (!d) return s;
    if (d->st != TK_OK) return d->st; /* the first failure is the informative one */
    d->st = s;
    vsnprintf(d->msg, sizeof d->msg, fmt, ap);
    return s;
}

tk_status tk_diag_fail(tk_diag *d, tk_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    s = tk_diag_vfail(d, s, fmt, ap);
    va_end(ap);
    return s;
}

void tk_diag_clear(tk_diag *d) {
    if (!d) return;
    d->st = TK_OK;
    d->msg[0] = '\0';
}
