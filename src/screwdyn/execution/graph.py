"""The scalar program: a hash-consed DAG of float64 operations that a traced recursion leaves.

A ``Graph`` holds nodes by integer id; a ``Node`` is a handle (graph, id) with Python's arithmetic
operators, so code written for floats or arrays builds the graph by running. While it is built:

- every node is created once (hash-consing): the same operation on the same operands returns the
  existing node, which is common-subexpression elimination (``a * b`` and ``b * a`` are one node,
  since IEEE addition and multiplication are commutative, bit for bit);
- operations on constants are folded, in IEEE double precision (as the compiled code would compute
  them: ``math`` for the elementary functions, numpy scalars for division by zero);
- only simplifications that are exact in IEEE arithmetic are made: ``x * 1``, ``x * -1``,
  ``x / 1``, ``x + 0``, ``x - 0``, ``--x``. Never ``x * 0 -> 0`` or ``x - x -> 0``, which are
  wrong for inf and NaN: a NaN or inf input propagates as IEEE says (the zeros that the model's
  constants make exact are dropped earlier, by ``algebra.entries``, the same on every path).

A loop (``Graph.loop``, what ``trace.fori_loop`` makes) is three kinds of node: ``carry``, the
value a body sees of each carried scalar; ``loop``, whose operands are the initial carries and
the values from outside that the body reads, and which holds the body (``Loop``: the number of
iterations, the body's nodes in order, the next value of each carry); ``loop_out``, one final
carry. A body is traced once and runs n times, so a program with loops is shorter than the same
program unrolled (``unroll``), and computes the same bits: the same operations in the same order.
A map (``Graph.map``) is a body run on independent columns; a when (``Graph.when``) a body run
only where a condition holds (the values it passes go through unchanged where it does not), so
that compiled code skips the work: a contact solver's rows of the points that touch nothing.

``Program`` is what a compiler takes: the graph, its inputs (named vectors of scalars) and its
outputs; ``Program.schedule()`` lists the live nodes (dead code eliminated) in an order that
evaluates each node's operands first, depth first from the outputs, so values are used soon
after they are made.
"""
import math
from dataclasses import dataclass

import numpy as np

# op codes: name -> (arity, result kind: "f" float64 or "b" bool)
OPS = {
    "const": (0, "f"), "input": (0, "f"),
    "neg": (1, "f"), "add": (2, "f"), "sub": (2, "f"), "mul": (2, "f"), "div": (2, "f"),
    "sqrt": (1, "f"), "sin": (1, "f"), "cos": (1, "f"), "tan": (1, "f"), "exp": (1, "f"),
    "log": (1, "f"), "atan2": (2, "f"), "fabs": (1, "f"), "pow": (2, "f"), "floor": (1, "f"),
    "max": (2, "f"), "min": (2, "f"),
    "lt": (2, "b"), "le": (2, "b"), "gt": (2, "b"), "ge": (2, "b"), "eq": (2, "b"),
    "ne": (2, "b"), "isfinite": (1, "b"), "isnan": (1, "b"),
    "and": (2, "b"), "or": (2, "b"), "not": (1, "b"),
    "select": (3, "f"), "bool_const": (0, "b"), "to_float": (1, "f"),
    # a loop (``Graph.loop``): its carried values inside the body, the loop, one of its results
    "carry": (0, "f"), "loop": (None, "f"), "loop_out": (1, "f"),
    # a map (``Graph.map``): a column's values inside the body, the map, one of its results
    "item": (0, "f"), "map": (None, "f"), "map_out": (1, "f"),
    # a when (``Graph.when``): a passed value inside the body, the when, one of its results
    "given": (0, "f"), "when": (None, "f"), "when_out": (1, "f"),
}
BODIES = ("loop", "map", "when")  # the nodes that hold a body (``Loop``, ``Map``, ``When``)
RESULTS = ("loop_out", "map_out", "when_out")  # their results
COMMUTATIVE = {"add", "mul", "max", "min", "eq", "ne", "and", "or"}


def _ieee(op, *x):
    """One operation on Python floats with IEEE results (inf and NaN instead of exceptions)."""
    with np.errstate(all="ignore"):
        if op == "neg":
            return -x[0]
        if op == "add":
            return x[0] + x[1]
        if op == "sub":
            return x[0] - x[1]
        if op == "mul":
            return x[0] * x[1]
        if op == "div":
            return float(np.float64(x[0]) / np.float64(x[1]))
        if op in ("sin", "cos", "tan", "exp", "log", "sqrt"):
            try:
                return getattr(math, op)(x[0])
            except (ValueError, OverflowError):
                return float(getattr(np, op)(np.float64(x[0])))
        if op == "atan2":
            return math.atan2(x[0], x[1])
        if op == "fabs":
            return abs(x[0])
        if op == "floor":
            return float(np.floor(x[0]))
        if op == "pow":
            return float(np.float64(x[0]) ** np.float64(x[1]))
        if op == "max":
            return float(np.fmax(x[0], x[1])) if x[0] != x[0] or x[1] != x[1] else max(x)
        if op == "min":
            return float(np.fmin(x[0], x[1])) if x[0] != x[0] or x[1] != x[1] else min(x)
        if op == "to_float":
            return float(x[0])
    raise KeyError(op)


_COMPARE = {"lt": lambda a, b: a < b, "le": lambda a, b: a <= b, "gt": lambda a, b: a > b,
            "ge": lambda a, b: a >= b, "eq": lambda a, b: a == b, "ne": lambda a, b: a != b}


class DataDependentError(TypeError):
    """Python control flow on a traced value (``if x > 0``): a straight-line program cannot
    express it; write it with ``xp.where``."""


