"""``torch.compile(..., backend="tpu")``: each captured graph becomes ONE
PJRT program, replayed from C with no per-op dispatch.

How a graph is compiled (README, "torch.compile"): the first call with a
new input signature runs the FX graph once through tpu's eager kernels with
the device's fused recording in capture mode, so the graph's ops become one
recorded segment that nothing cuts; that segment becomes one StableHLO
program (the same lowerings as eager mode, found through the same compile
cache, memory and disk). Later calls with inputs of the same dtypes, sizes,
strides and aliasing go straight to C (``tpuc._C.graph_replay``): the
inputs' storage values are the program's arguments, one execution, the
outputs come back as new storages, and inputs the graph writes in place get
their new values, donating the old ones where nothing else holds them.

Graphs whose outputs need autograd go through AOTAutograd first (its
forward and backward graphs are compiled the same way); inference graphs
and optimizer steps are compiled as Dynamo captured them, in-place updates
included.

A graph captured once is recorded in the compile cache's disk tier (its
recipe: where each program argument comes from, its outputs and in-place
updates, and its program text), keyed by the graph's code, its input
signature, tpuc's build and the state its lowering reads; a new process
that meets the same graph with the same inputs loads that record and the
program (``records_loaded`` in ``torch.tpu.compile_stats()``) instead of
capturing it again. ``TPUC_GRAPH_RECORDS=0`` turns records off.

A graph whose capture cannot be one program is split at the op that broke
the capture (an op without a native lowering, which runs on the CPU; a
collective, staged through the host; an op whose result's shape is read on
the host): the capture runs node by node and notes the first op after
which it is broken. That op, and every op of the graph with the same
target, then runs through the eager kernels (in the current eager mode) and
the parts between them are compiled like graphs of their own (a part that
breaks again is split again). A graph that cannot be split (the capture
broke at its end, or every op broke it) runs through the eager kernels on
every call; ``torch.tpu.compile_stats()`` counts both and says why.
"""

import hashlib
import importlib.abc
import json
import os
import sys
import threading
import warnings

import torch

from . import _C  # noqa: E402  (loaded by tpuc before this module)

_lock = threading.Lock()
_stats = {
    "graphs": 0,  # FX graphs handed to the backend (forward, backward, ...)
    "aot_graphs": 0,  # ... of which went through AOTAutograd
    "signatures": 0,  # input signatures captured (recompiles included)
    "recompiles": 0,  # captures of a graph for another input signature
    "eager_graphs": 0,  # graphs that run op by op (reasons below)
    "eager_calls": 0,
    "split_graphs": 0,  # graphs split around ops that break a capture
    "split_parts": 0,  # ... into this many compiled parts
}
_reasons = {}  # why a graph runs op by op -> count
_split_reasons = {}  # op a graph was split at: why -> count
_recompile_log = []  # (graph name, what changed)

# Captured signatures kept per graph (like Dynamo's cache_size_limit).
MAX_SIGNATURES = 16


def stats():
    """Counts of the tpu backend merged with the C runtime's graph counts."""
    from . import _C

    with _lock:
        out = dict(_stats)
        out["eager_reasons"] = dict(_reasons)
        out["split_reasons"] = dict(_split_reasons)
        out["recompile_log"] = list(_recompile_log[-32:])
    c = _C.graph_stats()
    out.update({
        "captures": c["captures"],
        "capture_failures": c["capture_failures"],
        "replays": c["replays"],
        "ops_replayed": c["ops_replayed"],
        "compiles": c["compiles"],
        "cache_hits": c["cache_hits"],
        "disk_hits": c["disk_hits"],
        "donation_variants": c["variants"],
        "donated": c["donated"],
        "compile_seconds": c["compile_seconds"],
        "execute_seconds": c["execute_seconds"],
        "records_saved": c["records_saved"],
        "records_loaded": c["records_loaded"],
    })
    return out


def reset_stats():
    from . import _C

    with _lock:
        for k in _stats:
            _stats[k] = 0
        _reasons.clear()
        _split_reasons.clear()
        _recompile_log.clear()
    _C.graph_reset_stats()


def _count(key, n=1):
    with _lock:
        _stats[key] += n


