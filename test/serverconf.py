"""The one generator of a loopback httpd configuration, used by the test
suite (test/httpd.py) and the bench (bench/server.py): the common part of
the configuration of an httpd under its own ServerRoot, listening on
127.0.0.1, followed by the caller's own configuration. What the two differ
in (modules, timeouts, an access log, the MPM's settings) is passed in.
Imports nothing outside the standard library and test/loopback.py.

tools/mod_mruby-test writes a configuration of its own: it is installed
alone, as /usr/bin/mod_mruby-test, and cannot import this."""

import os

from loopback import run_user

# The access log's format: Apache's "common" one.
COMMON_LOG_FORMAT = 'LogFormat "%h %l %u %t \\"%r\\" %>s %b" common'


def load_module_line(module, modules_dir):
    """The LoadModule line of module: a name ("mime", loaded from
    modules_dir/mod_mime.so) or a (name, path of its .so) pair."""
    name, path = module if isinstance(module, tuple) else (module, "%s/mod_%s.so" % (modules_dir, module))
    return "LoadModule %s_module %s" % (name, path)


def fill(text, root, port):
    """text with "{root}", "{docroot}" and "{port}" replaced by the
    server's."""
    return (text.replace("{root}", root).replace("{docroot}", os.path.join(root, "htdocs"))
            .replace("{port}", str(port)))


def server_config(root, port, mpm, modules_dir, modules=(), mpm_conf=None, body="", log_level="warn",
                  timeout=30, keepalive_timeout=2, access_log=False):
    """The whole configuration, as text, of an httpd whose ServerRoot is
    root (with run/, logs/ and the document root htdocs/ in it, made by the
    caller), listening on 127.0.0.1:port, under the MPM mpm (loaded from
    modules_dir). modules: what else it loads, in order, each a name or a
    (name, path) pair (see load_module_line). mpm_conf: the MPM's
    directives and values (none: httpd's defaults). body: the caller's
    configuration, appended, with {root}, {docroot} and {port} filled in.
    timeout, keepalive_timeout: seconds. access_log: whether requests are
    logged, to logs/access.log. When this runs as root, httpd's children
    run as loopback.run_user()."""
    lines = [
        'ServerRoot "%s"' % root,
        "Listen 127.0.0.1:%d" % port,
        "ServerName 127.0.0.1:%d" % port,
        'PidFile "%s"' % os.path.join(root, "run/httpd.pid"),
        'DefaultRuntimeDir "%s"' % os.path.join(root, "run"),
        'ErrorLog "%s"' % os.path.join(root, "logs/error.log"),
        "LogLevel %s" % log_level,
        "LoadModule mpm_%s_module %s/mod_mpm_%s.so" % (mpm, modules_dir, mpm),
    ]
    lines += [load_module_line(m, modules_dir) for m in modules]
    lines += [
        "TypesConfig /etc/mime.types",
        'DocumentRoot "%s"' % os.path.join(root, "htdocs"),
    ]
    if access_log:
        lines += [COMMON_LOG_FORMAT, 'CustomLog "%s" common' % os.path.join(root, "logs/access.log")]
    lines += [
        "Timeout %d" % timeout,
        # httpd's default, said because the bench's keep-alive loads need it
        "KeepAlive On",
        "KeepAliveTimeout %d" % keepalive_timeout,
        "GracefulShutdownTimeout 5",
        "MaxConnectionsPerChild 0",
    ]
    user = run_user()
    if user:
        lines += ["User %s" % user[0], "Group %s" % user[1]]
    if mpm_conf:
        lines.append("<IfModule mpm_%s_module>" % mpm)
        lines += ["    %s %s" % kv for kv in mpm_conf.items()]
        lines.append("</IfModule>")
    lines.append(fill(body, root, port))
    return "\n".join(lines) + "\n"
