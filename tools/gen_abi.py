#!/usr/bin/env python3
"""Generates the Python, Rust and C++ sides of the ABI from its sources of truth: aethercl/ops.py
(one typed wrapper per manifest symbol, its docstring the first sentence of the symbol's paragraph in
include/aethercl/driver.h) and ops.pyi from abi/driver.abi, aethercl/status.py from
abi/status.def, and aethercl/structs.py (the header's integer #defines, enums and structs as
ctypes) from the header; and through tools/gen_bindings.py the Rust crate's raw declarations
(bindings/rust/src/sys.rs, its layout test's two halves) and include/aethercl/aethercl_enums.hpp.

    python3 tools/gen_abi.py            # rewrite the generated files
    python3 tools/gen_abi.py --check    # exit 1 naming every file that is out of date

Why committed files and not generation at build time: the package must import straight from the
source tree (tests, tools and users put python_harness/ on sys.path without building anything,
and a pip package ships plain files), and the generator is pure Python with no build step to hang
it on. tests/python/test_generated.py runs --check's comparison, so a manifest line added without
regenerating fails CI.

Conventions follow the C signature; EXCEPTIONS below lists the few that the signature cannot say.
"""
from __future__ import annotations

import argparse
import importlib.util
import keyword
import re
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Tuple

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "python_harness" / "aethercl"
MANIFEST = ROOT / "abi" / "driver.abi"
HEADER = ROOT / "include" / "aethercl" / "driver.h"
STATUS_TABLE = ROOT / "abi" / "status.def"


