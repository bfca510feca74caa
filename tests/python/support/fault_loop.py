"""The OpenCL fault loop: runs a scenario of fault_scenarios.py once without faults to count its
OpenCL calls (N_total) and name each, then once per chosen (N, error) with the fault layer failing
call N, and judges every run (crash, hang, wrong success, unreported or unnamed failure, library
unusable afterwards, OpenCL objects left after shutdown_driver).

    python tests/python/support/fault_loop.py SCENARIO [--full] [--jobs J] [--layer PATH]

Without --full (or AETHERCL_TEST_FULL=1) the Ns are sampled: the first call of every OpenCL
function with every error it may return, and every k-th call besides with one error in turn."""
import argparse
import concurrent.futures
import ctypes
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
CHILD = HERE / "fault_scenarios.py"
ERRORS = ("CL_OUT_OF_RESOURCES", "CL_OUT_OF_HOST_MEMORY", "CL_INVALID_COMMAND_QUEUE",
          "CL_BUILD_PROGRAM_FAILURE", "CL_MAP_FAILURE", "CL_MEM_OBJECT_ALLOCATION_FAILURE",
          "CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST")
CHILD_TIMEOUT = 120  # seconds: a child normally ends in one to ten; past this it is a hang
SAMPLED_EXTRA = 24   # the every-k-th runs of a sampled loop, besides the first calls


def environment(scenario, layer, extra=None):
    env = dict(os.environ)
    preload = [p for p in env.get("LD_PRELOAD", "").split(":") if p]
    env["LD_PRELOAD"] = ":".join(preload + [str(layer)])  # a sanitizer runtime stays first
    if scenario == "collective":
        env["POCL_DEVICES"] = "pthread pthread"
    for name in ("AETHERCL_FAULT_AT", "AETHERCL_FAULT_ERROR", "AETHERCL_FAULT_TRACE"):
        env.pop(name, None)
    env.update(extra or {})
    return env


def run_child(scenario, layer, extra=None):
    """(the child's report dict or None, its return code or 'timeout', the tail of its stderr)."""
    try:
        done = subprocess.run([sys.executable, str(CHILD), scenario], capture_output=True,
                              text=True, timeout=CHILD_TIMEOUT,
                              env=environment(scenario, layer, extra))
    except subprocess.TimeoutExpired as expired:
        tail = (expired.stderr or b"")[-2000:]
        return None, "timeout", tail.decode(errors="replace") if isinstance(tail, bytes) else tail
    report = None
    for line in done.stdout.splitlines():
        if line.startswith("FAULT-REPORT "):
            report = json.loads(line[len("FAULT-REPORT "):])
    return report, done.returncode, done.stderr[-2000:]


def count(scenario, layer):
    """The scenario without faults: its report and the name of each OpenCL call of its first run.
    A first, uncounted run fills the kernel caches: on a cold cache a run builds programs from
    source where every later run loads binaries, so its calls would not number the later runs'."""
    report, code, stderr = run_child(scenario, layer)
    if report is None or code != 0:
        raise RuntimeError(f"{scenario} fails without faults (warming the caches): {code} {stderr}")
    with tempfile.TemporaryDirectory() as folder:
        trace = Path(folder) / "trace.txt"
        report, code, stderr = run_child(scenario, layer, {"AETHERCL_FAULT_TRACE": str(trace)})
        if report is None or code != 0 or report["first"] != "ok" or report["second"] != "ok":
            raise RuntimeError(f"{scenario} fails without faults: {code} {report} {stderr}")
        names = trace.read_text().split()
    return report, names