@dataclass(frozen=True)
class Loop:
    """The body of a ``loop`` node: ``n`` iterations; ``carries``, the ids of its ``carry``
    nodes; ``order``, the ids of the nodes that read a carry, operands first (what runs n
    times); ``nexts``, the id of each carry's next value (a node of ``order``, a carry, or a
    value from outside the loop: then one of the loop node's operands or a constant)."""

    n: int
    carries: tuple
    order: tuple
    nexts: tuple


@dataclass(frozen=True)
class Map:
    """The body of a ``map`` node: ``n`` columns; ``items``, the ids of its ``item`` nodes (a
    column's values as the body sees them); ``order``, the ids of the nodes that read an item,
    operands first (what runs once per column); ``outs``, the id of each result (a node of
    ``order``, an item, or a value from outside the map). The map node's operands: the
    columns' values (column by column, ``len(items)`` each), then the values from outside
    that the body reads; its ``map_out`` node (c, o) is result o of column c."""

    n: int
    items: tuple
    order: tuple
    outs: tuple


@dataclass(frozen=True)
class When:
    """The body of a ``when`` node: ``params``, the ids of its ``given`` nodes (the passed
    values as the body sees them); ``order``, the ids of the nodes that read one, operands
    first (what runs only where the condition holds); ``outs``, the id of each result that is
    not its passed value unchanged (a node of ``order``, a given, or a value from outside),
    and ``replaces``, the index of the passed value each replaces. The when node's operands:
    the condition, the passed values (``len(params)``), then the values from outside that the
    body reads; its ``when_out`` node j is ``outs[j]`` where the condition holds, and passed
    value ``replaces[j]`` where it does not."""

    params: tuple
    order: tuple
    outs: tuple
    replaces: tuple


