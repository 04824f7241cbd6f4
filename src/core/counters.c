/* counters.c: the server's counters in shared memory (counters.h).
 *
 * The memory is made by the parent at the first start and inherited by
 * every child. It holds one row per child process (ServerLimit of them, and
 * a few more for the children of an old generation still finishing after
 * a graceful restart), and in each row one block per VM a child can have
 * (ThreadLimit, and a few more for the timer thread's and VMs replaced
 * while their sleepers finish). A child takes a free row when it starts
 * (or the row of a child that died without giving it back); a VM takes a
 * free block of its child's row. Nothing is ever moved or reset but the
 * gauges: a VM that closes leaves its counts in its block, the next VM to
 * take the block counts on from them, and the next child to take the row
 * too. So every sum only grows, whoever reads it when (Prometheus reads a
 * decrease as a restart of the server).
 *
 * Writers: a block's counters by the thread running its VM; a row's
 * blocks' in_use flags and vms_created by its child, under the child's VM
 * registry lock; a row's pid by the child taking or giving it back. All are
 * aligned words written and read with atomic stores and loads: a reader
 * sees each counter as it was at some moment while it read. */

#include "httpd.h"
#include "http_log.h"
#include "ap_mpm.h"
#include "apr_shm.h"

#include <errno.h>
#include <signal.h>
#include <stddef.h>
#include <string.h>
#include <unistd.h>

#include "counters.h"
#include "mod_mruby.h"

APLOG_USE_MODULE(mruby);

/* More rows than ServerLimit, more blocks than ThreadLimit: see above. */
#define MM_EXTRA_ROWS   8
#define MM_EXTRA_BLOCKS 4

typedef struct {
    apr_uint32_t in_use; /* a live VM counts here */
    apr_uint32_t unused;
    apr_uint64_t v[MM_CTR_COUNT];
} mm_block_t;

typedef struct {
    pid_t pid; /* the child using the row; 0: none; -1: being taken */
    apr_uint32_t unused;
    apr_uint64_t vms_created;
    /* followed by blocks_per_row mm_block_t */
} mm_row_t;

typedef struct {
    int rows;
    int blocks_per_row;
    /* followed by the rows */
} mm_table_t;

static mm_table_t *table; /* the shared memory, or NULL */
static mm_row_t *my_row;  /* child: its row, or NULL (counts stay in each VM) */
static int warned;        /* child: the lack of a block was logged */

static const char *const names[MM_CTR_COUNT][2] = {
    [MM_CTR_RUNS] = {"runs", "script runs"},
    [MM_CTR_EXCEPTIONS] = {"exceptions", "runs ended by an exception"},
    [MM_CTR_TIMEOUTS] = {"timeouts", "runs stopped by mrubyTimeout"},
    [MM_CTR_SUSPENDS] = {"suspends", "requests put to sleep, in all"},
    [MM_CTR_SUSPENDED] = {"suspended", "requests asleep now"},
    [MM_CTR_WAKES] = {"wakes", "suspended scripts woken"},
    [MM_CTR_IO_WAKES] = {"io_wakes", "woken early by what they waited for"},
    [MM_CTR_CODE_HITS] = {"code_hits", "runs of bytecode the VM had loaded"},
    [MM_CTR_CODE_LOADS] = {"code_loads", "bytecode loaded into a VM"},
    [MM_CTR_CODE_COMPILES] = {"code_compiles", "script files compiled"},
    [MM_CTR_CACHE_OPS] = {"cache_ops", "Apache::Cache operations"},
    [MM_CTR_CACHE_ERRORS] = {"cache_errors", "Apache::Cache operations failed"},
    [MM_CTR_TIMER_RUNS] = {"timer_runs", "timer blocks called"},
    [MM_CTR_TIMER_FAILURES] = {"timer_failures", "timer blocks ended by an exception"},
};

const char *mm_counter_name(int id)
{
    return names[id][0];
}

const char *mm_counter_label(int id)
{
    return names[id][1];
}

static size_t row_size(int blocks_per_row)
{
    return sizeof(mm_row_t) + (size_t)blocks_per_row * sizeof(mm_block_t);
}

static mm_row_t *row_at(int i)
{
    return (mm_row_t *)((char *)(table + 1) + (size_t)i * row_size(table->blocks_per_row));
}

static mm_block_t *block_at(mm_row_t *row, int i)
{
    return (mm_block_t *)(row + 1) + i;
}

#define MM_COUNTERS_KEY "mod_mruby counters"

void mm_counters_post_config(apr_pool_t *pconf, server_rec *s)
{
    apr_pool_t *life = s->process->pool;
    void *kept = NULL;
    apr_shm_t *shm;
    int daemons = 0, threads = 0;
    apr_status_t rv;
    size_t size;

    apr_pool_userdata_get(&kept, MM_COUNTERS_KEY, life);
    if (kept) {
        table = kept;
        return;
    }
    ap_mpm_query(AP_MPMQ_HARD_LIMIT_DAEMONS, &daemons);
    ap_mpm_query(AP_MPMQ_HARD_LIMIT_THREADS, &threads);
    if (daemons < 1) {
        daemons = 1;
    }
    if (threads < 1) {
        threads = 1;
    }
    size = sizeof(mm_table_t) + (size_t)(daemons + MM_EXTRA_ROWS) * row_size(threads + MM_EXTRA_BLOCKS);
    rv = apr_shm_create(&shm, size, NULL, life);
    if (rv != APR_SUCCESS) {
        ap_log_error(APLOG_MARK, APLOG_WARNING, rv, s,
                     MM_LOGNO(00070) "cannot make %" APR_SIZE_T_FMT
                                     " bytes of shared memory for the counters: "
                                     "server-status and Apache::Status show no counts",
                     size);
        return;
    }
    table = apr_shm_baseaddr_get(shm);
    memset(table, 0, size);
    table->rows = daemons + MM_EXTRA_ROWS;
    table->blocks_per_row = threads + MM_EXTRA_BLOCKS;
    apr_pool_userdata_set(table, MM_COUNTERS_KEY, apr_pool_cleanup_null, life);
}