def _describe(args, tpos):
    return [
        (tuple(args[i].shape), str(args[i].dtype).replace("torch.", ""), tuple(args[i].stride()))
        for i in tpos
    ]


class _Graph:
    """One FX graph: a captured program per input signature."""

    def __init__(self, gm, name):
        # AOTAutograd passes the arguments as one list (an instance
        # attribute: the wrappers it puts around a backward copy __dict__).
        self._boxed_call = True
        self.gm = gm
        self.name = name
        self.variants = []  # (C graph, scalar args, output template)
        self.tpos = None  # positions of the tensor arguments
        self.spos = None  # positions of the others
        self.eager_reason = None
        self._reported = False
        self.last_sig = None
        self.split = None  # the graph split around ops that break a capture
        self._record_base = None  # what keys this graph's records (lazy)
        # Placeholders whose value is a list (compiled autograd's graph takes
        # its tensors as one list): their items are the graph's inputs.
        ph = [n for n in gm.graph.nodes if n.op == "placeholder"]
        self._nplaceholders = len(ph)
        self._list_inputs = {
            i for i, n in enumerate(ph)
            if isinstance(n.meta.get("example_value", n.meta.get("val")), (list, tuple))}
        self._flat_len = None
        # Tensors the graph holds as attributes (Dynamo's static inputs:
        # parameters, optimizer state) are inputs of the program too: their
        # storages' current values are read, and written, at every call.
        self.attrs = []
        for node in gm.graph.nodes:
            if node.op != "get_attr":
                continue
            obj = _attr(gm, node.target)
            if not isinstance(obj, torch.Tensor):
                continue
            if obj.device.type == "tpu":
                self.attrs.append(obj)
            elif any(_writes(user, node) for user in node.users):
                # Updated on the host while the capture runs, never by the
                # program: every call must run the graph's code.
                self.eager_reason = f"the graph writes the {obj.device} tensor {node.target}"

    def _mark_eager(self, reason):
        if self.eager_reason is not None:
            return
        self.eager_reason = reason
        self._reported = True
        with _lock:
            _stats["eager_graphs"] += 1
            _reasons[reason] = _reasons.get(reason, 0) + 1
        warnings.warn(
            f"tpuc: torch.compile graph {self.name} runs op by op on tpu: {reason}",
            stacklevel=4,
        )

    def _eager(self, args, reason=None):
        if reason is not None:
            self._mark_eager(reason)
        _count("eager_calls")
        return self.gm(*args)

    def __call__(self, *args):
        if self.eager_reason is not None and not self._reported:
            reason, self.eager_reason = self.eager_reason, None
            self._mark_eager(reason)
        # Boxed (one list, AOTAutograd's convention) or plain arguments (a
        # wrapper that hides _boxed_call).
        if len(args) == 1 and type(args[0]) is list and self._boxed(args[0]):
            args = args[0]
        if self.split is not None:
            return self.split(*args)
        if self.eager_reason is not None:
            return self._eager(args)
        flat = args
        if self._list_inputs:
            flat = [x for i, a in enumerate(args)
                    for x in (a if i in self._list_inputs and isinstance(a, (list, tuple)) else (a,))]
        if self.tpos is None:
            self._flat_len = len(flat)
            self.tpos = [i for i, a in enumerate(flat) if isinstance(a, torch.Tensor)]
            self.spos = [i for i, a in enumerate(flat) if not isinstance(a, torch.Tensor)]
        elif len(flat) != self._flat_len:  # a list input of another length
            _count("eager_calls")
            return self.gm(*args)
        if self.spos:
            tensors = [flat[i] for i in self.tpos]
            scalars = tuple(flat[i] for i in self.spos)
        else:  # every argument a tensor (the usual case): no copy
            tensors = flat
            scalars = ()
        if self.attrs:
            tensors = list(tensors) + self.attrs
        replay = _C.graph_replay
        for graph, sc, template in self.variants:
            if sc != scalars:
                continue
            out = replay(graph, tensors)
            if out is None:
                continue
            if out is False:  # an argument check: the CPU decides
                _count("eager_calls")
                return self.gm(*args)
            if template[1] is None:  # every output a new tensor
                return tuple(out) if template[0] is tuple else out
            return self._assemble(template, out, flat)
        loaded = self._load(args, flat, tensors, scalars)
        if loaded is not None:
            return loaded
        return self._capture(args, flat, tensors, scalars)

    def _boxed(self, lst):
        """Whether a call's one list argument is the boxed argument list
        (not the value of a graph's one list input)."""
        if self._nplaceholders == 1 and 0 in self._list_inputs:
            return len(lst) == 1 and isinstance(lst[0], (list, tuple))
        return True

    def _record_key(self, tensors, scalars):
        """The key of this graph's records for these scalars (bytes), or
        None when it cannot be recorded."""
        if self._record_base is None:
            self._record_base = _record_base(self.gm) or b""
        if not self._record_base:
            return None
        return self._record_base + repr((self.tpos, scalars, _ambient_state())).encode()

    def _load(self, args, flat, tensors, scalars):
        """Replays a graph recorded by an earlier process, or None."""
        if not _records_enabled() or len(self.variants) >= MAX_SIGNATURES:
            return None
        devices = {t.device for t in tensors}
        if len(devices) != 1 or next(iter(devices)).type != "tpu":
            return None
        key = self._record_key(tensors, scalars)
        if key is None:
            return None
        found = _C.graph_load(next(iter(devices)).index, key, tensors)
        if found is None:
            return None
        graph, extra = found
        try:
            t = json.loads(extra.decode())
            template = self._template(tuple if t["kind"] == "tuple" else list,
                                      [tuple(x) for x in t["slots"]], list(t["consts"]))
        except (ValueError, KeyError, TypeError):
            return None
        out = _C.graph_replay(graph, tensors)
        if out is None:
            return None
        self._add_variant(graph, scalars, template, flat)
        if out is False:  # an argument check: the CPU decides
            _count("eager_calls")
            return self.gm(*args)
        return self._assemble(template, out, flat)

    def _add_variant(self, graph, scalars, template, flat):
        sig = (_describe(flat, self.tpos), scalars)
        if self.variants:
            _count("recompiles")
            with _lock:
                _recompile_log.append((self.name, _what_changed(self.last_sig, sig)))
        self.last_sig = sig
        self.variants.append((graph, scalars, template))
        _count("signatures")

    def _save(self, graph, tensors, scalars, template):
        if not _records_enabled():
            return
        key = self._record_key(tensors, scalars)
        if key is None:
            return
        kind, slots, consts = template
        extra = json.dumps({"kind": "tuple" if kind is tuple else "list",
                            "slots": slots, "consts": consts})
        _C.graph_save(graph, key, extra.encode())

    @staticmethod
    def _template(kind, slots, consts):
        """An output template; its slots are None when every output is a
        new tensor of the replay, in order (nothing to assemble)."""
        if all(src is None for _, src in slots) and all(c is None for c in consts) \
                and [pos for pos, _ in slots] == list(range(len(consts))):
            return (kind, None, consts)
        return (kind, slots, consts)

    @staticmethod
    def _full(template):
        kind, slots, consts = template
        if slots is None:
            slots = [(pos, None) for pos in range(len(consts))]
        return (kind, slots, consts)

    @staticmethod
    def _assemble(template, out, args):
        kind, slots, consts = _Graph._full(template)
        res = list(consts)
        k = 0
        for pos, src in slots:
            if src is None:
                res[pos] = out[k]
                k += 1
            else:
                res[pos] = args[src]
        return tuple(res) if kind is tuple else res

    def _capture(self, args, flat, tensors, scalars):
        from . import _C

        devices = {t.device for t in tensors}
        if not tensors:
            return self._eager(args, "the graph has no tpu tensor input")
        if len(devices) != 1 or next(iter(devices)).type != "tpu":
            names = ", ".join(sorted(str(d) for d in devices))
            return self._eager(args, f"inputs on {names} (one tpu device needed)")
        device = next(iter(devices)).index
        if len(self.variants) >= MAX_SIGNATURES:
            # This call only: the signatures already captured still replay.
            with _lock:
                why = f"more than {MAX_SIGNATURES} input signatures"
                _reasons[why] = _reasons.get(why, 0) + 1
            return self._eager(args)
        why = _C.graph_capture_begin(device, tensors)
        if why:
            return self._eager(args, why)
        probe = _Probe(self.gm, device)
        try:
            out = probe.run(*args)
        except BaseException:
            probe.env.clear()
            _C.graph_capture_end(device, [], True)
            raise
        # The interpreter keeps the values of nodes nobody reads (an
        # in-place op's result): held, they would break the capture.
        probe.env.clear()
        if not isinstance(out, (tuple, list)):
            _C.graph_capture_end(device, [], True)
            return self._eager_after(out, "the graph does not return a flat tuple")
        ids = {id(a): i for i, a in enumerate(flat) if isinstance(a, torch.Tensor)}
        slots, consts, out_tensors = [], [], []
        for pos, v in enumerate(out):
            consts.append(None)
            if isinstance(v, torch.Tensor):
                if id(v) in ids:
                    slots.append((pos, ids[id(v)]))
                else:
                    slots.append((pos, None))
                    out_tensors.append(v)
            elif v is None or isinstance(v, (int, float, bool)):
                consts[pos] = v
            else:
                _C.graph_capture_end(device, [], True)
                return self._eager_after(out, f"the graph returns a {type(v).__name__}")
        graph, why = _C.graph_capture_end(device, out_tensors, False)
        if graph is False:  # an argument check: the CPU decides
            _count("eager_calls")
            return self.gm(*args)
        if graph is None:
            if probe.culprit is not None and self._split_at(probe.culprit, why):
                return out
            return self._eager_after(out, why)
        template = self._template(type(out), slots, consts)
        self._add_variant(graph, scalars, template, flat)
        self._save(graph, tensors, scalars, (type(out), slots, consts))
        return out

    def _eager_after(self, out, reason):
        """The capture's results stand; later calls run op by op."""
        self._mark_eager(reason)
        return out

    def _split_at(self, culprit, why):
        """Splits the graph around `culprit` and every node with its target
        (they run eagerly; the parts between are compiled graphs of their
        own). The capture's results stand. False when nothing would be
        compiled."""
        nodes = [n for n in self.gm.graph.nodes if n.op not in ("placeholder", "get_attr", "output")]
        bad = {n for n in nodes if n.op == culprit.op and n.target == culprit.target}
        if _is_collective(culprit) or _is_wait(culprit):
            # A collective's wait runs eagerly too (next to it when nothing
            # comes between), and takes its work out of c10d's registry.
            bad |= {n for n in nodes if _is_wait(n)}
        if len(bad) == len(nodes):
            return False
        part, ids, prev_bad = 0, {}, None
        for n in nodes:
            b = n in bad
            if prev_bad is not None and b != prev_bad:
                part += 1
            ids[n] = part
            prev_bad = b
        from torch.fx.passes.split_module import split_module

        try:
            top = split_module(self.gm, self.gm, lambda n: ids[n], keep_original_order=True)
        except Exception as e:  # a graph split_module does not take
            self._mark_eager(f"{why}; splitting it failed: {type(e).__name__}: {e}")
            return True
        bad_parts = {ids[n] for n in bad}
        parts = 0
        for node in list(top.graph.nodes):
            if node.op != "call_module":
                continue
            k = int(node.target.rsplit("_", 1)[1])
            if k in bad_parts:
                continue
            sub = getattr(top, node.target)
            _tuple_output(top, node, sub)
            del top._modules[node.target]
            object.__setattr__(top, node.target, _Graph(sub, f"{self.name}.{k}"))
            parts += 1
        top.recompile()
        self.split = top
        what = _node_name(culprit)
        with _lock:
            _stats["split_graphs"] += 1
            _stats["split_parts"] += parts
            key = f"{what}: {why}"
            _split_reasons[key] = _split_reasons.get(key, 0) + 1
        warnings.warn(
            f"tpuc: torch.compile graph {self.name} is split at {what} ({len(bad)} "
            f"node(s), run eagerly): {why}; the {parts} part(s) between compile as "
            "programs of their own",
            stacklevel=4,
        )
        return True