class Graph:
    """Nodes by id: ``op[i]``, ``args[i]`` (operand ids), ``value[i]`` (the float of a constant,
    the (input, index) of an input). Build it through ``Node`` operators or ``apply``."""

    def __init__(self):
        self.op, self.args, self.value = [], [], []
        self.cval = []  # the float of each constant node, else None
        self.kinds = []  # "f" or "b" per node
        self._index = {}
        self._handles = []
        self.inputs = []  # input node ids in order of creation
        self._tags = 0  # loops begun (each one's carries are distinct nodes)
        self.loop_outs = {}  # loop (map, when) node id -> its loop_out (map_out, when_out) ids

    def __len__(self):
        return len(self.op)

    # -- node creation ------------------------------------------------------------------
    def _node(self, op, args, value=None):
        key = (op, args, value)
        i = self._index.get(key)
        if i is None:
            i = len(self.op)
            self.op.append(op)
            self.args.append(args)
            self.value.append(value)
            self.cval.append(value[0] if op == "const" else None)
            self.kinds.append(OPS[op][1])
            self._index[key] = i
            self._handles.append(Node(self, i))
        return self._handles[i]

    def constant(self, x):
        x = float(x)
        # -0.0 and 0.0 are different constants (hash them apart); NaN equals itself by repr
        return self._node("const", (), (x, math.copysign(1.0, x), repr(x)))

    def bool_constant(self, b):
        return self._node("bool_const", (), bool(b))

    def input(self, name, index):
        node = self._node("input", (), (name, index))
        if node.i == len(self.op) - 1 and node.i not in self.inputs:
            self.inputs.append(node.i)
        return node

    def loop(self, n, body, init):
        """The final carries (Nodes) of ``n`` iterations of ``body`` from ``init``: ``body``
        maps a list of carry Nodes to a list of as many next values (Nodes or floats), and is
        traced once. n = 0 returns ``init``, n = 1 the body on ``init`` (no loop), and so does
        a body that reads no carry (its values are the same at every iteration)."""
        init = [self.operand(x) for x in init]
        if n <= 0:
            return init
        if n == 1:
            return [self.operand(x) for x in body(list(init))]
        tag = self._tags  # unique, nested loops included
        self._tags += 1
        carries = [self._node("carry", (), (tag, k)) for k in range(len(init))]
        nexts = [self.operand(x) for x in body(list(carries))]
        if len(nexts) != len(init):
            raise ValueError(f"a loop body returned {len(nexts)} values for {len(init)} carries")
        order, free, inside = self._body(carries, nexts)
        if not order and not any(x.i in inside for x in nexts):
            return nexts
        spec = Loop(n, tuple(c.i for c in carries), tuple(order), tuple(x.i for x in nexts))
        node = self._node("loop", tuple(x.i for x in init) + tuple(free), spec)
        outs = [self._node("loop_out", (node.i,), k) for k in range(len(init))]
        self.loop_outs[node.i] = [o.i for o in outs]
        return outs

    def _body(self, params, results):
        """(order, free, inside) of a body traced on the parameter nodes ``params`` (carries or
        items, the newest nodes when it began) to the nodes ``results``: ``order``, the nodes
        that read a parameter, operands first; ``free``, the other non-constant nodes they
        read (values from outside); ``inside``, the ids of the parameters and of ``order``."""
        first = params[0].i if params else len(self.op)  # older nodes read no parameter
        inside = {c.i for c in params}
        order, outside, seen = [], [], set(inside)
        for root in results:
            stack = [(root.i, False)]
            while stack:
                i, expanded = stack.pop()
                if expanded:
                    if any(a in inside for a in self.args[i]):
                        inside.add(i)
                        order.append(i)
                    else:
                        outside.append(i)
                    continue
                if i in seen:
                    continue
                seen.add(i)
                if i < first:
                    outside.append(i)
                    continue
                stack.append((i, True))
                stack.extend((a, False) for a in reversed(self.args[i]) if a not in seen)
        used = {a for i in order for a in self.args[i]} | {x.i for x in results}
        free = [i for i in outside if i in used and self.op[i] not in ("const", "bool_const")]
        return order, free, inside

    def map(self, body, columns):
        """``[body(column) for column in columns]`` as one ``map`` node: ``columns``, C lists
        of K operands (Nodes or floats; booleans become 1.0 / 0.0); ``body`` maps K ``item``
        Nodes to a list of values (the same) and is traced once. Returns C lists of
        ``map_out`` Nodes. The columns are independent, so compiled code runs several in the
        lanes of vector registers (``llvm``). Fewer than two columns, or a body that reads no
        item: the body applied to each column (no map). A body holds no loop or map. Each
        column computes the operations of the unrolled body in the same order, with one
        difference: a constant in a column is not folded into the body (traced once, on items),
        which is exact for arithmetic, but an elementary function of it (sin, exp, ...) is
        computed by the compiled code where the unrolled body holds ``math``'s value: they can
        differ in the last bit."""
        columns = [[self._float(x) for x in column] for column in columns]
        if len(columns) < 2:
            return [[self._float(x) for x in body(list(column))] for column in columns]
        K = len(columns[0])
        if any(len(column) != K for column in columns):
            raise ValueError(f"map: columns of {sorted({len(c) for c in columns})} values; "
                             "every column needs as many")
        tag = self._tags
        self._tags += 1
        items = [self._node("item", (), (tag, k)) for k in range(K)]
        outs = [self._float(x) for x in body(list(items))]
        order, free, inside = self._body(items, outs)
        if not order and not any(x.i in inside for x in outs):
            return [list(outs) for _ in columns]
        if any(self.op[i] in BODIES for i in order):
            raise NotImplementedError("a map body holds no loop, map or when")
        spec = Map(len(columns), tuple(c.i for c in items), tuple(order),
                   tuple(x.i for x in outs))
        node = self._node("map", tuple(x.i for column in columns for x in column)
                          + tuple(free), spec)
        results = [[self._node("map_out", (node.i,), (c, o)) for o in range(len(outs))]
                   for c in range(len(columns))]
        self.loop_outs[node.i] = [x.i for column in results for x in column]
        return results

    def when(self, condition, body, values):
        """``body(values)`` where the boolean ``condition`` holds, else ``values``: one ``when``
        node, whose body compiled code runs only where the condition holds (``When``).
        ``values``: operands (Nodes or floats; booleans become 1.0 / 0.0); ``body`` maps as
        many ``given`` Nodes to as many values and is traced once. Every result is, bit for
        bit, ``select(condition, body's, passed)``, which is what ``unroll`` makes of it. A
        constant condition, or a body that reads no given, needs no node (the body on the
        values; selects). A body holds no loop, map or when."""
        condition = self.operand(condition)
        if self.kinds[condition.i] != "b":
            raise TypeError("when needs a boolean condition")
        values = [self._float(x) for x in values]
        if not values:
            return []
        if self.op[condition.i] == "bool_const":
            return [self._float(x) for x in body(list(values))] if self.value[condition.i] \
                else values
        tag = self._tags
        self._tags += 1
        params = [self._node("given", (), (tag, k)) for k in range(len(values))]
        outs = [self._float(x) for x in body(list(params))]
        if len(outs) != len(values):
            raise ValueError(f"a when body returned {len(outs)} values for {len(values)}")
        replaces = [k for k, (x, p) in enumerate(zip(outs, params)) if x.i != p.i]
        changed = [outs[k] for k in replaces]  # a value returned as given passes through
        order, free, inside = self._body(params, changed)
        if not order:  # nothing to skip: each result a select of a given or outside value
            passed = {p.i: v for p, v in zip(params, values)}
            return [self.apply("select", condition, passed.get(x.i, x), v)
                    for x, v in zip(outs, values)]
        if any(self.op[i] in BODIES for i in order):
            raise NotImplementedError("a when body holds no loop, map or when")
        spec = When(tuple(p.i for p in params), tuple(order), tuple(x.i for x in changed),
                    tuple(replaces))
        node = self._node("when", (condition.i,) + tuple(v.i for v in values) + tuple(free),
                          spec)
        results = list(values)
        for j, k in enumerate(replaces):
            results[k] = self._node("when_out", (node.i,), j)
        self.loop_outs[node.i] = [results[k].i for k in replaces]
        return results

    def _float(self, x):
        """``x`` as a float node (a boolean as 1.0 / 0.0: a map's columns and results)."""
        x = self.operand(x)
        return self.apply("to_float", x) if self.kinds[x.i] == "b" else x

    def replay(self, order, env, of=None):
        """Nodes for ``order`` (node ids, operands first) evaluated again with some operands
        replaced: ``env`` {node id: node} is filled with the new node of each; an operand not
        in ``env`` is ``of(id)`` (default: the node itself). A loop in ``order`` is unrolled
        (``unrolled_loop``). Returns ``env``."""
        h = self._handles
        for i in order:
            op, args = self.op[i], self.args[i]
            get = (lambda a: env[a] if a in env else (of(a) if of else h[a]))
            if op in BODIES:
                for o, x in zip(self.loop_outs[i], self.unrolled(i, get)):
                    env[o] = x
            elif op not in RESULTS:
                env[i] = self.apply(op, *(get(a) for a in args))
        return env

    def unrolled(self, i, of=None):
        """The results of loop, map or when node ``i`` as straight-line nodes
        (``unrolled_loop``, ``unrolled_map``, ``unrolled_when``)."""
        return {"loop": self.unrolled_loop, "map": self.unrolled_map,
                "when": self.unrolled_when}[self.op[i]](i, of)

    def unrolled_loop(self, i, of=None):
        """The final carries of loop node ``i`` as straight-line nodes: its body replayed n
        times; ``of(id)``: the node to use for an operand of the loop (default: itself)."""
        spec, args, h = self.value[i], self.args[i], self._handles
        get = of or (lambda a: h[a])
        k = len(spec.carries)
        current = [get(a) for a in args[:k]]
        free = {a: get(a) for a in args[k:]}
        for _ in range(spec.n):
            env = dict(free)
            env.update(zip(spec.carries, current))
            self.replay(spec.order, env)
            current = [env.get(x, h[x]) for x in spec.nexts]
        return current

    def unrolled_map(self, i, of=None):
        """The results of map node ``i`` (its ``map_out`` nodes' values, column by column) as
        straight-line nodes: its body replayed on each column; ``of`` as ``unrolled_loop``."""
        spec, args, h = self.value[i], self.args[i], self._handles
        get = of or (lambda a: h[a])
        K = len(spec.items)
        free = {a: get(a) for a in args[spec.n * K:]}
        out = []
        for c in range(spec.n):
            env = dict(free)
            env.update(zip(spec.items, (get(a) for a in args[c * K:(c + 1) * K])))
            self.replay(spec.order, env)
            out += [env.get(x, h[x]) for x in spec.outs]
        return out

    def unrolled_when(self, i, of=None, keep=False):
        """The results of when node ``i`` (its ``when_out`` nodes' values) as straight-line
        nodes: its body replayed on the passed values, each result a select of it and the
        passed value (the same bits); with ``keep``, a new when node instead (its operands
        replaced); ``of`` as ``unrolled_loop``."""
        spec, args, h = self.value[i], self.args[i], self._handles
        get = of or (lambda a: h[a])
        k = len(spec.params)
        condition, values = get(args[0]), [get(a) for a in args[1:1 + k]]
        free = {a: get(a) for a in args[1 + k:]}

        def body(given):
            env = dict(free)
            env.update(zip(spec.params, given))
            self.replay(spec.order, env)
            out = list(given)
            for x, j in zip(spec.outs, spec.replaces):
                out[j] = env.get(x, h[x])
            return out

        if keep:
            new = self.when(condition, body, values)
        else:
            new = [self.apply("select", condition, x, v) for x, v in zip(body(values), values)]
        return [new[j] for j in spec.replaces]

    def const_value(self, i):
        """The float of constant node i, or None."""
        return self.cval[i]

    def kind(self, i):
        return self.kinds[i]

    def arith(self, op, x, y):
        """``apply`` for add, sub, mul and div of two float operands (Nodes of this graph or
        Python floats): the hot path of tracing, with the same folding and simplifications."""
        if type(x) is Node:
            i, cx = x.i, self.cval[x.i]
            if self.kinds[i] != "f":
                return self.apply(op, x, y)
        else:
            i, cx = -1, float(x)
        if type(y) is Node:
            j, cy = y.i, self.cval[y.i]
            if self.kinds[j] != "f":
                return self.apply(op, x, y)
        else:
            j, cy = -1, float(y)
        if cx is not None and cy is not None:
            if op == "add":
                return self.constant(cx + cy)
            if op == "sub":
                return self.constant(cx - cy)
            if op == "mul":
                return self.constant(cx * cy)
            return self.constant(_ieee(op, cx, cy))
        if i < 0 or j < 0 or cx is not None or cy is not None:
            if i < 0:
                i = self.constant(cx).i
            if j < 0:
                j = self.constant(cy).i
            folded = self._fold(op, (i, j))
            if folded is not None:
                return folded
        elif op == "add" or op == "sub":
            folded = self._fold(op, (i, j))  # a + (-b) -> a - b and the like
            if folded is not None:
                return folded
        if (op == "add" or op == "mul") and i > j:
            i, j = j, i
        node = self._index.get((op, (i, j), None))
        return self._handles[node] if node is not None else self._node(op, (i, j))

    def operand(self, x):
        """A node of this graph for x (a Node, a Python or numpy number, a bool)."""
        if type(x) is Node:
            if x.g is not self:
                raise ValueError("a node of another graph")
            return x
        if isinstance(x, (bool, np.bool_)):
            return self.bool_constant(x)
        if isinstance(x, (int, float, np.floating, np.integer)):
            return self.constant(x)
        raise TypeError(f"cannot use {type(x).__name__} in a traced scalar program")

    def apply(self, op, *operands):
        """The node of ``op`` on ``operands`` (nodes or numbers), folded and simplified."""
        nodes = [self.operand(x) for x in operands]
        ids = tuple(n.i for n in nodes)
        kinds = tuple(self.kind(i) for i in ids)
        if op in ("and", "or", "not"):
            if any(k != "b" for k in kinds):
                raise TypeError(f"'{op}' needs boolean operands")
        elif op == "select":
            if kinds[0] != "b":
                raise TypeError("select needs a boolean condition")
        elif any(k != "f" for k in kinds) and op != "to_float":
            raise TypeError(f"'{op}' needs float operands (convert booleans with to_float)")
        folded = self._fold(op, ids)
        if folded is not None:
            return folded
        if op in COMMUTATIVE and ids[0] > ids[1]:
            ids = (ids[1], ids[0])
        return self._node(op, ids)

    def _fold(self, op, ids):
        """A node for ``op`` on ``ids`` computed at compile time or simplified, or None."""
        c = [self.const_value(i) for i in ids]
        if op in ("and", "or", "not", "select", "to_float"):
            b = [self.value[i] if self.op[i] == "bool_const" else None for i in ids]
            if op == "not" and b[0] is not None:
                return self.bool_constant(not b[0])
            if op == "to_float" and b[0] is not None:
                return self.constant(1.0 if b[0] else 0.0)
            if op in ("and", "or"):
                if b[0] is not None and b[1] is not None:
                    return self.bool_constant(b[0] and b[1] if op == "and" else b[0] or b[1])
                for known, other in ((b[0], ids[1]), (b[1], ids[0])):
                    if known is not None:
                        if op == "and":
                            return self._handles[other] if known else self.bool_constant(False)
                        return self.bool_constant(True) if known else self._handles[other]
            if op == "select":
                if b[0] is not None:
                    return self._handles[ids[1] if b[0] else ids[2]]
                if ids[1] == ids[2]:
                    return self._handles[ids[1]]
            if op == "not" and self.op[ids[0]] == "not":
                return self._handles[self.args[ids[0]][0]]
            return None
        if all(x is not None for x in c):
            if op in _COMPARE:
                return self.bool_constant(_COMPARE[op](*c))
            if op == "isfinite":
                return self.bool_constant(math.isfinite(c[0]))
            if op == "isnan":
                return self.bool_constant(math.isnan(c[0]))
            return self.constant(_ieee(op, *c))
        h = self._handles
        if op == "mul":
            for k, x in ((c[0], ids[1]), (c[1], ids[0])):
                if k == 1.0:
                    return h[x]
                if k == -1.0:
                    return self.apply("neg", h[x])
        elif op == "add":
            if c[0] == 0.0:
                return h[ids[1]]
            if c[1] == 0.0:
                return h[ids[0]]
            if self.op[ids[1]] == "neg":  # a + (-b) = a - b, exactly
                return self.apply("sub", h[ids[0]], h[self.args[ids[1]][0]])
            if self.op[ids[0]] == "neg":
                return self.apply("sub", h[ids[1]], h[self.args[ids[0]][0]])
        elif op == "sub":
            if c[1] == 0.0:
                return h[ids[0]]
            if c[0] == 0.0 and math.copysign(1.0, c[0]) < 0:  # -0 - x = -x exactly
                return self.apply("neg", h[ids[1]])
            if self.op[ids[1]] == "neg":  # a - (-b) = a + b
                return self.apply("add", h[ids[0]], h[self.args[ids[1]][0]])
        elif op == "div":
            if c[1] == 1.0:
                return h[ids[0]]
            if c[1] == -1.0:
                return self.apply("neg", h[ids[0]])
        elif op == "neg":
            if self.op[ids[0]] == "neg":
                return h[self.args[ids[0]][0]]
        elif op == "pow" and c[1] is not None:
            if c[1] == 1.0:
                return h[ids[0]]
            if c[1] == 2.0:
                return self.apply("mul", h[ids[0]], h[ids[0]])
            if c[1] in (3.0, 4.0):  # numpy's x**n on floats is a correctly used pow; any order
                square = self.apply("mul", h[ids[0]], h[ids[0]])
                return self.apply("mul", square, h[ids[0]] if c[1] == 3.0 else square)
            if c[1] == 0.5:
                return self.apply("sqrt", h[ids[0]])
        return None


