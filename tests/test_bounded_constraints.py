"""Bounded dimensions at every size: the sizes a model cannot run become a constraint in
the file (docs/runtime.md, "Bounded dimensions"), shown by get_inputs and inspect, and an
input that breaks it gets an error naming the input, the dimension and the rule, never a
kernel error or a wrong answer. Checked against onnxruntime at every size of the range."""
import struct

import numpy as np
import onnxruntime as ort
import pytest
from click.testing import CliRunner
from onnx import TensorProto, helper, numpy_helper

import edgert
from edgert import fileformat
from edgert.cli.main import main as cli
from edgert.errors import ConversionError, InputError, ModelFormatError
from edgert.runtime import session as runtime


def _w(rng, name, shape):
    return numpy_helper.from_array((rng.standard_normal(shape) * 0.3).astype(np.float32), name)


def fpn_net(levels=3, upsample="resize"):
    """A small FPN: `levels` stride-2 convs (pads 1, kernel 3: ceil(H / 2) each), then
    each level upsampled by 2 and added to the one above. Sizes whose halvings are odd
    give maps that no longer match (onnxruntime fails in the Add)."""
    rng = np.random.default_rng(7)
    nodes, inits, c = [], [], 4
    prev = "x"
    feats = []
    for k in range(levels):
        inits.append(_w(rng, f"w{k}", [c, 3 if k == 0 else c, 3, 3]))
        nodes.append(helper.make_node("Conv", [prev, f"w{k}"], [f"c{k}"], kernel_shape=[3, 3], strides=[2, 2],
                                      pads=[1, 1, 1, 1], name=f"down{k}"))
        nodes.append(helper.make_node("Relu", [f"c{k}"], [f"r{k}"], name=f"relu{k}"))
        feats.append(f"r{k}")
        prev = f"r{k}"
    inits.append(numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales"))
    top = feats[-1]
    for k in range(levels - 2, -1, -1):
        nodes.append(helper.make_node("Resize", [top, "", "scales"], [f"u{k}"], mode="nearest", name=f"up{k}"))
        nodes.append(helper.make_node("Add", [f"u{k}", feats[k]], [f"s{k}"], name=f"merge{k}"))
        top = f"s{k}"
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, "H", "W"])
    y = helper.make_tensor_value_info(top, TensorProto.FLOAT, None)
    g = helper.make_graph(nodes, "fpn", [x], [y], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def _ort_runs(ref, shape) -> bool:
    try:
        ref.run(None, {"x": np.zeros(shape, np.float32)})
    except Exception:
        return False
    return True


def test_fpn_constraint_is_exactly_the_sizes_onnxruntime_runs(tmp_path):
    """Every H and every W of the bounds (the other at its upper bound): edgert runs the
    size, with onnxruntime's shape and values, exactly when onnxruntime runs it, and
    refuses the others with the rule."""
    model = fpn_net()
    data = edgert.convert(model, tmp_path / "f.edgert", input_shapes={"x": [1, 3, (8, 88), (8, 88)]})
    sess = runtime.Session(data, max_contexts=1)
    (x,) = sess.get_inputs()
    assert x.steps[2][0] == 8 and x.steps[3][0] == 8, x.steps
    assert x.constraints and all("8*k" in c or "multiple of 8" in c for c in x.constraints), x.constraints
    ref = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    opts = ort.SessionOptions()
    rng = np.random.default_rng(3)
    ran = refused = 0
    for axis in (2, 3):
        for v in range(8, 89):
            shape = [1, 3, 88, 88]
            shape[axis] = v
            feed = rng.standard_normal(shape).astype(np.float32)
            if _ort_runs(ref, shape):
                want = ref.run(None, {"x": feed})[0]
                before = runtime.alloc_count()
                got = sess.run(None, {"x": feed})[0]
                assert runtime.alloc_count() == before
                assert got.shape == want.shape, (axis, v)
                np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * float(np.abs(want).max()))
                ran += 1
            else:
                sym = "H" if axis == 2 else "W"
                with pytest.raises(InputError, match=rf"input 'x' dim {axis} is {v}: the model runs '{sym}' = 8\*k"):
                    sess.run(None, {"x": feed})
                refused += 1
    assert ran >= 20 and refused >= 20, (ran, refused)
    del opts


def test_constraint_shown_by_inspect(tmp_path):
    path = tmp_path / "f.edgert"
    edgert.convert(fpn_net(), path, input_shapes={"x": [1, 3, (8, 88), (8, 88)]})
    out = CliRunner().invoke(cli, ["inspect", str(path)])
    assert out.exit_code == 0, out.output
    assert "constraint: H must be 8*k + r, r in {" in out.output, out.output


def test_bounds_the_model_cannot_run_throughout_say_what_to_give(tmp_path):
    """Sizes below 8 leave a 1x1 map whose upsampling no longer matches: the sizes that
    fail are no residue pattern over 2..90, so the converter names them and the bounds
    that work."""
    with pytest.raises(ConversionError, match=r"cannot run 'H' = .* within 2\.\.88; it runs .*give bounds"):
        edgert.convert(fpn_net(), tmp_path / "f.edgert", input_shapes={"x": [1, 3, (2, 88), 64]})
    with pytest.raises(ConversionError, match=r"cannot run at the upper bounds \[90\].*give upper bounds it runs"):
        edgert.convert(fpn_net(), tmp_path / "f.edgert", input_shapes={"x": [1, 3, (8, 90), 64]})


def _bounds_section(data: bytes) -> tuple[int, int]:
    hdr = fileformat._HEADER.unpack_from(data, 0)
    nsec, toff = hdr[6], hdr[7]
    for k in range(nsec):
        kind, _, off, size, _, _ = fileformat._ENTRY.unpack_from(data, toff + k * fileformat.ENTRY_SIZE)
        if kind == fileformat.BOUNDS:
            return off, size
    raise AssertionError("no BOUNDS section")


@pytest.mark.parametrize("step,mask,why", [(65, 1, "step above 64"), (8, 0, "no residue"),
                                            (8, 1 << 9, "residue past the step"), (1, 1, "step 1")])
def test_loader_refuses_bad_step_rules(tmp_path, step, mask, why):
    data = bytearray(edgert.convert(fpn_net(), None, input_shapes={"x": [1, 3, (8, 88), (8, 88)]}))
    off, size = _bounds_section(bytes(data))
    # The STEP rules are the last rules of the section (node 0xFFFFFFFF).
    rule = fileformat._RULE
    pos = off + size - rule.size
    node, kind, sym, _, _, _ = rule.unpack_from(data, pos)
    assert (node, kind) == (fileformat.RULE_NO_NODE, fileformat.RULE_STEP), why
    rule.pack_into(data, pos, node, kind, sym, mask & 0xFFFFFFFF, step,
                   struct.unpack("<i", struct.pack("<I", mask >> 32))[0])
    fileformat.seal(data)
    with pytest.raises(ModelFormatError, match="BOUNDS rule"):
        runtime.Session(bytes(data))


def test_shapes_at_gives_the_run_shapes_without_running(tmp_path):
    data = edgert.convert(fpn_net(), None, input_shapes={"x": [1, 3, (8, 88), (8, 88)]})
    sess = runtime.Session(data, max_contexts=1)
    for h, w in ((16, 24), (88, 8), (64, 72)):
        (shape,) = sess.shapes_at({"x": [1, 3, h, w]}).values()
        assert shape == list(sess.run(None, {"x": np.zeros((1, 3, h, w), np.float32)})[0].shape)
    with pytest.raises(InputError, match="dim 2 is 17"):
        sess.shapes_at({"x": [1, 3, 17, 16]})
