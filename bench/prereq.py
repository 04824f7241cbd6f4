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


def build_module(apxs, src, build_dir):
    """Builds the one-file httpd module src with apxs (which compiles next
    to its source, hence the copy into build_dir), unless build_dir holds
    one newer than src; returns the .so's path. Raises RuntimeError with
    apxs's output when it fails."""
    os.makedirs(build_dir, exist_ok=True)
    name = os.path.basename(src)
    so = os.path.join(build_dir, ".libs", os.path.splitext(name)[0] + ".so")
    if os.path.exists(so) and os.path.getmtime(so) >= os.path.getmtime(src):
        return so
    shutil.copy(src, build_dir)
    p = subprocess.run([apxs, "-c", name], cwd=build_dir, capture_output=True, text=True)
    if p.returncode != 0 or not os.path.exists(so):
        raise RuntimeError("apxs could not build %s:\n%s%s" % (name, p.stdout, p.stderr))
    return so


def build_floor_module(apxs, build_dir, log):
    """Builds mod_bench_hello.so (the C floor) into build_dir and returns
    its path."""
    so = build_module(apxs, os.path.join(BENCH_DIR, "mod_bench_hello.c"), build_dir)
    log("bench: C floor module %s" % so)
    return so