def _attr(mod, target):
    """The object a get_attr node's dotted target names (None if absent)."""
    for part in target.split("."):
        mod = getattr(mod, part, None)
    return mod


# Op namespaces whose ops are PyTorch's own (a record keys a graph by its
# code, which names ops, not their implementations: a custom op or a user
# function allowed in the graph may change between processes).
_BUILTIN_OP_NAMESPACES = frozenset(("aten", "prims", "_c10d_functional", "c10d_functional",
                                    "_c10d_functional_autograd", "higher_order"))
_BUILTIN_MODULES = ("torch", "_operator", "operator", "math", "builtins")


def _builtin_target(target):
    if isinstance(target, torch._ops.OpOverload):
        return target.namespace in _BUILTIN_OP_NAMESPACES
    if isinstance(target, torch._ops.OpOverloadPacket):
        return target._qualified_op_name.split("::")[0] in _BUILTIN_OP_NAMESPACES
    if isinstance(target, torch._ops.HigherOrderOperator):
        return True
    module = getattr(target, "__module__", None) or ""
    return module.split(".")[0] in _BUILTIN_MODULES


def _records_enabled():
    return os.environ.get("TPUC_GRAPH_RECORDS", "1") != "0"


_build = None


def _build_stamp():
    """Which build of tpuc and torch records are made by: a rebuilt binding
    (new lowerings) or another torch never reads an older record."""
    global _build
    if _build is None:
        st = os.stat(_C.__file__)
        _build = f"{_C.__file__}:{st.st_size}:{st.st_mtime_ns}:{torch.__version__}"
    return _build


