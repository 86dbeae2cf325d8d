"""make mutate: mutation testing of the decision code with cosmic-ray (docs/testing.md).

Per file of tests/mutation/targets.yml (or the ones named): copy the working tree to .cache/mutate/tree (cosmic-ray
mutates in place; the copy keeps this checkout clean even when a run is killed, and lets you edit and test here
meanwhile), measure the file's tests once unmutated (they must pass; the per-mutant timeout is 3x that plus 10 s),
create or resume a cosmic-ray session in .cache/mutate/<file>.sqlite, mark the left-out operators and the
equivalent mutants of tests/mutation/equivalent.yml as skipped, run the pending mutants (each with only the file's
tests, `-x`, `-p no:cacheprovider`), then print the survivors and the score killed / (total - equivalent).

A session is resumed as long as the mutated file is unchanged (--fresh starts over); --rerun-survivors runs the
previous survivors again (after new tests: a killed mutant stays killed when tests are only added).
"""
import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import threading
import time

import yaml

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CACHE = os.path.join(TOP, ".cache", "mutate")
TREE = os.path.join(CACHE, "tree")
TARGETS = os.path.join(TOP, "tests", "mutation", "targets.yml")
EQUIVALENT = os.path.join(TOP, "tests", "mutation", "equivalent.yml")
BIN = os.path.dirname(sys.executable)


def _load(path):
    with open(path) as f:
        return yaml.safe_load(f) or {}


def sync_tree():
    """Copy the tracked and untracked-not-ignored files to TREE (only those that changed); remove the rest."""
    out = subprocess.run(["git", "ls-files", "-z", "-co", "--exclude-standard"], cwd=TOP, check=True,
                         capture_output=True).stdout.decode()
    files = set(p for p in out.split("\0") if p and os.path.isfile(os.path.join(TOP, p)))
    for rel in files:
        src, dst = os.path.join(TOP, rel), os.path.join(TREE, rel)
        if os.path.islink(src):
            if not os.path.lexists(dst):
                os.makedirs(os.path.dirname(dst), exist_ok=True)
                os.symlink(os.readlink(src), dst)
            continue
        try:
            if os.stat(dst).st_size == os.stat(src).st_size and _digest(src) == _digest(dst):
                continue
        except OSError:
            pass
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        shutil.copy2(src, dst)
    for root, dirs, names in os.walk(TREE):
        dirs[:] = [d for d in dirs if d not in (".build", ".cache", "__pycache__")]
        for n in names:
            rel = os.path.relpath(os.path.join(root, n), TREE)
            if rel not in files:
                os.unlink(os.path.join(root, n))


def _digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def _session(target):
    return os.path.join(CACHE, target.replace("plugins/module_utils/", "").replace("/", "_").replace(".py", ""))


_TRACE = """
import json, os, sys, threading, pytest
path, out = sys.argv[1], sys.argv[2]
lines = {"": set()}
cur = [""]
real = {}
def local(frame, event, arg):
    if event == "line":
        lines[cur[0]].add(frame.f_lineno)
    return local
def glob(frame, event, arg):
    f = frame.f_code.co_filename
    if f not in real:
        real[f] = os.path.realpath(f)
    if real[f] == path:
        lines[cur[0]].add(frame.f_lineno)
        return local
    return None
class PerTest:
    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item, nextitem):
        cur[0] = item.nodeid
        lines.setdefault(item.nodeid, set())
        yield
        cur[0] = ""
sys.settrace(glob)
threading.settrace(glob)
rc = pytest.main(sys.argv[3:], plugins=[PerTest()])
sys.settrace(None)
with open(out, "w") as f:
    json.dump({"collect": sorted(lines.pop("")), "tests": [[k, sorted(v)] for k, v in lines.items()]}, f)
sys.exit(int(rc))
"""


