#!/bin/sh
# gen-constants.sh INCLUDEDIR: prints MM_CONST(NAME) for every constant the
# Ruby class Apache exposes, read from httpd's installed headers (statuses,
# methods, proxy request kinds, hook results and log levels).
set -e
inc=${1:?usage: gen-constants.sh HTTPD_INCLUDEDIR}
{
  sed -n 's/^#define[[:space:]]\{1,\}\(\(HTTP\|M\|PROXYREQ\)_[A-Z0-9_]\{1,\}\)[[:space:]]\{1,\}-\{0,1\}[0-9]\{1,\}\([[:space:]].*\)\{0,1\}$/\1/p' "$inc/httpd.h"
  sed -n 's/^#define[[:space:]]\{1,\}\(OK\|DECLINED\|DONE\|SUSPENDED\)[[:space:]].*/\1/p' "$inc/httpd.h"
  sed -n 's/^[[:space:]]*#define[[:space:]]\{1,\}\(APLOG_[A-Z0-9]\{1,\}\)[[:space:]]\{1,\}[0-9]\{1,\}[[:space:]]*\/\*.*/\1/p' "$inc/http_log.h"
} | grep -v '^APLOG_LEVELMASK$' | sort -u | sed 's/.*/MM_CONST(&)/'
