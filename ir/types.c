/* Type constructors, names, sizes, and the host bf16/f16 conversions. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ir/ir.h"

tk_type tk_scalar_type(tk_dtype dt) { return (tk_type){.kind = TK_KIND_SCALAR, .dtype = dt}; }

tk_type tk_tile_type(tk_dtype dt, int rows, int cols, tk_owner owner, tk_layout layout) {
    return (tk_type){.kind = TK_KIND_TILE,
                     .dtype = dt,
                     .rows = rows,
                     .cols = cols,
                     .owner = owner,
                     .layout = layout};
}

tk_type tk_vec_type(tk_dtype dt, int len, tk_axis axis, tk_owner owner, tk_layout layout) {
    return (tk_type){.kind = TK_KIND_VEC,
                     .dtype = dt,
                     .rows = len,
                     .owner = owner,
                     .layout = layout,
                     .axis = axis};
}

const char *tk_dtype_name(tk_dtype dt) {
    switch (dt) {
    case TK_F32: return "f32";
    case TK_BF16: return "bf16";
    case TK_F16: return "f16";
    case TK_I32: return "i32";
    case TK_I64: return "i64";
    case TK_BOOL: return "bool";
    case TK_FP8_E4M3: return "fp8e4m3";
    case TK_FP8_E5M2: return "fp8e5m2";
    case TK_DT_NONE: break;
    }
    return "?";
}

size_t tk_dtype_size(tk_dtype dt) {
    switch (dt) {
    case TK_F32:
    case TK_I32: return 4;
    case TK_BF16:
    case TK_F16: return 2;
    case TK_I64: return 8;
    case TK_BOOL:
    case TK_FP8_E4M3:
    case TK_FP8_E5M2: return 1;
    case TK_DT_NONE: break;
    }
    return 0;
}

bool tk_dtype_is_float(tk_dtype dt) { return dt == TK_F32 || dt == TK_BF16 || dt == TK_F16; }
bool tk_dtype_is_int(tk_dtype dt) { return dt == TK_I32 || dt == TK_I64; }

static const char *owner_name(tk_owner o) {
    return o == TK_WARP ? "warp" : o == TK_WARPGROUP ? "warpgroup" : "?";
}

static const char *smem_name(tk_smem_layout l) {
    return l == TK_SMEM_PLAIN     ? "plain"
           : l == TK_SMEM_SWIZZLE ? "swizzle"
           : l == TK_SMEM_PAD     ? "pad"
                                  : "?";
}

void tk_type_str(const tk_type *t, char *buf, size_t n) {
    const char *dt = tk_dtype_name(t->dtype);
    switch (t->kind) {
    case TK_KIND_SCALAR: snprintf(buf, n, "%s", dt); return;
    case TK_KIND_TILE:
        snprintf(buf, n, "%dx%d %s %s tile (%s)", t->rows, t->cols, dt,
                 t->layout == TK_COL   ? "col"
                 : t->layout == TK_ROW ? "row"
                                       : "?",
                 owner_name(t->owner));
        return;
    case TK_KIND_VEC:
        snprintf(buf, n, "%d %s %s vec of %s tiles (%s)", t->rows, dt,
                 t->axis == TK_PER_ROW   ? "per-row"
                 : t->axis == TK_PER_COL ? "per-col"
                                         : "?",
                 t->layout == TK_COL   ? "col"
                 : t->layout == TK_ROW ? "row"
                                       : "?",
                 owner_name(t->owner));
        return;
    case TK_KIND_SMEM:
        if (t->count > 1)
            snprintf(buf, n, "%dx%d %s %s shared x%d", t->rows, t->cols, dt, smem_name(t->smem),
                     t->count);
        else
            snprintf(buf, n, "%dx%d %s %s shared", t->rows, t->cols, dt, smem_name(t->smem));
        return;
    case TK_KIND_GVIEW: snprintf(buf, n, "rank-%d %s tensor", t->rank, dt); return;
    case TK_KIND_NONE: break;
    }
    snprintf(buf, n, "<no type>");
}

bool tk_type_eq(const tk_type *a, const tk_type *b) {
    if (a->kind != b->kind || a->dtype != b->dtype) return false;
    switch (a->kind) {
    case TK_KIND_SCALAR: return true;
    case TK_KIND_TILE:
        return a->rows == b->rows && a->cols == b->cols && a->owner == b->owner &&
               a->layout == b->layout;
    case TK_KIND_VEC:
        return a->rows == b->rows && a->axis == b->axis && a->owner == b->owner &&
               a->layout == b->layout;
    case TK_KIND_SMEM:
        return a->rows == b->rows && a->cols == b->cols && a->smem == b->smem &&
               a->count == b->count;
    case TK_KIND_GVIEW: return a->rank == b->rank;
    case TK_KIND_NONE: return true;
    }
    return false;
}

int32_t tk_smem_pitch(const tk_type *t) {
    int32_t pad = t->smem == TK_SMEM_PAD ? (int32_t)(16 / tk_dtype_size(t->dtype)) : 0;
    return t->cols + pad;
}

int32_t tk_smem_swizzle_bytes(const tk_type *t) {
    int32_t rb = t->cols * (int32_t)tk_dtype_size(t->dtype);
    if (t->kind != TK_KIND_SMEM || t->smem != TK_SMEM_SWIZZLE) return 0;
    return rb == 32 || rb == 64 ? rb : rb % 128 == 0 ? 128 : 0;
}

size_t tk_smem_stage_bytes(const tk_type *t) {
    size_t b = (size_t)t->rows * (size_t)tk_smem_pitch(t) * tk_dtype_size(t->dtype);
    return (b + 127) & ~(size_t)127;
}

/* ---- host conversions: round to nearest even, NaN kept quiet ------------- */
uint16_t tk_f32_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

float tk_bf16_to_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

uint16_t tk_f32_to_f16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    uint32_t sign = (u >> 16) & 0x8000u;
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u);  /* NaN */
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* overflow -> inf */
    if (a < 0x38800000u) {                                   /* subnormal / zero */
        float af;
        memcpy(&af, &a, 4);
        /* 2^-24 is the f16 subnormal step: scale and round to nearest even. */
        float q = af * 16777216.0f;
        return (uint16_t)(sign | (uint32_t)nearbyintf(q));
    }
    uint32_t e = ((a >> 23) - 112u) << 10;
    uint32_t m = a & 0x7fffffu;
    uint32_t h = e | (m >> 13);
    uint32_t rem = m & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++;
    return (uint16_t)(sign | h);
}

float tk_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    float f;
    if (e == 0) {
        f = ldexpf((float)m, -24);
        return sign ? -f : f;
    }
    uint32_t u =
        e == 31 ? (sign | 0x7f800000u | (m << 13)) : (sign | ((e + 112u) << 23) | (m << 13));
    memcpy(&f, &u, 4);
    return f;
}