def _load_abi_module():
    """aethercl/abi.py alone (stdlib only), so a stale or broken ops.py cannot stop the generator."""
    spec = importlib.util.spec_from_file_location("_aethercl_abi", PACKAGE / "abi.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module   # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


abi = _load_abi_module()

# Python names kept from the hand-written module; every other symbol gets default_python_name().
PYTHON_NAMES = {
    "shutdown_driver": "shutdown",
    "allocate_gpu_memory": "allocate",
    "free_gpu_memory": "free",
    "write_host_to_gpu_blocking": "write",
    "read_gpu_to_host_blocking": "read",
    "execute_log_softmax_stable_gpu": "log_softmax",
    "simulated_get_compute_unit_count": "sim_compute_unit_count",
}
# What the C signature cannot say:
EXCEPTIONS = {
    # int results that are values, not the 1/0 status every other int function returns
    "value": {"aethercl_abi_version", "aethercl_last_error_code", "aethercl_device_count"},
    # void functions documented as no-ops on bad input: the wrapper never raises
    "quiet": {"shutdown_driver", "free_gpu_memory", "simulated_kernel_free"},
    # pointer results where NULL is a valid answer: raise only when the call recorded an error
    "nullable": {"aethercl_stream_current"},
}
INT_TYPES = {"int", "unsigned int", "long long", "unsigned long long", "size_t"}
FLOAT_TYPES = {"float", "double"}


def default_python_name(c_name: str) -> str:
    """execute_add_on_gpu -> add, aethercl_trace_start -> trace_start, simulated_kernel_write ->
    sim_write, initialize_gpu -> initialize."""
    name = c_name
    for prefix, replacement in (("aethercl_", ""), ("execute_", ""), ("simulated_kernel_", "sim_"),
                                ("simulated_", "sim_")):
        if name.startswith(prefix):
            name = replacement + name[len(prefix):]
            break
    for suffix in ("_on_gpu", "_gpu"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
            break
    return name


# --- the header's descriptions -------------------------------------------------------------------

def first_sentence(paragraph: str) -> str:
    """Up to the first full stop that ends a sentence (not "e.g.", "i.e.", "etc." or a ".." range)."""
    text = " ".join(paragraph.split())
    for match in re.finditer(r"\.(\s|$)", text):
        before = text[: match.start()]
        if re.search(r"(\be\.g|\bi\.e|\betc|\.)$", before):
            continue
        return text[: match.start() + 1]
    return text


_COMMENT = re.compile(r"/\*.*?\*/", re.S)
_BANNER_LINE = re.compile(r"^[-=]{3,}.*?[-=]{3,}$|^[-=]{3,}$")
_PROTOTYPE = re.compile(r"AETHERCL_API\s+[^;(]*?\b(\w+)\s*\(")


def _comment_paragraph(comment: str) -> str:
    """The text of a /* */ comment: leading '*'s gone, a section banner line (---- Title ----)
    dropped; "" when nothing else is left."""
    lines = [re.sub(r"^\s*\*(?!/)\s?", "", line).strip() for line in comment[2:-2].splitlines()]
    lines = [line for line in lines if line and not _BANNER_LINE.match(line)]
    return " ".join(lines)


def _declaration_start(masked: str, end: int) -> Tuple[Optional[int], bool]:
    """(start, is_definition) of the top-level declaration ending with the ';' at masked[end - 1]:
    a prototype, or a struct/enum definition (`typedef struct x { ... } x;`, `enum x { ... };`).
    start is None for anything else."""
    body = masked[:end - 1].rstrip()
    if body.endswith("}") or re.search(r"}\s*\w+$", body):
        depth, i = 0, body.rfind("}")
        while i >= 0:
            depth += {"}": 1, "{": -1}.get(body[i], 0)
            if depth == 0:
                break
            i -= 1
        head = masked.rfind(";", 0, i) + 1
        head = max(head, masked.rfind("*/", 0, i) + 2, masked.rfind("\n#", 0, i) + 1)
        if i < 0:
            return None, True
        return head + len(masked[head:i]) - len(masked[head:i].lstrip()), True
    start = masked.rfind("AETHERCL_API", 0, end)
    if start >= 0 and ";" not in masked[start:end - 1]:
        return start, False
    return None, False


def header_descriptions(header_text: str) -> Dict[str, str]:
    """Symbol -> the first sentence of its paragraph: the comment that starts a line right before
    its AETHERCL_API prototype, or before the group it belongs to: a paragraph, then any struct or
    enum definitions, then consecutive prototypes share the paragraph."""
    spans = [(m.start(), m.end()) for m in _COMMENT.finditer(header_text)]
    masked = _COMMENT.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), header_text)
    descriptions = {}
    for match in _PROTOTYPE.finditer(masked):
        i, passed_definition = match.start(), False
        while True:
            i = len(header_text[:i].rstrip())
            if header_text.endswith("*/", 0, i):
                c_start = next(s for s, e in spans if e == i)
                line_start = header_text.rfind("\n", 0, c_start) + 1
                if header_text[line_start:c_start].strip():      # a trailing comment: skip it
                    i = c_start
                    continue
                paragraph = _comment_paragraph(header_text[c_start:i])
                if paragraph:
                    descriptions[match.group(1)] = first_sentence(paragraph)
                break
            if header_text.endswith(";", 0, i):
                start, is_definition = _declaration_start(masked, i)
                if start is None or (passed_definition and not is_definition):
                    break     # a prototype before a definition belongs to another paragraph
                i, passed_definition = start, passed_definition or is_definition
                continue
            break
    return descriptions


# --- one wrapper per symbol --------------------------------------------------------------------

@dataclass
class Argument:
    python: str        # the wrapper's parameter name
    expression: str    # what is passed to the C function
    annotation: str    # its type in the stub


def _python_identifier(name: str, taken: set) -> str:
    name = name if name.isidentifier() else re.sub(r"\W", "_", name)
    while keyword.iskeyword(name) or name in taken or name.startswith("_"):
        name = name.lstrip("_") + "_" if name.startswith("_") else name + "_"
    taken.add(name)
    return name


