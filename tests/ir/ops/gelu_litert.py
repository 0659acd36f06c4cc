"""Write ``gelu_litert.json``: TFLite's int8 and int16 GELU outputs on every input, for a few quantizations.

TFLite Micro has no GELU kernel (tests/ir/ops/test_activation_lut.py checks that it refuses
the builtin), so the oracle for our GELU tables is TFLite's own kernel (kernels/gelu.cc):
``python tests/ir/ops/gelu_litert.py /path/to/python-with-ai-edge-litert``. The exporter
writes one single-op GELU file per case; that interpreter (LiteRT, ``pip install
ai-edge-litert``; 2.3.0 wrote the stored file) runs it with its reference kernels on all
256 int8 or 65536 int16 inputs. int8 outputs are stored whole (hex of the bytes), int16
ones as the SHA-256 of their little-endian bytes.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from rlx_edge.frontends.tflite import export_tflite
from rlx_edge.ir.graph import Graph
from rlx_edge.ir.types import QuantParams

OUT = Path(__file__).with_name("gelu_litert.json")
# storage, approximate, input scale and zero point, output scale and zero point
CASES = [
    ("i8", "none", 0.05, 3, 0.03, -100),
    ("i8", "tanh", 0.05, 3, 0.03, -100),
    ("i8", "none", 0.0234, -128, 0.0117, -128),
    ("i8", "tanh", 0.0234, -128, 0.0117, -128),
    ("i8", "none", 0.0031, 17, 0.0042, -7),
    ("i8", "tanh", 0.21, -40, 0.19, -120),
    ("i16", "none", 2.0**-12, 0, 2.0**-12, 0),
    ("i16", "tanh", 2.0**-12, 0, 2.0**-12, 0),
    ("i16", "none", 1.7e-4, 0, 1.3e-4, 0),
    ("i16", "tanh", 3.1e-5, 0, 2.9e-5, 0),
    # outputs far beyond the int16 range: TFLite's lookup wraps the slope and the result to int16
    ("i16", "none", 0.0199, 0, 2.88e-5, 0),
    ("i16", "tanh", 0.0302, 0, 1.25e-5, 0),
]

_RUN = """
import sys
import numpy as np
from ai_edge_litert.interpreter import Interpreter, OpResolverType
path, dtype, out = sys.argv[1:]
it = Interpreter(model_path=path, experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
it.allocate_tensors()
info = np.iinfo(dtype)
it.set_tensor(it.get_input_details()[0]["index"], np.arange(info.min, info.max + 1, dtype=dtype).reshape(1, -1))
it.invoke()
np.save(out, it.get_tensor(it.get_output_details()[0]["index"]))
"""


def all_inputs(storage: str) -> np.ndarray:
    info = np.iinfo(np.dtype({"i8": np.int8, "i16": np.int16}[storage]))
    return np.arange(info.min, info.max + 1, dtype=info.dtype).reshape(1, -1)


def gelu_graph(storage: str, approximate: str, s_x: float, zp_x: int, s_y: float, zp_y: int) -> Graph:
    g = Graph("gelu")
    x = g.input("x", all_inputs(storage).shape, storage, quant=QuantParams(np.float32(s_x), zp_x, storage=storage))
    g.output(g.gelu(x, approximate=approximate, out_quant=QuantParams(np.float32(s_y), zp_y, storage=storage)))
    return g


def digest(y: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(y, "<i2").tobytes()).hexdigest()


def main(python: str) -> None:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for k, case in enumerate(CASES):
            model, out = Path(tmp) / f"gelu{k}.tflite", Path(tmp) / f"gelu{k}.npy"
            export_tflite(gelu_graph(*case), model)
            dtype = "int8" if case[0] == "i8" else "int16"
            subprocess.run([python, "-c", _RUN, str(model), dtype, str(out)], check=True)
            y = np.load(out).reshape(-1)
            outputs = y.astype(np.int8).tobytes().hex() if case[0] == "i8" else digest(y)
            rows.append({"case": list(case), "outputs": outputs})
    OUT.write_text(json.dumps({"oracle": "ai-edge-litert 2.3.0, reference kernels", "cases": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main(sys.argv[1])
