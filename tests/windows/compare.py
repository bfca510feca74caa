"""Compares two conformance runs (tests/windows/conformance.c): every "result" line of the Windows
run (driver.dll under Wine) must match the native run's within 1e-5 relative, and both runs must
have passed all their own checks. Exit status 0 when they agree.

    python3 tests/windows/compare.py native.txt wine.txt"""
import math
import sys


def results(path):
    values, passed = {}, None
    with open(path, encoding="utf-8", errors="replace") as text:
        for line in text:
            fields = line.split()
            if len(fields) == 4 and fields[0] == "result":
                values[fields[1]] = (float(fields[2]), float(fields[3]))
            elif line.startswith("conformance: ") and line.rstrip().endswith(" 0 failed"):
                passed = line.strip()
    return values, passed


def main(native_path, other_path):
    native, native_passed = results(native_path)
    other, other_passed = results(other_path)
    problems = []
    if not native_passed:
        problems.append(f"{native_path}: the native run did not pass all its checks")
    if not other_passed:
        problems.append(f"{other_path}: the run did not pass all its checks")
    if set(native) != set(other) or not native:
        problems.append(f"different result sets: only native {sorted(set(native) - set(other))}, "
                        f"only other {sorted(set(other) - set(native))}")
    for name in sorted(set(native) & set(other)):
        for mine, theirs in zip(native[name], other[name]):
            if not math.isclose(mine, theirs, rel_tol=1e-5, abs_tol=1e-6):
                problems.append(f"{name}: native {native[name]} vs {other[name]}")
    for problem in problems:
        print("conformance compare:", problem)
    if not problems:
        print(f"conformance compare: {len(native)} results agree ({other_passed})")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
