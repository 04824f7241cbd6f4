#!/bin/sh
# gen-constants.sh GROUP INCLUDEDIR [CPP ...]: prints MM_CONST(NAME) for
# every constant of a group, read from the installed headers, so Ruby sees
# exactly the values this httpd was built with (the C compiler supplies
# them; no value is written here):
#   apache      Apache: statuses, methods, proxy request kinds, hook results,
#               log levels (httpd.h, http_log.h)
#   scoreboard  Apache::Scoreboard: worker states SERVER_* (scoreboard.h)
#   finfo       Apache::Finfo: APR file types APR_NOFILE ... (the
#               apr_filetype_e enum of apr_file_info.h, read from the output
#               of the preprocessor command CPP, which must find APR's headers)
set -e
group=${1:?usage: gen-constants.sh GROUP HTTPD_INCLUDEDIR [CPP ...]}
inc=${2:?usage: gen-constants.sh GROUP HTTPD_INCLUDEDIR [CPP ...]}
shift 2
case "$group" in
apache)
  {
    sed -n 's/^#define[[:space:]]\{1,\}\(\(HTTP\|M\|PROXYREQ\)_[A-Z0-9_]\{1,\}\)[[:space:]]\{1,\}-\{0,1\}[0-9]\{1,\}\([[:space:]].*\)\{0,1\}$/\1/p' "$inc/httpd.h"
    sed -n 's/^#define[[:space:]]\{1,\}\(OK\|DECLINED\|DONE\|SUSPENDED\)[[:space:]].*/\1/p' "$inc/httpd.h"
    sed -n 's/^[[:space:]]*#define[[:space:]]\{1,\}\(APLOG_[A-Z0-9]\{1,\}\)[[:space:]]\{1,\}[0-9]\{1,\}[[:space:]]*\/\*.*/\1/p' "$inc/http_log.h"
  } | grep -v '^APLOG_LEVELMASK$' | sort -u
  ;;
scoreboard)
  sed -n 's/^#define[[:space:]]\{1,\}\(SERVER_[A-Z_]\{1,\}\)[[:space:]]\{1,\}[0-9]\{1,\}.*/\1/p' "$inc/scoreboard.h" |
    grep -v '^SERVER_NUM_STATUS$'
  ;;
finfo)
  [ $# -gt 0 ] || { echo "gen-constants.sh finfo: needs a preprocessor command" >&2; exit 1; }
  echo '#include "apr_file_info.h"' | "$@" - |
    tr '\n' ' ' | sed -n 's/.*typedef enum {\([^}]*\)} apr_filetype_e;.*/\1/p' |
    tr ',' '\n' | sed -n 's/^[[:space:]]*\(APR_[A-Z]\{1,\}\).*/\1/p'; echo
  ;;
*)
  echo "gen-constants.sh: unknown group $group" >&2
  exit 1
  ;;
esac | sed 's/.*/MM_CONST(&)/'