def _argument(parameter, taken: set) -> Argument:
    c_type, name = parameter.c_type, parameter.name
    py = _python_identifier(name, taken)
    ctype = abi.ctype_of(c_type)      # raises for a type with no mapping
    if c_type == "int" and (name == "gpu_index" or name.endswith("_gpu")):
        return Argument(py, f"index_of({py})", "DeviceLike")
    if c_type in INT_TYPES:
        return Argument(py, py, "int")
    if c_type in FLOAT_TYPES:
        return Argument(py, py, "float")
    if c_type == "const char*":
        return Argument(py, f"text({py})", "TextArg")
    if c_type == "char*":
        return Argument(py, py, "CharBuffer")
    if c_type in ("void*", "const void*"):
        return Argument(py, f"pointer({py})", "Pointer")
    if ctype is not None and getattr(ctype, "_type_", None) is not None and \
            hasattr(ctype, "contents"):
        element = ctype._type_
        if element is abi.ctypes.c_void_p:
            return Argument(py, f"pointer_array({py})", "PointerArray")
        return Argument(py, f"scalar_array({py}, ctypes.{element.__name__})", "ScalarArray")
    if ctype is abi.ctypes.c_void_p:     # a pointer to a struct of the header
        return Argument(py, f"struct_pointer({py})", "StructPointer")
    raise ValueError(f"no Python convention for parameter {c_type} {name}")


def kind_of(symbol) -> str:
    params = symbol.parameters
    if symbol.return_type == "size_t" and len(params) >= 2 and params[-1].c_type == "size_t" \
            and params[-2].c_type in ("char*", "void*"):
        return "text_out" if params[-2].c_type == "char*" else "bytes_out"
    if symbol.return_type == "int":
        return "value" if symbol.name in EXCEPTIONS["value"] else "status"
    if symbol.return_type in ("void*", "unsigned long long"):
        return "nullable" if symbol.name in EXCEPTIONS["nullable"] else "handle"
    if symbol.return_type in ("const char*", "char*"):
        return "text"
    if symbol.return_type == "void":
        return "quiet" if symbol.name in EXCEPTIONS["quiet"] else "void"
    abi.ctype_of(symbol.return_type)
    return "value"


RETURNS = {"status": "None", "value": "int", "handle": "int", "nullable": "Optional[int]",
           "text": "str", "void": "None", "quiet": "None", "text_out": "str",
           "bytes_out": "bytes"}
RAISES = {
    "status": "Raises AetherCLError unless it returns 1.",
    "value": "Returns the C result.",
    "handle": "Returns the handle or address; raises AetherCLError when it is 0/NULL.",
    "nullable": "Returns the pointer (None for NULL); raises AetherCLError when the call failed.",
    "text": "Returns the C string.",
    "void": "Raises AetherCLError when the call recorded an error.",
    "quiet": "Never raises.",
    "text_out": "Returns the whole text (sized first); raises AetherCLError when it returns 0.",
    "bytes_out": "Returns the whole output (sized first); raises AetherCLError when it returns 0.",
}


