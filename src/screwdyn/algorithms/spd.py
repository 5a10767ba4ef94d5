"""Solving with a symmetric positive definite matrix (a mass matrix, a regularised Delassus
matrix) by its Cholesky factor: n^3 / 6 products and two triangular substitutions, no pivoting
(no comparisons: in the native tracer, LU's pivot search costs a select per entry and row).

Written on array operations with a leading batch axis, so that it runs on numpy, JAX and the
native tracer (whose ``linalg.cholesky`` is ``execution.trace._Linalg.cholesky``); the tree's
factor, on entries (``algebra.entries``: batch arrays or constants, zeros left out)."""
from ..algebra.entries import ZERO, mul, sub


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


def tree_factor(M, parent):
    """M = L^T D L for the mass matrix M of a tree (Featherstone, RBDA section 6.5), given as
    n x n nested lists of entries (only the entries M[k][i] of i on k's path to the root are
    read: the others are zero in every mass matrix) and ``parent``, per coordinate the one
    before it on its path to the root (-1 at a root). Returns H, nested lists: H[k][k] = 1 / D_k
    (the reciprocal, which every solve multiplies by), H[k][i] = L_ki for i on k's path. No
    fill-in outside the paths: O(n d^2) for depth d."""
    n = len(M)
    H = [list(row) for row in M]
    for k in reversed(range(n)):
        H[k][k] = 1.0 / H[k][k]
        i = parent[k]
        while i >= 0:
            a = mul(H[k][i], H[k][k])
            j = i
            while j >= 0:
                H[i][j] = sub(H[i][j], mul(a, H[k][j]))
                j = parent[j]
            H[k][i] = a
            i = parent[i]
    return H


def tree_solve(H, parent, b):
    """x = M^-1 b for the factor H of ``tree_factor`` and a column b (n entries): L^T y = b
    (leaves to root), y / D, then L x = y (root to leaves). Constant zeros of b stay free."""
    n = len(b)
    y = list(b)
    for k in reversed(range(n)):
        i = parent[k]
        while i >= 0:
            y[i] = sub(y[i], mul(H[k][i], y[k]))
            i = parent[i]
    x = [mul(y[k], H[k][k]) for k in range(n)]
    for k in range(n):
        i = parent[k]
        while i >= 0:
            x[k] = sub(x[k], mul(H[k][i], x[i]))
            i = parent[i]
    return x
