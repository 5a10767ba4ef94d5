"""Machine code for a ``graph.Program``, with LLVM through llvmlite (no C compiler at run time).

A program becomes one function of LLVM IR, written here as text::

    void kernel(i64 n, const double **inputs, const i64 *strides, double *out)

which evaluates the program for states s = 0 .. n-1: input k of state s is the vector at
``inputs[k] + s * strides[k]`` (a stride of 0 broadcasts one vector over the batch), the result
of state s goes to ``out + s * size``. The body of the loop is the program's straight-line code:
all loads first, then every live node once, in the schedule's order, then the stores. Only IEEE
operations are emitted (no fast-math flags: no reassociation, no fused multiply-adds), so each
state's result is the same bits whether it runs alone or in a batch of any size.

``compile_object`` optimises the IR for the host CPU and returns object code (bytes), which the
disk cache keeps; ``load`` links object code into the process (LLVM's MCJIT, milliseconds) and
returns the address of a function. The elementary functions (sin, cos, ...) are the C library's,
resolved in the process when the object code is loaded.
"""
import struct
import threading

_LOCK = threading.RLock()  # LLVM's global state is not thread-safe
_STATE = {}

_BINARY_IR = {"add": "fadd", "sub": "fsub", "mul": "fmul", "div": "fdiv"}
_INTRINSIC_1 = {"sqrt": "llvm.sqrt.f64", "sin": "llvm.sin.f64", "cos": "llvm.cos.f64",
                "exp": "llvm.exp.f64", "log": "llvm.log.f64", "fabs": "llvm.fabs.f64",
                "floor": "llvm.floor.f64", "tan": "tan"}
_INTRINSIC_2 = {"pow": "llvm.pow.f64", "atan2": "atan2", "max": "llvm.maximum.f64",
                "min": "llvm.minimum.f64"}
_FCMP = {"lt": "olt", "le": "ole", "gt": "ogt", "ge": "oge", "eq": "oeq", "ne": "une"}


SEGMENT = 4000  # nodes per function of LLVM IR (see kernel_ir)


def _hex(x):
    """An exact LLVM double literal."""
    return "0x%016X" % struct.unpack("<Q", struct.pack("<d", x))[0]