/* Whether the child pid of a row is alive (another user's process, for a
 * pid reused, counts as alive: its row is then left alone). */
static int alive(pid_t pid)
{
    return pid > 0 && (pid == getpid() || kill(pid, 0) == 0 || errno != ESRCH);
}

/* A row's blocks free, and none asleep: what a child leaves, or what the
 * next one finds of a child that died without leaving it so. */
static void clear_gauges(mm_row_t *row)
{
    int i;

    for (i = 0; i < table->blocks_per_row; i++) {
        __atomic_store_n(&block_at(row, i)->v[MM_CTR_SUSPENDED], 0, __ATOMIC_RELAXED);
        __atomic_store_n(&block_at(row, i)->in_use, 0, __ATOMIC_RELAXED);
    }
}

static apr_status_t give_back(void *unused)
{
    mm_row_t *row = my_row;

    if (row == NULL) {
        return APR_SUCCESS;
    }
    my_row = NULL;
    clear_gauges(row);
    __atomic_store_n(&row->pid, 0, __ATOMIC_RELEASE);
    return APR_SUCCESS;
}

void mm_counters_child_init(apr_pool_t *pchild, server_rec *s)
{
    int i;

    my_row = NULL;
    warned = 0;
    if (table == NULL) {
        return;
    }
    for (i = 0; i < table->rows && my_row == NULL; i++) {
        mm_row_t *row = row_at(i);
        pid_t pid = __atomic_load_n(&row->pid, __ATOMIC_ACQUIRE);

        if (pid == 0 || (pid > 0 && !alive(pid))) {
            /* -1 while it is made ready: the gauges of the child that died
             * with it are not counted meanwhile */
            if (__atomic_compare_exchange_n(&row->pid, &pid, -1, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
                clear_gauges(row);
                __atomic_store_n(&row->pid, getpid(), __ATOMIC_RELEASE);
                my_row = row;
            }
        }
    }
    if (my_row == NULL) {
        ap_log_error(APLOG_MARK, APLOG_WARNING, 0, s,
                     MM_LOGNO(00071) "no row of the shared counters is free for this child: its VMs' counts "
                                     "are not in server-status and Apache::Status");
        return;
    }
    /* Registered before the VM registry's cleanup (mod_mruby.c calls this
     * first), so it runs after it: no VM counts into a row given back. */
    apr_pool_cleanup_register(pchild, NULL, give_back, apr_pool_cleanup_null);
}

apr_uint64_t *mm_counters_vm_open(apr_uint64_t *fallback)
{
    int i;

    memset(fallback, 0, sizeof(apr_uint64_t) * MM_CTR_COUNT);
    if (my_row == NULL) {
        return fallback;
    }
    for (i = 0; i < table->blocks_per_row; i++) {
        mm_block_t *b = block_at(my_row, i);

        if (!b->in_use) {
            __atomic_store_n(&b->in_use, 1, __ATOMIC_RELAXED);
            __atomic_store_n(&my_row->vms_created, my_row->vms_created + 1, __ATOMIC_RELAXED);
            return b->v;
        }
    }
    if (!warned) {
        warned = 1;
        ap_log_error(APLOG_MARK, APLOG_WARNING, 0, NULL,
                     MM_LOGNO(00072) "more VMs in this child than blocks of the shared counters (%d): the "
                                     "counts of the others are not in server-status and Apache::Status",
                     table->blocks_per_row);
    }
    return fallback;
}

void mm_counters_vm_close(apr_uint64_t *ctr)
{
    mm_block_t *b;

    if (my_row == NULL || (char *)ctr < (char *)(my_row + 1) ||
        (char *)ctr >= (char *)block_at(my_row, table->blocks_per_row)) {
        return; /* the VM's own fallback */
    }
    b = (mm_block_t *)((char *)ctr - offsetof(mm_block_t, v));
    __atomic_store_n(&b->v[MM_CTR_SUSPENDED], 0, __ATOMIC_RELAXED);
    __atomic_store_n(&b->in_use, 0, __ATOMIC_RELAXED);
}

void mm_counters_server(mm_counters_t *out)
{
    int i, j, k;

    memset(out, 0, sizeof *out);
    if (table == NULL) {
        return;
    }
    for (i = 0; i < table->rows; i++) {
        mm_row_t *row = row_at(i);
        int live = alive(__atomic_load_n(&row->pid, __ATOMIC_ACQUIRE));

        out->children += live;
        out->vms_created += __atomic_load_n(&row->vms_created, __ATOMIC_RELAXED);
        for (j = 0; j < table->blocks_per_row; j++) {
            mm_block_t *b = block_at(row, j);
            int used = live && __atomic_load_n(&b->in_use, __ATOMIC_RELAXED);

            out->vms_alive += used;
            for (k = 0; k < MM_CTR_COUNT; k++) {
                if (k != MM_CTR_SUSPENDED || used) {
                    out->v[k] += __atomic_load_n(&b->v[k], __ATOMIC_RELAXED);
                }
            }
        }
    }
}
