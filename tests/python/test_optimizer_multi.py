"""aethercl_optimizer_step_multi: bit-identical to aethercl_optimizer_step on each descriptor in
order (mixtures of SGD / momentum / Nesterov / AdamW, sizes 1 to 70,001, varied hyper-parameters
and step counts, several calls in a row so the state carries over), close to float64 references,
launched ceil(n / 8) times; refusals name the descriptor and change no buffer. finite_gate (both
calls): a finite gate gives the ungated bits, a NaN or infinite one leaves every buffer of its
descriptors as it was while the others in the same launch update; a gate may be shared and may be
a gradient, never a buffer an update writes; the version-3 struct size means no gate.

Tolerances of the float64 comparison are those of the one-tensor suite (test_train_optim.py): an
update is a few float32 operations per element, rtol 1e-5 and atol 1e-6 per step, compounding
over three steps to rtol 3e-5 (the bit comparison against the one-tensor path is exact)."""
import ctypes
import json
import time

import numpy as np
import pytest

from aethercl import train as ops
from aethercl import train_types as T
from support.helpers import POISON_F32

SIZES = [1, 2, 7, 63, 64, 65, 1031, 4097, 70_001]
V3_SIZE = T.OptimizerDesc.finite_gate.offset   # the struct before finite_gate (version 3)


def bits(array):
    return np.ascontiguousarray(array, np.float32).view(np.uint32)


class Case:
    """One descriptor's tensors: host copies of the initial values, and two sets of device buffers
    (one for the per-tensor path, one for the multi path)."""

    def __init__(self, scope, rng, kind, n, hyper, step):
        self.kind, self.n, self.hyper, self.step = kind, n, hyper, step
        self.p = rng.standard_normal(n).astype(np.float32)
        self.s1 = (rng.standard_normal(n) * 0.1).astype(np.float32)
        self.s2 = np.abs(rng.standard_normal(n) * 0.01).astype(np.float32)
        self.sets = []
        for _ in range(2):
            tensors = dict(param=scope.in_(self.p), grad=scope.out((n,)))
            if self.uses(1):
                tensors["state1"] = scope.in_(self.s1)
            if self.uses(2):
                tensors["state2"] = scope.in_(self.s2)
            self.sets.append(tensors)

    def uses(self, state):
        if self.kind == T.OPTIMIZER_ADAMW:
            return True
        return state == 1 and self.hyper.get("momentum", 0.0) > 0

    def desc(self, which, step=None, gate=None):
        fields = {name: t.handle for name, t in self.sets[which].items()}
        return T.OptimizerDesc(kind=self.kind, count=self.n, step=step or self.step,
                               finite_gate=gate.handle if gate is not None else None,
                               **fields, **self.hyper)

    def write_grad(self, g):
        for tensors in self.sets:
            tensors["grad"].write(g)

    def read(self, which):
        return {name: t.numpy() for name, t in self.sets[which].items()}


def random_hyper(rng, kind):
    if kind == "adamw":
        return T.OPTIMIZER_ADAMW, dict(lr=float(rng.choice([1e-3, 3e-4, 0.05])),
                                       weight_decay=float(rng.choice([0.0, 0.01, 0.3])),
                                       beta1=float(rng.choice([0.0, 0.8, 0.9])),
                                       beta2=float(rng.choice([0.9, 0.999, 0.0])),
                                       eps=float(rng.choice([1e-8, 1e-3, 0.0])))
    momentum = {"sgd": 0.0, "momentum": 0.9, "nesterov": 0.7}[kind]
    return T.OPTIMIZER_SGD, dict(lr=float(rng.choice([0.1, 0.01])),
                                 weight_decay=float(rng.choice([0.0, 1e-3])),
                                 momentum=momentum,
                                 dampening=0.0 if kind == "nesterov" else float(
                                     rng.choice([0.0, 0.1])),
                                 nesterov=int(kind == "nesterov"))


def make_cases(scope, rng, count, sizes=SIZES):
    cases = []
    offset = int(rng.integers(4))
    for i in range(count):
        kind = ["adamw", "sgd", "momentum", "nesterov"][(i + offset) % 4]
        code, hyper = random_hyper(rng, kind)
        step = int(rng.choice([1, 2, 7, 1000]))
        cases.append(Case(scope, rng, code, int(sizes[i % len(sizes)]), hyper, step))
    return cases


