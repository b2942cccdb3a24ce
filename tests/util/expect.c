/* Expected failures (see expect.h). */
#include "util/expect.h"

#include <string.h>

void tu_expect_status(tk_ctx *ctx, tk_status got, tk_status want, const char *text) {
    ck_assert_msg(got == want, "status %s, expected %s (%s)", tk_status_name(got),
                  tk_status_name(want), tk_ctx_error(ctx));
    ck_assert_msg(strstr(tk_ctx_error(ctx), text), "message \"%s\" lacks \"%s\"", tk_ctx_error(ctx),
                  text);
}
