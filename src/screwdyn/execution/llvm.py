"""Machine code for a ``graph.Program``, with LLVM through llvmlite (no C compiler at run time).

A program becomes one function of LLVM IR, written here as text::

    void kernel(i64 n, const double **inputs, const i64 *strides, double *out)

which evaluates the program for states s = 0 .. n-1: input k of state s is the vector at
``inputs[k] + s * strides[k]`` (a stride of 0 broadcasts one vector over the batch), the result
of state s goes to ``out + s * size``. The body of the loop is the program's straight-line code:
all loads first, then every live node once, in the schedule's order, each output stored as soon
as it is computed; a loop of the program becomes a loop with phis, a map a loop over vector
registers (``_Segment.map``), a when a branch around its body (``_Segment.when``). After the
states, a pass applies ``Program.guard`` (a state with a non-finite input gets NaN in its finite
outputs). Only IEEE operations are emitted (no fast-math flags: no reassociation, no fused
multiply-adds), so each state's result is the same bits whether it runs alone or in a batch of
any size.

``compile_object`` optimises the IR for the host CPU and returns object code (bytes), which the
disk cache keeps; ``load`` links object code into the process (LLVM's MCJIT, milliseconds) and
returns the address of a function. The elementary functions (sin, cos, ...) are the C library's,
resolved in the process when the object code is loaded.
"""
import ctypes
import functools
import re
import struct
import threading

from . import graph

_LOCK = threading.RLock()  # LLVM's global state is not thread-safe
_STATE = {}

_BINARY_IR = {"add": "fadd", "sub": "fsub", "mul": "fmul", "div": "fdiv"}
_INTRINSIC_1 = {"sqrt": "llvm.sqrt", "exp": "llvm.exp", "log": "llvm.log", "fabs": "llvm.fabs",
                "floor": "llvm.floor"}
_INTRINSIC_2 = {"pow": "llvm.pow", "max": "llvm.maximum", "min": "llvm.minimum"}
_LIBM_1 = {"tan": "tan"}  # C library functions without an LLVM intrinsic: one call per lane
_LIBM_2 = {"atan2": "atan2"}
_FCMP = {"lt": "olt", "le": "ole", "gt": "ogt", "ge": "oge", "eq": "oeq", "ne": "une"}
_INPUT_LIKE = ("const", "bool_const", "input")

SEGMENT = 4000  # nodes per function of LLVM IR (see kernel_ir)
STACK_TABLE = 1 << 16  # bytes: a larger table of a function (a map's) is on the heap
STACK_SLOTS = 2  # stack slots per value of IR that ``stack_bound`` allows
BLOCK = 1000  # lines of IR after which a node starts a new basic block (see _Segment.node)

# sine and cosine (see _Segment.sincos_of): Cody-Waite reduction by pi/2 in three parts of 33
# bits and a tail, and FreeBSD msun's kernels __kernel_sin and __kernel_cos on [-pi/4, pi/4]
_PIO2 = (1.57079632673412561417e+00, 6.07710050630396597660e-11, 2.02226624871116645580e-21,
         8.47842766036889956997e-32)
_TWO_OVER_PI = 6.36619772367581382433e-01
_SIN = (-1.66666666666666324348e-01, 8.33333333332248946124e-03, -1.98412698298579493134e-04,
        2.75573137070700676789e-06, -2.50507602534068634195e-08, 1.58969099521155010221e-10)
_COS = (4.16666666666666019037e-02, -1.38888888888741095749e-03, 2.48015872894767294178e-05,
        -2.75573143513906633035e-07, 2.08757232129817482790e-09, -1.13596475577881948265e-11)
SINCOS_LIMIT = 823549.6  # |x| up to 2^19 pi/2: the reduction's products are exact


def _hex(x):
    """An exact LLVM double literal."""
    return "0x%016X" % struct.unpack("<Q", struct.pack("<d", x))[0]


@functools.cache
def vector_width():
    """States per iteration of a kernel's vector loop on this CPU: 4 with AVX, else 2. On a
    Zen 4 (AVX-512), 8 lanes ran the Talos's forward dynamics and mass matrix as fast as 4 and
    the Panda's programs up to 1.3x faster, within the noise of a shared machine; 4 keeps the
    code smaller and the same on AVX2 and AVX-512 machines. Asked once a process (LLVM's
    answer costs 0.1 ms, and a program's layout asks for every value of its maps)."""
    return 4 if _llvm().get_host_cpu_features().get("avx") else 2


class _Types:
    """The LLVM types and literals of one lane count (1: scalar code)."""

    def __init__(self, width):
        self.width = width
        if width == 1:
            self.f, self.b, self.i, self.suffix = "double", "i1", "i64", "f64"
        else:
            self.f, self.b, self.i = (f"<{width} x double>", f"<{width} x i1>",
                                      f"<{width} x i64>")
            self.suffix = f"v{width}f64"

    def const(self, x):
        lit = _hex(float(x))
        return lit if self.width == 1 else "<" + ", ".join([f"double {lit}"] * self.width) + ">"

    def bool(self, b):
        lit = "true" if b else "false"
        return lit if self.width == 1 else "<" + ", ".join([f"i1 {lit}"] * self.width) + ">"

    def int(self, k):
        return str(k) if self.width == 1 else "<" + ", ".join([f"i64 {k}"] * self.width) + ">"

    def to_float(self, v):
        """The instruction that makes boolean ``v`` 1.0 or 0.0: a select, not ``uitofp`` (which
        LLVM's fast instruction selector does not take: at level 0 a ``uitofp`` of a boolean
        sent the whole block before it to the slow selector, 0.79 s instead of 0.03 s for
        11,000 lines of ANYmal's contact program)."""
        return f"select {self.b} {v}, {self.f} {self.const(1.0)}, {self.f} {self.const(0.0)}"


