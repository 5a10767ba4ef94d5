"""Components as *entries*: a batch array (N,), a Python float (a component of a model constant),
or ``ZERO``, an exact zero. Closed-form products written on entries skip the work that a model's
zeros make unnecessary (a rotor about z has two nonzero components, a placement without offset no
translation), which the CGA and dual-quaternion algebras share."""


class _Zero:
    """The exact zero of a constant component: products with it vanish and sums skip it."""

    __slots__ = ()
    __array_ufunc__ = None  # numpy defers to the reflected methods below; JAX arrays do too

    def __mul__(self, other):
        return self

    __rmul__ = __truediv__ = __mul__

    def __add__(self, other):
        return other

    __radd__ = __rsub__ = __add__

    def __sub__(self, other):
        return -other

    def __neg__(self):
        return self

    def __float__(self):
        return 0.0

    def __repr__(self):
        return "ZERO"


ZERO = _Zero()
