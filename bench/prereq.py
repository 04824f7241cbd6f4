"""What the bench needs before it runs: Debian packages (installed when
missing and the bench runs as root) and the C floor module, built with apxs
into the bench's build directory."""

import os
import shutil
import subprocess

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))

# ab, mod_lua (in Debian's apache2-bin), apxs, taskset and the chart.
BASE_PACKAGES = ["apache2-utils", "apache2-bin", "apache2-dev", "util-linux", "python3-matplotlib"]


def missing_packages(packages):
    missing = []
    for p in packages:
        q = subprocess.run(["dpkg-query", "-W", "-f=${Status}", p], capture_output=True, text=True)
        if "ok installed" not in q.stdout:
            missing.append(p)
    return missing


def install(packages, log):
    """apt-get install of what is missing; returns what is still missing
    (not root, no dpkg, or the install failed), and never raises."""
    if not shutil.which("dpkg-query"):
        return list(packages)
    missing = missing_packages(packages)
    if not missing:
        return []
    if os.geteuid() != 0:
        log("bench: missing Debian packages (run as root to install them): %s" % " ".join(missing))
        return missing
    log("bench: installing %s" % " ".join(missing))
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    subprocess.run(["apt-get", "update", "-qq"], env=env, capture_output=True)
    p = subprocess.run(["apt-get", "install", "-y", "-qq", "--no-install-recommends"] + missing,
                       env=env, capture_output=True, text=True)
    if p.returncode != 0:
        log("bench: apt-get install failed:\n%s" % p.stderr[-2000:])
    return missing_packages(missing)


def build_floor_module(apxs, build_dir, log):
    """Builds mod_bench_hello.so with apxs (which compiles next to its
    source, hence the copy into build_dir) and returns its path."""
    os.makedirs(build_dir, exist_ok=True)
    src = os.path.join(BENCH_DIR, "mod_bench_hello.c")
    so = os.path.join(build_dir, ".libs", "mod_bench_hello.so")
    if os.path.exists(so) and os.path.getmtime(so) >= os.path.getmtime(src):
        return so
    shutil.copy(src, build_dir)
    p = subprocess.run([apxs, "-c", "mod_bench_hello.c"], cwd=build_dir, capture_output=True, text=True)
    if p.returncode != 0 or not os.path.exists(so):
        raise RuntimeError("apxs could not build the C floor module:\n" + p.stdout + p.stderr)
    log("bench: built %s" % so)
    return so