def kernel_ir(program, name="kernel", segment=SEGMENT, width=1, block=BLOCK):
    """The LLVM IR (text) of ``program`` as the batched kernel described in the module
    docstring. ``width`` > 1: a vector loop runs ``width`` states at once in SIMD lanes (the same
    operations lane by lane, so the same bits as one state alone), and a scalar loop the rest.

    Programs longer than ``segment`` nodes are split into functions of that many nodes, called
    one after the other for each state (or group of states), with the values that cross from one
    to a later one kept in a scratch array: LLVM's compile time grows faster than linearly with
    the length of one function (a 100-link chain's mass matrix, 86,000 nodes in one function,
    did not compile in 3 minutes). The split changes no result: each node is the same operation.
    Within a function, a basic block ends after about ``block`` lines (``_Segment.node``), which
    changes no result either.

    The vector loop runs ``program`` with its maps unrolled (``graph.unroll_maps``: lanes hold
    states, and the unrolled columns fold their constants again, as the sparse columns of
    forward dynamics' derivatives do), the scalar loop ``program`` with its maps."""
    g = program.graph
    inputs = {input_name: k for k, (input_name, _) in enumerate(program.inputs)}
    widths = (1,) if width == 1 else (width, 1)
    layouts = {w: _layout(graph.unroll_maps(program) if w > 1 else program, segment, w)
               for w in widths}
    declared = set()
    functions = []
    for w in widths:
        segments, slots, outputs_of, tables = layouts[w][1:5]
        for s, part in enumerate(segments):
            body = _Segment(g, part, inputs, slots, outputs_of.get(s, ()), declared,
                            _Types(w), tables, block).ir()
            functions.append(
                f"define internal void @{name}.w{w}.seg{s}(ptr noalias nocapture readonly %rows, "
                f"ptr noalias nocapture %scratch, ptr noalias nocapture %orows) nounwind "
                f"noinline {{\nentry:\n{body}}}")
    used = sorted({g.value[i][0] for w in widths for i in layouts[w][0] if g.op[i] == "input"},
                  key=inputs.__getitem__)
    scratch = max(max(layouts[w][5], 1) * w for w in widths)
    functions_of = {w: len(layouts[w][1]) for w in widths}  # segment functions per width
    size = len(program.outputs)
    sizes = dict(program.inputs)
    guard = [name for name in program.guard if sizes.get(name) and size]
    k_in = max(len(inputs), 1)
    head = [f"define void @{name}(i64 %n, ptr noalias nocapture readonly %ins, "
            f"ptr noalias nocapture readonly %strides, ptr noalias nocapture %out) "
            f"nounwind {{",
            "entry:",
            f"  %rows = alloca [{k_in * widths[0]} x ptr]",
            "  %orows = alloca [1 x ptr]",
            f"  %vout = alloca [{max(size, 1) * widths[0]} x double], align 64"]
    allocate, free, needs = _table_ir("%scratch", scratch, 64)
    head.append(allocate)
    declared.update(needs)
    for input_name in sorted(set(used) | set(guard), key=inputs.__getitem__):
        k = inputs[input_name]
        head += [f"  %inp{k}.p = getelementptr ptr, ptr %ins, i64 {k}",
                 f"  %inp{k} = load ptr, ptr %inp{k}.p",
                 f"  %st{k}.p = getelementptr i64, ptr %strides, i64 {k}",
                 f"  %st{k} = load i64, ptr %st{k}.p"]
    if width > 1:
        head += [f"  %nrem = srem i64 %n, {width}",
                 "  %nvec = sub i64 %n, %nrem",
                 "  %anyvec = icmp sgt i64 %nvec, 0",
                 "  br i1 %anyvec, label %vloop, label %scheck",
                 "vloop:",
                 "  %sv = phi i64 [ 0, %entry ], [ %sv.next, %vlatch ]"]
        for lane in range(width):
            head.append(f"  %sv{lane} = add i64 %sv, {lane}")
            head += _row_pointers(used, inputs, f"%sv{lane}", f"v{lane}", lane * k_in)
        head += [f"  call void @{name}.w{width}.seg{s}(ptr %rows, ptr %scratch, ptr %vout)"
                 for s in range(functions_of[width])]
        # the buffer (output-major, lanes inner) to the output rows of the states sv, sv + 1, ...
        head += [f"  %vbase = mul i64 %sv, {size}",
                 "  br label %vcopy",
                 "vcopy:",
                 "  %vj = phi i64 [ 0, %vloop ], [ %vj.next, %vcopy ]",
                 f"  %vsrc.i = mul i64 %vj, {width}"]
        for lane in range(width):
            head += [f"  %vsrc{lane}.i = add i64 %vsrc.i, {lane}",
                     f"  %vsrc{lane} = getelementptr double, ptr %vout, i64 %vsrc{lane}.i",
                     f"  %vval{lane} = load double, ptr %vsrc{lane}",
                     f"  %vdst{lane}.i = add i64 %vbase, {lane * size}",
                     f"  %vdst{lane}.j = add i64 %vdst{lane}.i, %vj",
                     f"  %vdst{lane} = getelementptr double, ptr %out, i64 %vdst{lane}.j",
                     f"  store double %vval{lane}, ptr %vdst{lane}"]
        head += ["  %vj.next = add i64 %vj, 1",
                 f"  %vjdone = icmp sge i64 %vj.next, {size}",
                 "  br i1 %vjdone, label %vlatch, label %vcopy",
                 "vlatch:",
                 f"  %sv.next = add i64 %sv, {width}",
                 "  %vdone = icmp sge i64 %sv.next, %nvec",
                 "  br i1 %vdone, label %scheck, label %vloop",
                 "scheck:",
                 "  %sstart = phi i64 [ 0, %entry ], [ %nvec, %vlatch ]"]
    else:
        head += ["  br label %scheck", "scheck:", "  %sstart = add i64 0, 0"]
    head += ["  %anys = icmp slt i64 %sstart, %n",
             f"  br i1 %anys, label %loop, label %{'guard' if guard else 'exit'}",
             "loop:",
             "  %s = phi i64 [ %sstart, %scheck ], [ %s.next, %loop ]"]
    head += _row_pointers(used, inputs, "%s", "s", 0)
    head += [f"  %outoff = mul i64 %s, {size}",
             "  %orow = getelementptr double, ptr %out, i64 %outoff",
             "  store ptr %orow, ptr %orows"]
    head += [f"  call void @{name}.w1.seg{s}(ptr %rows, ptr %scratch, ptr %orows)"
             for s in range(functions_of[1])]
    end = "guard" if guard else "exit"
    head += ["  %s.next = add i64 %s, 1",
             "  %done = icmp eq i64 %s.next, %n",
             f"  br i1 %done, label %{end}, label %loop"]
    if guard:
        head += _guard_ir(guard, inputs, sizes, size)
    head += ["exit:"] + ([free] if free else []) + ["  ret void", "}"]
    decls = [f"declare {ret} @{f}({args})" for f, ret, args in sorted(declared)]
    return "\n".join(decls + functions + head) + "\n"