def multi_log_entries(lib, device, since_ns=0):
    """The kernel log's launches by aethercl_optimizer_step_multi queued after since_ns (host
    CLOCK_MONOTONIC, time.monotonic_ns): the log keeps the last 4,096 launches of the process."""
    log = json.loads(lib.json_call("aethercl_kernel_log", device.index))
    return [e for e in log if e["entry_point"] == "aethercl_optimizer_step_multi"
            and e["queued_ns"] > since_ns]


def run_both(device, cases, rng, calls=3):
    """calls rounds: fresh gradients, the per-tensor steps in order on set 0, one multi call on
    set 1; steps count up from each case's first step."""
    for round_ in range(calls):
        for c in cases:
            c.write_grad(rng.standard_normal(c.n).astype(np.float32))
        for c in cases:
            ops.optimizer_step(device.index, c.desc(0, c.step + round_))
        ops.optimizer_step_multi(device.index, [c.desc(1, c.step + round_) for c in cases])


@pytest.mark.parametrize("count", [1, 5, 8, 9, 23])
def test_bit_identical_to_per_tensor_steps(scope, device, rng, count):
    cases = make_cases(scope, rng, count)
    run_both(device, cases, rng)
    for i, c in enumerate(cases):
        one, multi = c.read(0), c.read(1)
        for name in one:
            assert np.array_equal(bits(one[name]), bits(multi[name])), (i, name, c.kind, c.n)


def test_bit_identical_with_small_odd_work_groups(scope, device, rng, monkeypatch):
    # AETHERCL_WG_LIMIT=3: groups of 3 items, so items cross tensor ranges mid-group.
    monkeypatch.setenv("AETHERCL_WG_LIMIT", "3")
    cases = make_cases(scope, rng, 11, sizes=[1, 5, 64, 129, 1000])
    run_both(device, cases, rng, calls=2)
    for c in cases:
        one, multi = c.read(0), c.read(1)
        assert all(np.array_equal(bits(one[k]), bits(multi[k])) for k in one)


def test_both_kernel_forms_give_the_same_bits(scope, device, rng, monkeypatch):
    # The GPUs' form (four elements per work-item, 16-byte accesses; AETHERCL_CPU_KERNELS=0 asks
    # for it here) in the multi-tensor call against the device's own form one tensor at a time;
    # tails of 1-3 elements included.
    cases = make_cases(scope, rng, 9, sizes=[1, 2, 3, 5, 67, 1031])
    for round_ in range(2):
        for c in cases:
            c.write_grad(rng.standard_normal(c.n).astype(np.float32))
        monkeypatch.delenv("AETHERCL_CPU_KERNELS", raising=False)
        for c in cases:
            ops.optimizer_step(device.index, c.desc(0, c.step + round_))
        monkeypatch.setenv("AETHERCL_CPU_KERNELS", "0")
        ops.optimizer_step_multi(device.index, [c.desc(1, c.step + round_) for c in cases])
    for c in cases:
        one, multi = c.read(0), c.read(1)
        assert all(np.array_equal(bits(one[k]), bits(multi[k])) for k in one)


def sgd_reference(p, g, buf, h, step):
    p, g = p.astype(np.float64), g.astype(np.float64) + h["weight_decay"] * p
    if h["momentum"] > 0:
        buf = g if step == 1 else h["momentum"] * buf + (1 - h["dampening"]) * g
        g = g + h["momentum"] * buf if h["nesterov"] else buf
    return p - h["lr"] * g, buf


def adamw_reference(p, g, m, v, h, t):
    p, g = p.astype(np.float64) * (1 - h["lr"] * h["weight_decay"]), g.astype(np.float64)
    m = h["beta1"] * m + (1 - h["beta1"]) * g
    v = h["beta2"] * v + (1 - h["beta2"]) * g * g
    bc1, bc2 = 1 - h["beta1"] ** t, 1 - h["beta2"] ** t
    return p - h["lr"] / bc1 * m / (np.sqrt(v) / np.sqrt(bc2) + h["eps"]), m, v


