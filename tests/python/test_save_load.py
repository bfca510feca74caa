"""Models built from ocl_llm.layers are saved and loaded (issue 29, part 2): state_dict() /
load_state_dict() of every layer and container and of the optimizers, ocl_llm.save / ocl_llm.load
(JSON metadata beside .npz weights, SHA-256 per tensor) that resume training bit for bit, files
that are corrupt or do not belong together refused with what differs, and the transformer's
checkpoint in the same format, still reading the format before it.

Exact comparisons: a loaded model holds the saved bits and runs the same kernels on them."""
import json
import shutil

import numpy as np
import pytest

import ocl_llm as L
from ocl_llm import functional as F
from ocl_llm import ocl_initialize, ocl_shutdown
from ocl_llm.layers import (AvgPool2d, BatchNorm2d, Conv2d, Dropout, Flatten, GELU, LayerNorm,
                            Linear, MaxPool2d, Module, ReLU, Sequential, Sigmoid, Tanh)
from ocl_llm.optimizers import SGD, AdamW
from ocl_llm.tensor import OclTensor

X = np.random.default_rng(1).standard_normal((4, 2, 6, 6)).astype(np.float32)
TARGETS = np.array([0, 2, 1, 2], np.int32)


@pytest.fixture
def frontend(device):
    ocl_initialize(device.index, verbose=False)
    yield device.index
    ocl_shutdown(shutdown_driver=False)


def _every_layer(seed):
    rng = np.random.default_rng(seed)
    return Sequential(Conv2d(2, 3, 3, padding=1, stride=(1, 1), rng=rng), BatchNorm2d(3),
                      ReLU(), MaxPool2d(2), AvgPool2d(1, stride=1), Flatten(),
                      Linear(27, 8, rng=rng), LayerNorm(8), GELU("tanh"), Dropout(0.25),
                      Sequential(Tanh(), Sigmoid()), LayerNorm(8, rms=True), Linear(8, 3, rng=rng))


def _small_cnn(seed):
    rng = np.random.default_rng(seed)
    return Sequential(Conv2d(2, 3, 3, padding=1, rng=rng), BatchNorm2d(3), ReLU(), MaxPool2d(2),
                      Flatten(), Linear(27, 3, rng=rng))


def _step(model, optimizers):
    loss = F.cross_entropy(model(OclTensor(X)), TARGETS)
    loss.backward()
    for optimizer in optimizers:
        optimizer.step()
    model.zero_grad()
    return loss.to_host()


def _optimizers(model):
    params = model.parameters()
    return (SGD(params[:3], lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01),
            AdamW(params[3:], lr=0.01, betas=(0.8, 0.99)))


def _equal_states(a, b):
    assert a.keys() == b.keys()
    for key in a:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)


def test_state_dicts_name_every_tensor_and_refuse_what_does_not_fit(frontend):
    model = _every_layer(2)
    state = model.state_dict()
    assert list(state)[:6] == ["0.weight", "0.bias", "1.weight", "1.bias", "1.running_mean",
                               "1.running_var"]
    assert {"6.weight", "7.weight", "7.bias", "11.weight", "12.bias"} <= state.keys()
    other = _every_layer(3)
    before = other.state_dict()
    broken = dict(state, **{"6.weight": state["6.weight"][:5], "extra": np.zeros(2)})
    del broken["0.bias"]
    with pytest.raises(ValueError) as refused:
        other.load_state_dict(broken)
    message = str(refused.value)
    assert "missing 0.bias" in message and "unexpected extra" in message
    assert "6.weight has shape (5, 8), expected (27, 8)" in message
    _equal_states(other.state_dict(), before)           # nothing written
    other.load_state_dict(state)
    _equal_states(other.state_dict(), state)
    partial = {"0.weight": state["0.weight"]}
    other.load_state_dict(partial, strict=False)
    model.eval(), other.eval()
    np.testing.assert_array_equal(model(OclTensor(X)).to_host(), other(OclTensor(X)).to_host())