class Node:
    """A traced scalar: a node of a ``Graph``. Arithmetic, comparisons and ``&``, ``|``, ``~``
    build new nodes; using one as a Python truth value raises ``DataDependentError``."""

    __slots__ = ("g", "i")
    __array_priority__ = 1000

    def __init__(self, g, i):
        self.g, self.i = g, i

    def __repr__(self):
        g, i = self.g, self.i
        if g.op[i] == "const":
            return f"Node(const {g.value[i][0]!r})"
        return f"Node(#{i} {g.op[i]}{g.args[i] if g.args[i] else g.value[i]})"

    def __add__(self, y):
        return self.g.arith("add", self, y)

    def __radd__(self, y):
        return self.g.arith("add", y, self)

    def __sub__(self, y):
        return self.g.arith("sub", self, y)

    def __rsub__(self, y):
        return self.g.arith("sub", y, self)

    def __mul__(self, y):
        return self.g.arith("mul", self, y)

    def __rmul__(self, y):
        return self.g.arith("mul", y, self)

    def __truediv__(self, y):
        return self.g.arith("div", self, y)

    def __rtruediv__(self, y):
        return self.g.arith("div", y, self)

    def __pow__(self, y):
        return self.g.apply("pow", self, y)

    def __rpow__(self, y):
        return self.g.apply("pow", y, self)

    def __neg__(self):
        return self.g.apply("neg", self)

    def __pos__(self):
        return self

    def __abs__(self):
        return self.g.apply("fabs", self)

    def __lt__(self, y):
        return self.g.apply("lt", self, y)

    def __le__(self, y):
        return self.g.apply("le", self, y)

    def __gt__(self, y):
        return self.g.apply("gt", self, y)

    def __ge__(self, y):
        return self.g.apply("ge", self, y)

    def __eq__(self, y):
        return self.g.apply("eq", self, y)

    def __ne__(self, y):
        return self.g.apply("ne", self, y)

    __hash__ = object.__hash__

    def __and__(self, y):
        return self.g.apply("and", self, y)

    __rand__ = __and__

    def __or__(self, y):
        return self.g.apply("or", self, y)

    __ror__ = __or__

    def __invert__(self):
        return self.g.apply("not", self)

    def __bool__(self):
        raise DataDependentError("a traced value was used as a Python truth value (an `if` or "
                                 "`and` on data): the compiled path needs xp.where instead")

    def __float__(self):
        raise DataDependentError("a traced value was converted to a Python float")

    __int__ = __index__ = __float__

    # numpy calls these methods for its ufuncs on object arrays
    def sin(self):
        return self.g.apply("sin", self)

    def cos(self):
        return self.g.apply("cos", self)

    def tan(self):
        return self.g.apply("tan", self)

    def exp(self):
        return self.g.apply("exp", self)

    def log(self):
        return self.g.apply("log", self)

    def sqrt(self):
        return self.g.apply("sqrt", self)

    def arctan2(self, y):
        return self.g.apply("atan2", self, y)

    def floor(self):
        return self.g.apply("floor", self)


