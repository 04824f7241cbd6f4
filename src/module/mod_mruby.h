/* mod_mruby.h: what every C file of the module shares: the module record,
 * the version, and the log-tag convention. */
#ifndef MM_MOD_MRUBY_H
#define MM_MOD_MRUBY_H

#include "httpd.h"
#include "http_config.h"
#include "http_log.h"

#define MM_MODULE_NAME    "mod_mruby"
#define MM_MODULE_VERSION "0.1.0"

/* Log messages carry our own tags, "MRB" and five digits, instead of httpd's
 * APLOGNO "AH" numbers: MM_LOGNO(00001) "message". docs/log-messages.md lists
 * them. */
#define MM_LOGNO(n) "MRB" #n ": "

extern module AP_MODULE_DECLARE_DATA mruby_module;

#endif