def test_optimizer_state_dicts_round_trip_and_refuse_others(frontend):
    model = _small_cnn(4)
    sgd, adamw = _optimizers(model)
    _step(model, (sgd, adamw))
    state = adamw.state_dict()
    assert state["type"] == "AdamW" and state["hyper"]["betas"] == [0.8, 0.99]
    assert state["steps"] == [1, 1, 1] and sorted(state["state"]) == [
        "m.0", "m.1", "m.2", "v.0", "v.1", "v.2"]
    fresh = AdamW(model.parameters()[3:])
    fresh.load_state_dict(state)
    assert fresh.betas == (0.8, 0.99) and fresh.t == 1
    _equal_states(fresh.state_dict()["state"], state["state"])
    with pytest.raises(ValueError, match="it is AdamW's"):
        SGD(model.parameters()[3:]).load_state_dict(state)
    with pytest.raises(ValueError, match="3 step counts for 6 parameters"):
        AdamW(model.parameters()).load_state_dict(state)


def test_save_and_load_every_layer(frontend, tmp_path):
    model = _every_layer(5)
    _step(model, _optimizers(model))
    model.eval()
    model[11].train()                                   # flags are kept per layer
    path = L.save(model, tmp_path / "every")
    assert path.suffix == ".npz" and path.with_suffix(".json").is_file()
    metadata = json.loads(path.with_suffix(".json").read_text())
    assert metadata["format"] == "ocl-llm-aethercl/2"
    layer = metadata["objects"][""]["layer"]
    assert [c["type"] for c in layer["layers"]][:4] == ["Conv2d", "BatchNorm2d", "ReLU",
                                                        "MaxPool2d"]
    assert layer["layers"][0]["config"]["padding"] == 1
    assert layer["layers"][9]["config"]["p"] == 0.25
    entry = metadata["tensors"]["1.running_var"]
    assert entry["shape"] == [3] and entry["dtype"] == "float32" and len(entry["sha256"]) == 64
    loaded = L.load(path, device=frontend)
    assert type(loaded) is Sequential and type(loaded[10]) is Sequential
    assert [m.training for m in loaded.layers] == [m.training for m in model.layers]
    _equal_states(loaded.state_dict(), model.state_dict())
    loaded[11].eval(), model[11].eval()
    np.testing.assert_array_equal(loaded(OclTensor(X)).to_host(), model(OclTensor(X)).to_host())


def test_training_resumes_bit_for_bit(frontend, tmp_path):
    model = _small_cnn(6)
    sgd, adamw = _optimizers(model)
    for _ in range(2):
        _step(model, (sgd, adamw))
    path = L.save({"model": model, "sgd": sgd, "adamw": adamw, "epoch": 3,
                   "mean": np.arange(3.0)}, tmp_path / "run.npz")
    expected = [_step(model, (sgd, adamw)) for _ in range(2)]
    run = L.load(path)
    assert run["epoch"] == 3 and np.array_equal(run["mean"], np.arange(3.0))
    assert run["sgd"].steps == [2, 2, 2] and run["sgd"].nesterov is True
    assert run["sgd"].parameters[0] is run["model"][0].weight
    resumed = [_step(run["model"], (run["sgd"], run["adamw"])) for _ in range(2)]
    np.testing.assert_array_equal(resumed, expected)
    _equal_states(run["model"].state_dict(), model.state_dict())


def _rewrite_npz(path, change):
    with np.load(path) as archive:
        arrays = {key: archive[key] for key in archive.files}
    change(arrays)
    np.savez(path, **arrays)