class Program:
    """A straight-line program: ``graph``; ``inputs``, a list of (name, size) whose scalars are
    the graph's input nodes (name, index); ``outputs``, node ids, in the flat order of the
    result, of shape ``output_shape``; ``guard``, names of inputs any non-finite value of which
    makes every finite output NaN (``call.propagate_non_finite``'s rule, applied by the
    compiled kernel to such states after their outputs, and by ``evaluate``; kept by
    ``unroll_maps``, not by the derivative transformations, whose programs get their own)."""

    def __init__(self, graph, inputs, outputs, output_shape, guard=()):
        self.graph, self.inputs = graph, list(inputs)
        self.guard = tuple(guard)
        self.outputs = [graph.operand(o).i for o in outputs]
        self.output_shape = tuple(output_shape)
        self._schedule = None
        if any(graph.kind(i) != "f" for i in self.outputs):
            self.outputs = [i if graph.kind(i) == "f"
                            else graph.apply("to_float", graph._handles[i]).i
                            for i in self.outputs]

    def schedule(self):
        """The live nodes, operands before their users (depth first from the outputs); a
        loop's ``loop_out`` nodes right after it (the nodes of its body are in its ``Loop``).
        Computed once (a graph's nodes never change; a Talos's 195,000 took 0.36 s)."""
        if self._schedule is None:
            self._schedule = self._depth_first()
        return self._schedule

    def _depth_first(self):
        g, seen, order = self.graph, set(), []
        for root in self.outputs:
            if root in seen:
                continue
            stack = [(root, False)]
            while stack:
                i, expanded = stack.pop()
                if expanded:
                    order.append(i)
                    for o in g.loop_outs.get(i, ()):  # a loop's results right after it
                        if o not in seen:
                            seen.add(o)
                            order.append(o)
                    continue
                if i in seen:
                    continue
                seen.add(i)
                stack.append((i, True))
                for a in reversed(g.args[i]):
                    if a not in seen:
                        stack.append((a, False))
        return order

    def count(self):
        """{op: number of live nodes}."""
        counts = {}
        for i in self.schedule():
            op = self.graph.op[i]
            counts[op] = counts.get(op, 0) + 1
        return counts

    def evaluate(self, **inputs):
        """Evaluate with Python floats (a reference for tests): inputs by name, 1-D sequences."""
        values = {}
        _evaluate(self.graph, self.schedule(), values, inputs)
        out = np.array([values[i] for i in self.outputs], dtype=float)
        if not all(np.isfinite(np.asarray(inputs[name], dtype=float)).all()
                   for name in self.guard):
            out[np.isfinite(out)] = np.nan
        return out.reshape(self.output_shape)