def _docstring(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"""', '\\"\\"\\"')


WIDTH = 100


def _fill(text: str, indent: str) -> List[str]:
    return textwrap.wrap(text, WIDTH, initial_indent=indent, subsequent_indent=indent,
                         break_long_words=False, break_on_hyphens=False)


def _call(head: str, items: List[str], tail: str, indent: str) -> List[str]:
    """head(item, item, ...)tail on one line, or broken after commas with the items aligned."""
    one = f"{indent}{head}({', '.join(items)}){tail}"
    if len(one) <= WIDTH or not items:
        return [one]
    lines, current = [], f"{indent}{head}("
    pad = " " * len(current)
    for i, item in enumerate(items):
        piece = item + (", " if i < len(items) - 1 else f"){tail}")
        if len(current) + len(piece.rstrip()) > WIDTH and current.strip() != f"{head}(":
            lines.append(current.rstrip())
            current = pad
        current += piece
    lines.append(current)
    return lines


@dataclass
class Wrapper:
    symbol: object
    python_name: str
    kind: str
    parameters: List[Tuple[str, str, Optional[str]]]   # (name, annotation, default)
    body: List[str]
    description: str

    def signature(self) -> List[str]:
        parts = [f"{name}: {annotation}" + (f" = {default}" if default else "")
                 for name, annotation, default in self.parameters]
        return _call(f"def {self.python_name}", parts, f" -> {RETURNS[self.kind]}:", "")

    def docstring(self, indent: str = "    ") -> List[str]:
        lines = _fill('"""' + _docstring(self.description), indent) + [""]
        lines += _fill(f"C: {_docstring(self.symbol.prototype())}. {RAISES[self.kind]}" + '"""',
                       indent)
        return lines


def make_wrapper(symbol, description: str) -> Wrapper:
    kind = kind_of(symbol)
    params = list(symbol.parameters)
    if kind in ("text_out", "bytes_out"):
        params = params[:-2]
    # The module's own names: a C parameter called "target" or "pointer" must not shadow them.
    taken = {"dev", "ctypes", "target", "library", "pointer", "pointer_array", "scalar_array",
             "struct_pointer", "text", "text_result", "index_of", "nullable", "checked_void",
             "Buffer", "Device"}
    has_device = bool(params) and params[0].name == "gpu_index" and params[0].c_type == "int"
    arguments = [_argument(p, taken) for p in (params[1:] if has_device else params)]
    default = None if arguments or has_device else "0"
    signature = [("dev", "DeviceLike", default)] + [(a.python, a.annotation, None)
                                                    for a in arguments]
    values = ["_index"] if has_device else []
    values += [a.expression for a in arguments]
    named = [f'"{symbol.name}"'] + values
    head, items, tail = {
        "status": ("_lib.check", named, ""),
        "value": (f"return _lib.{symbol.name}", values, ""),
        "handle": ("return _lib.check_handle", named, ""),
        "nullable": ("return nullable", ["_lib"] + named, ""),
        "text": (f"return text_result(_lib.{symbol.name}", values, ")"),
        "void": ("checked_void", ["_lib"] + named, ""),
        "quiet": (f"_lib.{symbol.name}", values, ""),
        "text_out": ("return _lib.json_call", named, ""),
        "bytes_out": ("return _lib.bytes_call", named, ""),
    }[kind]
    body = ["    _lib, _index = target(dev)" if has_device else "    _lib = library(dev)"]
    body += _call(head, items, tail, "    ")
    name = PYTHON_NAMES.get(symbol.name) or default_python_name(symbol.name)
    return Wrapper(symbol, name, kind, signature, body, description)


def wrappers(symbols, descriptions: Dict[str, str]) -> List[Wrapper]:
    missing = [s.name for s in symbols if s.name not in descriptions]
    if missing:
        raise ValueError("include/aethercl/driver.h has no comment paragraph right before the "
                         "prototype of " + ", ".join(missing))
    result = [make_wrapper(s, descriptions[s.name]) for s in symbols]
    seen: Dict[str, str] = {}
    for w in result:
        if w.python_name in seen:
            raise ValueError(f"{w.symbol.name} and {seen[w.python_name]} would both be "
                             f"ops.{w.python_name}: add one to PYTHON_NAMES in tools/gen_abi.py")
        seen[w.python_name] = w.symbol.name
    return result


# --- the generated files -------------------------------------------------------------------------

BANNER = "# Generated by tools/gen_abi.py from {sources}; do not edit."
OPS_DOC = '''"""One Python function per exported entry point, generated from abi/driver.abi. Each takes the
device first (a Device, or an int gpu_index on the default library; functions without gpu_index
use it only to pick the library), accepts Buffers, raw handles or None for buffer arguments, NumPy
arrays or ctypes objects for host memory, sequences for arrays, str for strings, and raises
AetherCLError (with aethercl_last_error()) where the C function reports failure. Argument order
and meaning are the C function's; nothing is reordered. ENTRY_POINTS maps each Python name to its
C symbol."""'''


def render_ops(ws: List[Wrapper]) -> str:
    out = [BANNER.format(sources="abi/driver.abi and include/aethercl/driver.h"), OPS_DOC,
           "from __future__ import annotations", "", "import ctypes  # noqa: F401 (array types)",
           "from typing import Dict, Optional  # noqa: F401", "",
           "from ._calls import (CharBuffer, DeviceLike, Pointer, PointerArray,  # noqa: F401",
           "                     ScalarArray, StructPointer, TextArg, checked_void, index_of,",
           "                     library, nullable, pointer, pointer_array, scalar_array,",
           "                     struct_pointer, target, text, text_result)",
           "from .device import Buffer, Device  # noqa: F401 (part of the module's interface)", "",
           "# Python name -> C symbol, for every function of this module that wraps an entry point.",
           "ENTRY_POINTS: Dict[str, str] = {}", "", "",
           "def _entry(c_name: str):", "    def register(function):",
           "        ENTRY_POINTS[function.__name__] = c_name", "        function.c_name = c_name",
           "        return function", "    return register", ""]
    node = None
    for w in ws:
        if w.symbol.version != node:
            node = w.symbol.version
            out += ["", f"# --- {node} " + "-" * (93 - len(node))]
        out += ["", "", f'@_entry("{w.symbol.name}")'] + w.signature()
        out += w.docstring() + w.body
    out += ["", "", '__all__ = sorted(ENTRY_POINTS) + ["ENTRY_POINTS", "Buffer", "Device"]']
    return "\n".join(out) + "\n"


def render_stub(ws: List[Wrapper]) -> str:
    out = [BANNER.format(sources="abi/driver.abi and include/aethercl/driver.h"),
           "# Type stub of aethercl.ops.", "from typing import Dict, Optional", "",
           "from ._calls import (CharBuffer, DeviceLike, Pointer, PointerArray, ScalarArray,",
           "                     StructPointer, TextArg)",
           "from .device import Buffer as Buffer, Device as Device", "",
           "ENTRY_POINTS: Dict[str, str]", ""]
    for w in ws:
        out += [""] + w.signature() + w.docstring() + ["    ..."]
    return "\n".join(out) + "\n"


def status_rows(table_text: str) -> List[Tuple[int, str, str, str]]:
    """(value, NAME, Enumerator, description) of every AETHERCL_STATUS line of abi/status.def."""
    rows = []
    for match in re.finditer(r'^AETHERCL_STATUS\(\s*(\d+)\s*,\s*(\w+)\s*,\s*(\w+)\s*,\s*"([^"]*)"\s*\)',
                             table_text, re.M):
        rows.append((int(match.group(1)), match.group(2), match.group(3), match.group(4)))
    values = [r[0] for r in rows]
    if not rows or len(set(values)) != len(values):
        raise ValueError("abi/status.def: no AETHERCL_STATUS rows, or a value used twice")
    return rows


def render_status(rows) -> str:
    out = [BANNER.format(sources="abi/status.def"),
           '"""The driver\'s status codes (aethercl_last_error_code()), from abi/status.def: '
           'Status, the\nnames aethercl_status_name() returns, and what each code means."""',
           "from __future__ import annotations", "", "import enum", "from typing import Dict, Union",
           "", "", "class Status(enum.IntEnum):"]
    for value, name, _, description in rows:
        out.append(f"    {name[len('AETHERCL_'):]} = {value}  # {description}")
    out += ["", ""]
    for value, name, _, _ in rows:
        out.append(f"{name} = Status.{name[len('AETHERCL_'):]}")
    out += ["", "NAMES: Dict[int, str] = {"]
    out += [f'    {value}: "{name}",' for value, name, _, _ in rows]
    out += ["}", "DESCRIPTIONS: Dict[int, str] = {"]
    out += [f'    {value}: "{description}",' for value, _, _, description in rows]
    out += ["}", "UNKNOWN_NAME = \"AETHERCL_UNKNOWN_STATUS\"", "", "",
            "def as_status(code: int) -> Union[Status, int]:",
            '    """The Status member of a code, the plain int for a code the table lacks."""',
            "    return Status(code) if code in NAMES else code", "", "",
            "def describe(code: int) -> str:",
            '    """Text like \'AETHERCL_OUT_OF_RANGE: a buffer is too small ...\' for a code."""',
            "    if code not in NAMES:", "        return f\"{UNKNOWN_NAME} {code}\"",
            '    return f"{NAMES[code]}: {DESCRIPTIONS[code]}"']
    return "\n".join(out) + "\n"


# --- the header's constants and structs ----------------------------------------------------------

# C struct field types -> ctypes names (pointers of any kind are handles: c_void_p).
FIELD_TYPES = {"int": "c_int", "unsigned int": "c_uint", "long long": "c_longlong",
               "unsigned long long": "c_ulonglong", "size_t": "c_size_t", "float": "c_float",
               "double": "c_double"}
# Python class names that the struct's C name does not spell (default: aethercl_gemm_desc ->
# GemmDesc).
STRUCT_NAMES = {"aethercl_batchnorm_desc": "BatchNormDesc"}
# Enums generated elsewhere (status.py, from abi/status.def).
SKIPPED_ENUMS = {"aethercl_status"}


def _masked(header_text: str) -> str:
    """The header with comments blanked (line numbers kept) and preprocessor lines but #define
    kept."""
    return _COMMENT.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), header_text)


