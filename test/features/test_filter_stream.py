"""A 20 MB response through output filters that read every chunk into
Ruby: in stream mode the server's memory stays bounded (peak RSS of the one
child grows by far less than the body), with and without mod_deflate after
the filter; a buffering filter, as a control, grows by the whole body."""

import gzip
import hashlib

import procs
from httpd import SINGLE_WORKER, measures_memory, module_httpd

BODY = r"""
<Directory {docroot}>
    Require all granted
</Directory>
mrubyOutputFilterNamed reader {root}/scripts/reader.rb stream
mrubyOutputFilterNamed hoarder {root}/scripts/reader.rb
<Location /stream>
    SetOutputFilter reader
</Location>
<Location /streamz>
    SetOutputFilter reader;DEFLATE
</Location>
<Location /buffered>
    SetOutputFilter hoarder
</Location>
"""

# Every chunk is read into a Ruby String (and counted in the filter's
# state); the body goes on as it came.
READER = """
f = Apache::Filter.new
f.ctx[:bytes] = (f.ctx[:bytes] || 0) + f.data.bytesize
"""

LINE = b"0123456789abcdef" * 64 + b"\n"
DATA = LINE * 20000  # 20.5 MB, compressible
DIGEST = hashlib.sha256(DATA).hexdigest()

srv = module_httpd("filterstream", BODY, mpm_conf=SINGLE_WORKER, modules=("deflate",),
                   files={"scripts/reader.rb": READER, "htdocs/stream/big.txt": DATA,
                          "htdocs/streamz/big.txt": DATA, "htdocs/buffered/big.txt": DATA})

MB = 1024


@measures_memory
def test_stream_mode_memory_stays_bounded(srv):
    srv.get("/stream/")  # the child and its VM exist before measuring
    before = procs.peak_rss_kb(srv.pid)

    plain = srv.get("/stream/big.txt")
    assert plain.status == 200
    assert hashlib.sha256(plain.body).hexdigest() == DIGEST
    after_plain = procs.peak_rss_kb(srv.pid)

    zipped = srv.get("/streamz/big.txt", headers={"Accept-Encoding": "gzip"})
    assert zipped.status == 200
    assert zipped.headers["Content-Encoding"] == "gzip"
    assert len(zipped.body) < len(DATA) // 50
    assert hashlib.sha256(gzip.decompress(zipped.body)).hexdigest() == DIGEST
    after_zipped = procs.peak_rss_kb(srv.pid)

    # Loose bounds: the body is 20 MB; a stream filter holds a few chunks
    # and what the GC has not reclaimed yet.
    assert after_plain - before < 12 * MB, (before, after_plain)
    assert after_zipped - after_plain < 12 * MB, (after_plain, after_zipped)

    # The control: buffer mode holds the whole response, so the measure
    # above would have seen it.
    buffered = srv.get("/buffered/big.txt")
    assert buffered.status == 200
    assert hashlib.sha256(buffered.body).hexdigest() == DIGEST
    assert procs.peak_rss_kb(srv.pid) - after_zipped > 20 * MB