def _body_constants(g, order, results, values):
    """The Python values of the constants that a body (its nodes ``order``, its ``results``)
    reads, into ``values``: they are not nodes of the body, so no schedule evaluates them."""
    for a in {a for b in order for a in g.args[b]} | set(results):
        if g.op[a] in ("const", "bool_const"):
            values[a] = g.value[a][0] if g.op[a] == "const" else g.value[a]


def _evaluate(g, order, values, inputs):
    """Python floats of the nodes ``order`` into ``values`` (loops run their body n times)."""
    for i in order:
        op, args = g.op[i], g.args[i]
        if op == "const":
            values[i] = g.value[i][0]
        elif op == "bool_const":
            values[i] = g.value[i]
        elif op == "input":
            name, index = g.value[i]
            values[i] = float(np.asarray(inputs[name], dtype=float).reshape(-1)[index])
        elif op in _COMPARE:
            values[i] = _COMPARE[op](values[args[0]], values[args[1]])
        elif op == "isfinite":
            values[i] = math.isfinite(values[args[0]])
        elif op == "isnan":
            values[i] = math.isnan(values[args[0]])
        elif op == "and":
            values[i] = values[args[0]] and values[args[1]]
        elif op == "or":
            values[i] = values[args[0]] or values[args[1]]
        elif op == "not":
            values[i] = not values[args[0]]
        elif op == "select":
            values[i] = values[args[1]] if values[args[0]] else values[args[2]]
        elif op == "loop":
            spec = g.value[i]
            current = [values[a] for a in args[:len(spec.carries)]]
            _body_constants(g, spec.order, spec.nexts, values)
            for _ in range(spec.n):
                values.update(zip(spec.carries, current))
                _evaluate(g, spec.order, values, inputs)
                current = [values[x] for x in spec.nexts]
            values.update(zip(g.loop_outs[i], current))
        elif op == "map":
            spec, K, out = g.value[i], len(g.value[i].items), []
            _body_constants(g, spec.order, spec.outs, values)
            for c in range(spec.n):
                values.update(zip(spec.items, (values[a] for a in args[c * K:(c + 1) * K])))
                _evaluate(g, spec.order, values, inputs)
                out += [values[x] for x in spec.outs]
            values.update(zip(g.loop_outs[i], out))
        elif op == "when":
            spec, k = g.value[i], len(g.value[i].params)
            passed = [values[a] for a in args[1:1 + k]]
            out = [passed[j] for j in spec.replaces]
            if values[args[0]]:
                _body_constants(g, spec.order, spec.outs, values)
                values.update(zip(spec.params, passed))
                _evaluate(g, spec.order, values, inputs)
                out = [values[x] for x in spec.outs]
            values.update(zip(g.loop_outs[i], out))
        elif op in RESULTS:
            continue
        else:
            values[i] = _ieee(op, *(values[a] for a in args))