def plan(names, layer, full, light=False):
    """The (N, error) pairs to run: every applicable pair with full; light (the CI's strength 1):
    the first call of every OpenCL function with one of its errors, taken in turn; else that
    call with every error and about SAMPLED_EXTRA more calls."""
    applies = ctypes.CDLL(str(layer)).aethercl_fault_applies
    applies.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
    errors_of = {name: [e for e in ERRORS if applies(name.encode(), e.encode())]
                 for name in set(names)}
    if full:
        return [(n, e) for n, name in enumerate(names, 1) for e in errors_of[name]]
    pairs, seen = [], set()
    for n, name in enumerate(names, 1):
        if name not in seen:
            seen.add(name)
            if light and errors_of[name]:
                pairs.append((n, errors_of[name][len(seen) % len(errors_of[name])]))
            elif not light:
                pairs += [(n, e) for e in errors_of[name]]
    if light:
        return sorted(pairs)
    step = max(1, len(names) // SAMPLED_EXTRA)
    for turn, n in enumerate(range(step, len(names) + 1, step)):
        errors = errors_of[names[n - 1]]
        if errors and all(m != n for m, _ in pairs):
            pairs.append((n, errors[turn % len(errors)]))
    return sorted(pairs)


def judge(report, code, stderr, n, error, name, reference):
    """The defects of one faulted run (empty: it behaved)."""
    if code == "timeout":
        return [f"hang (no end within {CHILD_TIMEOUT} s): {stderr[-500:]}"]
    if report is None or code != 0:
        return [f"crash or abnormal exit (code {code}): {stderr[-1500:]}"]
    problems = []
    if report["hit_at"] == 0:
        problems.append("the fault was never hit")
    elif report["hit_at"] > report["calls"]:
        problems.append(f"the fault landed after the first run (call {report['hit_at']})")
    if report["first"] == "ok":
        if report["first_digest"] != reference:
            problems.append("wrong success: the faulted run returned other results")
    else:
        message = report["first_error"].get("message") or ""
        hit = report.get("hit_call") or name
        if report["first_error"].get("function") is None:
            problems.append(f"failure not reported by the library: {report['first_error']}")
        elif hit not in message and error not in message:
            problems.append(f"message names neither {hit} nor {error}: {message!r}")
    if report["second"] != "ok":
        problems.append(f"library unusable after the fault: {report['second_error']}")
    elif report["second_digest"] != reference:
        problems.append("the run after the fault returned other results")
    if report["live_objects"] != 0:
        problems.append(f"OpenCL objects left after shutdown_driver: {report['live_detail']}")
    return problems


def loop(scenario, layer, full=False, jobs=2, light=False):
    """Runs the loop; returns a summary dict with every defect found."""
    baseline, names = count(scenario, layer)
    if baseline["first_digest"].startswith("skipped"):
        return {"scenario": scenario, "skipped": baseline["first_digest"]}
    pairs = plan(names, layer, full, light)

    def one(pair):
        n, error = pair
        report, code, stderr = run_child(scenario, layer, {"AETHERCL_FAULT_AT": str(n),
                                                           "AETHERCL_FAULT_ERROR": error})
        problems = judge(report, code, stderr, n, error, names[n - 1], baseline["first_digest"])
        outcome = report["first"] if report else None
        return n, error, names[n - 1], outcome, report, problems

    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        results = list(pool.map(one, pairs))
    hit = {n for n, _, _, _, report, _ in results if report and report["hit_at"] == n}
    return {
        "scenario": scenario,
        "skipped": None,
        "fault_points": len(names),
        "functions": sorted(set(names)),
        "runs": len(results),
        "points_run": len({n for n, *_ in results}),
        "points_hit_exactly": len(hit),
        "refused": sum(1 for r in results if r[3] == "refused"),
        "tolerated": sum(1 for r in results if r[3] == "ok"),
        "defects": [{"n": n, "error": e, "call": c, "problems": p}
                    for n, e, c, _, _, p in results if p],
    }


def default_layer():
    build = Path(os.environ.get("AETHERCL_BUILD_DIR", HERE.parents[2] / "build"))
    return build / "libcl_fault_layer.so"


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenario")
    parser.add_argument("--full", action="store_true")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--layer", default=None)
    args = parser.parse_args()
    summary = loop(args.scenario, Path(args.layer) if args.layer else default_layer(),
                   args.full or os.environ.get("AETHERCL_TEST_FULL") == "1", args.jobs)
    print(json.dumps(summary, indent=1))