def test_against_float64_reference(scope, device, rng):
    cases = make_cases(scope, rng, 13)
    refs = [dict(p=c.p.astype(np.float64), s1=c.s1.astype(np.float64),
                 s2=c.s2.astype(np.float64)) for c in cases]
    for round_ in range(3):
        descs = []
        for c, r in zip(cases, refs):
            g = (rng.standard_normal(c.n) * 0.1).astype(np.float32)
            c.write_grad(g)
            t = c.step + round_
            if c.kind == T.OPTIMIZER_ADAMW:
                r["p"], r["s1"], r["s2"] = adamw_reference(r["p"], g, r["s1"], r["s2"], c.hyper, t)
            else:
                r["p"], r["s1"] = sgd_reference(r["p"], g, r["s1"], c.hyper, t)
            descs.append(c.desc(1, t))
        ops.optimizer_step_multi(device.index, descs)
    for c, r in zip(cases, refs):
        got = c.read(1)
        np.testing.assert_allclose(got["param"], r["p"], rtol=3e-5, atol=3e-6)
        if c.uses(1):
            np.testing.assert_allclose(got["state1"], r["s1"], rtol=3e-5, atol=3e-6)
        if c.uses(2):
            np.testing.assert_allclose(got["state2"], r["s2"], rtol=3e-5, atol=3e-6)


@pytest.mark.parametrize("count,launches", [(1, 1), (8, 1), (9, 2), (57, 8)])
def test_launch_count(scope, device, rng, lib, count, launches):
    cases = make_cases(scope, rng, count, sizes=[3, 40, 100])
    since = time.monotonic_ns()
    ops.optimizer_step_multi(device.index, [c.desc(1) for c in cases])
    after = multi_log_entries(lib, device, since)
    assert len(after) == launches
    assert all(e["kernel"] == "optim_multi" for e in after)


def test_empty_descriptors_take_no_slot(scope, device, rng, lib):
    # Nine descriptors of which two have count 0: seven tensors, one launch.
    cases = make_cases(scope, rng, 7, sizes=[5])
    a, b = scope.out((1,)), scope.out((1,))
    empty = T.OptimizerDesc(kind=T.OPTIMIZER_SGD, count=0, param=a.handle, grad=b.handle, lr=0.1,
                            step=1)
    since = time.monotonic_ns()
    descs = [c.desc(1) for c in cases[:3]] + [empty] + [c.desc(1) for c in cases[3:]]
    descs.append(T.OptimizerDesc(kind=T.OPTIMIZER_ADAMW, count=0, param=scope.out((1,)).handle,
                                 grad=scope.out((1,)).handle, state1=scope.out((1,)).handle,
                                 state2=scope.out((1,)).handle, beta1=0.9, beta2=0.99, step=1))
    ops.optimizer_step_multi(device.index, descs)
    assert len(multi_log_entries(lib, device, since)) == 1
    assert bits(a.numpy())[0] == np.float32(POISON_F32).view(np.uint32)


def test_zero_count_and_null(device, lib):
    assert lib.aethercl_optimizer_step_multi(device.index, None, 0, None) == 1
    assert lib.aethercl_optimizer_step_multi(device.index, None, -1, None) == 0
    assert "count = -1" in lib.last_error()
    assert lib.aethercl_optimizer_step_multi(device.index, None, 3, None) == 0
    assert "descs is NULL" in lib.last_error()
    assert lib.aethercl_optimizer_step_multi(device.index, None, 65537, None) == 0


def snapshot(cases):
    return [{k: bits(v).copy() for k, v in c.read(1).items()} for c in cases]


BAD = [(dict(lr=float("nan")), "lr"), (dict(kind=7), "kind"), (dict(step=0), "step"),
       (dict(state1=None), "state1 is NULL"), (dict(count=1 << 40), "param"),
       (dict(beta1=1.0), "beta1"), (dict(grad=None), "grad is NULL")]


