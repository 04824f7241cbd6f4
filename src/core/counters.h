/* counters.h: the module's counters (runs, exceptions, timeouts, sleeps,
 * bytecode, Apache::Cache, timers), for the whole server: every child's,
 * those of the children that exited too, since httpd started. Each VM
 * counts into a block of its own in memory shared by all children, with
 * plain stores (one writer per block, no lock, no atomic read-modify-write
 * on the request path); server-status and Apache::Status sum the blocks
 * when asked. */
#ifndef MM_COUNTERS_H
#define MM_COUNTERS_H

#include "httpd.h"

typedef enum {
    MM_CTR_RUNS,           /* outermost script runs */
    MM_CTR_EXCEPTIONS,     /* runs that ended in an uncaught exception */
    MM_CTR_TIMEOUTS,       /* runs stopped by mrubyTimeout */
    MM_CTR_SUSPENDS,       /* requests put to sleep (event MPM), in all */
    MM_CTR_SUSPENDED,      /* requests asleep now (a gauge) */
    MM_CTR_WAKES,          /* suspended scripts woken */
    MM_CTR_IO_WAKES,       /* of which by a socket they waited on, before their time */
    MM_CTR_CODE_HITS,      /* runs whose bytecode the VM had loaded already */
    MM_CTR_CODE_LOADS,     /* bytecode loaded into a VM from the shared copy */
    MM_CTR_CODE_COMPILES,  /* script files compiled (new, or changed on disk) */
    MM_CTR_CACHE_OPS,      /* Apache::Cache operations */
    MM_CTR_CACHE_ERRORS,   /* of which failed in the store (raised Apache::Cache::Error) */
    MM_CTR_TIMER_RUNS,     /* timer blocks called */
    MM_CTR_TIMER_FAILURES, /* of which ended by an exception */
    MM_CTR_COUNT
} mm_ctr_id_t;

/* Adds n to a VM's counter: only the thread running the VM writes its
 * block; others read it. */
static inline void mm_ctr_add(apr_uint64_t *ctr, mm_ctr_id_t id, apr_int64_t n)
{
    __atomic_store_n(&ctr[id], ctr[id] + (apr_uint64_t)n, __ATOMIC_RELAXED);
}

/* The server's counters, summed. */
typedef struct {
    apr_uint64_t children;    /* children alive now */
    apr_uint64_t vms_alive;   /* VMs alive now, in those children */
    apr_uint64_t vms_created; /* VMs made, in all */
    apr_uint64_t v[MM_CTR_COUNT];
} mm_counters_t;

/* Each counter's name (Apache::Status, Prometheus) and label. */
const char *mm_counter_name(int id);
const char *mm_counter_label(int id);

/* Makes the shared memory, once for the life of httpd (graceful restarts
 * keep it: ServerLimit and ThreadLimit cannot change then). */
void mm_counters_post_config(apr_pool_t *pconf, server_rec *s);

/* The child takes a row of blocks (one whose child exited, if need be). */
void mm_counters_child_init(apr_pool_t *pchild, server_rec *s);

/* A block for a VM being made, and its release when the VM is closed (the
 * counts stay in the block, for the next VM that takes it). Called under
 * the child's VM registry lock. Never NULL: without a shared block the VM
 * counts into fallback (its own memory, seen by nobody else). */
apr_uint64_t *mm_counters_vm_open(apr_uint64_t *fallback);
void mm_counters_vm_close(apr_uint64_t *ctr);

/* Fills out with the server's counters. */
void mm_counters_server(mm_counters_t *out);

#endif
