/* status.h: the module's counters in mod_status's server-status page. */
#ifndef MM_STATUS_H
#define MM_STATUS_H

#include "httpd.h"

void mm_status_register_hooks(apr_pool_t *p);

#endif