def header_defines(header_text: str) -> List[Tuple[str, int]]:
    """(NAME without AETHERCL_, value) of every integer #define AETHERCL_*."""
    return [(m.group(1), int(m.group(2))) for m in re.finditer(
        r"^#define\s+AETHERCL_(\w+)\s+(\d+)[uUlL]*\s*$", _masked(header_text), re.M)]


def header_enums(header_text: str) -> List[Tuple[str, List[Tuple[str, int]]]]:
    """(enum name, [(CONSTANT without AETHERCL_, value)]) of every enum aethercl_*, in order."""
    enums = []
    for match in re.finditer(r"\benum\s+(aethercl_\w+)\s*\{([^}]*)\}", _masked(header_text)):
        if match.group(1) in SKIPPED_ENUMS:
            continue
        values, value = [], -1
        for item in (i.strip() for i in match.group(2).split(",")):
            if not item:
                continue
            name, _, given = (part.strip() for part in item.partition("="))
            value = int(given, 0) if given else value + 1
            if not name.startswith("AETHERCL_"):
                raise ValueError(f"enum {match.group(1)}: {name} lacks the AETHERCL_ prefix")
            values.append((name[len("AETHERCL_"):], value))
        enums.append((match.group(1), values))
    return enums


def header_struct_fields(header_text: str) -> List[Tuple[str, List[Tuple[str, str, Optional[int]]]]]:
    """(struct name, [(field, C type, array length or None)]) of every typedef struct aethercl_*,
    fields in declaration order (`int m, n;` and `int shape[4];` included); the C type is spelled
    with its stars glued on ("void*", "const void*")."""
    structs = []
    for match in re.finditer(r"typedef\s+struct\s+(aethercl_\w+)\s*\{([^}]*)\}\s*(\w+)\s*;",
                             _masked(header_text)):
        fields = []
        for declaration in (d.strip() for d in match.group(2).split(";")):
            if not declaration:
                continue
            head = re.match(r"((?:const\s+)?(?:unsigned\s+)?(?:long\s+long|\w+)\s*\**)\s*(.*)$",
                            declaration, re.S)
            c_type, declarators = " ".join(head.group(1).split()), head.group(2)
            for declarator in (d.strip() for d in declarators.split(",")):
                star, name, length = re.fullmatch(r"(\**)\s*(\w+)\s*(?:\[(\d+)\])?",
                                                  declarator).groups()
                spelled = (c_type + star).replace(" *", "*")
                fields.append((name, spelled, int(length) if length else None))
        structs.append((match.group(1), fields))
    return structs


