/* Float64 Hedgehog feature map and its gradient (ref_hedgehog.h). */
#include "ref_hedgehog.h"

#include <math.h>

void ref_hedgehog_phi(const double *x, const double *W, const double *b, int D, double *phi) {
    double m = -INFINITY, s = 0;
    for (int o = 0; o < D; o++) {
        double y = b ? b[o] : 0;
        for (int i = 0; i < D; i++) y += W[o * D + i] * x[i];
        phi[o] = 2 * y, phi[D + o] = -2 * y;
        m = fmax(m, fabs(2 * y));
    }
    for (int f = 0; f < 2 * D; f++) s += phi[f] = exp(phi[f] - m);
    for (int f = 0; f < 2 * D; f++) phi[f] /= s;
}

/* softmax: du = φ⊙(dφ - Σ dφ⊙φ); u = [2y, -2y]: dy = 2(du[:D] - du[D:]) */
void ref_hedgehog_phi_bwd(const double *x, const double *W, const double *phi, const double *dphi,
                          int D, double *dx, double *dW, double *db) {
    double sigma = 0;
    for (int f = 0; f < 2 * D; f++) sigma += dphi[f] * phi[f];
    for (int i = 0; i < D; i++) dx[i] = 0;
    for (int o = 0; o < D; o++) {
        double dy = 2 * (phi[o] * (dphi[o] - sigma) - phi[D + o] * (dphi[D + o] - sigma));
        for (int i = 0; i < D; i++) {
            dx[i] += dy * W[o * D + i];
            if (dW) dW[o * D + i] += dy * x[i];
        }
        if (db) db[o] += dy;
    }
}