def _partials(g, i):
    """The local derivatives of float node i: [(operand id, d node / d operand)] (a node or a
    float), the exact rule of its operation (d sin a = cos a da, ...); ``_routing`` for select,
    max and min. Shared by ``jacobian`` (forward) and ``vjp`` (reverse)."""
    h, op, args = g._handles, g.op[i], g.args[i]
    y, a = h[i], [h[x] for x in args]
    if op == "neg":
        return [(args[0], -1.0)]
    if op in ("add", "sub"):
        return [(args[0], 1.0), (args[1], 1.0 if op == "add" else -1.0)]
    if op == "mul":
        return [(args[0], a[1]), (args[1], a[0])]
    if op == "div":
        return [(args[0], 1.0 / a[1]), (args[1], -(y / a[1]))]
    if op == "sqrt":
        return [(args[0], 0.5 / y)]
    if op == "sin":
        return [(args[0], g.apply("cos", a[0]))]
    if op == "cos":
        return [(args[0], -g.apply("sin", a[0]))]
    if op == "tan":
        return [(args[0], 1.0 + y * y)]
    if op == "exp":
        return [(args[0], y)]
    if op == "log":
        return [(args[0], 1.0 / a[0])]
    if op == "fabs":
        return [(args[0], g.apply("select", g.apply("ge", a[0], 0.0), 1.0, -1.0))]
    if op == "pow":
        if g.cval[args[1]] is None:
            raise NotImplementedError("derivative of x ** y with a traced exponent")
        c = g.cval[args[1]]
        return [(args[0], c * g.apply("pow", a[0], c - 1.0))]
    if op == "atan2":
        r2 = a[0] * a[0] + a[1] * a[1]
        return [(args[0], a[1] / r2), (args[1], -(a[0] / r2))]
    raise NotImplementedError(f"no derivative for op {op!r}")


def _routing(g, i):
    """(condition node, the operand taken where it holds, the other) of a select, max or min
    node i: its derivative is the chosen operand's (the first of max and min on ties)."""
    op, args = g.op[i], g.args[i]
    if op == "select":
        return g._handles[args[0]], args[1], args[2]
    a = [g._handles[x] for x in args]
    return g.apply("ge" if op == "max" else "le", a[0], a[1]), args[0], args[1]


_ROUTED = ("max", "min", "select")
_CONSTANT = ("const", "bool_const", "floor", "to_float")  # no derivative (or a zero one)


def jacobian(program, wrt):
    """The program of the derivatives of ``program``'s outputs with respect to the scalars of
    the inputs named ``wrt`` (forward mode, in the same graph: derivatives share nodes with the
    values and each other): outputs of shape ``output_shape + (n,)``, column j the derivative
    with respect to the j-th scalar of the ``wrt`` inputs in order. Exact rules per operation
    (``_partials``); comparisons and floor have none, ``select`` selects derivatives. Loops
    are unrolled first (``unroll``)."""
    program = unroll(program)
    g = program.graph
    sizes = dict(program.inputs)
    columns = {}
    for name in wrt:
        for k in range(sizes[name]):
            columns[g.input(name, k).i] = len(columns)
    n = len(columns)
    tangent = {}
    zero = {}

    def t(i):
        return tangent.get(i, zero)

    for i in program.schedule():
        op = g.op[i]
        if op == "input":
            d = {columns[i]: g.constant(1.0)} if i in columns else {}
        elif op in _CONSTANT or OPS[op][1] == "b":
            d = {}
        elif op in _ROUTED:
            cond, first, second = _routing(g, i)
            keys = set(t(first)) | set(t(second))
            d = {j: g.apply("select", cond, t(first).get(j, 0.0), t(second).get(j, 0.0))
                 for j in keys}
        else:
            d = {}
            for arg, factor in _partials(g, i):
                for j, v in t(arg).items():
                    term = factor * v
                    d[j] = d[j] + term if j in d else term
        if d:
            tangent[i] = d
    outputs = [t(i).get(j, 0.0) for i in program.outputs for j in range(n)]
    return Program(g, program.inputs, outputs, program.output_shape + (n,))


@dataclass(frozen=True)
class Reverse:
    """A reverse-mode link in a chain of derivatives (``native.get``'s ``derivatives``): the
    program of the cotangents of the inputs ``names`` given a cotangent of the outputs
    (``vjp``), where a plain tuple of names is a forward-mode link (``jacobian``)."""

    names: tuple


def vjp(program, wrt, cotangent):
    """The program of the vector-Jacobian product of ``program``: a new input named
    ``cotangent``, as many scalars as the outputs (in their flat order), and as outputs the sum
    over outputs of cotangent * d output / d x for every scalar x of the inputs named ``wrt``
    in order (shape (n,)): reverse mode (adjoints accumulated from the outputs back to the
    inputs, in the same graph), one sweep whatever n is, where ``jacobian`` makes n columns.
    The same rules as ``jacobian`` (``_partials``; ``select``, ``max`` and ``min`` route the
    adjoint to the operand they chose; comparisons and floor have none). Loops are unrolled
    first (``unroll``)."""
    program = unroll(program)
    g = program.graph
    sizes = dict(program.inputs)
    wanted = [g.input(name, k).i for name in wrt for k in range(sizes[name])]
    order = program.schedule()
    active = set(wanted)  # the nodes whose value depends on a scalar of ``wrt``
    for i in order:
        if g.kinds[i] == "f" and g.op[i] not in _CONSTANT and any(
                a in active for a in g.args[i]):
            active.add(i)
    parts = {}  # node -> the adjoint contributions of its users (and of the outputs)

    def add(i, v):  # v: the contribution of one user of the active node i
        parts.setdefault(i, []).append(v)

    for k, o in enumerate(program.outputs):
        if o in active:
            add(o, g.input(cotangent, k))
    for i in reversed(order):
        terms = parts.get(i)
        if not terms or g.op[i] == "input":
            continue
        ybar = _total(terms)
        if g.op[i] in _ROUTED:
            cond, first, second = _routing(g, i)
            if first in active:
                add(first, g.apply("select", cond, ybar, 0.0))
            if second in active:
                add(second, g.apply("select", cond, 0.0, ybar))
        else:
            for arg, factor in _partials(g, i):
                if arg in active:
                    add(arg, ybar * factor)
    outputs = [_total(parts.get(w, [0.0])) for w in wanted]
    inputs = list(program.inputs) + [(cotangent, len(program.outputs))]
    return Program(g, inputs, outputs, (len(wanted),))


