"""Generate ``src/screwdyn/algebra/_cga_products.py``: closed-form products of conformal geometric
algebra G(4,1) on the sparse grades that rigid-body dynamics uses (motors, twists, wrenches).

    python tools/generate_cga_products.py            # rewrite the module
    python tools/generate_cga_products.py --check    # exit 1 if the module is out of date

The multiplication table is built here from scratch, in exact rational arithmetic:
G(4,1) has the orthonormal basis e1, e2, e3, e+ (squares to +1), e- (squares to -1); the paper's
null basis replaces e+ and e- by the origin e0 = (e- - e+)/2 and infinity ei = e+ + e-, so that
e0^2 = ei^2 = 0 and e0 . ei = -1. A blade of the null basis is the outer product of its vectors
(e0i = e0 ^ ei, e123i = e1 ^ e2 ^ e3 ^ ei). Products of null blades are computed by expanding
them in the orthonormal basis, where the geometric product of two basis blades is one signed
blade, and converting the result back.

Every generated kernel is a function of sequences of component arrays (rows of an array with the
components first, or a list of arrays of any broadcastable shapes) returning a tuple of component
arrays: the same code serves screwdyn's internal layout and the user-facing typed objects.
"""
import argparse
import itertools
import sys
from fractions import Fraction
from pathlib import Path

OUTPUT = Path(__file__).resolve().parents[1] / "src/screwdyn/algebra/_cga_products.py"

# -- the algebra ---------------------------------------------------------------------------------
NULL_BASIS = ("0", "1", "2", "3", "i")  # e0, e1, e2, e3, ei: the order of vectors within a blade
ORTHONORMAL_BASIS = ("1", "2", "3", "p", "m")  # e1, e2, e3, e+, e-
SQUARE = {"1": 1, "2": 1, "3": 1, "p": 1, "m": -1}
HALF = Fraction(1, 2)
NULL_IN_ORTHONORMAL = {"0": {"m": HALF, "p": -HALF}, "i": {"p": 1, "m": 1},
                       "1": {"1": 1}, "2": {"2": 1}, "3": {"3": 1}}
ORTHONORMAL_IN_NULL = {"p": {"i": HALF, "0": -1}, "m": {"i": HALF, "0": 1},
                       "1": {"1": 1}, "2": {"2": 1}, "3": {"3": 1}}


def _sorted_with_sign(vectors, basis):
    """Sort a product of distinct-or-repeated basis vectors by swapping neighbours: (sign, list)."""
    vectors, sign = list(vectors), 1
    for end in range(len(vectors) - 1, 0, -1):
        for k in range(end):
            if basis.index(vectors[k]) > basis.index(vectors[k + 1]):
                vectors[k], vectors[k + 1] = vectors[k + 1], vectors[k]
                sign = -sign
    return sign, vectors


def _orthonormal_blade_product(a, b):
    """Geometric product of two orthonormal basis blades: one signed blade."""
    sign, vectors = _sorted_with_sign(a + b, ORTHONORMAL_BASIS)
    out = []
    for v in vectors:
        if out and out[-1] == v:
            out.pop()
            sign *= SQUARE[v]
        else:
            out.append(v)
    return sign, tuple(out)


def _outer_of_vectors(vectors, basis):
    """Outer product (metric-free) of vectors given as {basis vector: coefficient} dicts."""
    result = {(): Fraction(1)}
    for vector in vectors:
        step = {}
        for blade, coefficient in result.items():
            for v, c in vector.items():
                if v in blade:
                    continue
                sign, ordered = _sorted_with_sign(blade + (v,), basis)
                key = tuple(ordered)
                step[key] = step.get(key, 0) + sign * coefficient * c
        result = {k: c for k, c in step.items() if c}
    return result


def _change_basis(mv, vectors_in_target, basis):
    out = {}
    for blade, coefficient in mv.items():
        for b, c in _outer_of_vectors([vectors_in_target[v] for v in blade], basis).items():
            out[b] = out.get(b, 0) + coefficient * c
    return {k: c for k, c in out.items() if c}


