"""Solving with a symmetric positive definite matrix (a mass matrix, a regularised Delassus
matrix) by its Cholesky factor: n^3 / 6 products and two triangular substitutions, no pivoting
(no comparisons: in the native tracer, LU's pivot search costs a select per entry and row).

Written on array operations with a leading batch axis, so that it runs on numpy, JAX and the
native tracer (whose ``linalg.cholesky`` is ``execution.trace._Linalg.cholesky``)."""


def solve(xp, M, B):
    """X (N, n, k) with M X = B, for M (N, n, n) symmetric positive definite and B (N, n, k)."""
    n = M.shape[-1]
    if n == 0:
        return B
    L = xp.linalg.cholesky(M)
    y = []
    for i in range(n):  # L y = B
        acc = B[:, i]
        for k in range(i):
            acc = acc - L[:, i, k][:, None] * y[k]
        y.append(acc / L[:, i, i][:, None])
    x = [None] * n
    for i in reversed(range(n)):  # L^T x = y
        acc = y[i]
        for k in range(i + 1, n):
            acc = acc - L[:, k, i][:, None] * x[k]
        x[i] = acc / L[:, i, i][:, None]
    return xp.stack(x, axis=1)
