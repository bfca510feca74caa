"""OCL-LLM frontend on the AetherCL driver: the documented entry point.

    import ocl_framework as F          # GPUBuffer, OclTensor, layers, SimpleModel, AdamOptimizer,
    F.ocl_initialize(0)                # TinyTokenizer, checkpoints, train(), ...
    python ocl_framework.py --help     # the training command line

The code lives in the package ocl_llm/ next to this file (see its docstring for the module map);
this module re-exports every name of it, so existing imports and command lines keep working."""
from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import ocl_llm  # noqa: E402
from ocl_llm import *  # noqa: E402,F401,F403

__all__ = list(ocl_llm.__all__)

if __name__ == "__main__":
    sys.exit(ocl_llm.main())
