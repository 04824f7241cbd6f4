#!/bin/sh
# autogen.sh: generates ./configure from configure.ac (needs autoconf).
set -e
cd "$(dirname "$0")"
autoconf -f
rm -rf autom4te.cache