def unroll_maps(program):
    """``program`` with every map replaced by its body once per column (``Graph.unrolled_map``),
    those in loop bodies too (the loops kept, rebuilt: ``_loop_unrolling_maps``), in the same
    graph; the same program if it has no map. The unrolled columns fold their constants
    again."""
    g = program.graph
    order = program.schedule()
    if not any(_holds_map(g, i) for i in order):
        return program
    env = _replay_unrolling_maps(g, order, {})
    h = g._handles
    return Program(g, program.inputs, [env.get(i, h[i]) for i in program.outputs],
                   program.output_shape, program.guard)


def _holds_map(g, i):
    """Whether node i is a map or a loop whose body (or a nested loop's) holds one."""
    return g.op[i] == "map" or (g.op[i] == "loop"
                                and any(_holds_map(g, b) for b in g.value[i].order))


def _replay_unrolling_maps(g, order, env):
    """``env`` {node id: node} filled with new nodes for ``order`` where an operand is in
    ``env`` or a map is to be unrolled: maps unrolled, loops rebuilt (``_loop_unrolling_maps``)."""
    h = g._handles

    def get(a):
        return env[a] if a in env else h[a]

    for i in order:
        op, args = g.op[i], g.args[i]
        if op == "map":
            env.update(zip(g.loop_outs[i], g.unrolled_map(i, get)))
        elif op == "loop" and (_holds_map(g, i) or any(a in env for a in args)):
            env.update(zip(g.loop_outs[i], _loop_unrolling_maps(g, i, get)))
        elif op == "when" and any(a in env for a in args):  # kept, its operands replaced
            env.update(zip(g.loop_outs[i], g.unrolled_when(i, get, keep=True)))
        elif op not in RESULTS and any(a in env for a in args):
            env[i] = g.apply(op, *(get(a) for a in args))
    return env


def _loop_unrolling_maps(g, i, get):
    """The final carries of a new loop: loop node ``i`` with the maps of its body unrolled
    (``_replay_unrolling_maps``); ``get(id)``: the node to use for an operand of the loop."""
    spec, args = g.value[i], g.args[i]
    k = len(spec.carries)
    init = [get(a) for a in args[:k]]
    free = {a: get(a) for a in args[k:]}

    def body(carries):
        env = dict(free)
        env.update(zip(spec.carries, carries))
        env = _replay_unrolling_maps(g, spec.order, env)
        return [env.get(x, g._handles[x]) for x in spec.nexts]

    return g.loop(spec.n, body, init)


def unroll(program):
    """``program`` with every loop replaced by its body repeated (``Graph.unrolled_loop``),
    every map by its body once per column (``Graph.unrolled_map``) and every when by selects of
    its body's results (``Graph.unrolled_when``), in the same graph: the straight-line program
    that the derivative transformations take. The same program if it has none."""
    g = program.graph
    order = program.schedule()
    if not any(g.op[i] in BODIES for i in order):
        return program
    env = {}
    h = g._handles
    for i in order:
        op, args = g.op[i], g.args[i]
        if op in BODIES:
            env.update(zip(g.loop_outs[i],
                           g.unrolled(i, lambda a: env[a] if a in env else h[a])))
        elif op not in RESULTS and any(a in env for a in args):
            env[i] = g.apply(op, *(env[a] if a in env else h[a] for a in args))
    return Program(g, program.inputs, [env.get(i, h[i]) for i in program.outputs],
                   program.output_shape)


def _total(terms):
    """The sum of a non-empty list of nodes (or floats), left to right."""
    total = terms[0]
    for v in terms[1:]:
        total = total + v
    return total


def substitute(program, constants):
    """``program`` with the inputs named in ``constants`` {name: values (flat)} replaced by those
    constants, rebuilt in a new graph (folded and simplified again); its remaining inputs keep
    their names and order. (A derivative taken with respect to an input and then evaluated at a
    fixed point of it: the tangent-space derivatives of ``native.trace_program``.) Loops are
    unrolled (``unroll``)."""
    program = unroll(program)
    g, new = program.graph, Graph()
    values = {name: np.asarray(v, dtype=float).reshape(-1) for name, v in constants.items()}
    mapped = {}
    for i in program.schedule():
        op, args = g.op[i], g.args[i]
        if op == "const":
            mapped[i] = new.constant(g.value[i][0])
        elif op == "bool_const":
            mapped[i] = new.bool_constant(g.value[i])
        elif op == "input":
            name, index = g.value[i]
            mapped[i] = (new.constant(values[name][index]) if name in values
                         else new.input(name, index))
        else:
            mapped[i] = new.apply(op, *(mapped[a] for a in args))
    inputs = [(name, size) for name, size in program.inputs if name not in values]
    return Program(new, inputs, [mapped[i] for i in program.outputs], program.output_shape)
