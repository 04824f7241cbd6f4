"""Numbers come out of a handler as they do in Ruby: the libmruby the
module is built with keeps every Float's 64 bits and every Integer up to
2**63 - 1 as a value, and reads and writes decimals exactly
(build_config.rb, patches/mruby/float-exact.patch). Debian's libmruby 3.1
does none of this (docs/building.md): these tests are for the default
build, and are skipped on that one."""

import os

import pytest

from httpd import module_httpd

SOURCE = os.environ.get("MM_MRUBY_MODE") == "source"
pytestmark = pytest.mark.skipif(not SOURCE, reason="Debian's libmruby 3.1 boxes values (docs/building.md)")

SCRIPT = r'''
checks = [
  0.1 + 0.2 == 0.30000000000000004,
  (2**62) == (2**61 * 2),
  2**62 - 1 + 2**62 == 9223372036854775807,
  "0.30000000000000004".to_f == 0.1 + 0.2,
  (0.1 + 0.2).to_s == "0.30000000000000004",
  1.0 / 3 == 0.3333333333333333,
  [0.1].pack("E") == "\x9a\x99\x99\x99\x99\x99\xb9\x3f",
  19.99 * 3 == 59.97,
]
Apache.rputs checks.map { |c| c ? "t" : "f" }.join + "\n"
Apache.rputs [0.1 + 0.2, 1.0 / 3, 1e20, 1e16, 1e15, 100.0, 0.0001, 0.00001, -2.5, 2.0**70,
              1.7976931348623157e308, 12.5, 19.99 * 3, 2**62, -(2**62) * 2].map(&:inspect).join(" ")
'''

server = module_httpd("numbers", r"""
<Location /numbers>
    SetHandler mruby-native-script
    mrubyHandler {root}/numbers.rb
</Location>
""", files={"numbers.rb": SCRIPT})


def test_floats_and_integers_are_exact(server):
    r = server.get("/numbers")
    assert r.status == 200
    checks, written = r.text.split("\n")
    # 19.99 * 3 is 59.97 in IEEE doubles: Python says so too
    assert (19.99 * 3 == 59.97) is True
    assert checks == "tttttttt"
    # what CRuby writes for the same values
    assert written == ("0.30000000000000004 0.3333333333333333 1.0e+20 1.0e+16 1000000000000000.0 100.0 "
                       "0.0001 1.0e-05 -2.5 1.1805916207174113e+21 1.7976931348623157e+308 12.5 59.97 "
                       "4611686018427387904 -9223372036854775808")