def test_corrupt_or_mismatched_files_are_refused_with_what_differs(frontend, tmp_path):
    a = L.save(_small_cnn(7), tmp_path / "a")
    b = L.save(Sequential(Linear(4, 2)), tmp_path / "b")

    def flip(arrays):
        arrays["5.bias"] = arrays["5.bias"].copy()
        arrays["5.bias"].view(np.uint32)[0] ^= 1
    _rewrite_npz(a, flip)
    with pytest.raises(ValueError, match=r"5\.bias's SHA-256 differs"):
        L.load(a)
    shutil.copy(b, a)                                    # weights of another save
    with pytest.raises(ValueError) as refused:
        L.load(a)
    message = str(refused.value)
    assert "0.weight is float32[4, 2] in the weights, float32[3, 2, 3, 3] in the metadata" in \
        message and "1.running_mean is missing from the weights" in message
    meta = tmp_path / "b.json"
    text = json.loads(meta.read_text())
    meta.write_text(json.dumps(dict(text, format="ocl-llm-aethercl/9")))
    with pytest.raises(ValueError, match="format 'ocl-llm-aethercl/9'"):
        L.load(meta)
    text["objects"][""]["layer"]["type"] = "Transformer3000"
    meta.write_text(json.dumps(text))
    with pytest.raises(ValueError, match="unknown layer type 'Transformer3000'"):
        L.load(meta)


def test_what_cannot_be_rebuilt_is_refused_with_a_way_out(frontend, tmp_path):
    class Mine(Module):
        def __init__(self):
            self.fc = Linear(2, 2)

    with pytest.raises(NotImplementedError, match="save its state_dict"):
        L.save(Mine(), tmp_path / "mine")
    L.save(Mine().state_dict(), tmp_path / "mine")     # a dict of arrays: saved as arrays
    assert set(L.load(tmp_path / "mine")) == {"fc.weight", "fc.bias"}
    model = _small_cnn(8)
    with pytest.raises(ValueError, match="belong to no model"):
        L.save({"optimizer": SGD(model.parameters())}, tmp_path / "alone")


def _transformer(tmp_path):
    tokenizer = L.TinyTokenizer()
    config = dict(L.DEFAULT_CONFIG, embed_dim=8, num_heads=2, d_ff=16, num_layers=1, max_len=8,
                  vocab_size=tokenizer.vocab_size)
    model = L.SimpleModel(config)
    optimizer = L.AdamOptimizer(model.parameters(), lr=1e-2)
    ids = np.random.default_rng(9).integers(1, tokenizer.vocab_size, (2, 9)).astype(np.int32)
    L.train_step(model, optimizer, ids[:, :-1], ids[:, 1:])
    return tokenizer, config, model, optimizer


def test_transformer_checkpoint_uses_the_format_and_reads_the_old_one(frontend, tmp_path):
    tokenizer, config, model, optimizer = _transformer(tmp_path)
    progress = {"global_step": 1}
    path = L.save_checkpoint(tmp_path / "ck.npz", model, optimizer, tokenizer, config, progress)
    assert "model/param_0" in json.loads(path.with_suffix(".json").read_text())["tensors"]
    # The format before: metadata inside the .npz, param_<i> and adam_m/v_<i>.
    old = {f"param_{i}": p.to_host() for i, p in enumerate(model.parameters())}
    moments = optimizer.state_dict()["state"]
    n = len(old)
    old.update({f"adam_{s}_{i}": moments[f"{s}.{i}"] for s in "mv" for i in range(n)})
    metadata = {"format": "ocl-llm-aethercl/1", "config": config, "progress": progress,
                "optimizer": {"kind": "adam", "t": 1, "lr": 1e-2, "betas": [0.9, 0.999],
                              "eps": 1e-8, "weight_decay": 0.0},
                "tokenizer": {"vocab": tokenizer.get_vocab(), "inv_vocab": {
                    str(k): v for k, v in tokenizer.get_inv_vocab().items()}},
                "parameters": [{"name": p.name, "shape": list(p.shape)}
                               for p in model.parameters()]}
    np.savez(tmp_path / "old.npz", metadata_json=np.array(json.dumps(metadata)), **old)
    for source in (path, tmp_path / "old.npz"):
        model2, optimizer2, tokenizer2, config2, progress2 = L.load_checkpoint(source)
        assert optimizer2.t == 1 and config2 == config and progress2 == progress
        assert tokenizer2.get_vocab() == tokenizer.get_vocab()
        _equal_states(model2.state_dict(), model.state_dict())
        _equal_states(optimizer2.state_dict()["state"], moments)
