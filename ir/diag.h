/* The one internal error carrier: a status and its message.
 *
 * Every layer reports a failure the same way: the function that fails
 * calls tk_diag_fail on the tk_diag it was handed and returns the status.
 * The first failure wins (later calls keep it and return its status), so
 * the innermost, most precise message survives callers that fail in turn.
 * A caller that recovers from a failure (tries another candidate, falls
 * back) clears the diag. A public entry point hands its own diag down and
 * copies it into the context in one place (tk_ctx_report); the context's
 * last error is itself a tk_diag (ir/ctx.h). */
#ifndef TK_DIAG_H
#define TK_DIAG_H

#include <stdarg.h>

#include "tk/tk.h"

enum { TK_DIAG_LEN = 2048 }; /* message bytes, NUL included */

typedef struct tk_diag {
    tk_status st;          /* TK_OK: no failure recorded    */
    char msg[TK_DIAG_LEN]; /* "" when st is TK_OK           */
} tk_diag;

/* Records s with a printf-style message unless d already holds a failure;
 * returns d's status (s when this call recorded it). d NULL: returns s. */
tk_status tk_diag_fail(tk_diag *d, tk_status s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
tk_status tk_diag_vfail(tk_diag *d, tk_status s, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));
/* Forgets a recorded failure (NULL-safe). */
void tk_diag_clear(tk_diag *d);

#endif