def geometric_product(a, b):
    """Geometric product of two null-basis blades (tuples of vectors), as {blade: coefficient}."""
    a_ortho = _change_basis({a: Fraction(1)}, NULL_IN_ORTHONORMAL, ORTHONORMAL_BASIS)
    b_ortho = _change_basis({b: Fraction(1)}, NULL_IN_ORTHONORMAL, ORTHONORMAL_BASIS)
    product = {}
    for x, cx in a_ortho.items():
        for y, cy in b_ortho.items():
            sign, blade = _orthonormal_blade_product(x, y)
            product[blade] = product.get(blade, 0) + sign * cx * cy
    return _change_basis({k: c for k, c in product.items() if c}, ORTHONORMAL_IN_NULL, NULL_BASIS)


def _grade_part(mv, grade):
    return {k: c for k, c in mv.items() if len(k) == grade}


def outer_product(a, b):
    return _grade_part(geometric_product(a, b), len(a) + len(b))


def inner_product(a, b):
    """Hestenes' inner product (gafro's): the grade |r - s| part, zero if either is a scalar."""
    if not a or not b:
        return {}
    return _grade_part(geometric_product(a, b), abs(len(a) - len(b)))


def commutator_product(a, b):
    """X x Y = (XY - YX) / 2 (eq. 11)."""
    ab, ba = geometric_product(a, b), geometric_product(b, a)
    out = {k: (ab.get(k, 0) - ba.get(k, 0)) / 2 for k in set(ab) | set(ba)}
    return {k: c for k, c in out.items() if c}


