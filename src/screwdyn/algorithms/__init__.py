"""The recursive algorithms, each written once for every algebra (see ``screwdyn.algebra``).

Internal layout: q (nq, N), qd/qdd/tau (nv, N); results carry the same trailing batch axis.
The public functions in ``screwdyn.dynamics`` convert from and to leading batch dimensions.
"""