def kernel_ir(program, name="kernel", segment=SEGMENT):
    """The LLVM IR (text) of ``program`` as the batched kernel described in the module
    docstring. Programs longer than ``segment`` nodes are split into functions of that many
    nodes, called one after the other for each state, with the values that cross from one to a
    later one kept in a scratch array: LLVM's compile time grows faster than linearly with the
    length of one function (a 100-link chain's mass matrix, 86,000 nodes in one function, did not
    compile in 3 minutes). The split changes no result: each node is the same operation."""
    g = program.graph
    order = program.schedule()
    inputs = {input_name: k for k, (input_name, _) in enumerate(program.inputs)}
    segments = [order[i:i + segment] for i in range(0, len(order), segment)] or [[]]
    where = {i: s for s, part in enumerate(segments) for i in part}
    slots = {}  # node -> scratch slot, for values used in a later segment than their own
    for s, part in enumerate(segments):
        for i in part:
            for a in g.args[i]:
                if where[a] != s and g.op[a] not in ("const", "bool_const", "input") \
                        and a not in slots:
                    slots[a] = len(slots)
    outputs_of = {}
    for j, i in enumerate(program.outputs):
        home = where[i] if g.op[i] not in ("const", "bool_const", "input") else 0
        outputs_of.setdefault(home, []).append((j, i))
    declared = set()
    bodies = [_segment_ir(g, part, s, inputs, slots, outputs_of.get(s, ()), declared,
                          len(segments) > 1) for s, part in enumerate(segments)]
    used_inputs = sorted({g.value[i][0] for i in order if g.op[i] == "input"},
                         key=inputs.__getitem__)
    size = len(program.outputs)
    k_in = max(len(inputs), 1)
    head = [f"define void @{name}(i64 %n, ptr noalias nocapture readonly %ins, "
            f"ptr noalias nocapture readonly %strides, ptr noalias nocapture %out) "
            f"nounwind {{",
            "entry:",
            f"  %rows = alloca [{k_in} x ptr]",
            f"  %scratch = alloca [{max(len(slots), 1)} x double]"]
    for input_name in used_inputs:
        k = inputs[input_name]
        head += [f"  %inp{k}.p = getelementptr ptr, ptr %ins, i64 {k}",
                 f"  %inp{k} = load ptr, ptr %inp{k}.p",
                 f"  %st{k}.p = getelementptr i64, ptr %strides, i64 {k}",
                 f"  %st{k} = load i64, ptr %st{k}.p"]
    head += ["  %any = icmp sgt i64 %n, 0",
             "  br i1 %any, label %loop, label %exit",
             "loop:",
             "  %s = phi i64 [ 0, %entry ], [ %s.next, %loop ]"]
    for input_name in used_inputs:
        k = inputs[input_name]
        head += [f"  %off{k} = mul i64 %s, %st{k}",
                 f"  %hrow{k} = getelementptr double, ptr %inp{k}, i64 %off{k}",
                 f"  %rowp{k} = getelementptr ptr, ptr %rows, i64 {k}",
                 f"  store ptr %hrow{k}, ptr %rowp{k}"]
    head += [f"  %outoff = mul i64 %s, {size}",
             "  %orow = getelementptr double, ptr %out, i64 %outoff"]
    if len(segments) == 1:
        head.append(bodies[0].rstrip("\n"))
    else:
        for s in range(len(segments)):
            head.append(f"  call void @{name}.seg{s}(ptr %rows, ptr %scratch, ptr %orow)")
    head += ["  %s.next = add i64 %s, 1",
             "  %done = icmp eq i64 %s.next, %n",
             "  br i1 %done, label %exit, label %loop",
             "exit:",
             "  ret void",
             "}"]
    decls = [f"declare double @{f}({', '.join(['double'] * k)}) nounwind readnone"
             if f.startswith("llvm.") else
             f"declare double @{f}({', '.join(['double'] * k)}) nounwind"
             for f, k in sorted(declared)]
    segment_functions = [
        f"define internal void @{name}.seg{s}(ptr noalias nocapture readonly %rows, "
        f"ptr noalias nocapture %scratch, ptr noalias nocapture %orow) nounwind noinline "
        f"{{\nentry:\n{body}  ret void\n}}"
        for s, body in enumerate(bodies)] if len(segments) > 1 else []
    return "\n".join(decls + segment_functions + head) + "\n"