_MAX_KEYED_CONSTANT = 1 << 20


def _record_base(gm):
    """What keys a graph's records: tpuc's build, the code of the graph
    and of every graph module it calls, and the values of the CPU tensors
    it holds; None when the graph reads something a record cannot key (a
    module that is not an FX graph, a CPU tensor over 1 MiB, another
    object held as an attribute, a function or op that is not PyTorch's)."""
    parts = [_build_stamp()]
    for name, mod in sorted(gm.named_modules(), key=lambda m: m[0]):
        if not isinstance(mod, torch.fx.GraphModule):
            return None
        parts.append(f"[{name}]\n{mod.code}")
        for node in mod.graph.nodes:
            if node.op == "call_function" and not _builtin_target(node.target):
                return None
            if node.op != "get_attr":
                continue
            obj = _attr(mod, node.target)
            if isinstance(obj, torch.fx.GraphModule):
                continue
            if not isinstance(obj, torch.Tensor):
                return None
            if obj.device.type == "cpu":
                # A constant the graph holds (a lifted torch.tensor(...)):
                # its value is part of the key.
                if obj.is_sparse or obj.numel() * obj.element_size() > _MAX_KEYED_CONSTANT:
                    return None
                data = obj.detach().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()
                digest = hashlib.sha256(data).hexdigest()
                parts.append(f"{node.target}:{obj.dtype}:{tuple(obj.shape)}:{digest}")
            elif obj.device.type != "tpu":
                return None
    return "\n".join(parts).encode()