@pytest.mark.parametrize("bad_index", [0, 4, 9])
@pytest.mark.parametrize("change,words", BAD)
def test_one_bad_descriptor_refuses_all(scope, device, rng, lib, bad_index, change, words):
    cases = make_cases(scope, rng, 10)
    # The bad descriptor is an AdamW one, so every field rule applies.
    code, hyper = random_hyper(rng, "adamw")
    cases[bad_index] = Case(scope, rng, code, 33, hyper, 1)
    for c in cases:
        c.write_grad(rng.standard_normal(c.n).astype(np.float32))
    before = snapshot(cases)
    descs = [c.desc(1) for c in cases]
    for name, value in change.items():
        descs[bad_index].set(name, value)
    array = ops.optimizer_desc_array(descs)
    assert lib.aethercl_optimizer_step_multi(device.index, ctypes.addressof(array), len(descs),
                                             None) == 0
    message = lib.last_error()
    assert f"descs[{bad_index}]" in message and words in message, message
    after = snapshot(cases)
    assert all(np.array_equal(b[k], a[k]) for b, a in zip(before, after) for k in b)


def raw_array(descs, stride):
    """The descriptors at a stride of `stride` bytes (a newer header's larger struct, or the
    version-3 one: its first stride bytes), each with struct_size = stride."""
    size = min(ctypes.sizeof(T.OptimizerDesc), stride)
    raw = (ctypes.c_ubyte * (stride * len(descs)))()
    for i, d in enumerate(descs):
        d.struct_size = stride
        ctypes.memmove(ctypes.addressof(raw) + i * stride, ctypes.addressof(d), size)
    return raw


def test_struct_size_rules(scope, device, rng, lib):
    cases = make_cases(scope, rng, 4, sizes=[9])
    size = ctypes.sizeof(T.OptimizerDesc)
    # A larger stride (a newer header) is read with that stride.
    raw = raw_array([c.desc(1) for c in cases], size + 24)
    for c in cases:
        c.write_grad(rng.standard_normal(c.n).astype(np.float32))
    for c in cases:
        ops.optimizer_step(device.index, c.desc(0))
    assert lib.aethercl_optimizer_step_multi(device.index, ctypes.addressof(raw), 4, None) == 1, \
        lib.last_error()
    for c in cases:
        one, multi = c.read(0), c.read(1)
        assert all(np.array_equal(bits(one[k]), bits(multi[k])) for k in one)
    before = snapshot(cases)
    for index, value, words in [(0, V3_SIZE - 8, "descs[0].struct_size"),
                                (2, size - 8, "descs[2].struct_size"),
                                (3, size + 8, "descs[3].struct_size"),
                                (0, 1 << 20, "descs[0].struct_size"), (1, 0, "descs[1]")]:
        array = ops.optimizer_desc_array([c.desc(1) for c in cases])
        array[index].struct_size = value
        assert lib.aethercl_optimizer_step_multi(device.index, ctypes.addressof(array), 4,
                                                 None) == 0
        assert words in lib.last_error(), lib.last_error()
    after = snapshot(cases)
    assert all(np.array_equal(b[k], a[k]) for b, a in zip(before, after) for k in b)


@pytest.mark.parametrize("first,second,field_a,field_b", [
    (0, 2, "param", "param"), (1, 3, "param", "grad"), (0, 1, "state1", "grad"),
    (2, 3, "state2", "state1"), (1, 2, "grad", "param")])
def test_shared_buffers_are_refused(scope, device, rng, lib, first, second, field_a, field_b):
    cases = []
    for _ in range(4):
        code, hyper = random_hyper(rng, "adamw")
        cases.append(Case(scope, rng, code, 17, hyper, 1))
    for c in cases:
        c.write_grad(rng.standard_normal(c.n).astype(np.float32))
    before = snapshot(cases)
    descs = [c.desc(1) for c in cases]
    descs[second].set(field_b, getattr(descs[first], field_a))
    with pytest.raises(Exception) as error:
        ops.optimizer_step_multi(device.index, descs)
    message = str(error.value)
    assert f"descs[{second}].{field_b}" in message and f"descs[{first}].{field_a}" in message
    after = snapshot(cases)
    assert all(np.array_equal(b[k], a[k]) for b, a in zip(before, after) for k in b)