def header_structs(header_text: str) -> List[Tuple[str, List[Tuple[str, str]]]]:
    """(struct name, [(field, ctypes expression)]) of every typedef struct aethercl_*, fields in
    declaration order (`int m, n;` and `int shape[4];` included)."""
    structs = []
    for struct, declared in header_struct_fields(header_text):
        fields = []
        for name, c_type, length in declared:
            if "*" in c_type:
                ctype = "ctypes.c_void_p"
            elif c_type in FIELD_TYPES:
                ctype = f"ctypes.{FIELD_TYPES[c_type]}"
            else:
                raise ValueError(f"{struct}.{name}: no ctypes type for {c_type}")
            fields.append((name, f"{ctype} * {length}" if length else ctype))
        structs.append((struct, fields))
    return structs


def struct_class_name(c_name: str) -> str:
    return STRUCT_NAMES.get(c_name) or "".join(
        part[:1].upper() + part[1:] for part in c_name[len("aethercl_"):].split("_"))


def render_structs(header_text: str) -> str:
    out = [BANNER.format(sources="include/aethercl/driver.h"),
           '"""The integer #defines, enums and structs of include/aethercl/driver.h for ctypes: each '
           'constant\nnamed without its AETHERCL_ prefix, ENUMS (enum -> {constant: value}, in '
           'declaration order),\nand one ctypes.Structure per typedef struct, fields in the '
           'header\'s order."""',
           "from __future__ import annotations", "", "import ctypes", "from typing import Dict",
           "", "# #define AETHERCL_*"]
    out += [f"{name} = {value}" for name, value in header_defines(header_text)]
    enums = header_enums(header_text)
    for enum_name, values in enums:
        out += ["", f"# enum {enum_name}"] + [f"{name} = {value}" for name, value in values]
    out += ["", "ENUMS: Dict[str, Dict[str, int]] = {"]
    for enum_name, values in enums:
        out += _call(f'    "{enum_name}": dict', [f"{name}={name}" for name, _ in values], ",",
                     "")
    out += ["}"]
    structs = header_structs(header_text)
    for c_name, fields in structs:
        out += ["", "", f"class {struct_class_name(c_name)}(ctypes.Structure):",
                f'    """struct {c_name}."""', "    _fields_ = ["]
        out += [f'        ("{name}", {ctype}),' for name, ctype in fields]
        out += ["    ]"]
    out += ["", "", "# C struct name -> its class.", "STRUCTS = {"]
    out += [f'    "{c_name}": {struct_class_name(c_name)},' for c_name, _ in structs]
    out += ["}"]
    return "\n".join(out) + "\n"


