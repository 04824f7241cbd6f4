/* mod_mm_crash.c: a handler that crashes its process on purpose, for the
 * test kit's crash detection (test/shipped/test_kit.py). `SetHandler mm-crash`
 * writes through a null pointer: the child dies of SIGSEGV and httpd's
 * parent logs "exit signal Segmentation fault". Built by the tests with
 * apxs; never installed. */

#include <string.h>

#include "httpd.h"
#include "http_config.h"

static int crash_handler(request_rec *r)
{
    volatile int *nowhere = NULL;

    if (!r->handler || strcmp(r->handler, "mm-crash") != 0) {
        return DECLINED;
    }
    *nowhere = 1;
    return OK;
}

static void register_hooks(apr_pool_t *p)
{
    ap_hook_handler(crash_handler, NULL, NULL, APR_HOOK_MIDDLE);
}

module AP_MODULE_DECLARE_DATA mm_crash_module = {
    STANDARD20_MODULE_STUFF, NULL, NULL, NULL, NULL, NULL, register_hooks,
};
