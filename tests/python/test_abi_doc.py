"""docs/ABI.md restates the seed and AETHERCL_2 signatures by hand (§4.1, §5); they must equal
abi/driver.abi, the single source of truth for every exported symbol."""
import re
from pathlib import Path
from typing import Dict, List, Tuple

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs/ABI.md"
MANIFEST = ROOT / "abi" / "driver.abi"


def _normalised(prototype: str) -> str:
    """One spelling per C prototype: single spaces, `T* name`, no space before `(`."""
    text = " ".join(prototype.split())
    text = re.sub(r"\s*\*\s*", "* ", text)
    text = re.sub(r"\s*,\s*", ", ", text)
    text = re.sub(r"\s*\(\s*", "(", text)
    return re.sub(r"\s*\)", ")", text).strip()


def _manifest() -> List[Tuple[str, str, str]]:
    """(node, name, normalised prototype) per exported symbol."""
    symbols = []
    for line in MANIFEST.read_text().splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        node, result, name, params = (field.strip() for field in line.split("|"))
        symbols.append((node, name, _normalised(f"{result} {name}({params})")))
    return symbols


def _section(number: str) -> str:
    """The text of the section whose heading starts with `number` up to the next heading of the
    same or a higher level."""
    lines = DOC.read_text().splitlines()
    for i, line in enumerate(lines):
        heading = re.match(r"(#+) " + re.escape(number) + r"\.? ", line)
        if heading:
            level = len(heading.group(1))
            body = []
            for following in lines[i + 1:]:
                other = re.match(r"(#+) ", following)
                if other and len(other.group(1)) <= level:
                    break
                body.append(following)
            return "\n".join(body)
    raise AssertionError(f"docs/ABI.md has no section {number}")


def _prototypes(text: str) -> Dict[str, List[str]]:
    """Every `...name(...)` prototype in backticks, by function name."""
    found: Dict[str, List[str]] = {}
    for match in re.finditer(r"`([^`]*?\b(\w+)\([^`]*\))`", text):
        found.setdefault(match.group(2), []).append(_normalised(match.group(1)))
    return found


def test_seed_table_lists_every_driver_1_function_with_its_manifest_signature():
    table = _section("4.1")
    rows = re.findall(r"^\| (\d+) \| `([^`]+)` \|", table, flags=re.M)
    seeds = [(name, prototype) for node, name, prototype in _manifest() if node == "DRIVER_1"]
    assert [int(number) for number, _ in rows] == list(range(1, len(seeds) + 1))
    documented = {_normalised(signature) for _, signature in rows}
    assert documented == {prototype for _, prototype in seeds}


def test_aethercl_2_section_states_every_function_with_its_manifest_signature():
    stated = _prototypes(_section("5"))
    for node, name, prototype in _manifest():
        if node == "AETHERCL_2":
            assert stated.get(name) == [prototype], name
    extra = {n for n in stated if n.startswith("aethercl_")} - {n for _, n, _ in _manifest()}
    assert not extra, f"docs/ABI.md §5 names functions the manifest lacks: {sorted(extra)}"


def test_normalisation_keeps_different_signatures_apart():
    assert _normalised("void *f( int a , char * b )") == _normalised("void* f(int a, char* b)")
    assert _normalised("int f(int a)") != _normalised("int f(long a)")
    assert _normalised("void* f(void)") != _normalised("void f(void)")