def test_descriptors_may_share_a_gradient(scope, device, rng):
    # Gradients are only read: two parameters of x + y may share one gradient buffer.
    cases = make_cases(scope, rng, 6, sizes=[33])
    shared = (rng.standard_normal(33)).astype(np.float32)
    for c in cases:
        c.write_grad(shared)
    for c in cases:
        ops.optimizer_step(device.index, c.desc(0))
    descs = [c.desc(1) for c in cases]
    for d in descs[1:]:
        d.set("grad", descs[0].grad)
    ops.optimizer_step_multi(device.index, descs)
    for c in cases:
        one, multi = c.read(0), c.read(1)
        assert all(np.array_equal(bits(one[k]), bits(multi[k])) for k in one)


def test_within_descriptor_aliasing_names_the_index(scope, device, rng):
    cases = make_cases(scope, rng, 3, sizes=[8])
    descs = [c.desc(1) for c in cases]
    descs[1].set("grad", descs[1].param)
    with pytest.raises(Exception, match=r"descs\[1\]\.param and descs\[1\]\.grad"):
        ops.optimizer_step_multi(device.index, descs)


def test_sgd_without_momentum_needs_no_state(scope, device, rng):
    p, g = scope.in_(np.ones(5, np.float32)), scope.in_(np.full(5, 2.0, np.float32))
    desc = T.OptimizerDesc(kind=T.OPTIMIZER_SGD, count=5, param=p.handle, grad=g.handle,
                           lr=0.25, step=3)
    ops.optimizer_step_multi(device.index, [desc])
    assert np.array_equal(p.numpy(), np.full(5, 0.5, np.float32))


def both_sets(cases):
    return [{k: bits(v).copy() for which in (0, 1) for k, v in
             ((f"{which}.{name}", value) for name, value in c.read(which).items())}
            for c in cases]


@pytest.mark.parametrize("value,opens", [(1.5, True), (0.0, True), (-3.4e38, True),
                                         (float("nan"), False), (float("inf"), False),
                                         (float("-inf"), False)])
def test_finite_gate(scope, device, rng, value, opens):
    # 11 descriptors: two multi launches. Set 0: gated one-tensor calls; set 1: one gated multi
    # call. Open: both equal an ungated one-tensor run; shut: nothing changes in either.
    cases = make_cases(scope, rng, 11)
    gate = scope.in_(np.array([value, 1.0], np.float32))   # only the first float counts
    for c in cases:
        c.write_grad(rng.standard_normal(c.n).astype(np.float32))
    before = both_sets(cases)
    for c in cases:
        ops.optimizer_step(device.index, c.desc(0, gate=gate))
    ops.optimizer_step_multi(device.index, [c.desc(1, gate=gate) for c in cases])
    if not opens:
        after = both_sets(cases)
        assert all(np.array_equal(b[k], a[k]) for b, a in zip(before, after) for k in b)
        return
    gated = [c.read(0) for c in cases]
    multi = [c.read(1) for c in cases]
    # The reference: the same start, ungated, on set 1 reset to the initial values.
    for c in cases:
        for name, t in c.sets[1].items():
            if name != "grad":
                t.write({"param": c.p, "state1": c.s1, "state2": c.s2}[name])
        ops.optimizer_step(device.index, c.desc(1))
    for c, g, m in zip(cases, gated, multi):
        ref = c.read(1)
        for name in ref:
            assert np.array_equal(bits(g[name]), bits(ref[name])), (name, c.kind, c.n)
            assert np.array_equal(bits(m[name]), bits(ref[name])), (name, c.kind, c.n)


def test_gates_differ_within_one_launch(scope, device, rng):
    # Seven descriptors in one launch: shut (NaN), open (finite) and ungated interleaved.
    cases = make_cases(scope, rng, 7, sizes=[1, 63, 65, 1031])
    shut, open_ = scope.in_(np.array([np.nan], np.float32)), scope.in_(np.array([2.0], np.float32))
    gates = [shut, open_, None, shut, None, open_, shut]
    for c in cases:
        c.write_grad(rng.standard_normal(c.n).astype(np.float32))
    before = snapshot(cases)
    for c, gate in zip(cases, gates):
        if gate is not shut:
            ops.optimizer_step(device.index, c.desc(0))
    ops.optimizer_step_multi(device.index, [c.desc(1, gate=g) for c, g in zip(cases, gates)])
    for c, gate, b in zip(cases, gates, before):
        multi = c.read(1)
        if gate is shut:
            assert all(np.array_equal(bits(multi[k]), b[k]) for k in multi)
        else:
            one = c.read(0)
            assert all(np.array_equal(bits(one[k]), bits(multi[k])) for k in one)