def _ambient_state():
    """The state that the eager kernels a capture runs read, beside the
    graph's inputs: dtypes and precision defaults, determinism, grad and
    autocast modes, tpuc's own settings."""
    env = tuple(sorted((k, v) for k, v in os.environ.items()
                       if k.startswith(("TPUC_", "XLA_")) and k not in
                       ("TPUC_CACHE_DIR", "TPUC_CACHE_PREFETCH", "TPUC_GRAPH_RECORDS")))
    return (
        str(torch.get_default_dtype()),
        torch.are_deterministic_algorithms_enabled(),
        torch.get_float32_matmul_precision(),
        torch.is_grad_enabled(),
        torch.is_autocast_enabled("tpu"),
        str(torch.get_autocast_dtype("tpu")),
        torch.tpu.get_eager_mode(),
        env,
    )


class _Probe(torch.fx.Interpreter):
    """Runs a graph node by node during its capture and notes the first
    node after which the capture is broken."""

    def __init__(self, gm, device):
        from . import _C

        super().__init__(gm)
        self.device = device
        self.culprit = None
        self._broken = _C.graph_capture_broken

    def run_node(self, n):
        out = super().run_node(n)
        if _is_wait(n):
            # A replay would not run it: its work would stay in c10d's
            # registry (never waited, its tensors held to process exit).
            _break_capture(_WAIT_WHY)
        if self.culprit is None and n.op in ("call_function", "call_method", "call_module"):
            if self._broken(self.device):
                self.culprit = n
        return out