def reverse_sign(blade):
    k = len(blade)
    return -1 if (k * (k - 1) // 2) % 2 else 1


# -- the grades screwdyn uses --------------------------------------------------------------------
def blade(name):
    """'e23' -> ('2', '3'); '1' -> () (the scalar)."""
    return () if name == "1" else tuple(name[1:])


TYPES = {  # blade orders: the paper's twist (eq. 7) and wrench (eqs. 8, 14) orders
    "Twist": ("e23", "e13", "e12", "e1i", "e2i", "e3i"),
    "Wrench": ("e23", "e13", "e12", "e01", "e02", "e03"),
    "Motor": ("1", "e23", "e13", "e12", "e1i", "e2i", "e3i", "e123i"),
    "Bivector": ("e23", "e13", "e12", "e1i", "e2i", "e3i", "e01", "e02", "e03", "e0i"),
    "EvenMultivector": ("1", "e23", "e13", "e12", "e1i", "e2i", "e3i", "e01", "e02", "e03", "e0i",
                        "e123i", "e0123", "e012i", "e013i", "e023i"),
}
ROTOR = ("1", "e23", "e13", "e12")
PRODUCTS = {"geometric": geometric_product, "outer": outer_product, "inner": inner_product,
            "commutator": commutator_product}
OPERANDS = ("Motor", "Twist", "Wrench")
VARIABLE = {"1": "scalar"}


def _var(prefix, name):
    return f"{prefix}_{VARIABLE.get(name, name)}"


def _name_of(b):
    return "e" + "".join(b) if b else "1"


def bilinear(product, left, right):
    """{output blade name: [(coefficient, left index, right index)]} of product(left, right)."""
    terms = {}
    for (i, a), (j, b) in itertools.product(enumerate(left), enumerate(right)):
        for out, c in product(blade(a), blade(b)).items():
            terms.setdefault(_name_of(out), []).append((c, i, j))
    return terms


def result_type(support):
    """The smallest type holding the blades ``support`` ('scalar' for the scalar alone)."""
    if set(support) == {"1"}:
        return "scalar"
    for name, blades in TYPES.items():
        if set(support) <= set(blades):
            return name
    raise ValueError(f"no type holds {sorted(support)}")


# -- code emission -------------------------------------------------------------------------------
def _number(c):
    return str(int(c)) if c.denominator == 1 else repr(float(c))


def _sum(terms):
    """Python expression for sum(c * expr) over (c, expr): terms grouped by |c|, so that each
    distinct magnitude costs one multiplication."""
    groups = {}
    for c, expr in terms:
        if c:
            groups.setdefault(abs(c), []).append(("-" if c < 0 else "+", expr))
    parts = []
    for magnitude, group in groups.items():
        text = " ".join(f"{sign} {expr}" for sign, expr in group)
        text = text[2:] if text.startswith("+") else "-" + text[2:]
        parts.append(text if magnitude == 1 else f"{_number(magnitude)} * ({text})")
    text = parts[0]
    for part in parts[1:]:
        text += f" - {part[1:]}" if part.startswith("-") else f" + {part}"
    return text


def _wrap(text, indent):
    """Break a long expression at ' + ' / ' - ' so lines stay under 100 characters."""
    lines, line = [], ""
    for token in text.replace(" + ", "\n+ ").replace(" - ", "\n- ").split("\n"):
        candidate = line + (" " if line else "") + token
        if line and len(indent) + len(candidate) > 95:
            lines.append(line)
            line = token
        else:
            line = candidate
    lines.append(line)
    return ("\n" + indent).join(lines)


def _wrap_items(items, indent, separator=", "):
    """Join ``items`` with ``separator``, breaking lines (after a separator) under 96 columns."""
    lines, line = [], ""
    for item in items:
        candidate = f"{line}{separator}{item}" if line else item
        if line and len(indent) + len(candidate) + len(separator) > 95:
            lines.append(line + separator.rstrip())
            line = item
        else:
            line = candidate
    return ("\n" + indent).join(lines + [line])


def _parenthesised(text):
    return f"({text})" if "\n" in text else text


def _unpack(prefix, blades):
    return f"    {', '.join(_var(prefix, b) for b in blades)} = {prefix}\n"


def _return(outputs, names):
    body = "".join(f"        {_wrap(expr, ' ' * 8)},  # {name}\n"
                   for expr, name in zip(outputs, names))
    return f"    return (\n{body}    )\n"


def _tuple_literal(items, indent):
    items = [repr(item) for item in items]
    return f"({_wrap_items(items, indent)}{',' if len(items) == 1 else ''})"


def emit_bilinear(op, left_type, right_type, onto=None):
    """The kernel of a product, onto all the blades it reaches or onto those of type ``onto``:
    (code, result type, result blades)."""
    left, right = TYPES[left_type], TYPES[right_type]
    terms = bilinear(PRODUCTS[op], left, right)
    exprs = {name: _sum([(c, f"{_var('a', left[i])} * {_var('b', right[j])}") for c, i, j in t])
             for name, t in terms.items()}
    support = [name for name in TYPES[onto or "EvenMultivector"] if name in exprs]
    rtype = onto or result_type(support)
    name = f"{op}_{left_type.lower()}_{right_type.lower()}" + (f"_onto_{onto.lower()}"
                                                               if onto else "")
    what = f"its {onto.lower()} part" if onto else f"-> {rtype}"
    code = (f"def {name}(a, b):\n"
            f'    """{op.capitalize()} product of a {left_type.lower()} and a '
            f'{right_type.lower()}, {what}:\n    {_wrap_items(support, " " * 4)}."""\n')
    code += _unpack("a", left) + _unpack("b", right)
    if rtype == "scalar":
        code += f"    return {_parenthesised(_wrap(exprs['1'], ' ' * 8))}\n"
    else:
        code += _return([exprs[s] for s in support], support)
    return code, rtype, support


def sandwich_images(versor, x, reverse=False):
    """M e_x ~M (or ~M e_x M) for M = sum_a m_a e_a over the blades ``versor``, as
    {output blade: {(a, b): c}}: quadratic in the components, m_a m_b and m_b m_a merged."""
    images = {}
    for (i, a), (j, b) in itertools.product(enumerate(versor), repeat=2):
        pair = (versor[min(i, j)], versor[max(i, j)])
        sign = reverse_sign(blade(a if reverse else b))
        for middle, c1 in geometric_product(blade(a), blade(x)).items():
            for out, c2 in geometric_product(middle, blade(b)).items():
                poly = images.setdefault(_name_of(out), {})
                poly[pair] = poly.get(pair, 0) + c1 * c2 * sign
    return {out: {k: c for k, c in poly.items() if c} for out, poly in images.items()
            if any(poly.values())}


def _quadratic(poly):
    """Python expression of a quadratic polynomial {(a, b): c} in the motor components m_a."""
    return _sum([(c, f"{_var('m', a)} * {_var('m', b)}") for (a, b), c in poly.items()])


def emit_sandwiches():
    """M X ~M (eq. 4) and ~M X M for twists and wrenches X. The sandwich is linear in X, so it is
    X's components times the images of X's blades; those images are quadratic in M, and the same
    18 polynomials (up to sign) serve all four sandwiches: they are computed once per motor."""
    motor = TYPES["Motor"]
    index, polynomials, kernels = {}, [], []
    for kind, reverse in itertools.product(("Twist", "Wrench"), (False, True)):
        x = TYPES[kind]
        terms = {j: [] for j in x}
        for k in x:
            for j, poly in sandwich_images(motor, k, reverse).items():
                if j not in terms:  # off the wrench blades: see SANDWICH_OF
                    continue
                key = tuple(sorted(poly.items()))
                negated = tuple(sorted((pair, -c) for pair, c in poly.items()))
                if key not in index and negated not in index:
                    index[key] = len(polynomials)
                    polynomials.append(poly)
                sign, position = (1, index[key]) if key in index else (-1, index[negated])
                terms[j].append((sign, f"images[{position}] * {_var('x', k)}"))
        kernels.append((kind, reverse, [_sum(terms[j]) for j in x]))
    code = ("def sandwich_images(m):\n"
            '    """The distinct components (up to sign) of the images M e_k ~M and ~M e_k M\n'
            '    of the twist and wrench blades e_k: quadratic in the components of the motor M.'
            '"""\n')
    code += _unpack("m", motor) + _return([_quadratic(p) for p in polynomials],
                                          [f"images[{k}]" for k in range(len(polynomials))])
    for kind, reverse, outputs in kernels:
        sandwich = "~M X M" if reverse else "M X ~M"
        what = SANDWICH_OF[kind].format(sandwich=sandwich)
        name = f"{'reverse_' if reverse else ''}sandwich_{kind.lower()}"
        code += (f"\n\ndef {name}_from_images(images, x):\n"
                 f'    """{what}, from the sandwich images of M\n'
                 f'    (X\'s components times the images of its blades)."""\n')
        code += _unpack("x", TYPES[kind]) + _return(outputs, TYPES[kind])
    for kind in ("Twist", "Wrench"):
        name = f"sandwich_{kind.lower()}"
        code += (f"\n\ndef {name}(m, x):\n"
                 f'    """{SANDWICH_OF[kind].format(sandwich="M X ~M (eq. 4)")}."""\n'
                 f"    return {name}_from_images(sandwich_images(m), x)\n")
    return code


# A unit motor maps twists onto twists. It maps a wrench onto a bivector whose wrench part is the
# wrench in the new frame (the co-adjoint action); moving the tangent bivectors e01, e02, e03 off
# the origin also leaves components on e1i, e2i, e3i, e0i, which are dropped, as gafro's
# Wrench::transform does.
SANDWICH_OF = {"Twist": "{sandwich} for a unit motor M and a twist X",
               "Wrench": "The wrench part of {sandwich} for a unit motor M and a wrench X"}


def emit_rotation_matrix():
    """Entry (j, k) of the rotation matrix of a rotor R: the e_j component of R e_k ~R."""
    outputs, names = [], []
    for j, k in itertools.product("123", repeat=2):
        outputs.append(_quadratic(sandwich_images(ROTOR, "e" + k).get("e" + j, {})))
        names.append(f"R{j}{k}")
    code = ("def rotation_matrix(m):\n"
            '    """The 3x3 rotation matrix of a unit motor, row by row: entry (j, k) is the e_j\n'
            '    component of R e_k ~R, with R = <M>_(1, e23, e13, e12) the rotor of M."""\n')
    return code + _unpack("m", TYPES["Motor"]) + _return(outputs, names)


def emit_translation():
    """t from M = T R with T = 1 - t ei / 2: t_k = -2 <M ~R>_(e_k i)."""
    motor = TYPES["Motor"]
    code = ("def translation(m):\n"
            '    """The translation t of a unit motor M = T R, T = 1 - t ei / 2:\n'
            '    t = -2 <M ~R>_(e1i, e2i, e3i)."""\n')
    code += _unpack("m", motor)
    outputs = []
    for k in "123":
        poly = {}
        for a, b in itertools.product(motor, ROTOR):
            pair = tuple(sorted((a, b), key=motor.index))
            c = geometric_product(blade(a), blade(b)).get((k, "i"), 0) * reverse_sign(blade(b))
            poly[pair] = poly.get(pair, 0) - 2 * c
        outputs.append(_quadratic(poly))
    return code + _return(outputs, ["t1", "t2", "t3"])


def emit_times_e123i():
    """B I_inf for the rotational part of a twist, I_inf = e123i: the 'dual unit' of screw
    theory, which turns an angular velocity into a linear one (used by exp and log)."""
    twist = TYPES["Twist"]
    terms = bilinear(geometric_product, twist, ("e123i",))
    support = [name for name in twist if name in terms]
    code = ("def times_e123i(b):\n"
            '    """B e123i for a twist B: only its rotation part contributes, onto e1i, e2i,\n'
            '    e3i."""\n')
    code += _unpack("b", twist)
    outputs = [_sum([(c, _var("b", twist[i])) for c, i, _ in terms[name]]) for name in support]
    return code + _return(outputs, support)


HEADER = '''"""Closed-form products of conformal geometric algebra G(4,1) for screwdyn's grades.

GENERATED by tools/generate_cga_products.py from the multiplication table of G(4,1): do not edit.
Regenerate with:  python tools/generate_cga_products.py

Blades (null basis: e0 origin, ei infinity, e0 . ei = -1; e0i = e0 ^ ei, e123i = e123 ^ ei):
{blades}
Every function takes sequences of component arrays (the rows of a components-first array, or a
list of arrays that broadcast) and returns a tuple of component arrays (or one array for a scalar).
``PRODUCTS[(op, left, right)]`` is (function, result type, result blades) for op in geometric,
outer, inner (Hestenes', as in gafro), commutator (X x Y = (XY - YX) / 2).
"""
'''


def generate():
    """The text of ``_cga_products.py``."""
    blades = "\n".join(f"    {name:<16}{_wrap_items(b, ' ' * 20)}" for name, b in TYPES.items())
    parts = [HEADER.format(blades=blades),
             "".join(f"{name.upper()} = {_tuple_literal(b, ' ' * (len(name) + 4))}\n"
                     for name, b in TYPES.items())]
    table = []
    for op, left, right in itertools.product(PRODUCTS, OPERANDS, OPERANDS):
        code, rtype, support = emit_bilinear(op, left, right)
        parts.append(code)
        table.append(f"    ({op!r}, {left!r}, {right!r}): (\n"
                     f"        {op}_{left.lower()}_{right.lower()}, {rtype!r},\n"
                     f"        {_tuple_literal(support, ' ' * 9)}),\n")
    parts += [emit_bilinear("commutator", "Twist", "Wrench", onto="Wrench")[0],
              emit_sandwiches(), emit_rotation_matrix(), emit_translation(), emit_times_e123i(),
              "PRODUCTS = {\n" + "".join(table) + "}\n"]
    return "\n\n".join(parts)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the module is stale")
    args = parser.parse_args(argv)
    text = generate()
    if args.check:
        current = OUTPUT.read_text() if OUTPUT.exists() else ""
        if current != text:
            print(f"{OUTPUT} is out of date: run python tools/generate_cga_products.py")
            return 1
        return 0
    OUTPUT.write_text(text)
    print(f"wrote {OUTPUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