def test_gate_may_be_a_gradient_and_shared(scope, device, rng):
    cases = make_cases(scope, rng, 4, sizes=[9])
    for c in cases:
        c.write_grad(np.linspace(-1, 1, c.n).astype(np.float32))
    for c in cases:
        ops.optimizer_step(device.index, c.desc(0))
    gate = cases[0].sets[1]["grad"]   # finite: -1.0
    ops.optimizer_step_multi(device.index, [c.desc(1, gate=gate) for c in cases])
    for c in cases:
        one, multi = c.read(0), c.read(1)
        assert all(np.array_equal(bits(one[k]), bits(multi[k])) for k in one)


@pytest.mark.parametrize("field", ["param", "state1", "state2"])
def test_gate_may_not_be_written(scope, device, rng, lib, field):
    code, hyper = random_hyper(rng, "adamw")
    cases = [Case(scope, rng, code, 17, hyper, 1) for _ in range(2)]
    for c in cases:
        c.write_grad(rng.standard_normal(c.n).astype(np.float32))
    before = snapshot(cases)
    own = cases[0].desc(1, gate=cases[0].sets[1][field])
    with pytest.raises(Exception, match=rf"desc\.{field} .*desc\.finite_gate|"
                                        rf"desc\.finite_gate .*desc\.{field}"):
        ops.optimizer_step(device.index, own)
    # Another descriptor's written buffer as this one's gate.
    descs = [cases[0].desc(1), cases[1].desc(1, gate=cases[0].sets[1][field])]
    with pytest.raises(Exception) as error:
        ops.optimizer_step_multi(device.index, descs)
    assert "descs[1].finite_gate" in str(error.value) and f"descs[0].{field}" in str(error.value)
    assert all(np.array_equal(b[k], a[k]) for b, a in zip(before, snapshot(cases)) for k in b)


def test_gate_format_and_size(scope, device, rng, lib):
    cases = make_cases(scope, rng, 1, sizes=[5])
    cases[0].write_grad(np.ones(5, np.float32))
    before = snapshot(cases)
    small = device.alloc(2)
    try:
        desc = cases[0].desc(1)
        desc.set("finite_gate", small)
        with pytest.raises(Exception, match=r"desc\.finite_gate"):
            ops.optimizer_step(device.index, desc)
        with pytest.raises(Exception, match=r"descs\[0\]\.finite_gate"):
            ops.optimizer_step_multi(device.index, [desc])
    finally:
        lib.free_gpu_memory(device.index, small)
    half = scope.in_(np.zeros(4, np.float32))
    assert lib.aethercl_buffer_set_dtype(device.index, half.handle, 2) == 1   # AETHERCL_BF16
    with pytest.raises(Exception, match=r"desc\.finite_gate"):
        ops.optimizer_step(device.index, cases[0].desc(1, gate=half))
    assert all(np.array_equal(b[k], a[k]) for b, a in zip(before, snapshot(cases)) for k in b)


def test_version3_size_means_no_gate(scope, device, rng, lib):
    # The gate field past a version-3 struct_size is not read: a NaN gate there is ignored.
    cases = make_cases(scope, rng, 3, sizes=[11])
    shut = scope.in_(np.array([np.nan], np.float32))
    for c in cases:
        c.write_grad(rng.standard_normal(c.n).astype(np.float32))
    for c in cases:
        ops.optimizer_step(device.index, c.desc(0))
    single = cases[0].desc(1, gate=shut)
    single.struct_size = V3_SIZE
    assert lib.aethercl_optimizer_step(device.index, ctypes.addressof(single), None) == 1, \
        lib.last_error()
    raw = raw_array([c.desc(1, gate=shut) for c in cases[1:]], V3_SIZE)
    assert lib.aethercl_optimizer_step_multi(device.index, ctypes.addressof(raw), 2, None) == 1, \
        lib.last_error()
    for c in cases:
        one, multi = c.read(0), c.read(1)
        assert all(np.array_equal(bits(one[k]), bits(multi[k])) for k in one)