def _segment_ir(g, part, s, inputs, slots, outputs, declared, split):
    """The body of segment ``s``: loads of its inputs and of earlier segments' values, its
    nodes, stores of its values that later segments use and of its outputs."""
    lines = []
    emit = lines.append
    value = {}
    rows = set()

    def ref(i):
        v = value.get(i)
        if v is not None:
            return v
        op = g.op[i]
        if op == "const":
            return _hex(g.value[i][0])
        if op == "bool_const":
            return "true" if g.value[i] else "false"
        if op == "input":
            input_name, index = g.value[i]
            k = inputs[input_name]
            if k not in rows:
                rows.add(k)
                emit(f"  %rp{k} = getelementptr ptr, ptr %rows, i64 {k}")
                emit(f"  %row{k} = load ptr, ptr %rp{k}")
            emit(f"  %a{i}.p = getelementptr double, ptr %row{k}, i64 {index}")
            emit(f"  %v{i} = load double, ptr %a{i}.p")
        else:  # a value of an earlier segment
            kind = "i1" if g.kind(i) == "b" else "double"
            if kind == "i1":
                emit(f"  %x{i}.p = getelementptr double, ptr %scratch, i64 {slots[i]}")
                emit(f"  %x{i} = load double, ptr %x{i}.p")
                emit(f"  %v{i} = fcmp une double %x{i}, 0.0")
            else:
                emit(f"  %v{i}.p = getelementptr double, ptr %scratch, i64 {slots[i]}")
                emit(f"  %v{i} = load double, ptr %v{i}.p")
        value[i] = f"%v{i}"
        return value[i]

    for i in part:  # loads first: the inputs this segment reads
        if g.op[i] == "input":
            ref(i)
    for i in part:
        op, args = g.op[i], g.args[i]
        if op in ("input", "const", "bool_const"):
            continue
        a = [ref(x) for x in args]
        v = f"%v{i}"
        if op in _BINARY_IR:
            emit(f"  {v} = {_BINARY_IR[op]} double {a[0]}, {a[1]}")
        elif op == "neg":
            emit(f"  {v} = fneg double {a[0]}")
        elif op in _INTRINSIC_1:
            declared.add((_INTRINSIC_1[op], 1))
            emit(f"  {v} = call double @{_INTRINSIC_1[op]}(double {a[0]})")
        elif op in _INTRINSIC_2:
            declared.add((_INTRINSIC_2[op], 2))
            emit(f"  {v} = call double @{_INTRINSIC_2[op]}(double {a[0]}, double {a[1]})")
        elif op in _FCMP:
            emit(f"  {v} = fcmp {_FCMP[op]} double {a[0]}, {a[1]}")
        elif op == "isfinite":
            declared.add(("llvm.fabs.f64", 1))
            emit(f"  {v}.abs = call double @llvm.fabs.f64(double {a[0]})")
            emit(f"  {v} = fcmp one double {v}.abs, 0x7FF0000000000000")
        elif op == "isnan":
            emit(f"  {v} = fcmp uno double {a[0]}, 0.0")
        elif op == "and":
            emit(f"  {v} = and i1 {a[0]}, {a[1]}")
        elif op == "or":
            emit(f"  {v} = or i1 {a[0]}, {a[1]}")
        elif op == "not":
            emit(f"  {v} = xor i1 {a[0]}, true")
        elif op == "select":
            emit(f"  {v} = select i1 {a[0]}, double {a[1]}, double {a[2]}")
        elif op == "to_float":
            emit(f"  {v} = uitofp i1 {a[0]} to double")
        else:
            raise NotImplementedError(f"no code for op {op!r}")
        value[i] = v
        if i in slots:
            stored = v
            if g.kind(i) == "b":
                emit(f"  {v}.f = uitofp i1 {v} to double")
                stored = f"{v}.f"
            emit(f"  {v}.s = getelementptr double, ptr %scratch, i64 {slots[i]}")
            emit(f"  store double {stored}, ptr {v}.s")
    for j, i in outputs:
        emit(f"  %o{j}.p = getelementptr double, ptr %orow, i64 {j}")
        emit(f"  store double {ref(i)}, ptr %o{j}.p")
    return "\n".join(lines) + "\n"


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


def available():
    """Whether machine code can be made here (llvmlite is installed)."""
    return _llvm() is not None


def version():
    """The versions of llvmlite and LLVM (part of every cache key)."""
    import llvmlite

    return llvmlite.__version__, tuple(_llvm().llvm_version_info)


def host():
    """(triple, cpu, features): what object code is made for; part of every cache key."""
    llvm = _llvm()
    return (llvm.get_process_triple(), llvm.get_host_cpu_name(),
            llvm.get_host_cpu_features().flatten())


def _target_machine(opt):
    """A new target machine for the host (each compilation and each engine has its own: an
    engine owns its target machine, and compilations run in several threads)."""
    llvm = _llvm()
    triple, cpu, features = host()
    return llvm.Target.from_triple(triple).create_target_machine(
        cpu=cpu, features=features, opt=opt, reloc="pic", codemodel="default")


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
