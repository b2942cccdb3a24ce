/* Float64 pieces of the Hedgehog references (tests/test_hedgehog*.c): the
 * feature map φ(x) = softmax([2y, -2y]), y = W x + b, and its gradient. */
#ifndef TK_TEST_REF_HEDGEHOG_H
#define TK_TEST_REF_HEDGEHOG_H

/* phi [2D] of x [D]; W [D, D] row-major [out, in]; b [D] or NULL. */
void ref_hedgehog_phi(const double *x, const double *W, const double *b, int D, double *phi);
/* Back through φ at x (phi: its value) for the gradient dphi [2D]: dx [D]
 * written, dW [D, D] and db [D] (NULL: not wanted) added to. */
void ref_hedgehog_phi_bwd(const double *x, const double *W, const double *phi, const double *dphi,
                          int D, double *dx, double *dW, double *db);

#endif