def _table_ir(name: str, doubles: int, align: int) -> tuple[str, str | None, set]:
    """A table of ``doubles`` for one call of a function: (the line that allocates it, the
    line that frees it or None, the functions to declare). On the stack up to ``STACK_TABLE``
    bytes; beyond, on the heap, by ``aligned_alloc`` of a multiple of ``align`` bytes (a large
    scene's map of M^-1 J^T columns holds megabytes: on the stack, the thread's stack
    overflowed)."""
    if 8 * doubles <= STACK_TABLE:
        return f"  {name} = alloca [{doubles} x double], align {align}", None, set()
    size = -(-8 * doubles // align) * align
    return (f"  {name} = call ptr @aligned_alloc(i64 {align}, i64 {size})",
            f"  call void @free(ptr {name})",
            {("aligned_alloc", "ptr", "i64, i64"), ("free", "void", "ptr")})


def _layout(program, segment, width=1):
    """(order, segments, slots, outputs_of, tables, size) of ``program`` split into functions
    of about ``segment`` nodes (see ``kernel_ir``), at ``width`` lanes: its schedule; the node
    ids of each segment; the scratch slot of each value used by a later segment than its own;
    per segment, the (output index, node) pairs it stores; per map (at the top of the program)
    whose columns or results cross segments, the first slots of its two tables in the scratch
    array ({"in": slot, "out": slot}: ``_Segment.map``); the slots in all.

    A map's tables are in the scratch array where that saves copies: a column value made by an
    earlier segment is stored by it where the map reads it, and the results that later
    segments read stay where the map writes them, each value's slot being its place in the
    table (``_map_table``). ANYmal's 1,476 columns of M^-1 J^T in a contact scene were 154,000
    lines of IR of copies in and out of the map's own tables, 1.7 s of LLVM's 5.4."""
    g = program.graph
    order = program.schedule()
    segments, part, length = [], [], 0
    for i in order:  # a loop's (map's, when's) body counts in its length; its results stay
        if length >= segment and g.op[i] not in graph.RESULTS:
            segments.append(part)
            part, length = [], 0
        part.append(i)
        length += 1 + (len(g.value[i].order) if g.op[i] in graph.BODIES else 0)
    segments.append(part)
    where = {i: s for s, part in enumerate(segments) for i in part}
    slots, tables, size = {}, {}, 0

    def crosses(a, s):  # a value of another segment than s, kept in the scratch array
        return where[a] != s and g.op[a] not in _INPUT_LIKE

    for s, part in enumerate(segments):  # the maps' columns made by earlier segments
        for m in part:
            if g.op[m] != "map":
                continue
            K = len(g.value[m].items)
            columns = g.args[m][:g.value[m].n * K]

            def stored_there(a):  # a value the segment that made it may store in the table
                return crosses(a, s) and a not in slots and g.op[a] != "map_out"

            if any(stored_there(a) for a in columns):
                base, places, length = _map_table(g.value[m], K, width, size)
                for (c, k), place in places.items():
                    if stored_there(columns[c * K + k]):
                        slots[columns[c * K + k]] = place
                tables.setdefault(m, {})["in"] = base
                size += length
    for s, part in enumerate(segments):
        for i in part:
            for a in g.args[i]:
                if not crosses(a, s) or a in slots:
                    continue
                if g.op[a] == "map_out":  # its map's results, where the map writes them
                    m = g.args[a][0]
                    R = len(g.value[m].outs)
                    base, places, length = _map_table(g.value[m], R, width, size)
                    slots.update({g.loop_outs[m][c * R + o]: place
                                  for (c, o), place in places.items()})
                    tables.setdefault(m, {})["out"] = base
                    size += length
                else:
                    slots[a] = size
                    size += 1
    outputs_of = {}
    for j, i in enumerate(program.outputs):
        home = where[i] if g.op[i] not in _INPUT_LIKE else 0
        outputs_of.setdefault(home, []).append((j, i))
    return order, segments, slots, outputs_of, tables, size


def _map_lanes(width):
    """(lanes, columns per iteration) of a map's loop at ``width``: in scalar code
    ``vector_width()`` columns at a time, one per lane; in vector code (lanes are states) one."""
    return (vector_width(), vector_width()) if width == 1 else (width, 1)


def _table_index(c, k, K, width):
    """The double of column c's value k in a map's table of K values per column at ``width``
    lanes: [group][k][lane], a group being the columns of one iteration (``_map_lanes``)."""
    lanes, per = _map_lanes(width)
    return ((c // per) * K + k) * lanes + c % per


def _map_table(spec, K, width, start):
    """(first slot, {(column, k): slot}, slots) of a table of K values per column of a map
    (``graph.Map`` ``spec``) placed in the scratch array from slot ``start`` (aligned to a
    vector of lanes), in the layout ``_Segment.map`` reads and writes (``_table_index``), a
    slot being ``width`` doubles."""
    lanes, per = _map_lanes(width)
    step = lanes // width  # slots per vector of the table
    base = -(-start // step) * step
    places = {(c, k): base + _table_index(c, k, K, width) // width
              for c in range(spec.n) for k in range(K)}
    return base, places, base - start + -(-spec.n // per) * K * step


def _guard_ir(guard, inputs, sizes, size):
    """IR of the pass over states s = 0 .. n-1 after the kernel's loops (``Program.guard``):
    where an input named in ``guard`` holds a NaN or an infinity (x - x is not ordered), every
    finite output of the state is made NaN (``call.propagate_non_finite``'s rule: the programs
    leave out products with the model's exact zeros, and an input with them). A few operations
    per input scalar, and the outputs only for such a state, instead of a comparison and a
    select per output in the program."""
    nan = _hex(float("nan"))
    out = ["guard:",
           "  %gany = icmp sgt i64 %n, 0",
           "  br i1 %gany, label %gs, label %exit",
           "gs:",
           "  %g = phi i64 [ 0, %guard ], [ %g.next, %glatch ]"]
    bad = "false"
    for name in guard:
        k = inputs[name]
        out += [f"  %goff{k} = mul i64 %g, %st{k}",
                f"  %grow{k} = getelementptr double, ptr %inp{k}, i64 %goff{k}"]
        for j in range(sizes[name]):
            tag = f"{k}.{j}"
            out += [f"  %gp{tag} = getelementptr double, ptr %grow{k}, i64 {j}",
                    f"  %gx{tag} = load double, ptr %gp{tag}",
                    f"  %gd{tag} = fsub double %gx{tag}, %gx{tag}",
                    f"  %gu{tag} = fcmp uno double %gd{tag}, 0.0",
                    f"  %gb{tag} = or i1 {bad}, %gu{tag}"]
            bad = f"%gb{tag}"
    out += [f"  br i1 {bad}, label %gfix, label %glatch",
            "gfix:",
            f"  %gbase = mul i64 %g, {size}",
            "  br label %gfl",
            "gfl:",
            "  %gj = phi i64 [ 0, %gfix ], [ %gj.next, %gfl ]",
            "  %goi = add i64 %gbase, %gj",
            "  %gop = getelementptr double, ptr %out, i64 %goi",
            "  %go = load double, ptr %gop",
            "  %god = fsub double %go, %go",
            "  %gofin = fcmp ord double %god, 0.0",
            f"  %gonew = select i1 %gofin, double {nan}, double %go",
            "  store double %gonew, ptr %gop",
            "  %gj.next = add i64 %gj, 1",
            f"  %gjdone = icmp eq i64 %gj.next, {size}",
            "  br i1 %gjdone, label %glatch, label %gfl",
            "glatch:",
            "  %g.next = add i64 %g, 1",
            "  %gdone = icmp eq i64 %g.next, %n",
            "  br i1 %gdone, label %exit, label %gs"]
    return out


def _row_pointers(used, inputs, state, tag, base):
    """IR storing the row pointers of state ``state`` at %rows[base + k]."""
    out = []
    for input_name in used:
        k = inputs[input_name]
        out += [f"  %off{k}.{tag} = mul i64 {state}, %st{k}",
                f"  %row{k}.{tag} = getelementptr double, ptr %inp{k}, i64 %off{k}.{tag}",
                f"  %rowp{k}.{tag} = getelementptr ptr, ptr %rows, i64 {base + k}",
                f"  store ptr %row{k}.{tag}, ptr %rowp{k}.{tag}"]
    return out


class _Segment:
    """The body of one segment function at one lane count: loads of its inputs and of earlier
    segments' values, its nodes, stores of its values that later segments use and of its
    outputs. Lanes: %rows holds the row pointers of lane l at [l * inputs + k], %scratch
    ``width`` doubles per slot; %orows is the output row (one state) or, with lanes, a buffer of
    ``width`` doubles per output that the kernel then copies to the rows (with one vector store
    per output instead of one store per lane, a 38-DoF mass matrix compiled 3x faster)."""

    def __init__(self, g, part, inputs, slots, outputs, declared, types, tables=None,
                 block=BLOCK):
        self.g, self.part, self.inputs, self.slots = g, part, inputs, slots
        self.longest = block  # lines of a basic block before a node starts the next
        self.tables = tables or {}  # map -> {"in"/"out": first slot of that table in %scratch}
        self.outputs, self.declared, self.t = outputs, declared, types
        self.lines, self.value, self.rows = [], {}, {}
        self.sincos = {}
        self.block, self.opened = "entry", 0  # the current block, the line it starts at
        self.count = 0
        self.allocas = []  # the maps' tables, at the top of the entry block
        self.frees = []  # the tables on the heap, freed before the return

    def emit(self, line):
        self.lines.append(line)

    def label(self, name):
        """Start the basic block ``name`` (the block before it ends with its own branch)."""
        self.emit(f"{name}:")
        self.block, self.opened = name, len(self.lines)

    def keep_short(self, name):
        """End the current block with a branch to a new one, ``name``, where it is longer than
        ``self.longest`` lines (``node``; a map's table stores and loads, ``map``)."""
        if len(self.lines) - self.opened > self.longest:
            self.emit(f"  br label %{name}")
            self.label(name)

    def table(self, name, doubles, align):
        """``name``: a table of ``doubles`` for this call of the function (``_table_ir``: on
        the stack, or on the heap where larger than ``STACK_TABLE`` bytes)."""
        allocate, free, needs = _table_ir(name, doubles, align)
        self.allocas.append(allocate)
        if free:
            self.frees.append(free)
        self.declared.update(needs)

    def tmp(self):
        self.count += 1
        return f"%t{self.count}"

    def declare(self, name, ret, args):
        self.declared.add((name, ret, args))

    def row(self, k, lane):
        key = (k, lane)
        if key not in self.rows:
            v = f"%row{k}.{lane}"
            self.emit(f"  %rp{k}.{lane} = getelementptr ptr, ptr %rows, i64 "
                      f"{lane * len(self.inputs) + k}")
            self.emit(f"  {v} = load ptr, ptr %rp{k}.{lane}")
            self.rows[key] = v
        return self.rows[key]

    def ref(self, i):
        """The IR value of node i (loading inputs and earlier segments' values on first use)."""
        v = self.value.get(i)
        if v is not None:
            return v
        g, t = self.g, self.t
        op = g.op[i]
        if op == "const":
            return t.const(g.value[i][0])
        if op == "bool_const":
            return t.bool(g.value[i])
        v = f"%v{i}"
        if op == "input":
            input_name, index = g.value[i]
            k = self.inputs[input_name]
            lanes = []
            for lane in range(t.width):
                p = self.tmp()
                self.emit(f"  {p} = getelementptr double, ptr {self.row(k, lane)}, i64 {index}")
                x = v if t.width == 1 else self.tmp()
                self.emit(f"  {x} = load double, ptr {p}")
                lanes.append(x)
            if t.width > 1:
                self.emit(self._insert_lanes(v, lanes))
        else:  # a value of an earlier segment
            p = self.tmp()
            self.emit(f"  {p} = getelementptr double, ptr %scratch, i64 "
                      f"{self.slots[i] * t.width}")
            if g.kind(i) == "b":
                x = self.tmp()
                self.emit(f"  {x} = load {t.f}, ptr {p}, align 8")
                self.emit(f"  {v} = fcmp une {t.f} {x}, {t.const(0.0)}")
            else:
                self.emit(f"  {v} = load {t.f}, ptr {p}, align 8")
        self.value[i] = v
        return v

    def _insert_lanes(self, v, lanes):
        t, acc, lines = self.t, "poison", []
        for lane, x in enumerate(lanes):
            target = v if lane == len(lanes) - 1 else self.tmp()
            lines.append(f"  {target} = insertelement {t.f} {acc}, double {x}, i64 {lane}")
            acc = target
        return "\n".join(lines)

    def call_intrinsic(self, name, args, ret=None):
        t = self.t
        ret = ret or t.f
        full = f"{name}.{t.suffix}"
        self.declare(full, ret, ", ".join([t.f] * len(args)))
        v = self.tmp()
        self.emit(f"  {v} = call {ret} @{full}({', '.join(f'{t.f} {a}' for a in args)})")
        return v

    def call_libm(self, name, args):
        """A C library function, one call per lane."""
        t = self.t
        self.declare(name, "double", ", ".join(["double"] * len(args)))
        if t.width == 1:
            v = self.tmp()
            self.emit(f"  {v} = call double @{name}({', '.join(f'double {a}' for a in args)})")
            return v
        results = []
        for lane in range(t.width):
            lane_args = []
            for a in args:
                x = self.tmp()
                self.emit(f"  {x} = extractelement {t.f} {a}, i64 {lane}")
                lane_args.append(f"double {x}")
            r = self.tmp()
            self.emit(f"  {r} = call double @{name}({', '.join(lane_args)})")
            results.append(r)
        v = self.tmp()
        self.emit(self._insert_lanes(v, results))
        return v

    def binary(self, op, a, b):
        v = self.tmp()
        self.emit(f"  {v} = {op} {self.t.f} {a}, {b}")
        return v

    def select(self, c, a, b):
        v = self.tmp()
        self.emit(f"  {v} = select {self.t.b} {c}, {self.t.f} {a}, {self.t.f} {b}")
        return v

    def sincos_of(self, x):
        """(sin x, cos x), one reduction for both: |x| <= SINCOS_LIMIT by reduction to
        [-pi/4, pi/4] and polynomials (see the constants above), anything else (large, inf,
        NaN) by the C library; the choice is made per element, so lanes and single states agree
        in every bit."""
        if x in self.sincos:
            return self.sincos[x]
        t, c, mul, sub, add = self.t, self.t.const, (lambda a, b: self.binary("fmul", a, b)), \
            (lambda a, b: self.binary("fsub", a, b)), (lambda a, b: self.binary("fadd", a, b))
        ax = self.call_intrinsic("llvm.fabs", [x])
        ok = self.tmp()
        self.emit(f"  {ok} = fcmp ole {t.f} {ax}, {c(SINCOS_LIMIT)}")
        xs = self.select(ok, x, c(0.0))
        fn = self.call_intrinsic("llvm.rint", [mul(xs, c(_TWO_OVER_PI))])
        r = xs
        for part in _PIO2:
            r = sub(r, mul(fn, c(part)))
        z = mul(r, r)
        S1, S2, S3, S4, S5, S6 = (c(k) for k in _SIN)
        poly = add(S2, mul(z, add(S3, mul(z, add(S4, mul(z, add(S5, mul(z, S6))))))))
        s = add(r, mul(mul(z, r), add(S1, mul(z, poly))))
        C1, C2, C3, C4, C5, C6 = (c(k) for k in _COS)
        w2 = mul(z, z)
        cr = add(mul(z, add(C1, mul(z, add(C2, mul(z, C3))))),
                 mul(mul(w2, w2), add(C4, mul(z, add(C5, mul(z, C6))))))
        hz = mul(c(0.5), z)
        w = sub(c(1.0), hz)
        co = add(w, add(sub(sub(c(1.0), w), hz), mul(z, cr)))
        n = self.tmp()
        self.emit(f"  {n} = fptosi {t.f} {fn} to {t.i}")
        q = self.tmp()
        self.emit(f"  {q} = and {t.i} {n}, {t.int(3)}")
        quadrant = []
        for k in range(3):
            e = self.tmp()
            self.emit(f"  {e} = icmp eq {t.i} {q}, {t.int(k)}")
            quadrant.append(e)
        ns, nc = self.tmp(), self.tmp()
        self.emit(f"  {ns} = fneg {t.f} {s}")
        self.emit(f"  {nc} = fneg {t.f} {co}")
        sin = self.select(quadrant[0], s, self.select(quadrant[1], co,
                                                      self.select(quadrant[2], ns, nc)))
        cos = self.select(quadrant[0], co, self.select(quadrant[1], ns,
                                                       self.select(quadrant[2], nc, s)))
        if t.width == 1:
            all_ok = ok
        else:
            all_ok = self.tmp()
            name = f"llvm.vector.reduce.and.v{t.width}i1"
            self.declare(name, "i1", t.b)
            self.emit(f"  {all_ok} = call i1 @{name}({t.b} {ok})")
        label = f"sc{self.count}"
        before = self.block
        self.emit(f"  br i1 {all_ok}, label %{label}.join, label %{label}.libm")
        self.label(f"{label}.libm")
        sin_l, cos_l = self.call_libm("sin", [x]), self.call_libm("cos", [x])
        sin_f, cos_f = self.select(ok, sin, sin_l), self.select(ok, cos, cos_l)
        self.emit(f"  br label %{label}.join")
        self.label(f"{label}.join")
        sin_out, cos_out = self.tmp(), self.tmp()
        self.emit(f"  {sin_out} = phi {t.f} [ {sin}, %{before} ], [ {sin_f}, %{label}.libm ]")
        self.emit(f"  {cos_out} = phi {t.f} [ {cos}, %{before} ], [ {cos_f}, %{label}.libm ]")
        self.sincos[x] = (sin_out, cos_out)
        return self.sincos[x]

    def ir(self):
        g, t = self.g, self.t
        # node -> the outputs it is: each stored as soon as it is computed, so that it is not
        # live to the end (at level 0, a segment holding 1,300 outputs to its end took 0.5 s)
        stores = {}
        for j, i in self.outputs:
            stores.setdefault(i, []).append(j)
        row = None
        if self.outputs and t.width == 1:
            row = self.tmp()
            self.emit(f"  {row} = load ptr, ptr %orows")

        def store_output(i):
            for j in stores.pop(i, ()):
                p = self.tmp()
                if t.width > 1:  # lanes: one vector store per output into the buffer %orows
                    self.emit(f"  {p} = getelementptr double, ptr %orows, i64 {j * t.width}")
                    self.emit(f"  store {t.f} {self.ref(i)}, ptr {p}, align 8")
                else:
                    self.emit(f"  {p} = getelementptr double, ptr {row}, i64 {j}")
                    self.emit(f"  store double {self.ref(i)}, ptr {p}")

        for i in self.part:  # loads first: the inputs this segment reads
            if g.op[i] == "input":
                self.ref(i)
        for i in self.part:
            op = g.op[i]
            if op in _INPUT_LIKE:
                continue
            if op in graph.BODIES:  # its results follow it in the segment
                self.body(i)
                continue
            if op == "map_out" and i not in self.value:  # in its map's table in %scratch
                store_output(i)
                continue
            v = self.value[i] if op in graph.RESULTS else self.node(i)
            if i in self.slots:
                stored = v
                if g.kind(i) == "b":
                    stored = self.tmp()
                    self.emit(f"  {stored} = {t.to_float(v)}")
                p = self.tmp()
                self.emit(f"  {p} = getelementptr double, ptr %scratch, i64 "
                          f"{self.slots[i] * t.width}")
                self.emit(f"  store {t.f} {stored}, ptr {p}, align 8")
            store_output(i)
        for i in list(stores):  # inputs and constants
            store_output(i)
        self.lines += self.frees
        self.emit("  ret void")
        return "\n".join(self.allocas + self.lines) + "\n"

    def body(self, i):
        """A node that holds a body: a loop, a map or a when."""
        {"loop": self.loop, "map": self.map, "when": self.when}[self.g.op[i]](i)

    def when(self, i):
        """A when node (``graph.When``): its operands before it; a branch to the body's block
        where the condition holds (with lanes, where it holds in any lane), the body, and a
        join whose phis are the results: the body's where it ran (with lanes, selected lane by
        lane against the passed values), the passed values where it did not."""
        g, t = self.g, self.t
        spec, args = g.value[i], g.args[i]
        k = len(spec.params)
        condition = self.ref(args[0])
        values = [self.ref(a) for a in args[1:1 + k]]
        for a in args[1 + k:]:
            self.ref(a)
        test, label = condition, f"wh{i}"
        if t.width > 1:
            reduce = f"llvm.vector.reduce.or.v{t.width}i1"
            self.declare(reduce, "i1", t.b)
            test = self.tmp()
            self.emit(f"  {test} = call i1 @{reduce}({t.b} {condition})")
        before = self.block
        self.emit(f"  br i1 {test}, label %{label}.body, label %{label}.join")
        self.label(f"{label}.body")
        for p, v in zip(spec.params, values):
            self.value[p] = v
        for b in spec.order:
            self.node(b)
        outs = [self.ref(x) for x in spec.outs]
        values = [values[j] for j in spec.replaces]
        if t.width > 1:
            outs = [self.select(condition, x, v) for x, v in zip(outs, values)]
        self.emit(f"  br label %{label}.join")
        body = self.block
        self.label(f"{label}.join")
        for o, x, v in zip(g.loop_outs[i], outs, values):
            self.emit(f"  %v{o} = phi {t.f} [ {x}, %{body} ], [ {v}, %{before} ]")
            self.value[o] = f"%v{o}"

    def loop(self, i):
        """A loop node: its operands (initial carries, outside values) before it; a header
        block with a counter and one phi per carry, the body's nodes, the back edge; after it
        each ``loop_out`` is its carry's last next value."""
        g, t = self.g, self.t
        spec, args = g.value[i], g.args[i]
        init = [self.ref(a) for a in args[:len(spec.carries)]]
        for a in args[len(spec.carries):]:
            self.ref(a)
        before, label = self.block, f"lp{i}"
        self.emit(f"  br label %{label}.head")
        self.label(f"{label}.head")
        heads = len(self.lines)
        self.lines += [None] * (1 + len(spec.carries))  # the phis, once the latch is known
        for c in spec.carries:
            self.value[c] = f"%v{c}"
        for b in spec.order:
            if g.op[b] in graph.BODIES:  # its results follow it
                self.body(b)
            elif g.op[b] not in graph.RESULTS:
                self.value[b] = self.node(b)
        nexts = [self.ref(x) for x in spec.nexts]
        latch = self.block
        self.emit(f"  %{label}.k.next = add i64 %{label}.k, 1")
        self.emit(f"  %{label}.done = icmp eq i64 %{label}.k.next, {spec.n}")
        self.emit(f"  br i1 %{label}.done, label %{label}.exit, label %{label}.head")
        self.lines[heads] = (f"  %{label}.k = phi i64 [ 0, %{before} ], "
                             f"[ %{label}.k.next, %{latch} ]")
        for k, (c, x0, x1) in enumerate(zip(spec.carries, init, nexts)):
            self.lines[heads + 1 + k] = (f"  %v{c} = phi {t.f} [ {x0}, %{before} ], "
                                         f"[ {x1}, %{latch} ]")
        self.label(f"{label}.exit")
        for o, x in zip(g.loop_outs[i], nexts):
            self.value[o] = x

    def map(self, i):
        """A map node (``graph.Map``): its columns' values stored to a table, a loop whose
        body runs on a vector of lanes, and its results read back from a second table (or,
        where later segments read them, left in that table, which is then part of the scratch
        array: ``_map_table``). In scalar code (one state) the lanes are ``vector_width()``
        columns, the last column repeated to fill the last vector; in vector code (lanes are
        states) one column per iteration. Each lane computes the same operations as the
        unrolled body (the same bits)."""
        g, t = self.g, self.t
        spec, args = g.value[i], g.args[i]
        K, R, C = len(spec.items), len(spec.outs), spec.n
        lanes, per = _map_lanes(t.width)
        groups = -(-C // per)
        vt = _Types(lanes)
        label = f"mp{i}"
        tables = self.tables.get(i, {})
        for name, size in (("in", groups * K), ("out", groups * R)):
            if name in tables:
                self.emit(f"  %{label}.{name} = getelementptr double, ptr %scratch, i64 "
                          f"{tables[name] * t.width}")
            else:
                self.table(f"%{label}.{name}", max(size, 1) * lanes, 8 * lanes)

        def element(table, index):  # the address of a double of a table
            p = self.tmp()
            self.emit(f"  {p} = getelementptr double, ptr %{label}.{table}, i64 {index}")
            return p

        def vector(table, per_iteration, k):  # the address of vector k of this iteration
            base, index, p = self.tmp(), self.tmp(), self.tmp()
            self.emit(f"  {base} = mul i64 %{label}.k, {per_iteration * lanes}")
            self.emit(f"  {index} = add i64 {base}, {k * lanes}")
            self.emit(f"  {p} = getelementptr double, ptr %{label}.{table}, i64 {index}")
            return p

        for c in range(groups * per):  # the table: [group][item][lane]
            column = args[min(c, C - 1) * K:(min(c, C - 1) + 1) * K]
            for k, a in enumerate(column):
                index = _table_index(c, k, K, t.width)
                if "in" in tables and c < C and self.slots.get(a) == \
                        tables["in"] + index // t.width:
                    continue  # stored there by the segment that made it
                v = self.ref(a)
                self.emit(f"  store {t.f} {v}, ptr {element('in', index)}, align 8")
                self.keep_short(f"{label}.in{index}")
        inside = {a: self.ref(a) for a in args[C * K:]}  # values from outside: in every lane
        if t.width == 1 and inside:
            # the broadcasts in a block of their own: LLVM's level 0 (FastISel) has no code
            # for them, and where it fails it hands the whole rest of the block, up to its top,
            # to the slow selector (six stacked boxes: 85 of a first step's 90 s)
            self.emit(f"  br label %{label}.splat")
            self.label(f"{label}.splat")
        for a, v in list(inside.items()):
            if t.width == 1:
                kind = vt.b if g.kind(a) == "b" else vt.f
                scalar = "i1" if g.kind(a) == "b" else "double"
                x = self.tmp()
                self.emit(f"  {x} = insertelement {kind} poison, {scalar} {v}, i64 0")
                v = self.tmp()
                self.emit(f"  {v} = shufflevector {kind} {x}, {kind} poison, "
                          f"<{lanes} x i32> zeroinitializer")
            inside[a] = v
        before = self.block
        self.emit(f"  br label %{label}.head")
        self.label(f"{label}.head")
        self.emit(f"  %{label}.k = phi i64 [ 0, %{before} ], [ %{label}.k.next, "
                  f"%{label}.latch ]")
        outer = (self.t, self.value)
        self.t, self.value = vt, inside
        for k, item in enumerate(spec.items):
            self.emit(f"  %v{item} = load {vt.f}, ptr {vector('in', K, k)}, align {8 * lanes}")
            self.value[item] = f"%v{item}"
        for b in spec.order:
            self.node(b)
        for o, x in enumerate(spec.outs):
            self.emit(f"  store {vt.f} {self.ref(x)}, ptr {vector('out', R, o)}, "
                      f"align {8 * lanes}")
        self.t, self.value = outer
        self.emit(f"  br label %{label}.latch")
        self.label(f"{label}.latch")
        self.emit(f"  %{label}.k.next = add i64 %{label}.k, 1")
        self.emit(f"  %{label}.done = icmp eq i64 %{label}.k.next, {groups}")
        self.emit(f"  br i1 %{label}.done, label %{label}.exit, label %{label}.head")
        self.label(f"{label}.exit")
        if "out" in tables:  # read where used (``ref``), as a value of an earlier segment
            return
        outs = g.loop_outs[i]
        for c in range(C):
            for o in range(R):
                index = _table_index(c, o, R, t.width)
                v = f"%v{outs[c * R + o]}"
                self.emit(f"  {v} = load {t.f}, ptr {element('out', index)}, align 8")
                self.value[outs[c * R + o]] = v
                self.keep_short(f"{label}.out{index}")

    def node(self, i):
        """Emit node i (its operands emitted already) and return its IR value. A block longer
        than ``self.longest`` lines ends first, with a branch to the next. At level 0 LLVM
        expands each select it cannot make an SSE select (its condition from another block,
        or an ``and``) by splitting its block in two, at a cost that grows with the block: six
        stacked boxes' step, a loop of 440,000 lines in mostly three blocks, spent 15 s of
        a 21 s compilation there, and 0.06 s in blocks of 1,000 lines (``keep_short``). No
        operation changes."""
        self.keep_short(f"bk{i}")
        g, t = self.g, self.t
        op, args = g.op[i], g.args[i]
        a = [self.ref(x) for x in args]
        v = f"%v{i}"
        if op in _BINARY_IR:
            self.emit(f"  {v} = {_BINARY_IR[op]} {t.f} {a[0]}, {a[1]}")
        elif op == "neg":
            self.emit(f"  {v} = fneg {t.f} {a[0]}")
        elif op in ("sin", "cos"):
            v = self.sincos_of(a[0])[0 if op == "sin" else 1]
        elif op in _INTRINSIC_1 or op in _INTRINSIC_2:
            v = self.call_intrinsic(_INTRINSIC_1.get(op) or _INTRINSIC_2[op], a)
        elif op in _LIBM_1 or op in _LIBM_2:
            v = self.call_libm(_LIBM_1.get(op) or _LIBM_2[op], a)
        elif op in _FCMP:
            self.emit(f"  {v} = fcmp {_FCMP[op]} {t.f} {a[0]}, {a[1]}")
        elif op == "isfinite":
            ax = self.call_intrinsic("llvm.fabs", a)
            self.emit(f"  {v} = fcmp one {t.f} {ax}, {t.const(float('inf'))}")
        elif op == "isnan":
            self.emit(f"  {v} = fcmp uno {t.f} {a[0]}, {t.const(0.0)}")
        elif op == "and":
            self.emit(f"  {v} = and {t.b} {a[0]}, {a[1]}")
        elif op == "or":
            self.emit(f"  {v} = or {t.b} {a[0]}, {a[1]}")
        elif op == "not":
            self.emit(f"  {v} = xor {t.b} {a[0]}, {t.bool(True)}")
        elif op == "select":
            self.emit(f"  {v} = select {t.b} {a[0]}, {t.f} {a[1]}, {t.f} {a[2]}")
        elif op == "to_float":
            self.emit(f"  {v} = {t.to_float(a[0])}")
        else:
            raise NotImplementedError(f"no code for op {op!r}")
        self.value[i] = v
        return v


# -- LLVM: initialisation, compilation, loading --------------------------------------------
def _llvm():
    """llvmlite.binding, initialised once; None if llvmlite is not installed."""
    if "binding" not in _STATE:
        try:
            import llvmlite.binding as llvm
        except ImportError:
            _STATE["binding"] = None
        else:
            llvm.initialize_native_target()
            llvm.initialize_native_asmprinter()
            _STATE["binding"] = llvm
    return _STATE["binding"]


def hold():
    """Take the locks around LLVM (this module's and llvmlite's own, ``llvmlite.binding.ffi``),
    waiting for a call into LLVM in another thread to return: before a fork, so that no thread
    is inside LLVM when the process is copied (a child would wait for ever on a lock held by a
    thread it does not have). ``release`` gives them back, in the parent and in the child."""
    _LOCK.acquire()
    lock = _llvmlite_lock()
    if lock is not None:
        lock.__enter__()
    _STATE.setdefault("held", []).append(lock)


def release():
    """Give back what ``hold`` took."""
    lock = _STATE["held"].pop()
    if lock is not None:
        lock.__exit__(None, None, None)
    _LOCK.release()


def _llvmlite_lock():
    """llvmlite's lock around every call into LLVM (an ``_LLVMLock``, a context manager), or
    None before LLVM was loaded here (then no thread can be inside it). llvmlite offers no
    public way to take it; its attribute has been ``lib._lock`` since llvmlite 0.30."""
    if _STATE.get("binding") is None:
        return None
    from llvmlite.binding import ffi

    return getattr(ffi.lib, "_lock", None)


def available():
    """Whether machine code can be made here (llvmlite is installed)."""
    return _llvm() is not None


def version():
    """The versions of llvmlite and LLVM (part of every cache key)."""
    import llvmlite

    return llvmlite.__version__, tuple(_llvm().llvm_version_info)


@functools.cache
def host():
    """(triple, cpu, features): what object code is made for; part of every cache key (asked
    once a process)."""
    llvm = _llvm()
    return (llvm.get_process_triple(), llvm.get_host_cpu_name(),
            llvm.get_host_cpu_features().flatten())


def _target_machine(opt):
    """A new target machine for the host (each compilation and each engine has its own: an
    engine owns its target machine, and compilations run in several threads)."""
    llvm = _llvm()
    triple, cpu, features = host()
    # the large code model: a program's code reaches its constants by 64-bit addresses. With the
    # default (small) one, MCJIT's loader may place the constant pool more than 2 GiB from the
    # code once the process's memory is fragmented (after JAX, with dozens of programs loaded),
    # and the loader aborted the process (RuntimeDyldELF: isInt<32>(RealOffset)). The same speed
    # (the Puma simulation, one rollout and a batch, interleaved: within the noise)
    return llvm.Target.from_triple(triple).create_target_machine(
        cpu=cpu, features=features, opt=opt, reloc="pic", codemodel="large")


def compile_object(ir, opt=2):
    """Object code (bytes) for LLVM IR text, for the host CPU, with LLVM's code generator at
    level ``opt`` (0: fast to compile; 2: fast code; the same results in every bit, since no
    fast-math flag allows any level to change an operation). LLVM's IR optimisation passes are
    not run: the program arrives optimised (hash-consed, folded, dead code removed), and on the
    Panda's forward dynamics they took 3 of every 4 seconds of compilation for no measurable
    gain. Thread-safe: each call has its own LLVM context."""
    llvm = _llvm()
    context = llvm.create_context()
    module = llvm.parse_assembly(ir, context)
    module.verify()
    return _target_machine(opt).emit_object(module)


def stack_bound(ir: str) -> int:
    """An upper bound (bytes) on the stack one call of a module's code takes, at any level of
    code generation: its functions that are not ``internal`` (the entry points, which may call
    each other) plus the largest ``internal`` one (the segments, which the kernel calls one
    after another). A function's frame: its tables (``alloca``) and ``STACK_SLOTS`` slots for
    each value it defines, a vector's slot as wide as its lanes. Level 0 gives each value that
    lives across blocks a slot of its own, so a loop of the program (the contact solver's
    sweeps, a Runge-Kutta step's stages) is one function whose frame grows with its body: a
    scene of 8 balls took 291 kB, a humanoid's 1,132 pairs of shapes more than the 8 MB of a
    thread's usual stack. LLVM's frames against the bound (``tests/test_native_safety.py``):
    6 balls' step, 149 kB (level 0) and 77 kB (level 2) within 1.03 MB; Talos's forward
    dynamics at 4 lanes, 101 kB and 46 kB within 464 kB."""
    internal, entry = 0, 0
    for function in ir.split("\ndefine ")[1:]:
        head = function[:function.find("(")]
        values = function.count(" = ")
        wide = 0  # values of a vector type, with their lanes
        for lanes in (16, 8, 4, 2):
            lines = len(re.findall(rf"^[^\n]*<{lanes} x ", function, re.M))
            wide += (lanes - 1) * lines
        tables = sum(int(n) * 8 for n in re.findall(r"alloca \[(\d+) x (?:double|ptr|i64)\]",
                                                    function))
        frame = 8 * STACK_SLOTS * (values + wide) + tables
        if head.startswith("internal "):
            internal = max(internal, frame)
        else:
            entry += frame
    return entry + internal


def with_stack_bound(ir: str) -> str:
    """``ir`` and a global ``@stack_bound``, its ``stack_bound``, for the object code to carry
    into the disk cache and back (``Library.stack_bound``)."""
    return ir + f"@stack_bound = constant i64 {stack_bound(ir)}\n"


class Library:
    """Object code linked into this process; ``address(name)`` of its functions and globals.
    Keep it alive as long as any of its functions may be called."""

    def __init__(self, obj, symbols=None):
        llvm = _llvm()
        with _LOCK:
            for name, address in (symbols or {}).items():
                llvm.add_symbol(name, address)
            tm = _target_machine(0)
            self._obj = bytes(obj)  # LLVM reads the object file in place: keep it alive
            self._engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), tm)
            self._engine.add_object_file(llvm.ObjectFileRef.from_data(self._obj))
            self._engine.finalize_object()

    def address(self, name):
        with _LOCK:
            address = self._engine.get_function_address(name)
            if not address:
                address = self._engine.get_global_value_address(name)
        if not address:
            raise KeyError(f"no symbol {name!r} in the object code")
        return address

    def stack_bound(self) -> int:
        """The bound (bytes) its IR was given (``with_stack_bound``)."""
        return ctypes.c_int64.from_address(self.address("stack_bound")).value
