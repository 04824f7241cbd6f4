/* vm.h: the per-thread mruby VM. Each worker thread owns one mrb_state,
 * created on the thread's first request and closed when the thread (or, for
 * the main thread under prefork, the child process) ends. Nothing on the
 * request path takes a global lock to reach it. */
#ifndef MM_VM_H
#define MM_VM_H

#include "apr_hash.h"
#include "apr_pools.h"
#include "apr_thread_mutex.h"
#include "httpd.h"

#include <mruby.h>
#include <pthread.h>

#include "counters.h"
#include "mruby_internal.h"

struct mm_run;
struct mm_loaded;
struct mm_files;

typedef struct mm_vm mm_vm_t;

/* Why a VM is to be replaced (its retire field; 0: it is not). The timer
 * thread, which replaces its VM itself, logs it (timer.c). */
typedef enum {
    MM_RETIRE_NO = 0,
    MM_RETIRE_STOPPED, /* a script was stopped hard (mrubyTimeout): mruby's state was cut short */
    MM_RETIRE_MEMORY,  /* mrubyMemoryLimit refused an allocation */
    MM_RETIRE_RUNS,    /* it ran mrubyMaxRequestsPerVM scripts */
    MM_RETIRE_FIBER    /* Fiber#initialize was redefined: no script may sleep in it */
} mm_retire_e;

/* As many as binding.h's MM_INDEXED_MAX: one C function per slot. */
#define MM_BINDING_SLOTS 32

/* Owned by the thread that created it; freed by mm_vm_close (or, when the
 * thread exits while scripts of this VM sleep, by the run that finishes the
 * last of them). mrb->ud points back to this struct, which is how C methods
 * find the current run. */
struct mm_vm {
    mrb_state *mrb;
    apr_pool_t *pool;         /* this VM's own pool (private allocator), made when first needed: mm_vm_pool */
    struct mm_loaded *loaded; /* scripts compiled at config time, by id; loaded lazily */
    int nloaded;
    struct mm_files *files;       /* path -> mm_loaded_t of file scripts (code.c; NULL before the first) */
    struct mm_run *run;           /* innermost run in progress, NULL between runs */
    uintptr_t serial;             /* counts runs; wrapper objects remember theirs */
    struct RClass *fiber_class;   /* Fiber: what scripts that may sleep run in */
    mrb_sym sym_initialize;       /* :initialize, interned once */
    mrb_func_t fiber_initialize;  /* mruby's own Fiber#initialize, which the VM's wraps */
    mrb_sym sym_backtrace;        /* :backtrace (an exception's), interned once */
    struct RClass *http_error;    /* Apache::HTTPError, whatever scripts do to the constant */
    struct RClass *timeout_class; /* Apache::Timeout, the same way */
    /* What the methods binding.c defines per slot stand for in this VM
     * (Request's readers: a class and tag; the kind classes' new: their
     * mm_kind_class_t), set at its start: one C function per slot, not a
     * C Proc with an environment (two objects each). */
    struct mm_binding_slot {
        struct RClass *cls;
        unsigned int tag;
        const void *data;
    } slots[MM_BINDING_SLOTS];
    int nslots;
    mm_mi_gc_settings_t gc; /* the collector's settings before any script ran */

    /* mruby's one SystemStackError object of the VM, as mruby made it: run.c
     * puts it back so after each run (vm.c says why). */
    mrb_sym sym_mesg;                 /* where mruby keeps an exception's message */
    struct RClass *stack_error_class; /* its class */
    mrb_value stack_error_message;    /* its message, frozen */

    /* Event MPM only: a sleeping script's fiber stays in this VM and may be
     * resumed by another thread, so whoever runs Ruby in the VM holds lock
     * (recursive: runs nest). Not made under prefork and worker (locking
     * 0): no locking. A mutex of the VM's own, not an APR one, which would
     * need the VM's pool at once: its first block is 8 KiB. */
    int locking;
    pthread_mutex_t lock;
    int suspended; /* sleeping runs (under lock) */
    int orphaned;  /* its thread exited while runs slept (under lock) */
    /* Counts the connections its thread began to work on (written by that
     * thread, read by others: suspend.c). */
    volatile apr_uint32_t began;
    /* Limits (mrubyMemoryLimit, mrubyMaxRequestsPerVM, mrubyTimeout). */
    apr_size_t mem_limit;   /* 0: no limit, only big blocks counted */
    apr_size_t mem_used;    /* bytes malloc'd for mrb (counted when limited) */
    int exhausted;          /* an allocation was refused: replace the VM */
    apr_size_t big_bytes;   /* big blocks allocated since the last full GC (vm.c) */
    apr_size_t young_bytes; /* bytes allocated since the last collection run at a run's end (vm.c) */
    int io_made;            /* IO objects made since the last full GC (vm.c) */
    apr_uint64_t runs;      /* outermost runs so far */
    /* The VM's counters (counters.h): a block of the server's shared ones
     * while the VM is in the registry, else own_ctr. */
    apr_uint64_t *ctr;
    apr_uint64_t own_ctr[MM_CTR_COUNT];
    int registered;     /* in the child's registry of live VMs */
    mm_retire_e retire; /* replace this VM before its next run (not 0: why) */
    /* mrubyTimeout (timeout.c). deadline and passed are read and written
     * with atomic operations (and latest): the child's watchdog thread
     * reads deadline and latest, and writes passed. */
    apr_time_t deadline;       /* the running script's time is up then (monotonic clock); 0: none */
    apr_time_t passed;         /* a time the watchdog saw pass, before it installed the hook */
    apr_time_t latest;         /* the last deadline a run was given (not cleared) */
    apr_interval_time_t grace; /* after the deadline, before a hard stop */
    int stopped;               /* a script was stopped hard: mruby's state was cut short */

