/* error.h: reporting Ruby exceptions to the error log. */
#ifndef MM_ERROR_H
#define MM_ERROR_H

#include "httpd.h"
#include "vm.h"

/* Logs one entry at level (APLOG_ERR but where the exception is no fault of
 * the script): phase, script, exception class, message, the file:line where
 * it was raised and the backtrace. r may be NULL (server phases). */
void mm_error_log_exception(mm_vm_t *vm, mrb_value exc, request_rec *r, server_rec *s, int level,
                            const char *phase, const char *script);

#endif
