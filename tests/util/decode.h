/* The decoding kernels of one tk_attention_forward call, on the CPU
 * interpreter (tests/test_attention_decode.c, test_attention_paged.c). */
#ifndef TK_TEST_DECODE_H
#define TK_TEST_DECODE_H

#include "kernels/attention_decode.h"

/* The plan tk_attention_forward would make for p on sm SMs (want_kw: the
 * warps sharing a tile's keys where it splits them) into *pl, and a host
 * workspace of its size, NaN-poisoned (unwritten partials show), set in p;
 * the caller frees p->workspace. */
void tu_decode_plan_ws(tk_ctx *ctx, tk_attention_params *p, int sm, int want_kw,
                       tk_attn_decode_plan *pl);

/* Builds and interprets every part plan pl runs for p (host pointers; a
 * workspace of pl->bytes when pl splits), as tk_attention_forward would
 * launch them; a failed build or run fails the test. */
void tu_decode_on_interp(tk_ctx *ctx, const tk_attention_params *p, const tk_attn_decode_plan *pl);

#endif