def generate(manifest_text: str, header_text: str, status_text: str) -> Dict[str, str]:
    """File name (inside python_harness/aethercl) -> generated text."""
    ws = wrappers(abi.parse_manifest(manifest_text), header_descriptions(header_text))
    return {"ops.py": render_ops(ws), "ops.pyi": render_stub(ws),
            "status.py": render_status(status_rows(status_text)),
            "structs.py": render_structs(header_text)}


def generate_bindings(manifest_text: str, header_text: str, status_text: str) -> Dict[str, str]:
    """Path relative to the repository root -> generated text of the Rust and C++ bindings
    (tools/gen_bindings.py)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import gen_bindings
    symbols = abi.parse_manifest(manifest_text)
    descriptions = header_descriptions(header_text)
    return gen_bindings.generate(sys.modules[__name__], symbols, descriptions, header_text,
                                 status_rows(status_text))


def generate_from_tree() -> Dict[Path, str]:
    texts = MANIFEST.read_text(), HEADER.read_text(), STATUS_TABLE.read_text()
    files = {PACKAGE / name: text for name, text in generate(*texts).items()}
    files.update({ROOT / name: text for name, text in generate_bindings(*texts).items()})
    return files


def stale_files() -> List[Path]:
    return [path for path, text in generate_from_tree().items()
            if not path.is_file() or path.read_text() != text]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only report out-of-date files")
    args = parser.parse_args()
    if args.check:
        stale = stale_files()
        for path in stale:
            print(f"out of date: {path.relative_to(ROOT)} (run python3 tools/gen_abi.py)")
        return 1 if stale else 0
    for path, text in generate_from_tree().items():
        if not path.is_file() or path.read_text() != text:
            path.write_text(text)
            print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