_WAIT_WHY = "waits for a collective's work (runs eagerly: c10d's registry of works)"


def _break_capture(why):
    from . import _C

    _C.graph_capture_break(why)


def _op_namespace(n):
    t = n.target if n.op == "call_function" else None
    if isinstance(t, torch._ops.OpOverload):
        t = t.overloadpacket
    if isinstance(t, torch._ops.OpOverloadPacket):
        ns, _, name = t._qualified_op_name.partition("::")
        return ns, name
    return None, None


def _is_wait(n):
    """A functional collective's wait_tensor node."""
    ns, name = _op_namespace(n)
    return ns in ("_c10d_functional", "c10d_functional") and name == "wait_tensor"


def _is_collective(n):
    ns, _ = _op_namespace(n)
    return ns in ("_c10d_functional", "c10d_functional", "_c10d_functional_autograd")


def _node_name(n):
    t = n.target
    if isinstance(t, str):
        return t
    name = getattr(t, "name", None)
    if callable(name):  # an OpOverload: aten::mul.Tensor
        return name()
    try:  # torch.poisson, _operator.mul
        return torch.fx.node._get_qualified_name(t)
    except Exception:
        return getattr(t, "__qualname__", None) or getattr(t, "__name__", None) or str(t)


def _tuple_output(top, call, sub):
    """Makes part `sub` (called by `call` in `top`) return a tuple, as a
    captured graph must: a single result becomes (result,) and the caller
    takes its item 0."""
    out = next(n for n in sub.graph.nodes if n.op == "output")
    if isinstance(out.args[0], (tuple, list)):
        return
    out.args = ((out.args[0],),)
    sub.recompile()
    import operator

    with top.graph.inserting_after(call):
        item = top.graph.call_function(operator.getitem, (call, 0))
    call.replace_all_uses_with(item, delete_user_cb=lambda u: u is not item)


def _writes(user, node):
    """True when FX node ``user`` is an in-place op that writes ``node``."""
    if user.op != "call_function" and user.op != "call_method":
        return False
    name = getattr(user.target, "__name__", str(user.target))
    name = name.split(".")[0]
    if not name.endswith("_") or name.startswith("__"):
        return False
    first = user.args[0] if user.args else None
    if isinstance(first, (list, tuple)):
        return node in first
    return first is node


def _what_changed(before, after):
    if before is None:
        return "first signature"
    (bt, bs), (at, as_) = before, after
    if len(bt) != len(at):
        return f"number of tensor inputs {len(bt)} -> {len(at)}"
    for i, (b, a) in enumerate(zip(bt, at)):
        if b != a:
            return f"tensor input {i}: shape {b[0]} dtype {b[1]} stride {b[2]} -> shape {a[0]} dtype {a[1]} stride {a[2]}"
    if bs != as_:
        return f"non-tensor inputs {bs} -> {as_}"
    return ("storage offsets, storage sizes, the element type a storage's value is kept in "
            "(bytes after a host write), or aliasing of the inputs")


_names = {}


def _name(kind):
    with _lock:
        _names[kind] = _names.get(kind, 0) + 1
        return f"{kind}{_names[kind] - 1}"


def _compiler(kind):
    def compile_graph(gm, example_inputs):
        _count("graphs")
        return _Graph(gm, _name(kind))

    return compile_graph


def _outputs_need_grad(gm, example_inputs):
    if not torch.is_grad_enabled():
        return False
    for node in gm.graph.nodes:
        if node.op != "output":
            continue
        outs = node.args[0] if isinstance(node.args[0], (tuple, list)) else (node.args[0],)
        known = True
        for o in outs:
            if not isinstance(o, torch.fx.Node):
                continue
            ev = o.meta.get("example_value", o.meta.get("val"))
            if ev is None:
                known = False
                continue
            if isinstance(ev, torch.Tensor) and ev.requires_grad:
                return True
        if known:
            return False
    return any(isinstance(x, torch.Tensor) and x.requires_grad for x in example_inputs)