def baseline(target, tests, base):
    """Run the tests once unmutated (they must pass), recording the lines of ``target`` each test executes (and
    those run at import): a mutant runs only the tests that execute its line, and a mutant on a line no test runs
    survives without being run. Keeps a pristine copy of ``target`` (base.orig). Returns the seconds it took."""
    t0 = time.time()
    shutil.copy2(os.path.join(TREE, target), base + ".orig")
    cmd = [sys.executable, "-c", _TRACE, os.path.realpath(os.path.join(TREE, target)), base + ".map",
           "-x", "-q", "-p", "no:cacheprovider"] + tests
    r = subprocess.run(cmd, cwd=TREE, capture_output=True, text=True, check=False,
                       env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1", PYTEST_DISABLE_PLUGIN_AUTOLOAD="1"))
    if r.returncode != 0:
        sys.exit("make mutate: the tests fail unmutated (%s):\n%s" % (" ".join(tests), r.stdout[-3000:]))
    import json
    with open(base + ".map") as f:
        cov = json.load(f)
    run = set(cov["collect"]).union(*[set(ls) for dummy, ls in cov["tests"]])
    with open(base + ".lines", "w") as f:
        f.write(" ".join(str(n) for n in sorted(run)))
    return time.time() - t0


def run_tests(base, target):
    """cosmic-ray's test command: the tests that execute the mutated lines (all of them when a mutated line runs
    at import), `-x`; exit 0 (survived) when none does."""
    import difflib
    import json
    with open(base + ".orig") as f:
        old = f.read().splitlines()
    with open(os.path.join(TREE, target)) as f:
        new = f.read().splitlines()
    changed = set()
    for tag, i1, i2, dummy_j1, dummy_j2 in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        if tag != "equal":
            changed.update(range(i1 + 1, max(i2, i1 + 1) + 1))
    with open(base + ".map") as f:
        cov = json.load(f)
    if changed & set(cov["collect"]):
        ids = [t for t, dummy in cov["tests"]]
    else:
        ids = [t for t, ls in cov["tests"] if changed & set(ls)]
    if not ids:
        return 0
    # No plugin autoload: the hypothesis and xdist plugins cost 0.8 s of CPU per run and these tests need neither.
    return subprocess.call([sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider"] + ids, cwd=TREE,
                           env=dict(os.environ, PYTEST_DISABLE_PLUGIN_AUTOLOAD="1"))


def _diff(source, mutation):
    """The mutated line(s) of ``mutation`` as a unified diff (cosmic-ray's own mutation, not run)."""
    import difflib
    from cosmic_ray.mutating import mutate_code
    from cosmic_ray.plugins import get_operator
    op = get_operator(mutation.operator_name)(**(mutation.operator_args or {}))
    new = mutate_code(source, op, mutation.occurrence)
    return "\n".join(difflib.unified_diff(source.split("\n"), (new or source).split("\n"), lineterm=""))


def _mutated_line(source, mutation):
    """The first line the mutation changes, as it reads mutated (stripped)."""
    for ln in _diff(source, mutation).splitlines():
        if ln.startswith("+") and not ln.startswith("+++"):
            return ln[1:].strip()
    return None


def skip_uncovered(db, lines_file, source):
    """Record the mutants on lines that the tests never execute as survived, without running them."""
    from cosmic_ray.work_item import TestOutcome, WorkResult, WorkerOutcome
    with open(lines_file) as f:
        run = set(int(n) for n in f.read().split())
    n = 0
    for item in db.pending_work_items:
        m = item.mutations[0]
        if not any(ln in run for ln in range(m.start_pos[0], m.end_pos[0] + 1)):
            db.set_result(item.job_id, WorkResult(output="line not executed by the tests", diff=_diff(source, m),
                                                  worker_outcome=WorkerOutcome.NORMAL,
                                                  test_outcome=TestOutcome.SURVIVED))
            n += 1
    return n


def write_config(target, base, timeout, path):
    excl = _load(TARGETS).get("exclude-operators", [])
    with open(path, "w") as f:
        f.write('[cosmic-ray]\nmodule-path = "%s"\ntimeout = %.1f\nexcluded-modules = []\n' % (target, timeout))
        f.write("test-command = %s\n" % _toml_str("%s %s --tree %s --run-tests %s %s" % (
            sys.executable, os.path.join(TOP, "hack", "mutate.py"), TREE, base, target)))
        f.write('[cosmic-ray.distributor]\nname = "local"\n')
        f.write("[cosmic-ray.filters.operators-filter]\nexclude-operators = [%s]\n"
                % ", ".join(_toml_str(e) for e in excl))


def _toml_str(s):
    return "'%s'" % s  # literal string: no escapes (the values have no single quote)


def _line(src_lines, mutation):
    return src_lines[mutation.start_pos[0] - 1].strip()


def mark(db, target, src_lines):
    """Mark the equivalent mutants of equivalent.yml as skipped (output "equivalent: <reason>"); return the
    entries that matched nothing (stale after an edit of the file)."""
    from cosmic_ray.work_item import WorkResult, WorkerOutcome
    entries = [e for e in _load(EQUIVALENT).get("equivalent", []) or [] if e["file"] == target]
    used, matched = set(), set()
    source = "\n".join(src_lines) + "\n"
    for item in list(db.work_items):
        m = item.mutations[0]
        for i, e in enumerate(entries):
            if (e["operator"] == m.operator_name and e["code"].strip() == _line(src_lines, m)
                    and e.get("col", m.start_pos[1]) == m.start_pos[1]
                    and e.get("line", m.start_pos[0]) == m.start_pos[0]
                    and ("mutant" not in e or e["mutant"].strip() == _mutated_line(source, m))):
                used.add(i)
                db.set_result(item.job_id, WorkResult(output="equivalent: " + e["reason"],
                                                      worker_outcome=WorkerOutcome.SKIPPED))
                matched.add(item.job_id)
                break
    # An entry removed from the list: its mutant is run again.
    for item, r in db.completed_work_items:
        if (r.output or "").startswith("equivalent:") and item.job_id not in matched:
            _forget(db, item.job_id)
    return [e for i, e in enumerate(entries) if i not in used]


def _forget(db, job_id):
    import sqlite3
    con = sqlite3.connect(db._path)
    con.execute("DELETE FROM work_results WHERE job_id = ?", (job_id,))
    con.commit()
    con.close()


def run_file(target, tests, args):
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import TestOutcome, WorkerOutcome
    base = _session(target) + (("-" + args.session) if args.session else "")
    db_path, cfg, stamp = base + ".sqlite", base + ".toml", base + ".src"
    src = os.path.join(TOP, target)
    digest = _digest(src)
    fresh = args.fresh or not os.path.exists(db_path) or not os.path.exists(stamp) or open(stamp).read() != digest
    if args.report_only:
        if not os.path.exists(db_path):
            return "%-45s no session yet" % target
        with open(src) as f:
            src_lines = f.read().splitlines()
        with use_db(db_path, WorkDB.Mode.open) as db:
            stale = mark(db, target, src_lines)
        return report(target, db_path, src_lines, stale)
    took = baseline(target, tests, base)
    write_config(target, base, 3 * took + 10, cfg)
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    if fresh:
        if os.path.exists(db_path):
            os.unlink(db_path)
        subprocess.run([os.path.join(BIN, "cosmic-ray"), "init", cfg, db_path], cwd=TREE, check=True, env=env)
        subprocess.run([os.path.join(BIN, "cr-filter-operators"), db_path, cfg], cwd=TREE, check=True, env=env)
        with open(stamp, "w") as f:
            f.write(digest)
    with open(src) as f:
        src_lines = f.read().splitlines()
    if args.rerun_survivors:
        # Forget the survivors' results so that exec runs them again (killed ones stay killed).
        import sqlite3
        con = sqlite3.connect(db_path)
        con.execute("DELETE FROM work_results WHERE test_outcome = 'SURVIVED' OR test_outcome = 'survived'")
        con.commit()
        con.close()
    with use_db(db_path, WorkDB.Mode.open) as db:
        stale = mark(db, target, src_lines)
        uncovered = skip_uncovered(db, base + ".lines", "\n".join(src_lines) + "\n")
        pending = db.num_work_items - db.num_results
    if uncovered:
        print("    %d mutants on lines no test executes: survived without a run" % uncovered, flush=True)
    print("=== %s: %d pending mutants, tests %.1f s unmutated (%s)" % (target, pending, took, " ".join(tests)),
          flush=True)
    if pending and not args.report_only:
        t0 = time.time()
        stop = threading.Event()
        threading.Thread(target=_progress, args=(db_path, pending, t0, stop), daemon=True).start()
        subprocess.run([os.path.join(BIN, "cosmic-ray"), "exec", cfg, db_path], cwd=TREE, check=True, env=env)
        stop.set()
        print("    %d mutants in %.0f s (%.1f s each)" % (pending, time.time() - t0, (time.time() - t0) / pending),
              flush=True)
    return report(target, db_path, src_lines, stale)


def _progress(db_path, pending, t0, stop):
    import sqlite3
    while not stop.wait(60):
        try:
            con = sqlite3.connect(db_path)
            left = con.execute("SELECT COUNT(*) FROM work_items WHERE job_id NOT IN "
                               "(SELECT job_id FROM work_results)").fetchone()[0]
            con.close()
        except sqlite3.Error:
            continue
        done = pending - left
        if done:
            print("    %d/%d, about %.0f min left" % (done, pending, (time.time() - t0) / done * left / 60.0),
                  flush=True)


def report(target, db_path, src_lines, stale):
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import TestOutcome, WorkerOutcome
    killed = survived = equivalent = pending = incompetent = 0
    survivors = []
    with use_db(db_path, WorkDB.Mode.open) as db:
        results = dict((i.job_id, r) for i, r in db.completed_work_items)
        for item in db.work_items:
            r = results.get(item.job_id)
            m = item.mutations[0]
            if r is None:
                pending += 1
            elif r.worker_outcome == WorkerOutcome.SKIPPED:
                if (r.output or "").startswith("equivalent:"):
                    equivalent += 1
                # else: an operator left out (targets.yml), not a mutant of this run
            elif r.test_outcome == TestOutcome.SURVIVED:
                survived += 1
                survivors.append((m.start_pos, m.operator_name, _line(src_lines, m), r.diff))
            elif r.test_outcome == TestOutcome.INCOMPETENT:
                incompetent += 1
            else:
                killed += 1
    for pos, op, code, diff in sorted(survivors):
        new = [ln[1:].strip() for ln in (diff or "").splitlines() if ln.startswith("+") and not ln.startswith("+++")]
        print("  survived %s:%d:%d %s\n      - %s\n      + %s" % (target, pos[0], pos[1], op, code,
                                                                  new[0] if new else "?"))
    for e in stale:
        print("  stale equivalent.yml entry (matches no mutant): %s %s %r" % (e["file"], e["operator"], e["code"]))
    total = killed + survived + incompetent
    score = 100.0 * killed / total if total else 100.0
    line = "%-45s killed %4d  survived %3d  incompetent %2d  equivalent %3d  pending %4d  score %5.1f %%" % (
        target, killed, survived, incompetent, equivalent, pending, score)
    print(line, flush=True)
    return line


def main():
    global TREE
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("files", nargs="*", help="files to mutate (default: all of tests/mutation/targets.yml)")
    p.add_argument("--fresh", action="store_true", help="start the sessions over")
    p.add_argument("--rerun-survivors", action="store_true", help="run the previous survivors again")
    p.add_argument("--report-only", action="store_true", help="print the sessions' state, run nothing")
    p.add_argument("--tree", default=TREE, help="where to copy the tree and mutate (default %(default)s; give "
                   "another to run two files at once)")
    p.add_argument("--session", metavar="NAME", help="use the sessions <file>-NAME (e.g. a copy that holds only the "
                   "mutants already run, to re-run its survivors)")
    p.add_argument("--run-tests", metavar="SESSION", help=argparse.SUPPRESS)  # cosmic-ray's test command
    args = p.parse_args()
    TREE = os.path.abspath(args.tree)
    if args.run_tests:
        sys.exit(run_tests(args.run_tests, args.files[0]))
    targets = _load(TARGETS)["targets"]
    files = args.files or list(targets)
    unknown = [f for f in files if f not in targets]
    if unknown:
        sys.exit("make mutate: no tests listed for %s in tests/mutation/targets.yml (valid: %s)"
                 % (", ".join(unknown), ", ".join(targets)))
    if not args.report_only:
        os.makedirs(TREE, exist_ok=True)
        sync_tree()
    t0 = time.time()
    lines = [run_file(f, targets[f], args) for f in files]
    print("\n=== make mutate: score = killed / (total - equivalent), %.0f s" % (time.time() - t0))
    for ln in lines:
        print(ln)


if __name__ == "__main__":
    main()