    int last_match;               /* $~ was set since the last run ended (mm_regexp_forget) */
    struct mm_re_match *re_match; /* Regexp's match data (rb_regexp.c), NULL before a match */
    mrb_func_t str_split;         /* mruby's own String#split, which rb_regexp.c's calls */

    int timed_out;        /* past the deadline: the hook raises every 1024 instructions */
    unsigned int ticks;   /* instructions the hook saw, between two raises */
    mm_vm_t *next, *prev; /* the child's list of live VMs */
};

/* The calling thread's VM, created on first use; NULL (and logged) when it
 * cannot be created. */
mm_vm_t *mm_vm_for_thread(server_rec *s);

/* The calling thread's VM if it has one; never creates one. */
mm_vm_t *mm_vm_of_thread(void);

/* The end of an outermost run in vm: counts it, and marks the VM for
 * replacement when a limit says so. */
void mm_vm_ran(mm_vm_t *vm, server_rec *s);

/* A full collection if the VM's big blocks (Strings of a KB or more) add
 * up to more than a few MB since the last one: mruby's collector, which
 * counts objects, would leave them. Called where no object is half made:
 * when an outermost run ends or sleeps, and before the body APIs make a
 * String. */
void mm_vm_collect_big_garbage(mm_vm_t *vm);

/* A minor collection if the VM allocated more than a few KB since the
 * last one run here (logged for s at trace1). Called when an outermost run
 * ends or sleeps, after mm_vm_collect_big_garbage, where the run's objects
 * are dead (a sleeping run's are kept, and made old). */
void mm_vm_collect_young_garbage(mm_vm_t *vm, server_rec *s);

/* A String of len bytes, to be filled, for data Ruby reads in chunks (the
 * request body, a filter's data): the Strings of earlier reads are garbage
 * by now, so the big garbage is collected first. */
mrb_value mm_vm_data_string(mrb_state *mrb, mrb_int len);

/* Calls fn for each live VM of the child, under the registry's lock (so
 * none is closed meanwhile): fn must not create or close a VM. */
void mm_vm_each(void (*fn)(mm_vm_t *vm, void *ctx), void *ctx);

/* A VM for the parent process (configuration phases). */
mm_vm_t *mm_vm_create(server_rec *s);
void mm_vm_close(mm_vm_t *vm);

/* post_config (prefork): makes the VM each child adopts at its start. */
void mm_vm_post_config(apr_pool_t *pconf, server_rec *s);
/* child_init: creates the thread key and the registry of live VMs (under
 * prefork, with the parent's VM in it). */
void mm_vm_child_init(apr_pool_t *pchild, server_rec *s);

/* True when this child's MPM can suspend requests (event): then fibers may
 * sleep and VMs are locked. Set in child_init. */
extern int mm_vm_async;

/* Around the making of an object that holds a descriptor (IO, File,
 * Apache::Socket), which only the collector closes if the script drops
 * it: before, the VM collects when 16 such objects were made since its
 * last full collection; after, made objects are counted, and fd (the
 * new descriptor, 0 if unknown) past half the process's limit makes the
 * next one collect first. */
void mm_vm_before_io(mrb_state *mrb);
void mm_vm_after_io(mrb_state *mrb, int made, mrb_int fd);

/* Makes vm the calling thread's VM until mm_vm_leave (a timed callback
 * resuming a sleeping script of another thread's VM), and takes its lock.
 * Returns what must be given back to mm_vm_leave. */
mm_vm_t *mm_vm_enter(mm_vm_t *vm);
/* Gives the thread its own VM back; closes vm when it was orphaned and no
 * script of it sleeps any more. */
void mm_vm_leave(mm_vm_t *vm, mm_vm_t *previous);

/* The VM's own pool (a private allocator, which keeps at most 512 KB
 * free), made at its first use: a VM that never asks for it does without
 * its 8 KB. NULL when it cannot be made (out of memory). */
apr_pool_t *mm_vm_pool(mm_vm_t *vm);
/* The same for a C method: raises RuntimeError "WHAT: out of memory"
 * instead of returning NULL. */
apr_pool_t *mm_vm_pool_or_raise(mrb_state *mrb, const char *what);

static inline mm_vm_t *mm_vm_of(mrb_state *mrb)
{
    return (mm_vm_t *)mrb->ud;
}

static inline void mm_vm_lock(mm_vm_t *vm)
{
    if (vm->locking) {
        pthread_mutex_lock(&vm->lock);
    }
}

static inline void mm_vm_unlock(mm_vm_t *vm)
{
    if (vm->locking) {
        pthread_mutex_unlock(&vm->lock);
    }
}

#endif