_capturable_installed = False


def _install_capturable():
    """Dynamo compiles an optimizer's step with ``capturable=True`` when its
    parameters are on cuda or xpu, so the step counters live on the device
    and are part of the graph; tpu gets the same (a CPU step counter would
    be updated outside the program)."""
    global _capturable_installed
    if _capturable_installed:
        return
    _capturable_installed = True
    try:
        from torch._dynamo.variables.optimizer import OptimizerVariable
    except ImportError:
        return
    original = OptimizerVariable._set_capturable

    def _set_capturable(self, tx):
        for group in self.value.param_groups:
            params = group.get("params", [])
            if (
                "capturable" in group
                and params
                and all(getattr(p, "device", None) is not None and p.device.type == "tpu" for p in params)
                and all(p not in self.value.state for p in params)
            ):
                group["capturable"] = True
        return original(self, tx)

    OptimizerVariable._set_capturable = _set_capturable


_OPTIMIZER_MODULE = "torch._dynamo.variables.optimizer"


class _AfterImport:
    """A meta-path finder that runs ``hook`` once ``name`` is imported (so
    importing tpuc does not import Dynamo)."""

    def __init__(self, name, hook):
        self.name, self.hook = name, hook

    def find_spec(self, fullname, path=None, target=None):
        if fullname != self.name:
            return None
        import importlib.util

        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None:
            return spec
        loader, hook = spec.loader, self.hook

        class _Loader(importlib.abc.Loader):
            def create_module(self, spec):
                return loader.create_module(spec)

            def exec_module(self, module):
                loader.exec_module(module)
                hook()

        spec.loader = _Loader()
        return spec


def _install_capturable_lazily():
    if _OPTIMIZER_MODULE in sys.modules:
        _install_capturable()
    elif not any(isinstance(f, _AfterImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterImport(_OPTIMIZER_MODULE, _install_capturable))


def backend(gm, example_inputs, **kwargs):
    """The ``tpu`` Dynamo backend. ``mode=`` and ``options=`` (which
    ``torch.compile`` passes on) are accepted; every mode compiles each
    graph into one program."""
    kwargs.pop("mode", None)
    kwargs.pop("options", None)
    if _outputs_need_grad(gm, example_inputs):
        from torch._dynamo.backends.common import aot_autograd

        _count("aot_graphs")
        return aot_autograd(
            fw_compiler=_compiler("forward"),
            bw_compiler=_compiler("backward"),
            inference_compiler=_compiler("inference"),
            keep_inference_input_mutations=True,
        )(gm, example_inputs)
    _count("graphs")
    g = _Graph(gm, _name("graph"))

    return g


def _on_tpu(inputs, gm=None):
    """Whether the graph computes on tpu: an input on tpu, or (a graph with
    no tensor inputs, such as FlexAttention's compiled create_block_mask) a
    value the graph creates on tpu."""
    for x in inputs:
        if isinstance(x, torch.Tensor) and x.device.type == "tpu":
            return True
    graph = getattr(gm, "graph", None)
    for n in graph.nodes if graph is not None else ():
        v = n.meta.get("example_value", n.meta.get("val"))
        for t in v if isinstance(v, (tuple, list)) else (v,):
            if isinstance(t, torch.Tensor) and t.device.type == "tpu":
                return True
    return False


def install_default_backend():
    """Installs the routing below and the optimizer rule above.

    ``torch.compile(model)`` with no backend picks Inductor, which has no
    code generator for tpu; graphs that compute on tpu go to this backend
    instead (PyTorch has no per-device default backend to register)."""
    _install_capturable_lazily()
    wrapper = getattr(torch, "_TorchCompileInductorWrapper", None)
    if wrapper is None or getattr(wrapper, "_tpuc_routed", False):
        return
    original = wrapper.__call__

    def __call__(self, model_, inputs_):
        if _on_tpu(inputs_, model_):
            return backend(model_, inputs_)
        return original(self, model_, inputs_)

    wrapper.__call__ = __call__
    wrapper._tpuc_routed = True
