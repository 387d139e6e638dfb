"""A stand-in for the onnxruntime calls bench/ort_peer.py makes: it reads the
one-node graph with onnx and computes it in numpy (stub_math), so that the
script's graphs, bindings, agreement check and report run without ORT."""

import types

import onnx

import stub_math

__version__ = "stand-in"
ExecutionMode = types.SimpleNamespace(ORT_SEQUENTIAL=0)
GraphOptimizationLevel = types.SimpleNamespace(ORT_ENABLE_ALL=99)


def get_available_providers():
    return ["CPUExecutionProvider"]


class SessionOptions:
    def __init__(self):
        self.config = {}

    def add_session_config_entry(self, key, value):
        self.config[key] = value


class OrtValue:
    def __init__(self, array):
        self.array = array

    @staticmethod
    def ortvalue_from_numpy(array):
        return OrtValue(array)

    def numpy(self):
        return self.array


class IOBinding:
    def __init__(self):
        self.inputs, self.output = {}, None

    def bind_ortvalue_input(self, name, value):
        self.inputs[name] = value.array

    def bind_ortvalue_output(self, name, value):
        self.output = value

    def get_outputs(self):
        return [self.output]


class InferenceSession:
    def __init__(self, model_bytes, sess_options=None, providers=None):
        model = onnx.load_from_string(model_bytes)
        if model.ir_version > 10:
            raise RuntimeError(f"Unsupported model IR version: {model.ir_version}")
        (self.node,) = model.graph.node
        self.attrs = {a.name: onnx.helper.get_attribute_value(a) for a in self.node.attribute}
        if self.node.op_type not in ("Attention", "MultiHeadAttention", "Softmax", "Gemm"):
            raise RuntimeError(f"stand-in: no kernel for {self.node.op_type}")

    def io_binding(self):
        return IOBinding()

    def run_with_iobinding(self, binding):
        x = [binding.inputs[n] for n in self.node.input]
        op = self.node.op_type
        if op == "Attention":
            y = stub_math.attention(x[0], x[1], x[2], bool(self.attrs.get("is_causal", 0)),
                                    x[3] if len(x) > 3 else None)
        elif op == "MultiHeadAttention":  # q [b, s, h*d]; k, v [b, h, s, d]
            heads = self.attrs["num_heads"]
            b, s, hd = x[0].shape
            q = x[0].reshape(b, s, heads, hd // heads).transpose(0, 2, 1, 3)
            y = stub_math.attention(q, x[1], x[2]).transpose(0, 2, 1, 3).reshape(b, s, hd)
        elif op == "Softmax":
            y = stub_math.softmax(x[0], self.attrs.get("axis", -1))
        else:
            y = stub_math.matmul(x[0], x[1].T if self.attrs.get("transB") else x[1])
        binding.output.array[...] = y
